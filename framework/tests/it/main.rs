//! Ward's integration tests in one binary (kube, k8s-openapi, tokio and
//! ward-apiserver linked once, not once per file): a module per area;
//! `common` holds the process-wide metrics recorder they share.

mod common;
mod fresh;
mod guarded;
mod leader;
mod observe;
mod operate;
mod shard;
