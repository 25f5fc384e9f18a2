//! Seeded, Sieve-style perturbation campaigns over any controller, on an
//! embedded ward-apiserver in simulated time.
//!
//! Sieve (OSDI'22) found bugs in real controllers by perturbing what they
//! see: a stale view of the cluster, intermediate states they never
//! observe, crashes between writes. This crate does that in one process:
//! each seed draws a [`Plan`] — one [`Action`] per enabled [`Perturbation`]
//! kind, with its own start, length and target — and a [`Perturber`]
//! carries it out against the server's fault knobs and the controllers
//! under test while your scenario's workload runs. The same seed draws the
//! same plan, and under [`simulate`] the run replays exactly, in this
//! process or another (see [`entropy`] for what that covers). Every run
//! is bounded ([`Perturber::run`], [`Limits`]), and invariants can judge
//! every committed write ([`Perturber::judge`], [`history`]).
//!
//! A campaign over a small controller that keeps a ConfigMap `marker` in
//! existence, with every perturbation kind on (a fuller one is
//! `campaign/tests/it/probe.rs`; the method is in docs/campaigns.md):
//!
//! ```
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, DeleteParams, PostParams};
//! use ward_apiserver::{ApiServer, ServerConfig};
//! use ward_campaign::perturbations::{builtin, select};
//! use ward_campaign::{Perturber, Plan, simulate};
//!
//! async fn keep_marker(client: kube::Client) {
//!     let cms: Api<ConfigMap> = Api::default_namespaced(client);
//!     let mut marker = ConfigMap::default();
//!     marker.metadata.name = Some("marker".into());
//!     loop {
//!         if let Ok(None) = cms.get_opt("marker").await {
//!             let _ = cms.create(&PostParams::default(), &marker).await;
//!         }
//!         tokio::time::sleep(Duration::from_secs(1)).await;
//!     }
//! }
//!
//! let kinds = select("all", &builtin()).unwrap();
//! for seed in 0..3 {
//!     let held = simulate(|| async {
//!         let server = ApiServer::start(ServerConfig::default().seed(seed)).await.unwrap();
//!         let horizon = Duration::from_secs(60);
//!         let plan = Plan::draw(seed, &kinds, horizon, &["keeper".into()]).unwrap();
//!         let mut perturber = Perturber::new(&server, plan, |line| println!("{line}"));
//!         perturber.supervise("keeper", keep_marker);
//!         perturber.start().unwrap();
//!         let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
//!         // The workload, bounded: a livelocked controller ends the run
//!         // with a verdict (`Err`) instead of spinning forever.
//!         perturber
//!             .run(async {
//!                 // Someone deletes the marker now and then.
//!                 for _ in 0..4 {
//!                     tokio::time::sleep(horizon / 4).await;
//!                     let _ = cms.delete("marker", &DeleteParams::default()).await;
//!                 }
//!                 // Settle past every window (each opens within the first
//!                 // 80% of the horizon and lasts at most half of it).
//!                 tokio::time::sleep(horizon).await;
//!             })
//!             .await
//!             .unwrap();
//!         cms.get_opt("marker").await.unwrap().is_some()
//!     });
//!     assert!(held, "seed {seed}: no marker");
//! }
//! ```
//!
//! Why a crate of its own: it is for controllers Ward has never seen, so it
//! cannot live with the examples; and it drives a server from outside
//! (which controllers to perturb, when), which is not the server's job.
//! Extend it by implementing [`Perturbation`] and [`Action`]: they get the
//! same [`World`] the built-in kinds use.

#![warn(missing_docs)]

pub mod entropy;
pub mod history;
mod isolate;
pub mod perturbations;
mod perturber;
pub mod plan;
#[cfg(tokio_unstable)]
pub mod polls;
pub mod process;
mod world;

pub use history::{Violation, Write};
pub use perturbations::{
    Crash, FrozenView, GcDelay, GcPause, Partition, SelectError, StaleView, Unobserved,
    WebhookFaults, WriteFaults,
};
pub use perturber::{Controller, Perturber};
pub use plan::{Action, Perturbation, Plan, PlanError};
pub use world::{Cut, Limits, Log, Op, RunError, World};

/// [`perturbations::SelectError`], by its old name.
#[deprecated(since = "0.3.0", note = "renamed `perturbations::SelectError`")]
pub type KindsError = perturbations::SelectError;

/// [`perturbations::builtin`], by its old path.
#[deprecated(since = "0.3.0", note = "moved to `perturbations::builtin`")]
#[must_use]
pub fn builtin() -> Vec<std::sync::Arc<dyn Perturbation>> {
    perturbations::builtin()
}

/// [`perturbations::select`], by its old path.
///
/// # Errors
/// As [`perturbations::select`].
#[deprecated(since = "0.3.0", note = "moved to `perturbations::select`")]
pub fn select(
    spec: &str,
    available: &[std::sync::Arc<dyn Perturbation>],
) -> Result<Vec<std::sync::Arc<dyn Perturbation>>, SelectError> {
    perturbations::select(spec, available)
}

/// [`plan::pick`], by its old path.
#[deprecated(since = "0.3.0", note = "moved to `plan::pick`")]
#[must_use]
pub fn pick(rng: &mut ward_base::Rng, targets: &[String]) -> String {
    plan::pick(rng, targets)
}

/// [`plan::window`], by its old path.
#[deprecated(since = "0.3.0", note = "moved to `plan::window`")]
#[must_use]
pub fn window(
    rng: &mut ward_base::Rng,
    horizon: std::time::Duration,
    min: std::time::Duration,
    max: std::time::Duration,
) -> (std::time::Duration, std::time::Duration) {
    plan::window(rng, horizon, min, max)
}

/// Run the future `make` builds as a simulation: on a thread of its own,
/// with every source of randomness the [`entropy`] module covers seeded,
/// on a single-threaded runtime with tokio's clock paused. The same code
/// and seed then replay the same run — in this process or another.
///
/// `make` is called on the simulation's thread, so the future it builds
/// need not be `Send` (only `make` and the output cross threads):
/// `simulate(|| async { .. })`.
///
/// Exact replay needs `--cfg tokio_unstable` (see [`entropy`]): with it
/// the runtime's random number generator — which decides the order a
/// watch channel wakes its receivers in — is seeded the same for every
/// simulation; without it tokio seeds it from a process-wide counter, and
/// the first simulation says so on stderr.
///
/// # Panics
/// If the simulation's thread cannot start or its runtime cannot be
/// built; a panic in the future is resumed here.
pub fn simulate<F, Fut>(make: F) -> Fut::Output
where
    F: FnOnce() -> Fut + Send,
    Fut: std::future::Future,
    Fut::Output: Send,
{
    std::hint::black_box(entropy::linked());
    std::thread::scope(|scope| {
        let sim = std::thread::Builder::new()
            .name("ward-simulation".into())
            .stack_size(8 << 20)
            .spawn_scoped(scope, move || {
                entropy::enter();
                let mut builder = tokio::runtime::Builder::new_current_thread();
                builder.enable_all().start_paused(true);
                entropy::seed_runtime(&mut builder);
                let runtime = builder.build().expect("a tokio runtime");
                runtime.block_on(make())
            })
            .expect("the simulation's thread starts");
        sim.join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}
