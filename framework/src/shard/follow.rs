//! A sharded controller's watch: kube-runtime's watcher for the shard's
//! active slots, filtered client-side whatever the server did, with a
//! watch added beside it for the slots gained since it started.
//!
//! When slots are only gained — none was deactivated since the watch
//! started, so no reconcile was cancelled — an added watch (`added.rs`)
//! lists and watches just the gained slots, and their objects reach the
//! reflector's store, and the reconciler, as their pages arrive: a
//! hand-over reconciles what moved without relisting what the replica
//! held. When a slot is deactivated (its objects must leave the cache),
//! after a few added watches, or when one of them loses track, the watch
//! restarts with a fresh LIST of every active slot, so the reflector's
//! store is rebuilt (kube-runtime's `Init` … `InitDone`) with exactly
//! their objects. If that restart only gained slots, the objects it lists
//! unchanged (same uid, same resourceVersion as in the cache before) are
//! not triggered again.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::stream::{BoxStream, SelectAll};
use futures::{Stream, StreamExt};
use kube::Resource;
use kube::api::Api;
use kube::runtime::reflector::Store;
use kube::runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;

use super::added::{self, Step};
use super::gate::ActiveWatch;
use super::{Shard, ShardKey, Slots, query};

/// Added watches beside the first before a restart folds them into one.
const MAX_ADDED: usize = 4;

struct State<K: 'static> {
    api: Api<K>,
    wc: watcher::Config,
    shard: Shard,
    /// The slots the running watch was started for.
    slots: Slots,
    /// The slots watched — the running watch's and the added watches' —
    /// and the deactivation epoch when they were taken.
    watched: (Slots, u64),
    /// What restarts it.
    active: ActiveWatch,
    inner: Option<BoxStream<'static, watcher::Result<Event<K>>>>,
    /// The running watch has listed (passed its `InitDone`): a watch added
    /// before then would see its objects dropped when the list lands.
    listed: bool,
    added: SelectAll<BoxStream<'static, watcher::Result<Step<K>>>>,
    probed: bool,
    gained: GainedOnly,
}

/// Set by [`watch`] when it restarts having only gained slots; taken by
/// [`applied_once_listed`] at that restart's `Init`.
#[derive(Clone, Default)]
pub(crate) struct GainedOnly(Arc<AtomicBool>);

/// The objects of `api` in `shard`'s active slots, as a watcher's events.
pub(crate) fn watch<K>(
    api: Api<K>,
    wc: watcher::Config,
    shard: Shard,
    gained: GainedOnly,
) -> impl Stream<Item = watcher::Result<Event<K>>> + Send
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    shard.register(api.resource_url());
    let state = State {
        api,
        wc,
        active: shard.watch_active(),
        shard,
        slots: Slots::NONE,
        watched: (Slots::NONE, u64::MAX),
        inner: None,
        listed: false,
        added: SelectAll::new(),
        probed: false,
        gained,
    };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            if st.inner.is_none() {
                st.start().await;
            }
            let inner = st.inner.as_mut().expect("started above");
            tokio::select! {
                biased;
                () = st.active.changed() => st.slots_changed(),
                event = inner.next() => match event {
                    None => return None,
                    // A relist (its watch expired) would drop from the
                    // store what the added watches put there: start over.
                    Some(Ok(Event::Init)) if !st.added.is_empty() => st.inner = None,
                    Some(Ok(event)) => {
                        match event {
                            Event::Init => st.listed = false,
                            Event::InitDone => st.listed = true,
                            _ => {}
                        }
                        if let Some(event) = kept(st.shard.key(), st.slots, event) {
                            return Some((Ok(event), st));
                        }
                    }
                    Some(Err(e)) => return Some((Err(e), st)),
                },
                step = st.added.next(), if !st.added.is_empty() => match step {
                    Some(Ok(Step::Event(event))) => return Some((Ok(event), st)),
                    Some(Ok(Step::Restart)) => st.inner = None,
                    Some(Err(e)) => return Some((Err(e), st)),
                    None => {}
                },
            }
        }
    })
}

