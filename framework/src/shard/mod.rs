//! Sharded controllers: active-active replicas that split the objects
//! between them on Kubernetes Leases, with hand-overs that never reconcile
//! one object twice at once.
//!
//! [`LeaderElection`](crate::LeaderElection) makes one replica do all the
//! work. A sharded controller spreads it: every replica is a [`Member`] of
//! a ring, holds a member Lease of its own, derives the same [`Ring`] from
//! the live members, and reconciles only the objects whose hash falls in
//! the slots it holds. There is no central sharder and no webhook: slots
//! move by a protocol the replicas run on their own Leases.
//!
//! # The race it stops
//! A slot moves when a replica joins, leaves, crashes or is cut off. Done
//! naively — each replica reconciles what its own current view of the ring
//! says — two replicas reconcile one object at once:
//! 1. Replicas A and B run; object `o` hashes to a slot A owns.
//! 2. C joins (creates its Lease). B's next LIST sees C: in B's ring, the
//!    slot is now C's — and C, having listed the Leases too, starts on `o`.
//! 3. A has not listed since (or its LIST is served from a stale cache):
//!    in A's ring the slot is still A's. A's reconcile of `o` runs.
//! 4. A and C both write `o`: the second decides on a state the first is
//!    changing. With a partition (A's calls hang, then land) or a frozen
//!    view of the Leases, A writes long after C took over.
//!
//! # The protocol
//! Each member Lease `<ring>-<identity>` carries the label `ward.dev/ring`
//! and the annotation `ward.dev/shard-slots`: the slots its holder *holds*
//! (has claimed, and may be reconciling). A member's slots are *active*
//! (reconciles may start on them) only between the steps below. Every
//! `renew_every`, each member runs a round:
//! 1. **LIST** the ring's Leases (a quorum read). A Lease is *live* while
//!    it names a holder and `renewTime + leaseDurationSeconds` has not
//!    passed; the live holders and this member make the ring.
//! 2. **Release** the held slots the ring gives to others: deactivate them
//!    (no new reconcile starts), wait for the reconciles running on them
//!    to finish (cancelling them after the drain timeout), then **UPDATE**
//!    the own Lease without them.
//! 3. **Claim** the slots the ring gives to this member that no live Lease
//!    lists: **UPDATE** the own Lease listing them (this write renews it).
//! 4. **Verify**: LIST again. Only a LIST that shows the own Lease at the
//!    resourceVersion step 3 returned counts (it is proven to come after
//!    that write); a claimed slot no other live Lease lists becomes active,
//!    one another lists is withdrawn (UPDATE without it) and retried later.
//!
//! A member that cannot renew stops: when `renew start + lease duration −
//! clock skew` passes without a successful write, every reconcile is
//! cancelled and every slot dropped — before any other member can count
//! the Lease expired (at `renewTime + leaseDurationSeconds`, `renewTime`
//! being stamped after the renew started). It rejoins with its next
//! successful round. A graceful leave drains every slot, then deletes the
//! Lease.
//!
//! **Why two members never run reconciles of one slot at once.** Say A
//! and C both have slot `s` active. Each wrote a Lease listing `s` (W_A,
//! W_C) and then listed (L_A after W_A, L_C after W_C, by the
//! resourceVersion check). The server orders W_A and W_C; say W_A came
//! first. Then L_C, after W_C, saw A's Lease as it was at or after W_A:
//! either still listing `s` — and C withdrew instead of activating — or
//! rewritten by A without `s` — which A does only after its reconciles on
//! `s` have ended (step 2) — or expired — which happens only after A
//! stopped every reconcile (its deadline comes first). In each case A was
//! not active on `s` when C became so. The argument needs no agreement on
//! the ring: members with different views of the membership are kept apart
//! by what their Leases list, and a stale view can delay a hand-over but
//! never double it. It assumes the replicas' clocks differ by less than
//! the clock skew (as every Lease-based election does), and that a write
//! cancelled at the deadline does not reach the server later (in process
//! it cannot; across a network, a request delayed past the skew is the gap
//! Kubernetes leaves open for every Lease holder, having no fencing tokens).
//!
//! # Which objects a replica sees
//! [`ShardKey`] says what is hashed: the object's uid (the default; spreads
//! any set of objects evenly) or its namespace (everything in a namespace
//! on one replica). A controller made sharded with
//! [`GuardedController::shard`](crate::GuardedController::shard) restarts
//! its watch with a KEP-5866 `shardSelector` for its active slots each time
//! they change, through an `Api` built on [`Shard::client`]; a server
//! that ignores the option (no echo in `metadata.shardInfo`, as a
//! kube-apiserver without the ShardedListAndWatch gate) sends everything,
//! and the replica filters client-side (`ward_shard_server_filtering` says
//! which). Every reconcile passes the shard's gate whatever the watch sent.
//! Owned children (`owns`) follow their controller owner: by uid, a child
//! is kept when its controller owner's uid hashes to an active slot
//! (client-side: the server cannot hash an owner reference); by namespace,
//! children are selected like their owners (server-side).
//!
//! Metrics (labels `ring`, `identity`; at zero from the start): gauges
//! `ward_shard_slots_owned`, `ward_shard_members`,
//! `ward_shard_server_filtering`; counter `ward_shard_handovers_total{event=
//! claimed|released|withdrawn|cancelled|lost}`.

