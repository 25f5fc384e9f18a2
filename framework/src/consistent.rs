//! Consistent reads from a watch cache, as kube-apiserver serves them from
//! its own watch cache (KEP-2340): learn the resourceVersion the server is
//! at *now*, wait (bounded) until the cache's watch has delivered it, then
//! answer from the cache; when it does not catch up in time, read with a
//! quorum GET instead.
//!
//! ```text
//! check ──► current rv R (a quorum LIST of one item, shared; sent after the check began)
//!       ──► cache watch at >= R?   yes: the cache's answer is as fresh as a GET
//!                                  no, within the bound: a (shared) quorum GET
//! ```
//!
//! Why this is linearizable where a plain cache is not: R was read after
//! the check began, so every write that completed before the check has an
//! rv <= R; a watch that has delivered R (an event or a BOOKMARK at or past
//! it) has applied all of them. A cache merely newer than the object being
//! reconciled proves nothing (the owner may have been replaced since).
//!
//! One cache per resource URL (kind and namespace), metadata only, started
//! by its first read and kept until the [`GuardContext`](crate::GuardContext)
//! is dropped: a list, then a watch with bookmarks, re-listed on errors.
//! A watch only moves past R when an object of its kind changes or a
//! bookmark arrives (ward-apiserver sends one every 15 s by default,
//! kube-apiserver about once a minute), so for a kind that is rarely
//! written while others are, the cache is mostly behind R: after a current
//! rv found it behind, reads go straight to the GET until the watch moves
//! again — then such a read costs what a GET costs, no more. The cache wins
//! when the server's rv stands still (an initial sync, a burst of
//! reconciles with no writes in between) or the kind itself is written.
//!
//! In a sharded controller ([`crate::shard`]) the client adds the shard's
//! `shardSelector` to the LISTs and WATCHes of the collections it shards,
//! the cache's among them: the cache then holds only the objects of the
//! slots it was listed with, and "absent from the cache" means "absent, or
//! in another replica's slots". So the cache answers only while the
//! active slots are the ones of its current list (same set, no slot lost
//! and regained since); from the moment they change it reads with the
//! GET, and its watch starts over with a list under the new selector. A
//! replica that takes slots over never reads an owner in them as absent.
//!
//! resourceVersions are compared as numbers, which is what both servers
//! issue (kube-apiserver's are etcd revisions); a server whose rvs are not
//! numbers gets the GET every time. The cache needs `list` and `watch` on
//! the kind; where RBAC grants only `get`, the current-rv read fails once
//! and every read is a GET, as before.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use tokio::sync::watch;

use crate::fresh::{FreshReads, Readable};
use crate::shard::{Shard, Slots};

/// How long a read waits for its cache to reach the current rv before it
/// reads with a GET instead.
pub const DEFAULT_CATCH_UP: Duration = Duration::from_millis(20);

/// A cache's answer: the object's metadata, or `None` when it does not exist.
pub type CachedRead = Result<Option<Arc<ObjectMeta>>, Arc<kube::Error>>;

/// What one cache holds, by name; shared by its watch task and its readers.
type Objects = Mutex<HashMap<String, Arc<ObjectMeta>>>;

/// The shard's active slots and deactivation epoch a filtered cache was
/// listed with (`None`: unfiltered, or not listed yet).
type Listed = Mutex<Option<(Slots, u64)>>;

struct Cache {
    objects: Arc<Objects>,
    /// What a shard-filtered cache holds the objects of.
    listed: Arc<Listed>,
    /// The highest rv the watch has delivered (0 before the first list).
    observed: watch::Receiver<u64>,
    /// The `observed` at which a current rv last found the cache behind,
    /// or could not be read (`u64::MAX`: never): until the watch moves,
    /// asking again is useless.
    behind_at: AtomicU64,
    task: tokio::task::AbortHandle,
}

impl Drop for Cache {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The watch caches of one controller (see the module doc); cheap to clone.
#[derive(Clone)]
pub struct WatchCaches {
    caches: Arc<Mutex<HashMap<String, Arc<Cache>>>>,
    catch_up: Duration,
    /// `ward_consistent_reads_total` from the cache and from a GET,
    /// registered at the first read (with the recorder installed by then).
    counters: Arc<OnceLock<(metrics::Counter, metrics::Counter)>>,
    /// The shard whose selector the reads' client adds, once the
    /// controller is sharded.
    shard: Arc<OnceLock<Shard>>,
}

impl Default for WatchCaches {
    fn default() -> Self {
        WatchCaches {
            caches: Arc::default(),
            catch_up: DEFAULT_CATCH_UP,
            counters: Arc::default(),
            shard: Arc::default(),
        }
    }
}

impl Debug for WatchCaches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchCaches")
            .field("catch_up", &self.catch_up)
            .finish_non_exhaustive()
    }
}

impl WatchCaches {
    /// Caches whose reads wait at most `catch_up` for the watch.
    #[must_use]
    pub fn with_catch_up(catch_up: Duration) -> Self {
        WatchCaches {
            catch_up,
            ..Self::default()
        }
    }

