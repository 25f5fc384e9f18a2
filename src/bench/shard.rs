//! Part 5, sharded controllers: 1, 2 and 4 replicas of a sharded
//! `GuardedController` (Ward's `Member` on Leases) over one set of
//! ConfigMaps, with the server filtering (KEP-5866 on) and without (each
//! replica filters client-side). Per replica count and mode: the time
//! until every object has been reconciled once (the ring forming
//! included), the bytes each replica receives for one update of every
//! object once synced, the objects each caches, and, with two replicas or more, the
//! hand-over: one replica leaves gracefully, and the time until each of
//! its objects has been reconciled by its new owner. Bytes are compared
//! with one replica's in the same mode (the baseline of the same run).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde::Serialize;
use tokio::sync::oneshot;
use ward_apiserver::{ApiServer, ServerConfig};
use ward_runtime::GuardedController;
use ward_runtime::shard::{Member, Ring, Shard};

/// Sizes of the sharding benchmark.
#[derive(Debug, Clone)]
pub struct ShardConfig {
    /// ConfigMaps the replicas share (0: the part is skipped).
    pub objects: usize,
    /// Replica counts, each run in both modes.
    pub replicas: Vec<usize>,
    /// The members' lease duration (renew every fifth of it).
    pub lease: Duration,
    /// How long to wait for a sync or a hand-over before giving up.
    pub timeout: Duration,
}

/// One replica count in one mode.
#[derive(Debug, Clone, Serialize)]
pub struct ShardRow {
    /// Whether the server applied the shardSelector (KEP-5866 on).
    pub server_filtering: bool,
    /// Replicas.
    pub replicas: usize,
    /// Seconds from the replicas' start until every object was reconciled once.
    pub sync_secs: f64,
    /// Whether that happened within the timeout.
    pub synced: bool,
    /// Mean bytes a replica received for one update of every object, once
    /// synced (its watch, and any relist the update caused).
    pub bytes_per_replica: f64,
    /// `bytes_per_replica` over one replica's in the same mode.
    pub bytes_ratio: f64,
    /// Mean objects in a replica's cache once synced.
    pub cached_per_replica: f64,
    /// The most a replica cached, over the mean.
    pub cached_max_over_mean: f64,
    /// Seconds from a graceful leave until each of the leaver's objects was
    /// reconciled by its new owner (`None` for one replica).
    pub handover_secs: Option<f64>,
    /// Seconds from that leave until the others' active slots covered all
    /// of them again: the protocol's part of the hand-over (the rest is
    /// relisting and reconciling the moved objects).
    pub slots_moved_secs: Option<f64>,
    /// Then, with two replicas or more left, seconds from a crash (a
    /// replica's task aborted: its Lease left to expire) until each of its
    /// objects was reconciled by its new owner.
    pub takeover_secs: Option<f64>,
}

/// Part 5's results.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ShardResults {
    /// Objects.
    pub objects: usize,
    /// Lease duration, seconds.
    pub lease_secs: f64,
    /// One row per mode and replica count.
    pub rows: Vec<ShardRow>,
}

/// What every replica of one run shares: who reconciled what, when.
#[derive(Default)]
struct Seen {
    /// object -> (replica, when) of its latest reconcile.
    last: Mutex<HashMap<String, (usize, Instant)>>,
}

/// A running replica.
struct Replica {
    shard: Arc<Mutex<Option<Shard>>>,
    cache: Arc<Mutex<Option<kube::runtime::reflector::Store<ConfigMap>>>>,
    bytes: Arc<AtomicU64>,
    leave: Option<oneshot::Sender<()>>,
    run: tokio::task::JoinHandle<()>,
}

