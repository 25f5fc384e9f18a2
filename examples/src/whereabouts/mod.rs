//! whereabouts: the duplicate-IP race of the ip-reconciler, reproduced and
//! fixed by Ward's guards. See `examples/whereabouts/README.md` for the commands.
//!
//! This module holds what the scenarios and the live binary both set up:
//! the networks, their pools and the CRD.

use std::time::Duration;

use kube::Client;
use kube::api::{Api, PostParams};

use self::agent::Network;
use self::invariants::Invariant;
use self::model::{IPPool, IPPoolSpec, Range};
use crate::example::{Example, History, Report};
use crate::run::{Mode, Scenario, ScenarioError};

pub mod agent;
pub mod invariants;
pub mod model;
pub mod reconciler;
#[cfg(feature = "sim")]
pub mod scenario;

/// How often the scenarios' reconciler runs.
pub const INTERVAL: Duration = Duration::from_secs(60);
/// The scenarios' guarded reconciler's liveness grace bound.
pub const GRACE: Duration = Duration::from_secs(30);

/// The two networks every pod attaches to.
#[must_use]
pub fn networks() -> Vec<Network> {
    [
        ("default/net-a", "net1", "10.128.40.0/24"),
        ("default/net-b", "net2", "10.128.165.0/24"),
    ]
    .into_iter()
    .map(|(name, ifname, range)| Network {
        name: name.into(),
        ifname: ifname.into(),
        range: Range::parse(range).expect("a valid range"),
    })
    .collect()
}

/// Install the IPPool CRD and the pools of `nets`.
pub async fn install(client: &Client, nets: &[Network]) -> Result<(), ScenarioError> {
    crate::run::install_crd::<IPPool>(client).await?;
    let pools: Api<IPPool> = Api::namespaced(client.clone(), "default");
    for n in nets {
        let spec = IPPoolSpec {
            range: n.range.to_string(),
            allocations: Default::default(),
        };
        pools
            .create(
                &PostParams::default(),
                &IPPool::new(&n.range.pool_name(), spec),
            )
            .await?;
    }
    Ok(())
}

/// The whereabouts example: S1–S3, naive, upstream and guarded.
#[derive(Debug, Default, Clone, Copy)]
pub struct Whereabouts;

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
    ) -> impl Future<Output = Result<Report<Self>, ScenarioError>> + Send {
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
