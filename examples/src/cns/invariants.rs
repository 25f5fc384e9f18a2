//! The invariants a CNS scenario checks, continuously, from the agent's
//! state and the server's own store (not from any controller's cache):
//!
//! - **I1** every IP config belongs to an NC present in state;
//! - **I2** while IPs are Available, a pod's IP request succeeds (checked
//!   at every CNI ADD, by the [kubelet](super::kubelet));
//! - **I3** no IP is assigned to two pods: in CNS's state, among the pod
//!   sandboxes on the node (from CNI ADD to CNI DEL: the data plane), and
//!   among the records of live pods (not terminating: a terminating pod's
//!   sandbox may already be torn down and its address handed on, while its
//!   record still names it until the kubelet's final delete);
//! - **I4** once the live Node's NNC is programmed, a waiting pod gets an
//!   IP within [`RECOVERY`] (the node recovers);
//! - **I5** (after settling: the scenario's last step plus 90 s) no address
//!   leaks: every IP CNS holds as Assigned is held by that pod's sandbox
//!   (the data plane), so some CNI DEL will release it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::run::{Parsed, key};
use tokio::time::Instant;
use ward_apiserver::store::Store;

use super::agent::Cns;
use super::cluster::Host;
use super::ipam::IpState;
use super::kubelet::{Sandboxes, Waiting};
use super::model::{NAMESPACE, POD_IP};

/// How long after its NNC is programmed a node may take to serve a
/// waiting pod (I4).
pub const RECOVERY: Duration = Duration::from_secs(30);

pub use super::violations::{Invariant, Violation, Violations};

/// The continuous checker of one node.
#[derive(Debug, Clone)]
pub struct Checker {
    /// The server's store.
    pub store: Arc<Store>,
    /// The node.
    pub node: String,
    /// Its CNS.
    pub cns: Cns,
    /// Its host.
    pub host: Host,
    /// Its kubelet's waiting pods.
    pub waiting: Waiting,
    /// Its kubelet's pod sandboxes and their addresses.
    pub sandboxes: Sandboxes,
    /// Where violations go.
    pub violations: Violations,
    /// What the checks made of each version of a pod and of the NNC
    /// (`Default` to start).
    pub parsed: Arc<Mutex<Seen>>,
}

/// What [`Checker`] made of each stored object's version it has read.
#[derive(Debug, Default)]
pub struct Seen {
    /// A pod's node and its IP annotation.
    pods: Parsed<(Option<String>, Option<String>)>,
    /// The NNC's owners and NCs.
    nnc: Parsed<Nnc>,
}

/// What I4 reads of an NNC.
#[derive(Debug)]
struct Nnc {
    /// The uids of its controller ownerReferences.
    controllers: Vec<String>,
    /// Its NCs' (id, version).
    ncs: Vec<(String, i64)>,
}

impl Checker {
    /// Check I1, I3 and I4 now.
    pub fn check(&self) {
        self.in_state();
        self.among_sandboxes();
        self.among_pods();
        self.recovery();
    }

    /// I1 and I3 in CNS's state.
    fn in_state(&self) {
        let s = self.cns.state();
        let ncs = s.ipam.ncs();
        let mut holders: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut orphans: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for c in s.ipam.configs() {
            if !ncs.contains_key(&c.nc) {
                orphans
                    .entry(c.nc.clone())
                    .or_default()
                    .push(format!("{} ({:?})", c.ip, c.state));
            }
            if let (IpState::Assigned, Some(pod)) = (c.state, c.pod) {
                holders.entry(c.ip).or_default().push(pod);
            }
        }
        drop(s);
        for (nc, ips) in orphans {
            let more = if ips.len() > 3 { ", ..." } else { "" };
            self.violations.violate(
                Invariant::I1,
                nc.clone(),
                format!(
                    "{} IP configs name NC {nc}, which is not in state ({}{more})",
                    ips.len(),
                    ips[..ips.len().min(3)].join(", ")
                ),
            );
        }
        for (ip, pods) in holders.into_iter().filter(|(_, p)| p.len() > 1) {
            let who = pods.join(" and ");
            self.violations.violate(
                Invariant::I3,
                format!("{ip}|{who}"),
                format!("CNS assigned {ip} to {who}"),
            );
        }
    }