/// Run part 5.
pub fn run(config: &ShardConfig, log: &(dyn Fn(&str) + Sync)) -> ShardResults {
    let mut results = ShardResults {
        objects: config.objects,
        lease_secs: config.lease.as_secs_f64(),
        rows: Vec::new(),
    };
    if config.objects == 0 {
        return results;
    }
    let rt = super::runtime();
    for server_filtering in [true, false] {
        rt.block_on(async {
            let server = ApiServer::start(ServerConfig::default().sharded_list_and_watch(server_filtering))
                .await
                .expect("an in-process server");
            let hashes = create(&server.client(), config.objects).await;
            let mut baseline = None;
            for (i, &n) in config.replicas.iter().enumerate() {
                let row = measure(&server, config, server_filtering, n, &format!("bench-{i}"), &hashes, baseline).await;
                log(&format!(
                    "  sharding ({}): {n} replicas synced in {:.2}s, {:.0} KiB each ({:.2} of one), hand-over {} (slots {}), crash takeover {}",
                    if server_filtering { "server filters" } else { "client filters" },
                    row.sync_secs,
                    row.bytes_per_replica / 1024.0,
                    row.bytes_ratio,
                    row.handover_secs.map_or("-".into(), |s| format!("{s:.2}s")),
                    row.slots_moved_secs.map_or("-".into(), |s| format!("{s:.2}s")),
                    row.takeover_secs.map_or("-".into(), |s| format!("{s:.2}s"))
                ));
                baseline.get_or_insert(row.bytes_per_replica);
                results.rows.push(row);
            }
        });
    }
    results
}

/// `objects` ConfigMaps; their names and uid hashes.
async fn create(client: &Client, objects: usize) -> HashMap<String, u64> {
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let mut cm = ConfigMap {
        data: Some([("payload".to_string(), "x".repeat(256))].into()),
        ..ConfigMap::default()
    };
    for i in 0..objects {
        cm.metadata.name = Some(format!("shard-{i:06}"));
        cms.create(&PostParams::default(), &cm)
            .await
            .expect("create");
    }
    let list = cms.list(&ListParams::default()).await.expect("list");
    list.items
        .iter()
        .map(|cm| {
            (
                cm.name_any(),
                ward_base::fnv1a(cm.uid().unwrap_or_default().as_bytes()),
            )
        })
        .collect()
}