mod follow;
mod gate;
mod member;
mod query;
pub mod ring;

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::{Arc, Mutex};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use tokio::sync::watch;

pub(crate) use follow::{applied_once_listed, watch};
pub(crate) use gate::{Gate, Ticket};
pub use member::Member;
pub use ring::{Ring, SLOTS, Slots};

/// The label naming a member Lease's ring.
pub const LABEL: &str = "ward.dev/ring";
/// The annotation listing the slots a member Lease's holder holds (32 hex
/// digits, slot 0 the lowest bit).
pub const ANNOTATION: &str = "ward.dev/shard-slots";

/// Errors from a sharded member.
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    /// The durations do not fit together.
    #[error("invalid shard member settings: {0}")]
    Config(String),
    /// The member Lease could not be deleted on leaving (the others take
    /// its slots once it expires).
    #[error("could not delete member lease {lease}: {source}")]
    Leave {
        /// The Lease's name.
        lease: String,
        /// What went wrong.
        #[source]
        source: kube::Error,
    },
    /// Deleting the member Lease took longer than a lease duration.
    #[error("deleting member lease {lease} timed out")]
    LeaveTimeout {
        /// The Lease's name.
        lease: String,
    },
}

/// What an object is hashed by (KEP-5866's two fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ShardKey {
    /// `metadata.uid`: objects spread evenly whatever their namespaces.
    #[default]
    Uid,
    /// `metadata.namespace`: a namespace's objects stay together (and a
    /// cluster-scoped kind all lands on one replica).
    Namespace,
}

impl ShardKey {
    /// The field as a `shardSelector` names it.
    #[must_use]
    pub fn field(self) -> &'static str {
        match self {
            ShardKey::Uid => "object.metadata.uid",
            ShardKey::Namespace => "object.metadata.namespace",
        }
    }

    /// The hash of an object's field (`None`: an object without a uid).
    #[must_use]
    pub fn hash(self, meta: &ObjectMeta) -> Option<u64> {
        let value = match self {
            ShardKey::Uid => meta.uid.as_deref()?,
            ShardKey::Namespace => meta.namespace.as_deref().unwrap_or(""),
        };
        Some(ward_base::fnv1a(value.as_bytes()))
    }

    /// The hash a child is routed by: its controller owner's uid (by uid),
    /// or its namespace. `None`: a child without a controller owner.
    #[must_use]
    pub fn child_hash(self, meta: &ObjectMeta) -> Option<u64> {
        match self {
            ShardKey::Uid => meta
                .owner_references
                .as_ref()?
                .iter()
                .find(|o| o.controller == Some(true))
                .map(|o| ward_base::fnv1a(o.uid.as_bytes())),
            ShardKey::Namespace => self.hash(meta),
        }
    }
}

/// A member's view of its slots, handed to the controllers it runs (see
/// [`Member::run`]). Cheap to clone.
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
    fn new(ring: String, identity: String, key: ShardKey, gate: Gate) -> Shard {
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

    /// `client`, with the shard's `shardSelector` added to every LIST and
    /// WATCH of a collection a sharded controller registered: build the
    /// controller's `Api` on it so the server filters (see the module docs).
    #[must_use]
    pub fn client(&self, client: Client) -> Client {
        let default_ns = client.default_namespace().to_string();
        Client::new(query::ShardQuery::new(client, self.clone()), default_ns)
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

    fn filters(&self, path: &str) -> bool {
        self.inner
            .paths
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(path)
    }
}
