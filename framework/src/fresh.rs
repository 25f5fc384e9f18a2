//! Fresh reads that cost less than a GET per check: concurrent quorum
//! reads of the same object share one request, under the one rule that
//! keeps them linearizable — a check only joins a read that had **not been
//! sent yet** when the check began.
//!
//! Why not a cache: a guard must judge an owner as it is *now*. A cache
//! that is newer than the child being reconciled can still show an owner
//! that was deleted and recreated since (the CNS race is exactly that), so
//! "the cache has seen the child's resourceVersion" proves nothing. A read
//! sent after the check began does: it reflects every write that completed
//! before the check.
//!
//! ```text
//! check A ──► read 1 sent ─────────── read 1 answers ─► A
//! check B ─────► (read 1 is in flight: B may not join it; it opens read 2)
//! check C ────────► joins read 2 (not sent yet)
//!                                     read 2 sent ─── answers ─► B, C
//! ```
//!
//! At most one read per object is in flight and at most one is waiting to
//! be sent, so N overlapping checks of one owner cost at most two reads —
//! a sync of 10k children owned by 64 Nodes needs about 64-128 reads
//! instead of 10k. A read stays open for one turn of the scheduler (tokio's:
//! until the worker has run its other ready tasks) before it is sent, and
//! for another after every turn in which a check joined it, at most
//! [`MAX_OPEN_TURNS`]: a controller under load starts reconciles turn after
//! turn, and one read gathers the checks of many, while a lone check (a
//! controller keeping up with its events) waits one turn only. Each read
//! runs on its own task, spawned when it opens: the checks that joined it
//! are woken once, by its answer — not at every turn it stays open, as
//! they would be if they drove it themselves (`Shared` wakes every joined
//! waiter whenever the shared future is woken).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use kube::api::{Api, ListParams};
use serde::de::DeserializeOwned;

/// What a fresh or consistent read can read: a kube resource that
/// deserializes and crosses threads.
pub trait Readable:
    kube::Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

impl<T: kube::Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static> Readable for T {}

/// A shared read's answer (an error is shared too, behind an `Arc`).
pub type FreshRead<T> = Answer<Option<Arc<T>>>;

/// What a shared call answers: a value, or the error every joiner shares.
type Answer<X> = Result<X, Arc<kube::Error>>;

/// The most scheduler turns a read stays open while checks keep joining it.
pub const MAX_OPEN_TURNS: u32 = 16;

type Call<X> = Shared<BoxFuture<'static, Answer<X>>>;
type Key = (TypeId, String);

/// The calls of one key: the one a newcomer may join (not sent yet), and
/// the latest one created (the next must wait for it).
struct Slot<X> {
    open: Option<Open<X>>,
    last: (u64, Call<X>),
}

/// A call not sent yet, and how many checks have joined it.
struct Open<X> {
    id: u64,
    call: Call<X>,
    joins: Arc<AtomicU64>,
}

#[derive(Default)]
struct Inner {
    next_id: u64,
    slots: HashMap<Key, Box<dyn Any + Send>>,
}

/// Coalesced quorum reads (see the module doc); cheap to clone, shared by
/// every check of one controller through [`GuardContext`](crate::GuardContext).
#[derive(Clone, Default)]
pub struct FreshReads {
    inner: Arc<Mutex<Inner>>,
}

impl std::fmt::Debug for FreshReads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FreshReads").finish_non_exhaustive()
    }
}

impl FreshReads {
    /// GET `name` through `api` (a quorum read), or join a read of the same
    /// object that has not been sent yet. `None` when it does not exist.
    pub async fn get<T>(&self, api: &Api<T>, name: &str) -> FreshRead<T>
    where
        T: Readable,
    {
        let key = (TypeId::of::<T>(), format!("{}/{name}", api.resource_url()));
        self.call(key, || {
            let (api, name) = (api.clone(), name.to_string());
            async move {
                metrics::counter!("ward_fresh_reads_total").increment(1);
                api.get_opt(&name)
                    .await
                    .map(|o| o.map(Arc::new))
                    .map_err(Arc::new)
            }
        })
        .await
    }

