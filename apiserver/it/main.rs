//! ward-apiserver's integration tests in one binary (kube, k8s-openapi,
//! tokio and hyper linked once, not once per file): a module per area;
//! `common` holds the request-level fixtures they share.

mod admission;
mod auth;
mod bad_input;
mod bad_requests;
mod builtins;
mod common;
mod consistent_lists;
mod conversion;
mod corpus;
mod crd_schemas;
mod differences;
mod dry_run;
mod faults;
mod field_validation;
mod http_heads;
mod kube_client;
mod kube_runtime_helpers;
mod kubectl;
mod lifecycle;
mod malformed_requests;
mod pod_actions;
mod policies;
mod protobuf;
mod scale;
mod services;
mod sharding;
