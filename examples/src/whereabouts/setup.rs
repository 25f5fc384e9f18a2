//! What the whereabouts example is and what its scenario and its live binary
//! share: its type, its setup of a cluster.

use std::time::Duration;

use kube::Client;
use kube::api::{Api, PostParams};

use super::agent::Network;
use super::model::{IPPool, IPPoolSpec, Range};
use crate::run::ScenarioError;

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
