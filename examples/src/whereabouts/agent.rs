//! The node agent: what kubelet, multus and the whereabouts CNI plugin do
//! for the pods of one node.
//!
//! - CNI ADD, for each network of a new pod: read the pool, pick the
//!   lowest free offset, commit it with `[test rv, add /spec/allocations/N]`;
//!   on a conflict re-read and re-pick. Then, after a jittered delay (the
//!   window the seed race needs), write the network-status annotation and
//!   set the pod Running.
//! - CNI DEL, when the pod is deleted: free the pod's allocations by
//!   container id.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::json;
use ward_guards::occ_patch::{Change, Decision, OccError, OccPatch, UpdateOutcome, json_pointer};

use super::model::{IPAllocation, IPPool, NETWORK_STATUS, NetworkStatus, Range};
use ward_base::Rng;

/// Errors of CNI ADD/DEL.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// An API call failed.
    #[error("API call failed: {0}")]
    Kube(#[from] kube::Error),
    /// The pool's range is invalid.
    #[error(transparent)]
    Model(#[from] super::model::ModelError),
    /// Every address of the range is taken.
    #[error("range {0} is exhausted")]
    Exhausted(String),
    /// Too many conflicts in a row.
    #[error("gave up allocating in {0} after repeated conflicts")]
    Contended(String),
    /// The pool does not exist.
    #[error("pool {0} does not exist")]
    NoPool(String),
    /// A pool write failed.
    #[error("writing the pool failed: {0}")]
    Write(#[source] OccError),
}

/// One network a pod attaches to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Network {
    /// Its name in the network-status annotation, e.g. `default/net-a`.
    pub name: String,
    /// The interface, e.g. `net1`.
    pub ifname: String,
    /// The pool (namespace default) allocated from.
    pub range: Range,
}

/// Agent settings.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The node it serves.
    pub node: String,
    /// The networks every pod attaches to.
    pub networks: Vec<Network>,
    /// Delay from CNI ADD to the annotation (drawn uniformly).
    pub annotate_after: (Duration, Duration),
    /// Pods (by name) whose sandbox never comes up: allocated, never annotated (S3).
    pub stuck: HashSet<String>,
    /// The seed of its random choices.
    pub seed: u64,
    /// The clock allocations are stamped with: the one that stamps the pods
    /// (the embedded server's; wall time against a real cluster).
    pub clock: ward_runtime::clock::Clock,
}

/// The container id CNI ADD uses for a pod's network (stable per pod uid).
#[must_use]
pub fn container_id(pod_uid: &str, network: &str) -> String {
    let mut rng = Rng::stream(0, &format!("{pod_uid}/{network}"));
    format!("{:016x}{:016x}", rng.next_u64(), rng.next_u64())
}

/// How CNI ADD and DEL write a pool: read, pick on that read, patch with a
/// resourceVersion test; on a conflict read and pick again at once (the
/// plugin does not back off), up to 20 times.
fn pool_writer(client: &Client) -> OccPatch<IPPool> {
    OccPatch::new(Api::namespaced(client.clone(), "default"))
        .max_attempts(20)
        .backoff(Duration::ZERO)
        .test_uid(false)
}

/// The agent's error for a pool write that did not happen.
fn write_failed(pool: String, e: OccError) -> AgentError {
    match e {
        OccError::Conflict { .. } => AgentError::Contended(pool),
        OccError::Aborted(reason) => match reason.downcast::<AgentError>() {
            Ok(e) => *e,
            Err(other) => AgentError::Write(OccError::Aborted(other)),
        },
        e => AgentError::Write(e),
    }
}

/// CNI ADD for one network: allocate the lowest free offset.
pub async fn allocate(
    client: &Client,
    net: &Network,
    pod: &Pod,
    now: &str,
) -> Result<String, AgentError> {
    let pool_name = net.range.pool_name();
    let uid = pod.uid().unwrap_or_default();
    let id = container_id(&uid, &net.name);
    let outcome = pool_writer(client)
        .update_with(&pool_name, |pool: &IPPool| {
            // Already allocated to this container (a retried ADD)?
            if let Some((off, _)) = pool.spec.allocations.iter().find(|(_, a)| a.id == id) {
                return (Decision::Nothing, off.parse().unwrap_or(0));
            }
            // Offset 0 is the network address; skip it and the last (broadcast).
            let free = (1..net.range.size().saturating_sub(1))
                .find(|o| !pool.spec.allocations.contains_key(&o.to_string()));
            let Some(free) = free else {
                let full = AgentError::Exhausted(net.range.to_string());
                return (Decision::Abort(full.into()), 0);
            };
            let alloc = IPAllocation {
                id: id.clone(),
                podref: format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any()),
                ifname: Some(net.ifname.clone()),
                pod_uid: Some(uid.clone()),
                allocated_at: Some(now.to_string()),
            };
            let value = serde_json::to_value(alloc).expect("an allocation serializes");
            let path = json_pointer(["spec", "allocations", &free.to_string()]);
            (Decision::Patch(vec![Change::add(path, value)]), free)
        })
        .await
        .map_err(|e| write_failed(pool_name.clone(), e))?;
    match outcome.into_value() {
        None => Err(AgentError::NoPool(pool_name)),
        Some(offset) => Ok(net.range.ip(offset)?.to_string()),
    }
}

