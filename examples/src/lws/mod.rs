//! LWS: a revision taken from a terminating or foreign StatefulSet
//! (LeaderWorkerSet), reproduced and fixed by a `GuardedController` with
//! the await-deletion guard. See `examples/lws/README.md` for the commands.

pub mod controller;
pub mod invariants;
pub mod model;
pub mod revision;
pub mod scenario;
