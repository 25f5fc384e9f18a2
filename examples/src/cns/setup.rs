//! What the cns example is and what its scenario and its live binary
//! share: its type, its setup of a cluster.

use std::time::Duration;

use kube::Client;

use super::cluster::WriterConfig;
use super::model::NodeNetworkConfig;
use crate::run::ScenarioError;

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
