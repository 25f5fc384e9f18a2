//! ward-guards' integration tests in one binary (kube, k8s-openapi, tokio
//! and ward-apiserver linked once, not once per file): a module per guard.

mod await_deletion;
mod common;
mod liveness;
mod occ_patch;
mod owner_uid;
mod port_allocator;
