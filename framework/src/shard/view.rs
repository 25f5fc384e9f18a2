//! [`Shard`]: a member's view of its slots as the controllers it runs see
//! it — which objects a reconcile may start on now, and the selector a
//! sharded watch carries.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::{Arc, Mutex};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio::sync::watch;

use super::gate::{self, Gate, Ticket};
use super::key::ShardKey;
use super::ring::Slots;

/// A member's view of its slots, handed to the controllers it runs (see
/// [`Member::run`](super::Member::run)). Cheap to clone.
#[derive(Clone, Debug)]
pub struct Shard {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    ring: String,
    identity: String,
    key: ShardKey,
    pub(crate) gate: Gate,
    pub(crate) stopping: watch::Sender<bool>,
    /// Collection paths whose LIST and WATCH carry the shard's selector.
    paths: Mutex<BTreeSet<String>>,
}

impl Shard {
    pub(super) fn new(ring: String, identity: String, key: ShardKey, gate: Gate) -> Shard {
        Shard {
            inner: Arc::new(Inner {
                ring,
                identity,
                key,
                gate,
                stopping: watch::Sender::new(false),
                paths: Mutex::new(BTreeSet::new()),
            }),
        }
    }

    /// A shard holding `slots` for good, with no ring behind it: for tests,
    /// and for replicas split statically (each given its slots).
    #[must_use]
    pub fn fixed(identity: impl Into<String>, key: ShardKey, slots: Slots) -> Shard {
        let shard = Shard::new(String::new(), identity.into(), key, Gate::default());
        shard.inner.gate.activate(slots);
        shard
    }

    /// The ring's name.
    #[must_use]
    pub fn ring(&self) -> &str {
        &self.inner.ring
    }

    /// This member's identity.
    #[must_use]
    pub fn identity(&self) -> &str {
        &self.inner.identity
    }

    /// What objects are hashed by.
    #[must_use]
    pub fn key(&self) -> ShardKey {
        self.inner.key
    }

    /// The slots reconciles may start on now.
    #[must_use]
    pub fn slots(&self) -> Slots {
        self.inner.gate.active()
    }

    /// Whether a reconcile of the object with `meta` may start now.
    #[must_use]
    pub fn admits(&self, meta: &ObjectMeta) -> bool {
        self.key()
            .hash(meta)
            .is_some_and(|h| self.slots().contains_hash(h))
    }

    /// The `shardSelector` for the active slots (`None` while there are none).
    #[must_use]
    pub fn selector(&self) -> Option<String> {
        self.slots().selector(self.key().field())
    }

    /// Completes once the member has left the ring (its slots drained and
    /// released, its Lease deleted or given up) or its future was dropped;
    /// made for
    /// [`GuardedController::graceful_shutdown_on`](crate::GuardedController::graceful_shutdown_on).
    pub fn stopping(&self) -> impl Future<Output = ()> + Send + Sync + 'static {
        let mut rx = self.inner.stopping.subscribe();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    }

    /// The active slots and their deactivation epoch now (see
    /// `Gate::selection`).
    pub(crate) fn selection(&self) -> (Slots, u64) {
        self.inner.gate.selection()
    }

    /// A watch of the active slots.
    pub(crate) fn watch_active(&self) -> gate::ActiveWatch {
        self.inner.gate.watch_active()
    }

    /// A reconcile may start on an object hashing to `hash`: its ticket.
    pub(crate) fn enter(&self, hash: u64) -> Option<Ticket> {
        self.inner.gate.enter(hash)
    }

    /// LIST and WATCH of `path` carry the selector from now on.
    pub(crate) fn register(&self, path: &str) {
        self.inner
            .paths
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(path.to_string());
    }

    pub(crate) fn filters(&self, path: &str) -> bool {
        self.inner
            .paths
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(path)
    }
}
