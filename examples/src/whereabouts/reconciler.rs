//! The ip-reconciler (upstream runs it as a CronJob): frees allocations
//! whose pod is gone. Three variants:
//!
//! - [`Mode::Naive`] — upstream's 2021 logic: list pods, then pools; a pod
//!   is alive if it exists AND its network-status annotation shows the IP;
//!   remove the others with `[test rv, remove /spec/allocations/N]`. The rv
//!   test guards the pool, not the stale pod view: a Pending pod whose
//!   annotation has not landed loses its IP (the seed race).
//! - [`Mode::Upstream`] — today's upstream: pools first; a Pending pod
//!   without the IP is re-read up to 3 times 250 ms apart, then reclaimed.
//!   Re-opens the race when the annotation lags more than 0.75 s.
//! - [`Mode::Guarded`] — Ward: pools BEFORE pods
//!   ([`ward_guards::liveness::snapshot`]), phase-aware liveness with a
//!   grace bound and the pod uid ([`ward_guards::liveness::LivenessPolicy`]),
//!   each verdict confirmed by a fresh GET of the pod, and the removal
//!   committed by an optimistic-concurrency patch that tests the exact
//!   entry and re-decides on conflict ([`ward_guards::occ_patch`]).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use ward_guards::liveness::{self, LivenessPolicy, Record};
use ward_guards::occ_patch::{Change, Decision, OccPatch, json_pointer};

use super::invariants::Journal;
use super::model::{IPAllocation, IPPool, Range, annotated_ips};

/// Errors of one reconcile run.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// An API call failed.
    #[error("API call failed: {0}")]
    Kube(#[from] kube::Error),
    /// The guarded commit failed.
    #[error(transparent)]
    Occ(#[from] ward_guards::occ_patch::OccError),
    /// A pod lookup failed.
    #[error(transparent)]
    Liveness(#[from] ward_guards::liveness::LivenessError),
}

/// Which reconciler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    /// Upstream 2021.
    Naive,
    /// Upstream today.
    Upstream,
    /// Built from ward-guards.
    Guarded,
}

impl Mode {
    /// Every mode.
    pub const ALL: [Mode; 3] = [Mode::Naive, Mode::Upstream, Mode::Guarded];
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Naive => "naive",
            Mode::Upstream => "upstream",
            Mode::Guarded => "guarded",
        })
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "naive" => Ok(Mode::Naive),
            "upstream" => Ok(Mode::Upstream),
            "guarded" => Ok(Mode::Guarded),
            other => Err(format!(
                "unknown mode {other:?}: naive, upstream or guarded"
            )),
        }
    }
}

/// Reconciler settings.
#[derive(Debug, Clone)]
pub struct ReconcilerConfig {
    /// Which logic.
    pub mode: Mode,
    /// How often it runs.
    pub interval: Duration,
    /// The liveness grace bound (guarded).
    pub grace: Duration,
    /// Delay before the first run.
    pub first_run: Duration,
    /// Namespace of the pools.
    pub namespace: String,
}

/// One allocation of one pool.
struct Entry {
    pool: String,
    offset: String,
    ip: String,
    alloc: IPAllocation,
}

fn entries(pools: &[IPPool]) -> Vec<Entry> {
    let mut out = Vec::new();
    for p in pools {
        let Ok(range) = Range::parse(&p.spec.range) else {
            continue;
        };
        for (off, a) in &p.spec.allocations {
            let Some(ip) = off.parse::<u128>().ok().and_then(|o| range.ip(o).ok()) else {
                continue;
            };
            out.push(Entry {
                pool: p.name_any(),
                offset: off.clone(),
                ip: ip.to_string(),
                alloc: a.clone(),
            });
        }
    }
    out
}

fn pod_index(pods: Vec<Pod>) -> HashMap<String, Pod> {
    pods.into_iter()
        .map(|p| {
            (
                format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any()),
                p,
            )
        })
        .collect()
}

