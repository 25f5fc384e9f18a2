//! Sharding: replicas of one controller splitting its objects on Leases,
//! through joins, graceful leaves, crashes, partitions and frozen views.
//!
//! Every replica reconciles ConfigMaps in `work` by reading one, deciding
//! for a moment, and writing it back (a counter, its own name in the
//! annotation `sharding.ward.dev/by`, and the object's `want` mark copied
//! to `seen`), again every few seconds; before each reconcile a fresh-
//! reading guard ([`AwaitDeletion`](ward_guards::await_deletion::AwaitDeletion))
//! checks the object is still there. Replicas join, leave and crash on a
//! seeded script, and the scenario creates objects and changes their
//! `want`, while the campaign partitions replicas (their requests hang or
//! fail) and freezes what they read.
//!
//! - **naive**: what a sharded controller written by hand does — each
//!   replica renews a member Lease listing the slots its own view of the
//!   ring gives it, and reconciles whatever that view says, at once. The
//!   race, as API events:
//!   1. r0 and r1 run; `obj-07` hashes to a slot r0 owns.
//!   2. r2 joins: it creates its Lease, LISTs the Leases, and in its ring
//!      the slot is r2's. r2 reconciles `obj-07`.
//!   3. r0 has not listed since: in its ring the slot is still its own.
//!      Its reconcile of `obj-07` runs too (I1). Partitioned, r0's write
//!      lands after its Lease expired and r2 took over (I2).
//! - **guarded**: Ward's [`ward_runtime::shard::Member`] and
//!   [`GuardedController::shard`](ward_runtime::GuardedController::shard): slots
//!   move only by the hand-over protocol (drain, release, claim, activate
//!   after a LIST proven fresh; stop before the Lease can expire).
//!
//! Invariants ([`invariants`]): **I1** no two replicas run a reconcile of
//! one object at overlapping times; **I2** no committed write by a replica
//! to an object outside the slots its live Lease listed at that instant
//! (the server's history, its clock); **I3** once membership and
//! perturbations stop, every object is reconciled by the owner the final
//! ring names within the Lease duration plus two rounds and a reconcile;
//! **I4** the final ring spreads 1,000 seeded uids within ±30% of the mean;
//! **I5** every change the churn makes (an object created, or its `want`
//! changed) is answered — a replica writes `seen` at least its mark — by
//! the end of the settle window (the quiet plus I3's bound; during the
//! churn a change may wait out a partition or a frozen view of its owner).

pub mod invariants;
pub mod replica;
pub mod scenario;

pub use scenario::Sharding;

/// The namespace of the objects and of the member Leases.
pub const NAMESPACE: &str = "work";
/// The ring's name.
pub const RING: &str = "widgets";
/// Who wrote an object last.
pub const BY: &str = "sharding.ward.dev/by";
/// The data key the scenario's changes set: a mark, increasing over the run.
pub const WANT: &str = "want";
/// The data key a reconcile copies the `want` it saw into.
pub const SEEN: &str = "seen";