/// CNI DEL for one network: free the allocations of container `id`.
pub async fn release(client: &Client, net: &Network, id: &str) -> Result<(), AgentError> {
    let pool_name = net.range.pool_name();
    let outcome = pool_writer(client)
        .update(&pool_name, |pool: &IPPool| {
            let ours = pool.spec.allocations.iter().filter(|(_, a)| a.id == id);
            Decision::Patch(
                ours.map(|(k, _)| Change::remove(json_pointer(["spec", "allocations", k])))
                    .collect(),
            )
        })
        .await
        .map_err(|e| write_failed(pool_name.clone(), e))?;
    match outcome {
        UpdateOutcome::Gone => Err(AgentError::NoPool(pool_name)),
        _ => Ok(()),
    }
}

/// Run the agent until aborted. Its state (which pods it has set up) is in
/// memory only: killed and restarted, it re-derives it from the watch.
pub async fn run(client: Client, config: AgentConfig) {
    let config = Arc::new(config);
    let pods: Api<Pod> = Api::all(client.clone());
    let wc = watcher::Config::default().fields(&format!("spec.nodeName={}", config.node));
    let mut events = watcher(pods, wc).boxed();
    let mut rng = Rng::stream(config.seed, &format!("agent/{}", config.node));
    let mut added: HashSet<String> = HashSet::new();
    let mut deleted: HashSet<String> = HashSet::new();
    let clock = config.clock;
    loop {
        let event = match events.try_next().await {
            Ok(Some(e)) => e,
            Ok(None) => return,
            Err(e) => {
                tracing::debug!(error = %e, "agent watch error");
                continue;
            }
        };
        let (pod, gone) = match event {
            watcher::Event::Apply(p) | watcher::Event::InitApply(p) => (p, false),
            watcher::Event::Delete(p) => (p, true),
            _ => continue,
        };
        let uid = pod.uid().unwrap_or_default();
        if gone || pod.metadata.deletion_timestamp.is_some() {
            if deleted.insert(uid.clone()) {
                for net in &config.networks {
                    if let Err(e) = release(&client, net, &container_id(&uid, &net.name)).await {
                        tracing::warn!(pod = %pod.name_any(), error = %e, "CNI DEL failed");
                    }
                }
            }
            continue;
        }
        if !added.insert(uid.clone())
            || pod.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Pending")
        {
            continue;
        }
        let now = ward_base::clock::format_time(clock.now());
        let mut statuses = Vec::new();
        for net in &config.networks {
            match allocate(&client, net, &pod, &now).await {
                Ok(ip) => statuses.push(NetworkStatus {
                    name: net.name.clone(),
                    interface: Some(net.ifname.clone()),
                    ips: vec![ip],
                    mac: None,
                    default: false,
                }),
                Err(e) => tracing::warn!(pod = %pod.name_any(), error = %e, "CNI ADD failed"),
            }
        }
        if config.stuck.contains(&pod.name_any()) || statuses.len() != config.networks.len() {
            continue;
        }
        let delay = rng.between(config.annotate_after.0, config.annotate_after.1);
        let client = client.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            if let Err(e) = annotate(&client, &pod, &statuses).await {
                tracing::debug!(pod = %pod.name_any(), error = %e, "annotating failed");
            }
        });
    }
}

/// Write the network-status annotation and set the pod Running, if it is
/// still the same pod.
async fn annotate(
    client: &Client,
    pod: &Pod,
    statuses: &[NetworkStatus],
) -> Result<(), kube::Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
    let uid = pod.uid().unwrap_or_default();
    let ann = serde_json::to_string(statuses).expect("statuses serialize");
    let meta = json!([
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "add", "path": "/metadata/annotations", "value": BTreeMap::from([(NETWORK_STATUS, ann)])},
    ]);
    let patch: json_patch::Patch = serde_json::from_value(meta).expect("a well-formed patch");
    pods.patch(
        &pod.name_any(),
        &PatchParams::default(),
        &Patch::Json::<()>(patch),
    )
    .await?;
    let ip = statuses
        .first()
        .and_then(|s| s.ips.first())
        .cloned()
        .unwrap_or_default();
    let status = json!([
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "add", "path": "/status/phase", "value": "Running"},
        {"op": "add", "path": "/status/podIP", "value": ip},
    ]);
    let patch: json_patch::Patch = serde_json::from_value(status).expect("a well-formed patch");
    pods.patch_status(
        &pod.name_any(),
        &PatchParams::default(),
        &Patch::Json::<()>(patch),
    )
    .await?;
    Ok(())
}
