//! The simulated cluster side CNS talks to: the network controller that
//! writes NodeNetworkConfigs (DNC-RC upstream) and the host agent that
//! programs network containers onto a node's VM (NMAgent upstream).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::time::Instant;
use ward_base::Rng;

use super::model::{NAMESPACE, NetworkContainer, NodeNetworkConfig, OVERLAY};
use crate::journal::Journal;

/// The host agent (NMAgent): which NCs each node's VM has programmed, at
/// which version, since when. It reports only NCs the VM has: a replaced
/// VM ([`Host::reimage`]) has none until the network controller programs
/// them again.
#[derive(Debug, Clone, Default)]
pub struct Host {
    vms: Arc<Mutex<BTreeMap<String, Vm>>>,
}

/// One VM's NCs: version and when it is (or will be) programmed, by id.
type Vm = BTreeMap<String, (i64, Instant)>;

impl Host {
    /// Program `nc` at `version` onto `node`'s VM, done `after` from now.
    pub fn program(&self, node: &str, nc: &str, version: i64, after: Duration) {
        self.lock()
            .entry(node.into())
            .or_default()
            .insert(nc.into(), (version, Instant::now() + after));
    }

    /// The version of `nc` programmed on `node`'s VM, if it is.
    #[must_use]
    pub fn programmed(&self, node: &str, nc: &str) -> Option<i64> {
        self.since(node, nc).map(|(v, _)| v)
    }

    /// The version of `nc` programmed on `node`'s VM and since when.
    #[must_use]
    pub fn since(&self, node: &str, nc: &str) -> Option<(i64, Instant)> {
        let (v, at) = *self.lock().get(node)?.get(nc)?;
        (Instant::now() >= at).then_some((v, at))
    }

