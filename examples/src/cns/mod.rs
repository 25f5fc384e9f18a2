//! CNS: the stale NodeNetworkConfig after a node is recreated (Azure CNS),
//! reproduced and fixed by a `GuardedController` with the owner-UID guard.
//! See `examples/cns/README.md` for the commands.

pub mod agent;
pub mod cluster;
pub mod invariants;
pub mod ipam;
pub mod kubelet;
pub mod model;
pub mod scenario;
