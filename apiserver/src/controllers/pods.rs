//! The pod lifecycle actor: what kubelet and the scheduler would do to pods,
//! reduced to what the seed races need.
//!
//! - Always: a pod deleted with a grace period lingers terminating until the
//!   period ends, then is removed (or left to its finalizers).
//! - When the pod-lifecycle fault is enabled (kwok-like stages, off by
//!   default): a new pod is scheduled onto a node (`spec.nodeName`) after a
//!   delay, then set Running with a podIP after another; each delay is
//!   drawn from the seeded generator and runs on tokio time.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

use crate::faults::Faults;
use crate::machinery::status::ApiError;
use crate::registry::resources::{Registry, ResourceInfo, StorageKey};
use crate::storage::store::{EventType, Store, StoredObject};

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Stage {
    Finish,
    Schedule,
    Run,
}

/// (namespace, name, uid)
type PodId = (String, String, String);

/// The pod lifecycle actor.
#[derive(Debug)]
pub struct PodLifecycleActor {
    store: Arc<Store>,
    pods: Arc<ResourceInfo>,
    faults: Faults,
    timers: BinaryHeap<Reverse<(Instant, u64, Stage, PodId)>>,
    armed: HashSet<(Stage, PodId)>,
    seq: u64,
    next_node: usize,
    next_ip: u32,
}

fn pods_key() -> StorageKey {
    StorageKey {
        group: String::new(),
        plural: "pods".into(),
    }
}

impl PodLifecycleActor {
    /// An actor over `store`.
    #[must_use]
    pub fn new(store: Arc<Store>, registry: &Registry, faults: Faults) -> Self {
        PodLifecycleActor {
            store,
            pods: registry.get("", "v1", "pods").expect("pods are built in"),
            faults,
            timers: BinaryHeap::new(),
            armed: HashSet::new(),
            seq: 0,
            next_node: 0,
            next_ip: 0,
        }
    }

    /// Run until `stopped` flips to true.
    pub async fn run(mut self, mut stopped: tokio::sync::watch::Receiver<bool>) {
        let (items, _, mut rx) = self.store.snapshot_and_subscribe(&pods_key());
        for p in &items {
            self.observe(p);
        }
        let mut changed = self.faults.subscribe();
        loop {
            let due = self.timers.peek().map(|Reverse((t, ..))| *t);
            tokio::select! {
                // Biased: a fixed poll order keeps seeded runs reproducible.
                biased;
                _ = stopped.wait_for(|s| *s) => return,
                ev = rx.recv() => match ev {
                    Ok(e) if *e.key == pods_key() && e.kind != EventType::Deleted => self.observe(&e.object),
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => {
                        let (items, _, fresh) = self.store.snapshot_and_subscribe(&pods_key());
                        rx = fresh;
                        for p in &items {
                            self.observe(p);
                        }
                    }
                    Err(RecvError::Closed) => return,
                },
                _ = changed.changed() => {
                    // The stages may just have been enabled: look at every pod.
                    let (items, _, _) = self.store.snapshot_and_subscribe(&pods_key());
                    for p in &items {
                        self.observe(p);
                    }
                }
                _ = async { tokio::time::sleep_until(due.unwrap_or_else(Instant::now)).await }, if due.is_some() => {
                    let now = Instant::now();
                    while let Some(Reverse((t, ..))) = self.timers.peek() {
                        if *t > now {
                            break;
                        }
                        let Some(Reverse((_, _, stage, id))) = self.timers.pop() else { break };
                        self.armed.remove(&(stage.clone(), id.clone()));
                        self.fire(stage, &id);
                    }
                }
            }
        }
    }

    fn arm(&mut self, stage: Stage, id: PodId, after: Duration) {
        if self.armed.insert((stage.clone(), id.clone())) {
            self.seq += 1;
            self.timers
                .push(Reverse((Instant::now() + after, self.seq, stage, id)));
        }
    }

