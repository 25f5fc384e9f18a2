//! CNS: the stale NodeNetworkConfig after a node is recreated (Azure CNS),
//! reproduced and fixed by a `GuardedController` with the owner-UID guard.
//! See `examples/cns/README.md` for the commands.
//!
//! This module holds what the scenarios and the live binary both set up:
//! the node, its prefix, the CRD and the network controller's settings.

use self::invariants::{Invariant, RECOVERY};
use crate::example::{Example, History, Report};
use crate::run::{Mode, Scenario};

pub mod agent;
pub mod cluster;
pub mod invariants;
pub mod ipam;
pub mod kubelet;
pub mod model;
#[cfg(feature = "sim")]
pub mod scenario;
mod setup;
mod violations;

pub use setup::{AzureCns, NODE, PREFIX, SUBNET, install, writer_config};

impl Example for AzureCns {
    const NAME: &'static str = "cns";
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
        format!(" (recovery bound {RECOVERY:?})")
    }

    /// The history up to the last violation (the node that never
    /// recovers), or all of it.
    fn history(report: &Report<Self>) -> History {
        report
            .violations
            .iter()
            .map(|v| v.at)
            .max()
            .map_or(History::All, History::Until)
    }
}
