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

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use ward_guards::liveness::{self, LivenessPolicy, Record, ResourceCheck};
use ward_guards::occ_patch::{Change, Decision, OccPatch, json_pointer};

use super::model::{IPAllocation, IPPool, Range, annotated_ips};
use crate::journal::Journal;

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

pub use crate::run::Mode;

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
    /// The clock liveness reads "now" from: the one that stamps the pods
    /// and allocations (the embedded server's; wall time against a real
    /// cluster).
    pub clock: ward_runtime::clock::Clock,
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

/// What one run sees: the pools (the records) and the pods.
type View = liveness::Snapshot<Vec<IPPool>>;

/// The pod an allocation names (`namespace/name`), if the read found it.
fn pod_of<'v>(view: &'v View, podref: &str) -> Option<&'v Pod> {
    let (ns, name) = podref.split_once('/')?;
    view.pods.get(&(ns.to_string(), name.to_string()))
}

/// One run of the reconciler: read, judge each allocation, commit the
/// removals. The three modes differ only inside each stage.
pub async fn reconcile_once(
    client: &Client,
    config: &ReconcilerConfig,
    clock: &ward_runtime::clock::Clock,
    journal: &Journal,
) -> Result<(), ReconcileError> {
    let run = Run {
        client,
        config,
        clock,
        journal,
    };
    let view = read(&run).await?;
    let now = clock.now();
    let mut dead = Vec::new();
    for e in entries(&view.records) {
        if is_dead(&run, &view, now, &e).await? {
            dead.push(e);
        }
    }
    commit(&run, &view.records, dead).await
}

/// What every stage of one run uses.
struct Run<'a> {
    client: &'a Client,
    config: &'a ReconcilerConfig,
    clock: &'a ward_runtime::clock::Clock,
    journal: &'a Journal,
}

/// Read. Naive lists the pods first (the order that loses); upstream lists
/// the pools first; guarded takes a [`liveness::snapshot`]: pools, then
/// every page of pods.
async fn read(run: &Run<'_>) -> Result<View, ReconcileError> {
    let Run { client, config, .. } = *run;
    let pools_api: Api<IPPool> = Api::namespaced(client.clone(), &config.namespace);
    let pods_api: Api<Pod> = Api::all(client.clone());
    let all = ListParams::default();
    Ok(match config.mode {
        Mode::Naive => {
            let pods = liveness::index_pods(pods_api.list(&all).await?.items);
            let records = pools_api.list(&all).await?.items;
            View { records, pods }
        }
        Mode::Upstream => {
            let records = pools_api.list(&all).await?.items;
            let pods = liveness::index_pods(pods_api.list(&all).await?.items);
            View { records, pods }
        }
        Mode::Guarded => {
            liveness::snapshot(
                || async { pools_api.list(&all).await.map(|l| l.items) },
                || liveness::list_pod_index(&pods_api),
            )
            .await?
        }
    })
}