    fn observe(&mut self, p: &StoredObject) {
        let id = (
            p.namespace().to_string(),
            p.name().to_string(),
            p.uid.to_string(),
        );
        if p.terminating {
            let v = p.value();
            if v["metadata"]["deletionGracePeriodSeconds"]
                .as_i64()
                .unwrap_or(0)
                > 0
            {
                // Timestamps have whole seconds: round the wait up so the
                // pod lingers for its full grace period.
                let remaining = v["metadata"]["deletionTimestamp"]
                    .as_str()
                    .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                    .map(|t| {
                        let ms = t
                            .duration_since(self.store.clock().now())
                            .as_millis()
                            .max(0);
                        (ms as u64).div_ceil(1000)
                    })
                    .unwrap_or(0);
                self.arm(Stage::Finish, id, Duration::from_secs(remaining));
            }
            return;
        }
        let stages = self.faults.pod_lifecycle();
        if !stages.enabled {
            return;
        }
        let node = p.field("spec.nodeName").unwrap_or_default();
        let phase = p.field("status.phase").unwrap_or_default();
        if node.is_empty() {
            let d = self.faults.draw(stages.schedule);
            self.arm(Stage::Schedule, id, d);
        } else if phase == "Pending" {
            let d = self.faults.draw(stages.run);
            self.arm(Stage::Run, id, d);
        }
    }

    fn pick_node(&mut self) -> String {
        let mut nodes = self.faults.pod_lifecycle().nodes;
        if nodes.is_empty() {
            let key = StorageKey {
                group: String::new(),
                plural: "nodes".into(),
            };
            nodes = self
                .store
                .list(&key, None, None, None, |_| true)
                .items
                .iter()
                .map(|n| n.name().to_string())
                .collect();
        }
        if nodes.is_empty() {
            return "ward-node-0".into();
        }
        let n = nodes[self.next_node % nodes.len()].clone();
        self.next_node += 1;
        n
    }

    fn fire(&mut self, stage: Stage, id: &PodId) {
        let (ns, name, uid) = id;
        let same = |old: &serde_json::Value| -> Result<(), ApiError> {
            if old["metadata"]["uid"] != uid.as_str()
                || !old["metadata"]["deletionTimestamp"].is_null()
            {
                return Err(ApiError::conflict("pod replaced or terminating"));
            }
            Ok(())
        };
        let res = match stage {
            Stage::Finish => self
                .store
                .finish_grace(&self.pods, ns, name, uid)
                .map(|_| ()),
            Stage::Schedule => {
                let node = self.pick_node();
                self.store
                    .update(&self.pods, ns, name, |old| {
                        same(old)?;
                        if old["spec"]["nodeName"].as_str().is_some_and(|n| !n.is_empty()) {
                            return Ok(old.clone());
                        }
                        let mut new = old.clone();
                        new["spec"]["nodeName"] = node.clone().into();
                        new["status"]["conditions"] = json!([{"type": "PodScheduled", "status": "True",
                            "lastTransitionTime": self.store.clock().rfc3339()}]);
                        Ok(new)
                    })
                    .map(|_| ())
            }
            Stage::Run => {
                self.next_ip += 1;
                let ip = format!(
                    "10.244.{}.{}",
                    (self.next_ip / 250) % 256,
                    self.next_ip % 250 + 2
                );
                let now = self.store.clock().rfc3339();
                self.store
                    .update(&self.pods, ns, name, |old| {
                        same(old)?;
                        if old["status"]["phase"] != "Pending" {
                            return Ok(old.clone());
                        }
                        let mut new = old.clone();
                        let cond = |t: &str| json!({"type": t, "status": "True", "lastTransitionTime": now});
                        let statuses: Vec<_> = old["spec"]["containers"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(|c| json!({"name": c["name"], "image": c["image"], "ready": true,
                                "restartCount": 0, "started": true, "state": {"running": {"startedAt": now}}}))
                            .collect();
                        new["status"] = json!({
                            "phase": "Running",
                            "podIP": ip,
                            "podIPs": [{"ip": ip}],
                            "hostIP": "10.0.0.1",
                            "startTime": now,
                            "qosClass": old["status"]["qosClass"],
                            "conditions": [cond("PodScheduled"), cond("Initialized"), cond("ContainersReady"), cond("Ready")],
                            "containerStatuses": statuses,
                        });
                        Ok(new)
                    })
                    .map(|_| ())
            }
        };
        if let Err(e) = res {
            tracing::debug!(namespace = %ns, pod = %name, stage = ?stage, error = %e, "pod stage skipped");
        }
    }
}
