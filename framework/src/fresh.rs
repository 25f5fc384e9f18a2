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
//! instead of 10k. A read stays open for one turn of the scheduler before
//! it is sent, so checks polled one after another in the same turn share
//! it even when the server answers at once (in-process). Nothing is
//! spawned: a read is driven by whoever awaits it.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
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
pub type FreshRead<T> = Result<Option<Arc<T>>, Arc<kube::Error>>;

type Call<V> = Shared<BoxFuture<'static, V>>;
type Key = (TypeId, String);

/// The calls of one key: the one a newcomer may join (not sent yet), and
/// the latest one created (the next must wait for it).
struct Slot<V> {
    open: Option<(u64, Call<V>)>,
    last: (u64, Call<V>),
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
        let (api, name) = (api.clone(), name.to_string());
        self.call(key, move || async move {
            metrics::counter!("ward_fresh_reads_total").increment(1);
            api.get_opt(&name)
                .await
                .map(|o| o.map(Arc::new))
                .map_err(Arc::new)
        })
        .await
    }

    /// The resourceVersion the API server is at now, from a quorum LIST of
    /// one item of `api`'s kind, or joined with such a read not sent yet.
    /// `None` when the server's resourceVersion is not a number.
    pub(crate) async fn current_rv<T>(&self, api: &Api<T>) -> Result<Option<u64>, Arc<kube::Error>>
    where
        T: Readable,
    {
        let key = (TypeId::of::<u64>(), api.resource_url().to_string());
        let api = api.clone();
        self.call(key, move || async move {
            metrics::counter!("ward_fresh_rv_reads_total").increment(1);
            let list = api
                .list_metadata(&ListParams::default().limit(1))
                .await
                .map_err(Arc::new)?;
            Ok(list
                .metadata
                .resource_version
                .and_then(|rv| rv.parse().ok()))
        })
        .await
    }

    /// Run the call `send` makes for `key`, or join one for the same key
    /// that has not been sent yet.
    async fn call<V, F>(&self, key: Key, send: impl FnOnce() -> F + Send + 'static) -> V
    where
        V: Clone + Send + Sync + 'static,
        F: Future<Output = V> + Send + 'static,
    {
        let call = {
            let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            let slot = inner
                .slots
                .get(&key)
                .and_then(|s| s.downcast_ref::<Slot<V>>());
            match slot.and_then(|s| s.open.as_ref()) {
                Some((_, call)) => call.clone(),
                None => {
                    let before = slot.map(|s| s.last.1.clone());
                    inner.next_id += 1;
                    let id = inner.next_id;
                    let call = self.new_call(key.clone(), id, before, send);
                    let slot = Slot {
                        open: Some((id, call.clone())),
                        last: (id, call.clone()),
                    };
                    inner.slots.insert(key, Box::new(slot));
                    call
                }
            }
        };
        call.await
    }

    /// Call `id`: wait for the call before it, close itself to newcomers,
    /// send, and forget the slot if no later call was opened.
    fn new_call<V, F>(
        &self,
        key: Key,
        id: u64,
        before: Option<Call<V>>,
        send: impl FnOnce() -> F + Send + 'static,
    ) -> Call<V>
    where
        V: Clone + Send + Sync + 'static,
        F: Future<Output = V> + Send + 'static,
    {
        let inner = self.inner.clone();
        async move {
            if let Some(before) = before {
                let _ = before.await;
            }
            // Stay open for one turn of the scheduler: the checks polled
            // in the same turn (a controller polls its reconciles one after
            // another) join this call instead of each sending its own.
            tokio::task::yield_now().await;
            with_slot::<V>(&inner, &key, |slot| {
                if slot.open.as_ref().is_some_and(|(open, _)| *open == id) {
                    slot.open = None;
                }
                false
            });
            let answer = send().await;
            with_slot::<V>(&inner, &key, |slot| {
                slot.last.0 == id && slot.open.is_none()
            });
            answer
        }
        .boxed()
        .shared()
    }
}

/// Run `f` on the slot of `key`; remove the slot when `f` says so.
fn with_slot<V: Send + Sync + 'static>(
    inner: &Mutex<Inner>,
    key: &Key,
    f: impl FnOnce(&mut Slot<V>) -> bool,
) {
    let mut inner = inner.lock().unwrap_or_else(|e| e.into_inner());
    let remove = inner
        .slots
        .get_mut(key)
        .and_then(|s| s.downcast_mut::<Slot<V>>())
        .is_some_and(f);
    if remove {
        inner.slots.remove(key);
    }
}
