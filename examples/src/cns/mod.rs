//! CNS: the stale NodeNetworkConfig after a node is recreated (Azure CNS),
//! reproduced and fixed by a `GuardedController` with the owner-UID guard.
//! See `examples/cns/README.md` for the commands.
//!
//! This module holds what the scenarios and the live binary both set up:
//! the node, its prefix, the CRD and the network controller's settings.

use std::time::Duration;

use kube::Client;

use self::cluster::WriterConfig;
use self::invariants::{Invariant, RECOVERY};
use self::model::NodeNetworkConfig;
use crate::example::{Example, History, Report};
use crate::run::{Mode, Scenario, ScenarioError};

pub mod agent;
pub mod cluster;
pub mod invariants;
pub mod ipam;
pub mod kubelet;
pub mod model;
#[cfg(feature = "sim")]
pub mod scenario;

/// The node every scenario runs on (and the live agent's default).
pub const NODE: &str = "node-a";
/// Its overlay prefix (the same after the node is recreated).
pub const PREFIX: &str = "10.244.1.0/28";
/// The subnet the prefixes are carved from.
pub const SUBNET: &str = "10.244.0.0/16";

/// Install the NodeNetworkConfig CRD and wait until it is served.
pub async fn install(client: &Client) -> Result<(), ScenarioError> {
    crate::run::install_crd::<NodeNetworkConfig>(client).await
}

/// The network controller's settings for [`NODE`].
#[must_use]
pub fn writer_config(seed: u64) -> WriterConfig {
    WriterConfig {
        prefixes: [(NODE.to_string(), PREFIX.to_string())].into(),
        subnet: SUBNET.into(),
        program_after: (Duration::from_secs(1), Duration::from_secs(8)),
        retry: Duration::from_secs(2),
        seed,
    }
}

/// The Azure CNS example: S1–S3, naive, upstream and guarded.
#[derive(Debug, Default, Clone, Copy)]
pub struct AzureCns;

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
    ) -> impl Future<Output = Result<Report<Self>, ScenarioError>> + Send {
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
