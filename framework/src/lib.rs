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
//!
//! A guarded controller, run here against an embedded ward-apiserver (on a
//! cluster, the client is `kube::Client::try_default()`):
//!
//! ```
//! use std::sync::Arc;
//! use futures::StreamExt;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, PostParams};
//! use kube::runtime::{controller::Action, watcher};
//! use ward_runtime::{Guard, GuardContext, GuardError, GuardedController, Verdict};
//!
//! /// Never act on a ConfigMap that is being deleted.
//! struct NotTerminating;
//!
//! #[async_trait::async_trait]
//! impl Guard<ConfigMap> for NotTerminating {
//!     fn name(&self) -> &'static str {
//!         "not-terminating"
//!     }
//!     async fn check(&self, cm: &ConfigMap, _: &GuardContext) -> Result<Verdict, GuardError> {
//!         Ok(match cm.metadata.deletion_timestamp {
//!             Some(_) => Verdict::skip("terminating"),
//!             None => Verdict::proceed(),
//!         })
//!     }
//! }
//!
//! async fn reconcile(cm: Arc<ConfigMap>, _: Arc<()>) -> Result<Action, kube::Error> {
//!     // Runs only when every guard said proceed.
//!     assert!(cm.metadata.deletion_timestamp.is_none());
//!     Ok(Action::await_change())
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let server = ward_apiserver::ApiServer::start_in_process().await;
//! let cms: Api<ConfigMap> = Api::default_namespaced(kube::Client::new(server.service(), "default"));
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("hello".into());
//! cm.metadata.labels = Some([("app".to_string(), "hello".to_string())].into());
//! cms.create(&PostParams::default(), &cm).await.unwrap();
//!
//! // Only this app's ConfigMaps: a namespace holds others (kube-root-ca.crt).
//! let results = GuardedController::new(cms, watcher::Config::default().labels("app=hello"))
//!     .guard(NotTerminating)
//!     .run(reconcile, |_, _, _| Action::await_change(), Arc::new(()));
//! let first = std::pin::pin!(results).next().await;
//! let (object, _action) = first.unwrap().unwrap();
//! assert_eq!(object.name, "hello");
//! # }
//! ```

#![warn(missing_docs)]

pub mod clock;
pub mod consistent;
pub mod controller;
pub mod fresh;
pub mod guard;
pub mod leader;
pub mod observe;
pub mod shard;
pub mod shutdown;

pub use controller::{Error, ErrorBackoff, GuardedController, RunResult, Synced};
pub use guard::{Guard, GuardContext, GuardError, Reads, Verdict, Wait, run_guards};
pub use leader::{LeaderElection, LeaderError};
pub use observe::{Observability, ObserveError, ObserveHandle, Readiness, ReadyCheck};
