//! The pod workload of one node, as its kubelet drives CNI: a pod created
//! on the node waits for an IP, and its sandbox is retried (CNI ADD) every
//! half second until CNS gives one, which is recorded on the pod
//! ([`POD_IP`]); a deleted pod's sandbox is torn down (CNI DEL) once its
//! deletion is visible in the API, as the kubelet does it:
//!
//! 1. `DELETE` with a grace period: the pod is terminating
//!    (`deletionTimestamp` set);
//! 2. the kubelet stops the pod's containers and its sandbox: CNI DEL, and
//!    CNS frees the address;
//! 3. the kubelet's final `DELETE` (grace 0, uid precondition) removes the
//!    object.
//!
//! A kubelet never tears down the sandbox of a pod whose object says it
//! runs: until step 1 is committed, the address is the pod's. (This
//! kubelet used to call CNI DEL before the `DELETE`, so for one API round
//! trip a live, non-terminating pod's record named an address CNS had
//! already handed to the next pod — a duplicate no real kubelet produces,
//! which wide campaign runs reported as I3.)
//!
//! The kubelet keeps the node's [`Sandboxes`] — which pod's sandbox holds
//! which address, from its CNI ADD to its CNI DEL — the data plane that
//! invariant I3 is really about.
//!
//! Every ADD is a probe of invariant I2: a failure while CNS had Available
//! IPs is a violation, reported to the [`Violations`] sink.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use serde_json::json;
use tokio::sync::watch;
use tokio::time::Instant;

use super::agent::{AgentError, Cns};
use super::model::POD_IP;
use super::violations::{Invariant, Violations};
use crate::journal::Journal;

/// The namespace the workload's pods live in.
pub const NAMESPACE: &str = "default";

/// Pods waiting for an IP, by key, with when they began to wait; a watch
/// channel, so a scenario can wait for "no pod waits" as a condition.
pub type Waiting = Arc<watch::Sender<BTreeMap<String, Instant>>>;

pub use super::agent::Sandboxes;

/// How long a deleted pod stays terminating at most before the kubelet's
/// final delete (its teardown is done well within it).
const GRACE_SECONDS: u32 = 30;

/// One node's kubelet, as far as pod networking goes.
#[derive(Debug, Clone)]
pub struct Kubelet {
    node: String,
    pods: Api<Pod>,
    waiting: Waiting,
    sandboxes: Sandboxes,
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
            sandboxes: Sandboxes::default(),
            journal,
            violations,
        }
    }

    /// Pods waiting for an IP.
    #[must_use]
    pub fn waiting(&self) -> Waiting {
        self.waiting.clone()
    }

    /// The node's sandboxes and their addresses.
    #[must_use]
    pub fn sandboxes(&self) -> Sandboxes {
        self.sandboxes.clone()
    }

    fn sandboxes_mut(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        self.sandboxes.lock().unwrap_or_else(|e| e.into_inner())
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

    /// Delete pod `name` as the kubelet sees it through: `DELETE` with a
    /// grace period (the pod is terminating), CNI DEL, then the final
    /// `DELETE` (grace 0, with the pod's uid as precondition).
    pub async fn delete(&self, cns: &Cns, name: &str) -> Result<(), kube::Error> {
        let uid = self.tear_down(cns, name).await?;
        self.remove(name, uid).await
    }

    /// The first two steps of [`Kubelet::delete`]: `DELETE` with a grace
    /// period, then CNI DEL; the pod's uid, for [`Kubelet::remove`].
    pub async fn tear_down(&self, cns: &Cns, name: &str) -> Result<Option<String>, kube::Error> {
        let key = format!("{NAMESPACE}/{name}");
        self.waiting.send_modify(|w| {
            w.remove(&key);
        });
        let deleting = self
            .pods
            .delete(name, &DeleteParams::default().grace_period(GRACE_SECONDS))
            .await?;
        let uid = deleting
            .either(|p| p.uid(), |s| s.details.map(|d| d.uid))
            .filter(|u| !u.is_empty());
        self.sandboxes_mut().remove(&key);
        if let Some(c) = cns.del(&key) {
            self.journal
                .log(format!("pod {name}: CNI DEL freed {}", c.ip));
        }
        Ok(uid)
    }

    /// The last step of [`Kubelet::delete`]: the final `DELETE` of pod
    /// `name` (grace 0, with its `uid`, when known, as precondition).
    pub async fn remove(&self, name: &str, uid: Option<String>) -> Result<(), kube::Error> {
        let Some(uid) = uid else { return Ok(()) };
        let last = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..DeleteParams::default().grace_period(0)
        };
        match self.pods.delete(name, &last).await {
            // Already gone (its grace period ran out first), or the name
            // now holds another pod: nothing of this one is left.
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
            r => r.map(|_| ()),
        }
    }

    /// Forget every pod and sandbox: the node is gone with its pods (the
    /// caller deletes their objects).
    pub fn forget_all(&self) {
        self.waiting.send_modify(BTreeMap::clear);
        self.sandboxes_mut().clear();
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
                        // The sandbox holds the address from here, recorded or not.
                        self.sandboxes_mut().insert(key.clone(), c.ip.clone());
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