/// Remove `dead` entries of each pool with `[test rv, remove ...]` (the
/// naive and upstream commit), the rv being the one listed.
async fn remove_listed(
    pools_api: &Api<IPPool>,
    pools: &[IPPool],
    dead: &[Entry],
    journal: &Journal,
    mode: Mode,
) -> Result<(), kube::Error> {
    for pool in pools {
        let name = pool.name_any();
        let ours: Vec<&Entry> = dead.iter().filter(|e| e.pool == name).collect();
        if ours.is_empty() {
            continue;
        }
        let mut ops = vec![
            json!({"op": "test", "path": "/metadata/resourceVersion", "value": pool.resource_version()}),
        ];
        ops.extend(
            ours.iter().map(
                |e| json!({"op": "remove", "path": format!("/spec/allocations/{}", e.offset)}),
            ),
        );
        let patch: json_patch::Patch =
            serde_json::from_value(json!(ops)).expect("a well-formed patch");
        match pools_api
            .patch(&name, &PatchParams::default(), &Patch::Json::<()>(patch))
            .await
        {
            Ok(_) => {
                for e in ours {
                    journal.log(format!(
                        "reconciler ({mode}): removed {} of {}",
                        e.ip, e.alloc.podref
                    ));
                }
            }
            // The pool moved on since the list: try again next run (upstream's behaviour).
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 422 => {
                journal.log(format!(
                    "reconciler ({mode}): pool {name} changed since the list; skipped"
                ));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One run of the reconciler.
pub async fn reconcile_once(
    client: &Client,
    config: &ReconcilerConfig,
    clock: &ward::clock::Clock,
    journal: &Journal,
) -> Result<(), ReconcileError> {
    let pools_api: Api<IPPool> = Api::namespaced(client.clone(), &config.namespace);
    let pods_api: Api<Pod> = Api::all(client.clone());
    match config.mode {
        Mode::Naive => {
            // Pods first, then pools: the order that loses.
            let pods = pod_index(pods_api.list(&ListParams::default()).await?.items);
            let pools = pools_api.list(&ListParams::default()).await?.items;
            let dead: Vec<Entry> = entries(&pools)
                .into_iter()
                .filter(|e| {
                    !pods.get(&e.alloc.podref).is_some_and(|p| {
                        annotated_ips(p.metadata.annotations.as_ref()).contains(&e.ip)
                    })
                })
                .collect();
            remove_listed(&pools_api, &pools, &dead, journal, config.mode).await?;
        }
        Mode::Upstream => {
            let pools = pools_api.list(&ListParams::default()).await?.items;
            let pods = pod_index(pods_api.list(&ListParams::default()).await?.items);
            let mut dead = Vec::new();
            for e in entries(&pools) {
                let Some(pod) = pods.get(&e.alloc.podref) else {
                    dead.push(e);
                    continue;
                };
                if annotated_ips(pod.metadata.annotations.as_ref()).contains(&e.ip) {
                    continue;
                }
                let pending =
                    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending");
                let mut alive = false;
                if pending {
                    // Re-read a Pending pod 3 times, 250 ms apart.
                    let (ns, name) = e
                        .alloc
                        .podref
                        .split_once('/')
                        .unwrap_or(("default", &e.alloc.podref));
                    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
                    for _ in 0..3 {
                        tokio::time::sleep(Duration::from_millis(250)).await;
                        if let Some(p) = api.get_opt(name).await?
                            && annotated_ips(p.metadata.annotations.as_ref()).contains(&e.ip)
                        {
                            alive = true;
                            break;
                        }
                    }
                }
                if !alive {
                    dead.push(e);
                }
            }
            remove_listed(&pools_api, &pools, &dead, journal, config.mode).await?;
        }
        Mode::Guarded => guarded(client, config, clock, journal).await?,
    }
    Ok(())
}

fn record_of(e: &Entry) -> Option<Record> {
    let mut r = Record::from_pod_ref(&e.alloc.podref, &e.ip).ok()?;
    if let Some(uid) = &e.alloc.pod_uid {
        r = r.pod_uid(uid.clone());
    }
    if let Some(t) = e.alloc.allocated_at.as_deref().and_then(|t| t.parse().ok()) {
        r = r.allocated_at(t);
    }
    Some(r)
}

async fn guarded(
    client: &Client,
    config: &ReconcilerConfig,
    clock: &ward::clock::Clock,
    journal: &Journal,
) -> Result<(), ReconcileError> {
    let pools_api: Api<IPPool> = Api::namespaced(client.clone(), &config.namespace);
    let pods_api: Api<Pod> = Api::all(client.clone());
    let policy = LivenessPolicy::new().grace(config.grace);
    // Records (pools) first, then pods.
    let snap = liveness::snapshot(
        || async {
            pools_api
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
        },
        || liveness::list_pod_index(&pods_api),
    )
    .await?;
    let now = clock.now();
    // Candidates by the snapshot, each confirmed by a fresh read of its pod.
    let mut dead: BTreeMap<String, Vec<(String, IPAllocation)>> = BTreeMap::new();
    for e in entries(&snap.records) {
        let Some(record) = record_of(&e) else {
            continue;
        };
        if snap.decide(&policy, &record, now).is_alive() {
            continue;
        }
        let fresh = liveness::is_alive(client, &record, &policy, clock.now()).await?;
        if fresh.is_dead() {
            journal.log(format!(
                "reconciler (guarded): {} of {} is dead: {:?}",
                e.ip,
                e.alloc.podref,
                fresh.reason()
            ));
            dead.entry(e.pool.clone())
                .or_default()
                .push((e.offset.clone(), e.alloc.clone()));
        }
    }
    for (pool, victims) in dead {
        // Remove exactly these entries: on conflict the decision is re-made
        // on the fresh pool, and an entry that changed is left alone.
        let occ = OccPatch::new(pools_api.clone()).test_resource_version(false);
        let outcome = occ
            .update(&pool, |fresh: &IPPool| {
                let changes: Vec<Change> = victims
                    .iter()
                    .filter(|(off, a)| fresh.spec.allocations.get(off) == Some(a))
                    .map(|(off, _)| {
                        Change::remove(json_pointer(["spec", "allocations", off.as_str()]))
                    })
                    .collect();
                if changes.is_empty() {
                    Decision::Nothing
                } else {
                    Decision::Patch(changes)
                }
            })
            .await?;
        if matches!(outcome, ward_guards::occ_patch::Outcome::Patched(_)) {
            for (off, a) in &victims {
                journal.log(format!(
                    "reconciler (guarded): removed offset {off} of {} from {pool}",
                    a.podref
                ));
            }
        }
    }
    Ok(())
}

/// Run the reconciler every `interval` until aborted.
pub async fn run(client: Client, config: ReconcilerConfig, journal: Journal) {
    let clock = ward::clock::Clock::new();
    tokio::time::sleep(config.first_run).await;
    let mut tick = tokio::time::interval(config.interval);
    loop {
        tick.tick().await;
        if let Err(e) = reconcile_once(&client, &config, &clock, &journal).await {
            journal.log(format!("reconciler ({}): run failed: {e}", config.mode));
        }
    }
}
