//! ward-apiserver: an embedded Kubernetes API server that kube-rs and
//! kubectl use unmodified.
//!
//! One request handler behind two transports: an in-process tower
//! [`WardService`] (so `kube::Client::new(service, "default")` works with no
//! socket) and an HTTP listener (plain HTTP, loopback by default).
//!
//! ```
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, DeleteParams, PostParams};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let server = ward_apiserver::ApiServer::start_in_process().await;
//! // `server.client()` does the same with the `client` feature.
//! let client = kube::Client::new(server.service(), "default");
//! let cms: Api<ConfigMap> = Api::default_namespaced(client);
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("hello".into());
//! let created = cms.create(&PostParams::default(), &cm).await.unwrap();
//! assert!(created.metadata.uid.is_some());
//!
//! // Errors are the real server's: a second create is a 409 AlreadyExists.
//! let kube::Error::Api(status) = cms.create(&PostParams::default(), &cm).await.unwrap_err() else {
//!     panic!("not an API error");
//! };
//! assert_eq!((status.code, status.reason.as_str()), (409, "AlreadyExists"));
//! cms.delete("hello", &DeleteParams::default()).await.unwrap();
//! # }
//! ```

#![warn(missing_docs)]

// Instrumented fuzzing builds (`cargo bolero test`, docs/apiserver.md, "Fuzzing") link
// the fuzzer runtime into every binary that uses this crate (see Cargo.toml).
#[cfg(fuzzing)]
use bolero as _;

// The layers, private: ARCHITECTURE.md gives their order (machinery and
// faults lowest, then schema, registry, storage, auth, admission,
// conversion, controllers, http, server), and `.ci/imports.py` checks that
// none imports a higher one.
mod admission;
mod auth;
mod controllers;
mod conversion;
mod http;
mod machinery;
mod registry;
mod schema;
mod server;
mod storage;

pub mod faults;
pub mod store;

#[doc(hidden)]
pub mod internals;

pub use auth::tokens::{TokenFileError, parse_token_file};
pub use auth::{AuthorizationMode, UserInfo};
pub use controllers::alloc::ServiceCidr;
pub use faults::{
    ClientView, Delay, FaultConfig, FaultError, Faults, Fired, PodLifecycle, Verb, WriteAction,
    WriteFault,
};
pub use machinery::status::ApiError;
pub use server::{ApiServer, ServerConfig, ServerError, Services, WardService, kubeconfig_yaml};
pub use ward_base::clock::Clock;
