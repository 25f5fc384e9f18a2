//! The examples' integration tests in one binary (kube, k8s-openapi, tokio
//! and ward-apiserver linked once, not once per file): a module per example,
//! `campaigns` for all of them under perturbation, and `replay` (exact
//! replay of controllers whose reconciles end at one instant; it needs
//! `--cfg tokio_unstable`, which .cargo/config.toml sets).

mod blackbox;
mod campaigns;
mod cns;
mod common;
mod lws;
mod mirror;
#[cfg(tokio_unstable)]
mod rbac;
mod replay;
mod sharding;
mod whereabouts;
