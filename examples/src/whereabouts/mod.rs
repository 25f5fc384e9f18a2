//! whereabouts: the duplicate-IP race of the ip-reconciler, reproduced and
//! fixed by Ward's guards. See `examples/whereabouts/README.md` for the commands.

pub mod agent;
pub mod invariants;
pub mod model;
pub mod reconciler;
pub mod scenario;