/// `n` replicas on ring `ring`: until the ring has formed and every object
/// has been reconciled by its owner; then one update of every object (the
/// bytes each replica receives for it); then (n >= 2) a graceful leave.
async fn measure(
    server: &ApiServer,
    config: &ShardConfig,
    server_filtering: bool,
    n: usize,
    ring: &str,
    hashes: &HashMap<String, u64>,
    baseline: Option<f64>,
) -> ShardRow {
    let seen = Arc::new(Seen::default());
    let started = Instant::now();
    let mut replicas: Vec<Replica> = (0..n)
        .map(|i| start(server, config, ring, i, &seen))
        .collect();
    let owners = |n: usize| {
        let ring = Ring::new((0..n).map(|i| format!("replica-{i}")));
        let owner: HashMap<&str, usize> = hashes
            .iter()
            .map(|(name, h)| {
                let who = ring.owner_of(*h).unwrap_or_default();
                (
                    name.as_str(),
                    who.trim_start_matches("replica-").parse().unwrap_or(0),
                )
            })
            .collect();
        (ring, owner)
    };
    let (final_ring, owner) = owners(n);
    // Every object reconciled by its owner since `since`.
    let done = |owner: &HashMap<&str, usize>, since: Instant| {
        let last = seen.last.lock().unwrap();
        owner.iter().all(|(name, who)| {
            last.get(*name)
                .is_some_and(|(w, at)| w == who && *at >= since)
        })
    };
    let formed = |replicas: &[Replica]| {
        replicas.iter().enumerate().all(|(i, r)| {
            r.shard.lock().unwrap().as_ref().map(Shard::slots)
                == Some(final_ring.slots_of(&format!("replica-{i}")))
        })
    };
    let synced = wait(config.timeout, || {
        formed(&replicas) && done(&owner, started)
    })
    .await;
    let sync_secs = started.elapsed().as_secs_f64();
    let cached: Vec<usize> = replicas
        .iter()
        .map(|r| {
            r.cache
                .lock()
                .unwrap()
                .as_ref()
                .map_or(0, |s| s.state().len())
        })
        .collect();
    let mean = cached.iter().sum::<usize>() as f64 / n as f64;
    let max = cached.iter().copied().max().unwrap_or(0) as f64;
    // One update of every object: what each replica receives for it.
    for r in &replicas {
        r.bytes.store(0, Ordering::Relaxed);
    }
    let updated = Instant::now();
    update(&server.client(), hashes.keys(), ring).await;
    let delivered = synced && wait(config.timeout, || done(&owner, updated)).await;
    let bytes = replicas
        .iter()
        .map(|r| r.bytes.load(Ordering::Relaxed))
        .sum::<u64>() as f64
        / n as f64;
    let (mut handover_secs, mut slots_moved_secs, mut takeover_secs) = (None, None, None);
    if n >= 2 && delivered {
        // The last replica leaves; its objects must be reconciled by the others.
        let leaver = replicas.pop().expect("n >= 2");
        let left = Instant::now();
        let _ = leaver.leave.map(|tx| tx.send(()));
        let covered = |replicas: &[Replica]| {
            replicas
                .iter()
                .filter_map(|r| r.shard.lock().unwrap().as_ref().map(Shard::slots))
                .fold(ward_runtime::shard::Slots::NONE, |a, s| a.union(s))
                == ward_runtime::shard::Slots::ALL
        };
        if wait(config.timeout, || covered(&replicas)).await {
            slots_moved_secs = Some(left.elapsed().as_secs_f64());
        }
        let _ = leaver.run.await;
        // The objects replica `gone` owned, with their owners once it is gone.
        let moved_from = |gone: usize| -> HashMap<&str, usize> {
            let ((_, before), (_, after)) = (owners(gone + 1), owners(gone));
            after
                .into_iter()
                .filter(|(name, _)| before.get(name) == Some(&gone))
                .collect()
        };
        let moved = moved_from(n - 1);
        if wait(config.timeout, || done(&moved, left)).await {
            handover_secs = Some(left.elapsed().as_secs_f64());
        }
        if n >= 3 && handover_secs.is_some() {
            // The new last replica crashes; the others wait out its Lease.
            let crashed = replicas.pop().expect("n >= 3");
            let at = Instant::now();
            crashed.run.abort();
            let _ = crashed.run.await;
            let moved = moved_from(n - 2);
            if wait(config.timeout, || done(&moved, at)).await {
                takeover_secs = Some(at.elapsed().as_secs_f64());
            }
        }
    }
    for r in replicas {
        let _ = r.leave.map(|tx| tx.send(()));
        let _ = r.run.await;
    }
    ShardRow {
        server_filtering,
        replicas: n,
        sync_secs,
        synced: synced && delivered,
        bytes_per_replica: bytes,
        bytes_ratio: baseline.map_or(1.0, |b| super::ratio(bytes, b)),
        cached_per_replica: mean,
        cached_max_over_mean: super::ratio(max, mean),
        handover_secs,
        slots_moved_secs,
        takeover_secs,
    }
}

/// Change every object once (to a value of this run's own: a patch that
/// changes nothing is not a write, and sends no event).
async fn update(client: &Client, names: impl Iterator<Item = &String>, run: &str) {
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let patch = serde_json::json!({"data": {"payload": "y".repeat(256), "run": run}});
    for name in names {
        cms.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("patch");
    }
}

