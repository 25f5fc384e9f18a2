//! The pod workload of one node, as its kubelet drives CNI: a pod created
//! on the node waits for an IP, and its sandbox is retried (CNI ADD) every
//! half second until CNS gives one, which is recorded on the pod
//! ([`POD_IP`]); deleting a pod calls CNI DEL first.
//!
//! Every ADD is a probe of invariant I2: a failure while CNS had Available
//! IPs is a violation, reported to the [`Violations`] sink.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::watch;
use tokio::time::Instant;

use super::agent::{AgentError, Cns};
use super::invariants::{Invariant, Violations};
use super::model::POD_IP;
use crate::journal::Journal;

/// The namespace the workload's pods live in.
pub const NAMESPACE: &str = "default";

/// Pods waiting for an IP, by key, with when they began to wait; a watch
/// channel, so a scenario can wait for "no pod waits" as a condition.
pub type Waiting = Arc<watch::Sender<BTreeMap<String, Instant>>>;

/// One node's kubelet, as far as pod networking goes.
#[derive(Debug, Clone)]
pub struct Kubelet {
    node: String,
    pods: Api<Pod>,
    waiting: Waiting,
    journal: Journal,
    violations: Violations,
}

impl Kubelet {
    /// The kubelet of `node`.
    #[must_use]
    pub fn new(client: Client, node: &str, journal: Journal, violations: Violations) -> Self {
        Kubelet {
            node: node.into(),
            pods: Api::namespaced(client, NAMESPACE),
            waiting: Arc::new(watch::Sender::new(BTreeMap::new())),
            journal,
            violations,
        }
    }

    /// Pods waiting for an IP.
    #[must_use]
    pub fn waiting(&self) -> Waiting {
        self.waiting.clone()
    }

    /// Create pod `name` on the node; it waits for an IP.
    pub async fn create(&self, name: &str) -> Result<(), kube::Error> {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"nodeName": self.node, "containers": [{"name": "app", "image": "app"}]}}))
        .expect("a valid pod");
        self.pods.create(&PostParams::default(), &pod).await?;
        self.waiting.send_modify(|w| {
            w.insert(format!("{NAMESPACE}/{name}"), Instant::now());
        });
        self.journal
            .log(format!("pod {name} created on {}", self.node));
        Ok(())
    }

    /// CNI DEL, then delete pod `name` at once (grace 0).
    pub async fn delete(&self, cns: &Cns, name: &str) -> Result<(), kube::Error> {
        let key = format!("{NAMESPACE}/{name}");
        self.waiting.send_modify(|w| {
            w.remove(&key);
        });
        if let Some(c) = cns.del(&key) {
            self.journal
                .log(format!("pod {name}: CNI DEL freed {}", c.ip));
        }
        self.pods
            .delete(name, &DeleteParams::default().grace_period(0))
            .await?;
        Ok(())
    }

    /// Forget every pod: the node is gone with its pods (the caller
    /// deletes their objects).
    pub fn forget_all(&self) {
        self.waiting.send_modify(BTreeMap::clear);
    }

    /// Retry CNI ADD for every waiting pod every half second, until
    /// aborted.
    pub async fn run(self, cns: Cns) {
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        let mut failing: BTreeMap<String, String> = BTreeMap::new();
        loop {
            tick.tick().await;
            let keys: Vec<String> = self.waiting.borrow().keys().cloned().collect();
            for key in keys {
                // Deleted while an earlier pod's record was being written.
                if !self.waiting.borrow().contains_key(&key) {
                    continue;
                }
                let (result, available) = cns.add(&key);
                match result {
                    Ok(c) => {
                        let name = key.rsplit('/').next().unwrap_or(&key);
                        let patch = json!({"metadata": {"annotations": {POD_IP: c.ip}}});
                        let patched = self
                            .pods
                            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
                            .await;
                        if let Err(e) = patched {
                            self.journal
                                .log(format!("pod {name}: recording its IP failed: {e}"));
                            continue;
                        }
                        self.waiting.send_modify(|w| {
                            w.remove(&key);
                        });
                        failing.remove(&key);
                        self.journal
                            .log(format!("pod {name}: CNI ADD got {} (NC {})", c.ip, c.nc));
                    }
                    Err(e) => {
                        let why = e.to_string();
                        if failing.get(&key) != Some(&why) {
                            self.journal
                                .log(format!("pod {key}: CNI ADD failed: {why}"));
                            failing.insert(key.clone(), why);
                        }
                        if available > 0 && !matches!(e, AgentError::NotReady) {
                            self.violations.violate(
                                Invariant::I2,
                                key.clone(),
                                format!(
                                    "{key}'s IP request failed with {available} IPs Available: {e}"
                                ),
                            );
                        }
                    }
                }
            }
        }
    }
}