    /// `node`'s VM is replaced: it has no NCs.
    pub fn reimage(&self, node: &str) {
        self.lock().remove(node);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vm>> {
        self.vms.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How the network controller carves addresses.
#[derive(Debug, Clone)]
pub struct WriterConfig {
    /// The overlay prefix of each node, by name (a recreated node gets the
    /// same one, as in the seed).
    pub prefixes: BTreeMap<String, String>,
    /// The subnet the prefixes are carved from.
    pub subnet: String,
    /// How long the host takes to program an NC (drawn uniformly).
    pub program_after: (Duration, Duration),
    /// How often it retries (e.g. while a stale NNC holds the name).
    pub retry: Duration,
    /// Every random choice (NC ids, programming delays).
    pub seed: u64,
}

/// Errors of the network controller.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// An API call failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// The node has no NNC to change.
    #[error("node {0} has no NodeNetworkConfig")]
    NoNnc(String),
    /// The node's NNC has no network container to replace yet.
    #[error("NodeNetworkConfig {0} has no network container yet")]
    NoContainer(String),
}

/// The network controller (DNC-RC): for every Node with a prefix, an NNC
/// `kube-system/<node>` controlled by the Node's uid, holding one overlay
/// NC carving the node's prefix, which it has the host program. While the
/// name is taken (a stale NNC the GC has not removed yet) creating fails
/// with AlreadyExists and it retries every `retry`, as upstream does.
pub struct Writer {
    nodes: Api<Node>,
    nnc: Api<NodeNetworkConfig>,
    host: Host,
    config: WriterConfig,
    rng: Rng,
    journal: Journal,
    /// The uid of the node each name's stale-NNC note was logged for.
    noted: BTreeMap<String, String>,
}

impl Writer {
    /// A network controller over `client`.
    #[must_use]
    pub fn new(client: Client, host: Host, config: WriterConfig, journal: Journal) -> Self {
        Writer {
            nodes: Api::all(client.clone()),
            nnc: Api::namespaced(client, NAMESPACE),
            host,
            rng: Rng::stream(config.seed, "cns-writer"),
            config,
            journal,
            noted: BTreeMap::new(),
        }
    }

    /// Run until aborted (a restarted writer starts over from the server's
    /// state; it keeps nothing that matters in memory).
    pub async fn run(mut self) {
        loop {
            if let Err(e) = self.pass().await {
                self.journal.log(format!("writer: {e}; retrying"));
            }
            tokio::time::sleep(self.config.retry).await;
        }
    }

    /// One pass over every node.
    pub async fn pass(&mut self) -> Result<(), ClusterError> {
        for node in self.nodes.list(&Default::default()).await? {
            if node.metadata.deletion_timestamp.is_none() {
                self.ensure(&node).await?;
            }
        }
        Ok(())
    }

    async fn ensure(&mut self, node: &Node) -> Result<(), ClusterError> {
        let name = node.name_any();
        let Some(prefix) = self.config.prefixes.get(&name).cloned() else {
            return Ok(());
        };
        let uid = node.uid().unwrap_or_default();
        let nnc = match self.nnc.get_opt(&name).await? {
            Some(n) => n,
            None => {
                let fresh = NodeNetworkConfig::for_node(node, 16);
                match self.nnc.create(&PostParams::default(), &fresh).await {
                    Ok(n) => {
                        self.journal.log(format!(
                            "writer: created NNC {name} (uid {}) for node uid {uid}",
                            n.uid().unwrap_or_default()
                        ));
                        n
                    }
                    Err(kube::Error::Api(s)) if s.code == 409 => return Ok(()),
                    Err(e) => return Err(e.into()),
                }
            }
        };
        let controller = nnc.controller().map(|r| r.uid.clone()).unwrap_or_default();
        if controller != uid {
            if self.noted.insert(name.clone(), uid.clone()).as_deref() != Some(&uid) {
                self.journal.log(format!(
                    "writer: NNC {name} is taken by a stale NNC (controller {controller}, live node {uid}); retrying"
                ));
            }
            return Ok(());
        }
        if nnc.containers().is_empty() {
            self.write_nc(&name, &prefix, 1).await?;
        }
        Ok(())
    }

    /// Replace node `name`'s NC by a new one (new id, same prefix): what
    /// the network controller does when it re-provisions a node's network.
    pub async fn replace_nc(&mut self, name: &str) -> Result<(), ClusterError> {
        let nnc = self
            .nnc
            .get_opt(name)
            .await?
            .ok_or_else(|| ClusterError::NoNnc(name.into()))?;
        let prefix = nnc
            .containers()
            .first()
            .map(|n| n.primary_ip.clone())
            .ok_or_else(|| ClusterError::NoContainer(name.into()))?;
        self.write_nc(name, &prefix, 1).await
    }

    async fn write_nc(
        &mut self,
        node: &str,
        prefix: &str,
        version: i64,
    ) -> Result<(), ClusterError> {
        let nc = NetworkContainer {
            id: format!("nc-{:08x}", self.rng.next_u64() as u32),
            type_: OVERLAY.into(),
            primary_ip: prefix.into(),
            subnet_address_space: self.config.subnet.clone(),
            ip_assignments: Vec::new(),
            version,
        };
        let patch = json!({"status": {"networkContainers": [nc]}});
        self.nnc
            .patch_status(node, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
        let (lo, hi) = self.config.program_after;
        let after = self.rng.between(lo, hi);
        self.host.program(node, &nc.id, version, after);
        self.journal.log(format!(
            "writer: NNC {node} now holds NC {} ({prefix}); the host programs it in {after:?}",
            nc.id
        ));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_host_reports_only_what_it_programmed_once_done() {
        let host = Host::default();
        host.program("a", "nc1", 3, Duration::from_secs(5));
        assert_eq!(host.programmed("a", "nc1"), None);
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(host.programmed("a", "nc1"), Some(3));
        assert_eq!(host.programmed("a", "nc2"), None);
        assert_eq!(host.programmed("b", "nc1"), None);
        host.reimage("a");
        assert_eq!(host.programmed("a", "nc1"), None);
    }
}