/// Judge one allocation. Naive: alive only if its pod shows the IP.
/// Upstream: also a Pending pod that shows it within 3 re-reads 250 ms
/// apart. Guarded: phase-aware liveness with the grace bound and the pod
/// uid, judged on the view at `now` (the time of the read), a dead verdict
/// confirmed by a fresh read of the pod.
async fn is_dead(
    run: &Run<'_>,
    view: &View,
    now: jiff::Timestamp,
    e: &Entry,
) -> Result<bool, ReconcileError> {
    let Run {
        client,
        config,
        clock,
        journal,
    } = *run;
    let shows_ip = |p: &Pod| annotated_ips(p.metadata.annotations.as_ref()).contains(&e.ip);
    match config.mode {
        Mode::Naive => Ok(!pod_of(view, &e.alloc.podref).is_some_and(shows_ip)),
        Mode::Upstream => {
            let Some(pod) = pod_of(view, &e.alloc.podref) else {
                return Ok(true);
            };
            if shows_ip(pod) {
                return Ok(false);
            }
            if pod.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Pending") {
                return Ok(true);
            }
            let (ns, name) = e
                .alloc
                .podref
                .split_once('/')
                .unwrap_or(("default", &e.alloc.podref));
            let api: Api<Pod> = Api::namespaced(client.clone(), ns);
            for _ in 0..3 {
                tokio::time::sleep(Duration::from_millis(250)).await;
                if api.get_opt(name).await?.as_ref().is_some_and(shows_ip) {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        Mode::Guarded => {
            let policy = LivenessPolicy::new(ResourceCheck::Ips)
                .grace(config.grace)
                .clock(*clock);
            let Some(record) = record_of(e) else {
                return Ok(false);
            };
            if policy.decide(&record, view.pod(&record), now).is_alive() {
                return Ok(false);
            }
            let fresh = liveness::is_alive(client, &record, &policy).await?;
            if fresh.is_dead() {
                journal.log(format!(
                    "reconciler (guarded): {} of {} is dead: {:?}",
                    e.ip,
                    e.alloc.podref,
                    fresh.reason()
                ));
            }
            Ok(fresh.is_dead())
        }
    }
}

/// Commit the removals. Naive and upstream: per pool, `[test rv, remove
/// ...]` with the rv listed (a pool that moved on is skipped until the next
/// run). Guarded: per pool, an optimistic-concurrency patch that removes
/// exactly the judged entries, re-decided on the fresh pool on conflict.
async fn commit(run: &Run<'_>, pools: &[IPPool], dead: Vec<Entry>) -> Result<(), ReconcileError> {
    let Run {
        client,
        config,
        journal,
        ..
    } = *run;
    let pools_api: Api<IPPool> = Api::namespaced(client.clone(), &config.namespace);
    if config.mode != Mode::Guarded {
        return Ok(remove_listed(&pools_api, pools, &dead, journal, config.mode).await?);
    }
    let mut by_pool: BTreeMap<String, Vec<(String, IPAllocation)>> = BTreeMap::new();
    for e in dead {
        by_pool.entry(e.pool).or_default().push((e.offset, e.alloc));
    }
    for (pool, victims) in by_pool {
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
        if matches!(outcome, ward_guards::occ_patch::UpdateOutcome::Patched(..)) {
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

/// How long to wait before retrying a run that failed for the
/// `failures`th time in a row: a backoff doubling from 1 s up to a quarter
/// of the interval, or the server's `Retry-After` (a 429's
/// `details.retryAfterSeconds`) when that is longer.
fn retry_delay(e: &ReconcileError, failures: u32, interval: Duration) -> Duration {
    let backoff = ward_base::Backoff {
        base: Duration::from_secs(1),
        max: (interval / 4).max(Duration::from_secs(1)),
    };
    let root: &(dyn std::error::Error + 'static) = e;
    let asked = std::iter::successors(Some(root), |c| c.source())
        .filter_map(|c| match c.downcast_ref::<kube::Error>() {
            Some(kube::Error::Api(s)) => s.details.as_ref(),
            _ => None,
        })
        .map(|d| Duration::from_secs(d.retry_after_seconds.into()))
        .max()
        .unwrap_or_default();
    backoff.delay(failures).max(asked)
}

/// Run the reconciler every `interval` until aborted. A run that fails is
/// retried with backoff (1 s doubling to a quarter of the interval, or the
/// server's `Retry-After` when longer) until one succeeds, as a CronJob's
/// Job retries its failed pod, rather than left to the next
/// period: under a long window of throttled writes, waiting a whole
/// interval per failure lets a dead allocation outlive any bound stated in
/// intervals. The period is kept from the first run (a tick missed while
/// retrying is skipped, not made up in a burst).
pub async fn run(client: Client, config: ReconcilerConfig, journal: Journal) {
    let clock = config.clock;
    tokio::time::sleep(config.first_run).await;
    let mut tick = tokio::time::interval(config.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        let mut failures = 0;
        while let Err(e) = reconcile_once(&client, &config, &clock, &journal).await {
            failures += 1;
            let wait = retry_delay(&e, failures, config.interval);
            journal.log(format!(
                "reconciler ({}): run failed: {e}; retrying in {wait:?}",
                config.mode
            ));
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn throttled(retry_after: u32) -> ReconcileError {
        let status = kube::core::Status {
            code: 429,
            reason: "TooManyRequests".into(),
            details: Some(kube::core::response::StatusDetails {
                name: String::new(),
                group: String::new(),
                kind: String::new(),
                uid: String::new(),
                causes: Vec::new(),
                retry_after_seconds: retry_after,
            }),
            ..kube::core::Status::failure("throttled", "TooManyRequests")
        };
        ReconcileError::Kube(kube::Error::Api(Box::new(status)))
    }

    #[test]
    fn a_failed_run_is_retried_within_the_interval_honouring_retry_after() {
        let interval = Duration::from_secs(60);
        let secs = |e: &ReconcileError, n| retry_delay(e, n, interval).as_secs();
        let plain = throttled(0);
        assert_eq!(
            (1..=6).map(|n| secs(&plain, n)).collect::<Vec<_>>(),
            [1, 2, 4, 8, 15, 15]
        );
        // The server's Retry-After wins when longer, also through OccPatch.
        assert_eq!(secs(&throttled(5), 1), 5);
        assert_eq!(secs(&throttled(5), 4), 8);
        let ReconcileError::Kube(k) = throttled(7) else {
            unreachable!()
        };
        let occ = ReconcileError::Occ(ward_guards::occ_patch::OccError::Kube(k));
        assert_eq!(secs(&occ, 1), 7);
    }
}
