//! LWS: a revision taken from a terminating or foreign StatefulSet
//! (LeaderWorkerSet), reproduced and fixed by a `GuardedController` with
//! the await-deletion guard. See `examples/lws/README.md` for the commands.
//!
//! This module holds what the scenarios and the live binary both set up:
//! the namespace and the CRD.

use self::invariants::Invariant;
use crate::example::{Example, Report};
use crate::run::{Mode, Scenario};

pub mod controller;
pub mod invariants;
pub mod model;
pub mod readiness;
pub mod revision;
#[cfg(feature = "sim")]
pub mod scenario;
mod setup;

pub use setup::{Lws, Measured, NAMESPACE, install};

impl Example for Lws {
    const NAME: &'static str = "lws";
    type Scenario = Scenario;
    type Mode = Mode;
    type Invariant = Invariant;
    type Measured = Measured;
    const SCENARIOS: &'static [Scenario] = &Scenario::ALL;
    const MODES: &'static [Mode] = &Mode::ALL;

    fn guarded(mode: Mode) -> bool {
        mode == Mode::Guarded
    }

    #[cfg(feature = "sim")]
    fn run(
        scenario: Scenario,
        mode: Mode,
        seed: u64,
        kinds: &[std::sync::Arc<dyn ward_campaign::Perturbation>],
    ) -> impl Future<Output = Result<Report<Self>, crate::run::ScenarioError>> + Send {
        scenario::run(scenario, mode, seed, kinds)
    }

    /// When the LWS settled on its final template.
    fn summary(report: &Report<Self>) -> Vec<String> {
        vec![match report.measured.settled_after {
            Some(d) => format!("  settled {d:?} after the last change"),
            None => "  never settled".into(),
        }]
    }
}