impl<K> State<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// (Re)start the watch for the slots active now.
    async fn start(&mut self) {
        let (before, epoch) = self.watched;
        self.slots = self.active.take();
        let now = self.active.seen();
        let only_gained =
            !before.is_empty() && before.minus(self.slots).is_empty() && now.1 == epoch;
        self.gained.0.store(only_gained, Ordering::Relaxed);
        self.watched = now;
        self.added = SelectAll::new();
        self.listed = false;
        if self.slots.is_empty() {
            // Nothing to watch: empty the cache, then wait for a slot.
            self.inner = Some(
                futures::stream::iter([Ok(Event::Init), Ok(Event::InitDone)])
                    .chain(futures::stream::pending())
                    .boxed(),
            );
            return;
        }
        if !self.probed {
            self.probed = true;
            let client = self.api.clone().into_client();
            let server = query::server_filters(&client, self.api.resource_url()).await;
            let labels = [
                ("ring", self.shard.ring().to_string()),
                ("identity", self.shard.identity().to_string()),
            ];
            metrics::gauge!("ward_shard_server_filtering", &labels).set(if server {
                1.0
            } else {
                0.0
            });
            if !server {
                tracing::info!(ring = %self.shard.ring(), path = %self.api.resource_url(),
                    "the server does not apply shardSelector here: filtering client-side");
            }
        }
        self.inner = Some(watcher::watcher(self.api.clone(), self.wc.clone()).boxed());
    }

    /// The active slots changed: watch the gained ones beside the running
    /// watch if only slots were gained since it started and it has listed;
    /// otherwise restart.
    fn slots_changed(&mut self) {
        let (watched, epoch) = self.watched;
        let now = self.active.take();
        let now_epoch = self.active.seen().1;
        let gained = now.minus(watched);
        let only_gained = now_epoch == epoch && watched.minus(now).is_empty();
        let key = self.shard.key();
        match gained.selector(key.field()) {
            Some(selector)
                if only_gained
                    && self.listed
                    && !watched.is_empty()
                    && self.added.len() < MAX_ADDED =>
            {
                let steps = added::watch(&self.api, &self.wc, selector).filter_map(move |step| {
                    futures::future::ready(match step {
                        Ok(Step::Event(event)) => {
                            kept(key, gained, event).map(|e| Ok(Step::Event(e)))
                        }
                        other => Some(other),
                    })
                });
                self.added.push(steps.boxed());
                self.watched = (now, now_epoch);
            }
            _ => self.inner = None,
        }
    }
}

/// `event`, unless it carries an object outside `slots`: each object is
/// another watch's business, or none's.
fn kept<K: Resource>(key: ShardKey, slots: Slots, event: Event<K>) -> Option<Event<K>> {
    let inside = |k: &K| key.hash(k.meta()).is_some_and(|h| slots.contains_hash(h));
    match &event {
        Event::Apply(k) | Event::InitApply(k) | Event::Delete(k) if !inside(k) => None,
        _ => Some(event),
    }
}

/// The objects a sharded watch applied, as triggers — like kube-runtime's
/// `applied_objects`, except that a relist's objects are held back until
/// its `InitDone`, when the reflector's store holds them. kube-runtime
/// looks each trigger up in the store: an object of a slot just gained,
/// triggered while its relist is still paging, would not be found there
/// (`ObjectNotFound`) and never reconciled. (kube-runtime's own relists
/// have the same gap only for objects created meanwhile.) After a restart
/// that only gained slots ([`GainedOnly`]), objects `store` held unchanged
/// before it are not triggered again (see the module docs).
pub(crate) fn applied_once_listed<K>(
    events: impl Stream<Item = watcher::Result<Event<K>>> + Send,
    store: Store<K>,
    gained: GainedOnly,
) -> impl Stream<Item = watcher::Result<K>> + Send
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    let mut held: Vec<K> = Vec::new();
    // What the store held before a gain-only restart (shared, not copied).
    let mut before: Option<Vec<Arc<K>>> = None;
    events.flat_map(move |event| {
        let out: Vec<watcher::Result<K>> = match event {
            Err(e) => vec![Err(e)],
            Ok(Event::Apply(k)) => vec![Ok(k)],
            Ok(Event::InitApply(k)) => {
                held.push(k);
                Vec::new()
            }
            Ok(Event::InitDone) => {
                // uid -> resourceVersion of what the store held before.
                let listed = before.take().unwrap_or_default();
                let before: HashMap<&str, &str> = listed
                    .iter()
                    .filter_map(|k| {
                        let m = k.meta();
                        Some((m.uid.as_deref()?, m.resource_version.as_deref()?))
                    })
                    .collect();
                let unchanged = |k: &K| {
                    let m = k.meta();
                    matches!((m.uid.as_deref(), m.resource_version.as_deref()),
                        (Some(uid), Some(rv)) if before.get(uid) == Some(&rv))
                };
                std::mem::take(&mut held)
                    .into_iter()
                    .filter(|k| !unchanged(k))
                    .map(Ok)
                    .collect()
            }
            Ok(Event::Init) => {
                held.clear();
                // The reflector swaps its store at InitDone: it still
                // holds what the last watch listed.
                before = gained
                    .0
                    .swap(false, Ordering::Relaxed)
                    .then(|| store.state());
                Vec::new()
            }
            Ok(Event::Delete(_)) => Vec::new(),
        };
        futures::stream::iter(out)
    })
}