    /// I3 among the node's sandboxes.
    fn among_sandboxes(&self) {
        let mut holders: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (pod, ip) in self
            .sandboxes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            holders.entry(ip.clone()).or_default().push(pod.clone());
        }
        for (ip, pods) in holders.into_iter().filter(|(_, p)| p.len() > 1) {
            let who = pods.join(" and ");
            self.violations.violate(
                Invariant::I3,
                format!("{ip}|{who}"),
                format!("the sandboxes of {who} both hold {ip}"),
            );
        }
    }

    /// I3 among the live pods' records.
    fn among_pods(&self) {
        let page = self
            .store
            .list(&key("", "pods"), None, None, None, |_| true);
        let views = self.seen().pods.all(&page.items, |o| {
            let v = o.value();
            let text = |v: &serde_json::Value| v.as_str().map(str::to_string);
            (
                text(&v["spec"]["nodeName"]),
                text(&v["metadata"]["annotations"][POD_IP]),
            )
        });
        let mut holders: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (o, view) in page.items.iter().zip(&views) {
            if o.terminating || view.0.as_deref() != Some(self.node.as_str()) {
                continue;
            }
            if let Some(ip) = &view.1 {
                holders.entry(ip.clone()).or_default().push(format!(
                    "{}/{}",
                    o.namespace(),
                    o.name()
                ));
            }
        }
        for (ip, pods) in holders.into_iter().filter(|(_, p)| p.len() > 1) {
            let who = pods.join(" and ");
            self.violations.violate(
                Invariant::I3,
                format!("{ip}|{who}"),
                format!("live pods {who} both hold {ip}"),
            );
        }
    }

    /// I4: when the live Node's NNC has been programmed (every NC of it),
    /// no pod waits longer than [`RECOVERY`] past that or its own start.
    fn recovery(&self) {
        let Some(node) = self.store.get(&key("", "nodes"), "", &self.node) else {
            return;
        };
        let Some(nnc) = self.store.get(
            &key("acn.azure.com", "nodenetworkconfigs"),
            NAMESPACE,
            &self.node,
        ) else {
            return;
        };
        let node_uid = node.uid.to_string();
        let view = self.seen().nnc.get(&nnc, |o| {
            let v = o.value();
            let controllers = v["metadata"]["ownerReferences"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|r| r["controller"] == true)
                .filter_map(|r| r["uid"].as_str().map(str::to_string))
                .collect();
            let ncs = v["status"]["networkContainers"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|nc| {
                    (
                        nc["id"].as_str().unwrap_or("").to_string(),
                        nc["version"].as_i64().unwrap_or(0),
                    )
                })
                .collect();
            Nnc { controllers, ncs }
        });
        if !view.controllers.contains(&node_uid) || nnc.terminating || view.ncs.is_empty() {
            return;
        }
        let mut since = None;
        for (id, version) in &view.ncs {
            match self.host.since(&self.node, id) {
                Some((v, at)) if v >= *version => since = since.max(Some(at)),
                _ => return,
            }
        }
        let Some(programmed) = since else { return };
        let now = Instant::now();
        let late: Vec<(String, Duration)> = self
            .waiting
            .borrow()
            .iter()
            .map(|(pod, t)| (pod.clone(), now.duration_since((*t).max(programmed))))
            .filter(|(_, d)| *d > RECOVERY)
            .collect();
        for (pod, d) in late {
            self.violations.violate(
                Invariant::I4,
                pod.clone(),
                format!("{pod} has waited {d:?} for an IP since the node's NNC was programmed"),
            );
        }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.parsed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// I5, once settled: an address CNS holds for a pod whose sandbox does
    /// not hold it is one no CNI DEL will release.
    pub fn settled(&self) {
        let s = self.cns.state();
        if !s.ready {
            return;
        }
        let held = s.ipam.configs();
        drop(s);
        let sandboxes = self.sandboxes.lock().unwrap_or_else(|e| e.into_inner());
        for c in held {
            let (IpState::Assigned, Some(pod)) = (c.state, &c.pod) else {
                continue;
            };
            if sandboxes.get(pod) != Some(&c.ip) {
                let now = sandboxes
                    .get(pod)
                    .map_or("has no sandbox".to_string(), |ip| {
                        format!("has a sandbox holding {ip}")
                    });
                self.violations.violate(
                    Invariant::I5,
                    c.ip.clone(),
                    format!(
                        "CNS holds {} for {pod}, which {now}: no CNI DEL will release it",
                        c.ip
                    ),
                );
            }
        }
    }

    /// Check after every change of the store, and at least every second
    /// (CNS's state changes between store events too), until aborted.
    pub async fn run(self) {
        crate::run::follow_store(&self.store, |_| self.check()).await;
    }
}
