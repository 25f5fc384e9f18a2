//! What the lws example is and what its scenario and its live binary
//! share: its type, its setup of a cluster.

use std::time::Duration;

use kube::Client;

use super::model::LeaderWorkerSet;
use crate::run::ScenarioError;

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