    /// The same caches, reads waiting at most `catch_up`.
    #[must_use]
    pub(crate) fn catch_up(mut self, catch_up: Duration) -> Self {
        self.catch_up = catch_up;
        self
    }

    /// Follow `shard` (set once the controller is sharded): a cache of a
    /// collection the shard filters answers only while the slots it was
    /// listed with are the active ones (see the module docs).
    pub(crate) fn in_shard(mut self, shard: Arc<OnceLock<Shard>>) -> Self {
        self.shard = shard;
        self
    }

    /// The slots `cache` must have been listed with to answer now: `None`
    /// when the shard does not filter `url` (any list will do).
    fn wanted(&self, url: &str) -> Option<(Slots, u64)> {
        self.shard
            .get()
            .filter(|s| s.filters(url))
            .map(Shard::selection)
    }

    /// The metadata of `name` as it is now: from the cache of `api`'s kind
    /// when it has caught up with the server's current rv, else from a
    /// quorum GET shared through `reads`. `None` when it does not exist.
    pub async fn get<T>(&self, reads: &FreshReads, api: &Api<T>, name: &str) -> CachedRead
    where
        T: Readable,
    {
        let cache = self.cache(api);
        let mut observed = cache.observed.clone();
        let seen = *observed.borrow_and_update();
        // A filtered cache holds the objects of the slots it was listed
        // with: after a change of slots it may lack an object in a slot
        // gained, until its watch has listed again.
        let wanted = self.wanted(api.resource_url());
        let current =
            wanted.is_none() || *cache.listed.lock().unwrap_or_else(|e| e.into_inner()) == wanted;
        // After a miss, asking again is useless until the watch moves.
        if current && cache.behind_at.load(Ordering::Relaxed) != seen {
            match reads.current_rv(api).await {
                Ok(Some(now)) => {
                    // The timer is boxed (as the GET below): rarely
                    // needed, inline it would grow every check's future.
                    let caught_up = *observed.borrow() >= now || {
                        let wait = observed.wait_for(|o| *o >= now);
                        let wait = Box::pin(tokio::time::timeout(self.catch_up, wait));
                        matches!(wait.await, Ok(Ok(_)))
                    };
                    // The slots may have changed while it waited.
                    let current = wanted.is_none()
                        || *cache.listed.lock().unwrap_or_else(|e| e.into_inner())
                            == self.wanted(api.resource_url());
                    if caught_up && current {
                        self.counters().0.increment(1);
                        let objects = cache.objects.lock();
                        let objects = objects.unwrap_or_else(|e| e.into_inner());
                        return Ok(objects.get(name).cloned());
                    }
                    cache.behind_at.store(*observed.borrow(), Ordering::Relaxed);
                }
                // rvs that are not numbers: the cache can never answer.
                Ok(None) => cache.behind_at.store(seen, Ordering::Relaxed),
                // E.g. RBAC grants get but not list: the GET still can.
                Err(e) => {
                    tracing::debug!(error = %e, url = api.resource_url(), "consistent read: current rv unavailable, reading with a GET");
                    cache.behind_at.store(seen, Ordering::Relaxed);
                }
            }
        }
        self.counters().1.increment(1);
        let live = Box::pin(reads.get(api, name)).await?;
        Ok(live.map(|o| Arc::new(o.meta().clone())))
    }

    /// `ward_consistent_reads_total`'s handles: (from the cache, from a GET).
    fn counters(&self) -> &(metrics::Counter, metrics::Counter) {
        self.counters.get_or_init(|| {
            (
                metrics::counter!("ward_consistent_reads_total", "from" => "cache"),
                metrics::counter!("ward_consistent_reads_total", "from" => "get"),
            )
        })
    }

    /// Start the cache of `api`'s resource URL if it has not started.
    pub fn start<T>(&self, api: &Api<T>)
    where
        T: Readable,
    {
        self.cache(api);
    }

    /// The cache of `api`'s resource URL, started if it was not.
    fn cache<T>(&self, api: &Api<T>) -> Arc<Cache>
    where
        T: Readable,
    {
        let mut caches = self.caches.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(cache) = caches.get(api.resource_url()) {
            return cache.clone();
        }
        caches
            .entry(api.resource_url().to_string())
            .or_insert_with(|| {
                let objects = Arc::new(Objects::default());
                let listed = Arc::new(Listed::default());
                let (tx, observed) = watch::channel(0);
                let kept = Kept {
                    objects: objects.clone(),
                    listed: listed.clone(),
                    observed: tx,
                    shard: self.shard.clone(),
                };
                let task = tokio::spawn(keep(api.clone(), kept)).abort_handle();
                Arc::new(Cache {
                    objects,
                    listed,
                    observed,
                    behind_at: AtomicU64::new(u64::MAX),
                    task,
                })
            })
            .clone()
    }
}

/// What a cache's watch task keeps up to date.
struct Kept {
    objects: Arc<Objects>,
    listed: Arc<Listed>,
    observed: watch::Sender<u64>,
    shard: Arc<OnceLock<Shard>>,
}

