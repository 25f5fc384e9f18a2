//! whereabouts: the duplicate-IP race of the ip-reconciler, reproduced and
//! fixed by Ward's guards. See `examples/whereabouts/README.md` for the commands.
//!
//! This module holds what the scenarios and the live binary both set up:
//! the networks, their pools and the CRD.

use self::invariants::Invariant;
use crate::example::{Example, History, Report};
use crate::run::{Mode, Scenario};

pub mod agent;
pub mod invariants;
pub mod model;
pub mod reconciler;
#[cfg(feature = "sim")]
pub mod scenario;
mod setup;

pub use setup::{GRACE, INTERVAL, Whereabouts, install, networks};

impl Example for Whereabouts {
    const NAME: &'static str = "whereabouts";
    type Scenario = Scenario;
    type Mode = Mode;
    type Invariant = Invariant;
    type Measured = ();
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

    fn parameters() -> String {
        format!(" (reconciler every {INTERVAL:?}, grace {GRACE:?})")
    }

    /// None of the history when every invariant holds; else up to the
    /// first duplicate IP if there is one, else the first violation.
    fn history(report: &Report<Self>) -> History {
        let Some(first) = report.violations.first() else {
            return History::Hidden;
        };
        let until = report
            .violations
            .iter()
            .find(|v| v.invariant == Invariant::I1)
            .unwrap_or(first);
        History::Until(until.at)
    }
}
