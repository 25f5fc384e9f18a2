//! Ward: a guarded reconcile loop on kube-runtime.
//!
//! kube-runtime schedules and caches by name: `ObjectRef` ignores the uid,
//! owner triggers carry the owner uid and nobody checks it, and a cached
//! read may be arbitrarily stale. Ward adds the missing pieces as small
//! parts of a controller rather than `if`s to remember:
//!
//! - [`Guard`]: a check before every reconcile — proceed, wait (woken by a
//!   watch event), skip, or fail; guards compose in order.
//! - [`GuardedController`]: kube-runtime's `Controller` (its whole API, the
//!   same meaning) with guards, owner triggers from replaced owners made
//!   visible, an opt-in per-object error backoff, a tracing span per
//!   reconcile (object ref and uid) and metrics.
//! - Fresh reads for guards ([`GuardContext`], [`Reads`]): an object as it
//!   is now, from the controller's watch cache once it has caught up with
//!   the server's current resourceVersion ([`consistent`]), or with quorum
//!   GETs that overlapping checks share ([`fresh`]).
//!
//! Ready-made guards live in the `ward-guards` crate.

#![warn(missing_docs)]

pub mod clock;
pub mod consistent;
pub mod controller;
pub mod fresh;
pub mod guard;
pub mod leader;
pub mod observe;
pub mod shutdown;

pub use controller::{Error, ErrorBackoff, GuardedController, RunResult, Synced};
pub use guard::{Guard, GuardContext, GuardError, Reads, Verdict, Wait, run_guards};
pub use leader::{LeaderElection, LeaderError};
pub use observe::{Observability, ObserveError, ObserveHandle, Readiness, ReadyCheck};