/// Keep `objects` equal to the server's objects of `api`'s kind: list,
/// watch with bookmarks from the list's rv, re-watch from the last rv when
/// a watch ends, re-list after an error — and, for a collection the shard
/// filters, as soon as its active slots change. `observed` follows every
/// event and bookmark; `listed` says which slots the objects are of.
async fn keep<T>(api: Api<T>, kept: Kept)
where
    T: Readable,
{
    let Kept {
        objects,
        listed,
        observed,
        shard,
    } = kept;
    let url = api.resource_url().to_string();
    let mut retry = Duration::from_millis(100);
    let mut slots = None;
    loop {
        // Which slots this list is of: taken before it is sent, so a
        // change from here on is seen (and lists again).
        *listed.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let filtered = shard.get().filter(|s| s.filters(&url));
        let selection = filtered.map(|s| {
            let active = slots.get_or_insert_with(|| s.watch_active());
            active.take();
            active.seen()
        });
        let list = match api.list_metadata(&ListParams::default()).await {
            Ok(list) => list,
            Err(e) => {
                failed(&e, &url, "list");
                tokio::time::sleep(retry).await;
                retry = (retry * 2).min(Duration::from_secs(10));
                continue;
            }
        };
        let Some(mut rv) = list.metadata.resource_version.clone() else {
            return;
        };
        *objects.lock().unwrap_or_else(|e| e.into_inner()) = list
            .items
            .into_iter()
            .map(|o| {
                (
                    o.metadata.name.clone().unwrap_or_default(),
                    Arc::new(o.metadata),
                )
            })
            .collect();
        *listed.lock().unwrap_or_else(|e| e.into_inner()) = selection;
        if !advance(&observed, &rv) {
            return;
        }
        retry = Duration::from_millis(100);
        let params = WatchParams {
            bookmarks: true,
            ..WatchParams::default()
        }
        .timeout(290);
        let relist = 'watch: loop {
            // Slots changed (or filtering began) since the list: start over.
            let now = shard
                .get()
                .filter(|s| s.filters(&url))
                .map(Shard::selection);
            if now != selection {
                break 'watch true;
            }
            let events = match api.watch_metadata(&params, &rv).await {
                Ok(events) => events,
                Err(e) => {
                    failed(&e, &url, "watch");
                    break 'watch false;
                }
            };
            let mut events = events.boxed();
            loop {
                let changed = async {
                    match (&mut slots, selection) {
                        (Some(active), Some(_)) => active.changed().await,
                        _ => std::future::pending().await,
                    }
                };
                let event = tokio::select! {
                    biased;
                    () = changed => break 'watch true,
                    event = events.try_next() => event,
                };
                let event = match event {
                    Ok(Some(event)) => event,
                    Ok(None) => continue 'watch,
                    Err(e) => {
                        tracing::debug!(error = %e, url, "watch cache: watch broke");
                        break 'watch false;
                    }
                };
                let (meta, gone) = match event {
                    WatchEvent::Added(o) | WatchEvent::Modified(o) => (o.metadata, false),
                    WatchEvent::Deleted(o) => (o.metadata, true),
                    WatchEvent::Bookmark(b) => {
                        rv = b.metadata.resource_version;
                        advance(&observed, &rv);
                        continue;
                    }
                    WatchEvent::Error(e) => {
                        tracing::debug!(error = %e, url, "watch cache: watch error");
                        break 'watch false;
                    }
                };
                let name = meta.name.clone().unwrap_or_default();
                let event_rv = meta.resource_version.clone().unwrap_or_default();
                {
                    let mut objects = objects.lock().unwrap_or_else(|e| e.into_inner());
                    if gone {
                        objects.remove(&name);
                    } else {
                        objects.insert(name, Arc::new(meta));
                    }
                }
                rv = event_rv;
                advance(&observed, &rv);
            }
        };
        if !relist {
            tokio::time::sleep(retry).await;
        }
    }
}

/// Log a failed LIST or WATCH of a watch cache: a refusal (401, 403) at
/// warn, naming what to grant, since it will not pass by itself and every
/// check reads with a quorum GET until it does; anything else at debug.
fn failed(e: &kube::Error, url: &str, what: &str) {
    if matches!(e, kube::Error::Api(s) if s.code == 401 || s.code == 403) {
        tracing::warn!(
            error = %e,
            url,
            "watch cache: {what} refused; guards read these objects with a GET each until list and watch are granted"
        );
    } else {
        tracing::debug!(error = %e, url, "watch cache: {what} failed");
    }
}

/// Move `observed` to `rv` if it is a number past it; false when it is not
/// a number (the cache then never answers).
fn advance(observed: &watch::Sender<u64>, rv: &str) -> bool {
    let Ok(rv) = rv.parse::<u64>() else {
        return false;
    };
    observed.send_if_modified(|o| {
        let moved = rv > *o;
        *o = (*o).max(rv);
        moved
    });
    true
}