/// Poll `cond` every 10 ms until it holds or `timeout` passes.
async fn wait(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    tokio::time::timeout(timeout, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .is_ok()
}

/// Replica `i`: a member of `ring` running a sharded controller whose
/// reconcile records who reconciled what.
fn start(
    server: &ApiServer,
    config: &ShardConfig,
    ring: &str,
    i: usize,
    seen: &Arc<Seen>,
) -> Replica {
    let bytes = Arc::new(AtomicU64::new(0));
    let client = counting_client(server, bytes.clone());
    let lease_client = server.client();
    let member = Member::new(lease_client, "default", ring, format!("replica-{i}"))
        .lease_duration(config.lease)
        .renew_every(config.lease / 5)
        .retry_every(config.lease / 5)
        .drain_timeout(config.lease / 4);
    let (tx, rx) = oneshot::channel::<()>();
    let (cache, shard_seen) = (Arc::new(Mutex::new(None)), Arc::new(Mutex::new(None)));
    let (cache_slot, shard_slot, seen) = (cache.clone(), shard_seen.clone(), seen.clone());
    let run = tokio::spawn(async move {
        let _ = member
            .run(
                move |shard: Shard| async move {
                    *shard_slot.lock().unwrap() = Some(shard.clone());
                    let api: Api<ConfigMap> = Api::default_namespaced(shard.client(client));
                    let controller = GuardedController::new(api, watcher::Config::default())
                        .shard(shard.clone());
                    *cache_slot.lock().unwrap() = Some(controller.store());
                    controller
                        .graceful_shutdown_on(shard.stopping())
                        .run(
                            move |cm: Arc<ConfigMap>, seen: Arc<Seen>| async move {
                                seen.last
                                    .lock()
                                    .unwrap()
                                    .insert(cm.name_any(), (i, Instant::now()));
                                Ok::<_, kube::Error>(Action::await_change())
                            },
                            |_, _, _| Action::await_change(),
                            seen,
                        )
                        .for_each(|r| async move {
                            if let Err(e) = r {
                                eprintln!("sharding bench: replica-{i}: {e}");
                            }
                        })
                        .await;
                },
                async move {
                    let _ = rx.await;
                },
            )
            .await;
    });
    Replica {
        shard: shard_seen,
        cache,
        bytes,
        leave: Some(tx),
        run,
    }
}

/// A client of `server` counting the body bytes of every response it gets
/// (the controller's LISTs and WATCHes of the kind, and its probe).
fn counting_client(server: &ApiServer, bytes: Arc<AtomicU64>) -> Client {
    let inner = server.client();
    let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let (inner, bytes) = (inner.clone(), bytes.clone());
        async move {
            let resp = inner.send(req).await?;
            Ok::<_, kube::Error>(resp.map(|body| {
                body.map_frame(move |frame| {
                    if let Some(data) = frame.data_ref() {
                        bytes.fetch_add(data.len() as u64, Ordering::Relaxed);
                    }
                    frame
                })
            }))
        }
    });
    Client::new(svc, "default")
}

/// The sharding table docs/benchmarks.md quotes.
#[must_use]
pub fn markdown(r: &ShardResults) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    if r.rows.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "**Sharding** ({} ConfigMaps of ~300 bytes, member Leases of {:.0} s renewed every {:.1} s; KiB: what one replica received for one update of every object once synced, and its ratio to one replica's in the same mode; cached: objects in a replica's cache once synced; hand-over: a replica leaves gracefully, until the others' slots cover its slots (slots) and until each of its objects was reconciled by its new owner (objects); crash takeover: then, with two or more left, one crashes (its Lease left to expire), until each of its objects was reconciled by its new owner):\n",
        r.objects,
        r.lease_secs,
        r.lease_secs / 5.0
    );
    s.push_str("| server filters (KEP-5866) | replicas | sync s (ring forming included) | KiB per replica (ratio to 1) | cached per replica (max / mean) | hand-over s: slots / objects | crash takeover s |\n|---|---|---|---|---|---|---|\n");
    for row in &r.rows {
        let _ = writeln!(
            s,
            "| {} | {} | {:.2}{} | {:.0} ({:.2}) | {:.0} ({:.2}) | {} | {} |",
            if row.server_filtering { "yes" } else { "no" },
            row.replicas,
            row.sync_secs,
            if row.synced { "" } else { " (timed out)" },
            row.bytes_per_replica / 1024.0,
            row.bytes_ratio,
            row.cached_per_replica,
            row.cached_max_over_mean,
            match (row.slots_moved_secs, row.handover_secs) {
                (None, None) => "-".into(),
                (s, h) => format!(
                    "{} / {}",
                    s.map_or("-".into(), |s| format!("{s:.2}")),
                    h.map_or("-".into(), |h| format!("{h:.2}"))
                ),
            },
            row.takeover_secs.map_or("-".into(), |h| format!("{h:.2}"))
        );
    }
    s
}
