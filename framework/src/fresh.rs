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
//! instead of 10k. Nothing is spawned: a read is driven by whoever awaits it.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use kube::api::Api;
use serde::de::DeserializeOwned;

/// A shared read's answer (an error is shared too, behind an `Arc`).
pub type FreshRead<T> = Result<Option<Arc<T>>, Arc<kube::Error>>;

type Read<T> = Shared<BoxFuture<'static, FreshRead<T>>>;

/// The reads of one object: the one a newcomer may join (not sent yet),
/// and the latest one created (the next must wait for it).
struct Slot<T> {
    open: Option<(u64, Read<T>)>,
    last: (u64, Read<T>),
}

#[derive(Default)]
struct Inner {
    next_id: u64,
    slots: HashMap<(TypeId, String), Box<dyn Any + Send>>,
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
        T: kube::Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let key = (TypeId::of::<T>(), format!("{}/{name}", api.resource_url()));
        let read = {
            let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            let joinable = inner
                .slots
                .get(&key)
                .and_then(|s| s.downcast_ref::<Slot<T>>())
                .and_then(|s| s.open.as_ref())
                .map(|(_, r)| r.clone());
            match joinable {
                Some(read) => read,
                None => {
                    inner.next_id += 1;
                    let id = inner.next_id;
                    let before = inner
                        .slots
                        .get(&key)
                        .and_then(|s| s.downcast_ref::<Slot<T>>())
                        .map(|s| s.last.1.clone());
                    let read =
                        self.new_read(key.clone(), id, before, api.clone(), name.to_string());
                    let slot = Slot {
                        open: Some((id, read.clone())),
                        last: (id, read.clone()),
                    };
                    inner.slots.insert(key, Box::new(slot));
                    read
                }
            }
        };
        read.await
    }

    /// Read `id`: wait for the read before it, close itself to newcomers,
    /// send the GET, and forget the slot if no later read was opened.
    fn new_read<T>(
        &self,
        key: (TypeId, String),
        id: u64,
        before: Option<Read<T>>,
        api: Api<T>,
        name: String,
    ) -> Read<T>
    where
        T: kube::Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let inner = self.inner.clone();
        async move {
            if let Some(before) = before {
                let _ = before.await;
            }
            with_slot::<T>(&inner, &key, |slot| {
                if slot.open.as_ref().is_some_and(|(open, _)| *open == id) {
                    slot.open = None;
                }
                false
            });
            metrics::counter!("ward_fresh_reads_total").increment(1);
            let answer = api
                .get_opt(&name)
                .await
                .map(|o| o.map(Arc::new))
                .map_err(Arc::new);
            with_slot::<T>(&inner, &key, |slot| {
                slot.last.0 == id && slot.open.is_none()
            });
            answer
        }
        .boxed()
        .shared()
    }
}

/// Run `f` on the slot of `key`; remove the slot when `f` says so.
fn with_slot<T: Send + Sync + 'static>(
    inner: &Mutex<Inner>,
    key: &(TypeId, String),
    f: impl FnOnce(&mut Slot<T>) -> bool,
) {
    let mut inner = inner.lock().unwrap_or_else(|e| e.into_inner());
    let remove = inner
        .slots
        .get_mut(key)
        .and_then(|s| s.downcast_mut::<Slot<T>>())
        .is_some_and(f);
    if remove {
        inner.slots.remove(key);
    }
}
