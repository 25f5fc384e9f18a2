//! LWS: a revision taken from a terminating or foreign StatefulSet
//! (LeaderWorkerSet), reproduced and fixed by a `GuardedController` with
//! the await-deletion guard. See `examples/lws/README.md` for the commands.
//!
//! This module holds what the scenarios and the live binary both set up:
//! the namespace and the CRD.

use std::time::Duration;

use kube::Client;

use self::invariants::Invariant;
use self::model::LeaderWorkerSet;
use crate::example::{Example, Report};
use crate::run::{Mode, Scenario, ScenarioError};

pub mod controller;
pub mod invariants;
pub mod model;
pub mod revision;
#[cfg(feature = "sim")]
pub mod scenario;

/// The namespace of the scenarios' LWS (and the live controller's default).
pub const NAMESPACE: &str = "default";

/// Install the LeaderWorkerSet CRD and wait until it is served.
pub async fn install(client: &Client) -> Result<(), ScenarioError> {
    crate::run::install_crd::<LeaderWorkerSet>(client).await
}

/// What an LWS run measures besides its violations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measured {
    /// Simulated time from the last change to the LWS until its status
    /// showed the revision of its final template.
    pub settled_after: Option<Duration>,
}

/// The LWS example: S1–S3, naive, upstream and guarded.
#[derive(Debug, Default, Clone, Copy)]
pub struct Lws;

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
    ) -> impl Future<Output = Result<Report<Self>, ScenarioError>> + Send {
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
