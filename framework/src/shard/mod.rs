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
//! `renew_every` — and as soon as another member's Lease appears, goes, or
//! changes its holder or the slots it lists (a WATCH of the ring's Leases;
//! renewals alone start nothing), but never sooner than a quarter of
//! `renew_every` after its last round began — each member runs a round:
//! 1. **LIST** the ring's Leases (a quorum read). A member that has no
//!    Lease yet first creates it listing nothing (*announce*) and LISTs
//!    again, so that members started together see each other before they
//!    claim. A Lease is *live* while
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
//! 5. **Collect** the Leases of other members expired for a whole lease
//!    duration more: DELETE each with the resourceVersion step 1 read as
//!    precondition (a holder that renewed meanwhile keeps it). Its holder
//!    stopped reconciling before it expired; should it come back, its
//!    next write finds its Lease gone and it drops every slot before
//!    rejoining.
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
//! [`GuardedController::shard`](crate::GuardedController::shard) watches
//! with a KEP-5866 `shardSelector` for its active slots, through an `Api`
//! built on [`Shard::client`]. Slots gained are listed and watched beside
//! that watch (their objects reconciled as their pages arrive, nothing
//! else relisted); a slot lost restarts it with a fresh LIST of the slots
//! still active (after a restart that only gained slots, the objects it
//! held unchanged are not reconciled again). A request that names its own
//! `shardSelector` keeps it. A server
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

mod added;
mod changes;
mod follow;
mod gate;
mod keeper;
mod key;
mod lease;
mod member;
mod query;
pub mod ring;
mod run;
mod view;

pub(crate) use follow::{GainedOnly, applied_once_listed, watch};
pub use key::ShardKey;
pub use lease::{ANNOTATION, LABEL};
pub use member::{Member, ShardError};
pub use ring::{Ring, SLOTS, Slots};
pub use view::Shard;
