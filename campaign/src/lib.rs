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
//! same plan, and under tokio's paused clock the run replays exactly.
//!
//! A campaign over your own controller, in outline (a complete one is
//! `campaign/tests/probe.rs`, and docs/campaigns.md):
//!
//! ```ignore
//! let kinds = ward_campaign::select("all", &ward_campaign::builtin())?;
//! for seed in 0..1000 {
//!     ward_campaign::simulate(async {
//!         let server = ApiServer::start(ServerConfig::default().seed(seed)).await?;
//!         let plan = Plan::draw(seed, &kinds, Duration::from_secs(60), &["my-controller".into()]);
//!         let mut perturber = Perturber::new(&server, plan, |line| history.push(line));
//!         perturber.controller(&server, "my-controller", |client| my_controller(client));
//!         perturber.start();
//!         my_workload(server.client()).await;   // then check your invariants
//!     });
//! }
//! ```
//!
//! Why a crate of its own: it is for controllers Ward has never seen, so it
//! cannot live with the examples; and it drives a server from outside
//! (which controllers to perturb, when), which is not the server's job.
//! Extend it by implementing [`Perturbation`] and [`Action`]: they get the
//! same [`World`] the built-in kinds use.

mod kinds;
mod plan;
mod world;

pub use kinds::{
    Crash, GcDelay, GcPause, KindsError, StaleView, Unobserved, WriteFaults, builtin, select,
};
pub use plan::{Action, Perturbation, Plan, pick, window};
pub use world::{Controller, Log, Op, Perturber, World};

/// Run `fut` on its own single-threaded runtime with tokio's clock paused
/// (simulated time), as every campaign run does: the same seed then
/// replays the same interleaving.
pub fn simulate<F: std::future::Future>(fut: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a tokio runtime")
        .block_on(fut)
}
