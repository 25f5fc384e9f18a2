//! The examples' integration tests in one binary (kube, k8s-openapi, tokio
//! and ward-apiserver linked once, not once per file): a module per example,
//! and `campaigns` for all of them under perturbation.

mod campaigns;
mod cns;
mod common;
mod lws;
mod mirror;
mod sharding;
mod whereabouts;