    /// The resourceVersion the API server is at now, from a quorum LIST of
    /// one item of `api`'s kind, or joined with such a read not sent yet.
    /// `None` when the server's resourceVersion is not a number.
    pub(crate) async fn current_rv<T>(&self, api: &Api<T>) -> Answer<Option<u64>>
    where
        T: Readable,
    {
        let key = (TypeId::of::<u64>(), api.resource_url().to_string());
        self.call(key, || {
            let api = api.clone();
            async move {
                metrics::counter!("ward_fresh_rv_reads_total").increment(1);
                let list = api
                    .list_metadata(&ListParams::default().limit(1))
                    .await
                    .map_err(Arc::new)?;
                Ok(list
                    .metadata
                    .resource_version
                    .and_then(|rv| rv.parse().ok()))
            }
        })
        .await
    }

    /// Run the call `send` makes for `key` (made only when no call for
    /// `key` is open), or join one that has not been sent yet.
    async fn call<X, F>(&self, key: Key, send: impl FnOnce() -> F) -> Answer<X>
    where
        X: Clone + Send + Sync + 'static,
        F: Future<Output = Answer<X>> + Send + 'static,
    {
        let call = {
            let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            let slot = inner
                .slots
                .get_mut(&key)
                .and_then(|s| s.downcast_mut::<Slot<X>>());
            match slot {
                Some(Slot {
                    open: Some(open), ..
                }) => {
                    open.joins.fetch_add(1, Ordering::Relaxed);
                    open.call.clone()
                }
                slot => {
                    let before = slot.map(|s| s.last.1.clone());
                    inner.next_id += 1;
                    let id = inner.next_id;
                    let joins = Arc::new(AtomicU64::new(0));
                    let call = self.new_call(key.clone(), id, before, joins.clone(), send());
                    let slot = Slot {
                        open: Some(Open {
                            id,
                            call: call.clone(),
                            joins,
                        }),
                        last: (id, call.clone()),
                    };
                    inner.slots.insert(key, Box::new(slot));
                    call
                }
            }
        };
        call.await
    }

    /// Call `id`, on a task of its own: wait for the call before it, close
    /// itself to newcomers, send, and forget the slot if no later call was
    /// opened.
    fn new_call<X, F>(
        &self,
        key: Key,
        id: u64,
        before: Option<Call<X>>,
        joins: Arc<AtomicU64>,
        send: F,
    ) -> Call<X>
    where
        X: Clone + Send + Sync + 'static,
        F: Future<Output = Answer<X>> + Send + 'static,
    {
        let inner = self.inner.clone();
        let task = tokio::spawn(async move {
            if let Some(before) = before {
                let _ = before.await;
            }
            // Stay open for a turn of the scheduler, and another after
            // every turn in which a check joined: the checks polled in the
            // meantime join this call instead of each sending its own.
            open_turns(&joins).await;
            with_slot::<X>(&inner, &key, |slot| {
                if slot.open.as_ref().is_some_and(|open| open.id == id) {
                    slot.open = None;
                }
                false
            });
            let answer = send.await;
            with_slot::<X>(&inner, &key, |slot| {
                slot.last.0 == id && slot.open.is_none()
            });
            answer
        });
        async move {
            match task.await {
                Ok(answer) => answer,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                // Only when its runtime shuts down.
                Err(e) => Err(Arc::new(kube::Error::Service(Box::new(e)))),
            }
        }
        .boxed()
        .shared()
    }
}

/// Stay open for a turn of the scheduler, and another after every turn in
/// which a check joined, at most [`MAX_OPEN_TURNS`].
///
/// A turn is `tokio::task::yield_now`'s: the call's task is woken again
/// once the worker has run its other ready tasks — the checks they start
/// join meanwhile.
async fn open_turns(joins: &AtomicU64) {
    let mut counted = 0;
    for _ in 0..MAX_OPEN_TURNS {
        tokio::task::yield_now().await;
        let now = joins.load(Ordering::Relaxed);
        if now == counted {
            return;
        }
        counted = now;
    }
}

/// Run `f` on the slot of `key`; remove the slot when `f` says so.
fn with_slot<X: Send + Sync + 'static>(
    inner: &Mutex<Inner>,
    key: &Key,
    f: impl FnOnce(&mut Slot<X>) -> bool,
) {
    let mut inner = inner.lock().unwrap_or_else(|e| e.into_inner());
    let remove = inner
        .slots
        .get_mut(key)
        .and_then(|s| s.downcast_mut::<Slot<X>>())
        .is_some_and(f);
    if remove {
        inner.slots.remove(key);
    }
}
