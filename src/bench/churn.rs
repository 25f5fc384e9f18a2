//! Part 1, controller churn: the same reconcile body run by a bare
//! `kube_runtime::Controller` and by Ward's [`GuardedController`], against
//! an in-process ward-apiserver holding N objects while a churn generator
//! creates, updates and deletes at a set rate.
//!
//! The setup is the CNS shape: ConfigMaps standing in for node-scoped
//! configuration records, each with a controller ownerReference to a Node.
//! The guarded controller runs the guard that applies to such objects,
//! [`OwnerUid`]`<Node>` (the owner read as it is now and compared by UID;
//! by default from the controller's watch cache once it has caught up with
//! the server's current resourceVersion; every owner is live, so every
//! verdict is proceed and the controllers run the body on the same
//! objects). Two more controllers run the guard with the other read modes:
//! a quorum GET shared by the checks that overlap it (`Reads::Shared`) and
//! a GET of its own per check (`Reads::Get`), the baseline. The body reads the
//! object's `stamp`, hashes its data and records the latency.
//!
//! Each phase (one controller, fresh client) first syncs — lists the N
//! objects and reconciles each once (the saturated throughput) — then
//! runs the generator for a fixed time (reconciles/s, event-to-reconcile
//! latency, CPU time; peak RSS over the phase). Phases are interleaved in
//! one process: bare, guarded, bare, guarded, …; the figures are reported
//! as ratios guarded/bare.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use serde::Serialize;
use ward_apiserver::store::ResourceInfo;
use ward_apiserver::store::{DeleteSpec, Store};
use ward_apiserver::{ApiServer, ServerConfig};
use ward_base::Rng;
use ward_guards::owner_uid::OwnerUid;
use ward_runtime::{GuardedController, Reads};

use super::objects::{self, NAMESPACE, Owner, now_micros};
use super::{median, quantile, ratio, sys};

/// Sizes and rates of the churn benchmark.
#[derive(Debug, Clone)]
pub struct ChurnConfig {
    /// Object counts, one server each.
    pub sizes: Vec<usize>,
    /// Writes per second of the generator (20% creates, 60% updates, 20% deletes).
    pub rate: f64,
    /// How long each phase churns.
    pub churn: Duration,
    /// Rounds of (bare, guarded) per size.
    pub rounds: usize,
    /// Further rounds per size that only sync (no churn window): more
    /// pairs for the saturated ratio, which one round measures noisily.
    pub sync_rounds: usize,
    /// Nodes owning the objects.
    pub nodes: usize,
    /// Longest a controller may take to reconcile every object once.
    pub sync_timeout: Duration,
    /// Pause between phases.
    pub settle: Duration,
    /// Seed of the generator.
    pub seed: u64,
}

/// Which controller runs the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    /// `kube_runtime::Controller`.
    Bare,
    /// `ward_runtime::GuardedController` with `OwnerUid<Node>` (consistent reads
    /// from a watch cache, the default).
    Guarded,
    /// The same with `Reads::Shared`: quorum GETs shared by overlapping checks.
    #[serde(rename = "guarded-shared")]
    GuardedShared,
    /// The same with `Reads::Get`: one quorum GET per check (the baseline
    /// the other two are measured against).
    #[serde(rename = "guarded-get")]
    GuardedGet,
    /// `kube_runtime::Controller` whose reconcile awaits once (a
    /// `yield_now`) before its work, in the sync-only rounds: a control for
    /// what suspending every reconcile once costs by itself (the bare
    /// reconcile never suspends; a guard that waits for a read does).
    #[serde(rename = "bare-await")]
    BareAwait,
    /// `ward_runtime::GuardedController` with no guard: what the wrapper costs by
    /// itself (the reconcile-cost harness only, [`super::cost`]).
    Unguarded,
}

/// One phase: one controller, sync then churn.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    /// Which controller.
    pub variant: Variant,
    /// Which round.
    pub round: usize,
    /// A sync-only round (no churn window; its churn figures are zero and
    /// left out of the churn summaries).
    pub sync_only: bool,
    /// Objects in the store when the phase started.
    pub objects: usize,
    /// From the controller's start to every object reconciled once, seconds
    /// (stamped by the reconcile that completes the sync).
    pub sync_secs: f64,
    /// From the controller's start to its first reconcile (mostly the
    /// initial list), seconds.
    pub sync_first_secs: f64,
    /// `objects / sync_secs`: saturated reconciles/s (includes the list).
    pub sync_reconciles_per_sec: f64,
    /// Whether the sync finished before the timeout.
    pub synced: bool,
    /// Reads of an owner (requests to `/nodes`) the controller sent
    /// during the sync: 0 for bare, one per check at most for guarded.
    pub sync_owner_reads: u64,
    /// Length of the churn window, seconds.
    pub churn_secs: f64,
    /// Creates, updates, deletes written during the window.
    pub writes: [u64; 3],
    /// Reconciles completed during the churn window.
    pub reconciles: u64,
    /// `reconciles / churn_secs`.
    pub reconciles_per_sec: f64,
    /// Reconciles of objects written during the window (after a short
    /// drain), over the creates + updates: below 1 when the scheduler
    /// merged several writes of one object into one reconcile.
    pub reconciled_fraction: f64,
    /// Event-to-reconcile latency, median, ms.
    pub p50_ms: f64,
    /// Event-to-reconcile latency, 99th percentile, ms.
    pub p99_ms: f64,
    /// Event-to-reconcile latency, maximum, ms.
    pub max_ms: f64,
    /// Process CPU time during the churn window, seconds.
    pub churn_cpu_secs: f64,
    /// Process CPU time during the sync, seconds.
    pub sync_cpu_secs: f64,
    /// Peak RSS of the process during the phase, MiB.
    pub peak_rss_mib: f64,
    /// Whether the controller stopped (graceful shutdown) within 10 s.
    pub stopped: bool,
    /// How long it took to stop, seconds.
    pub stop_secs: f64,
    /// The latencies, µs (pooled per variant for the summary).
    #[serde(skip)]
    pub latencies_us: Vec<u64>,
}

/// One variant's figures at one size, over its rounds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    /// Mean reconciles/s during churn.
    pub reconciles_per_sec: f64,
    /// Median saturated reconciles/s of the syncs (every round's).
    pub sync_reconciles_per_sec: f64,
    /// Median latency over every round's reconciles, ms.
    pub p50_ms: f64,
    /// 99th percentile latency over every round's reconciles, ms.
    pub p99_ms: f64,
    /// Mean CPU seconds per churn window.
    pub churn_cpu_secs: f64,
    /// Median CPU seconds per sync.
    pub sync_cpu_secs: f64,
    /// Owner reads per object reconciled during the sync (mean).
    pub sync_owner_reads_per_object: f64,
    /// Largest peak RSS of its phases, MiB.
    pub peak_rss_mib: f64,
    /// Mean fraction of writes reconciled.
    pub reconciled_fraction: f64,
}

/// Guarded over bare.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Ratios {
    /// Reconciles/s under churn (target >= 0.97).
    pub throughput: f64,
    /// p50 latency.
    pub p50: f64,
    /// p99 latency (target <= 1.10).
    pub p99: f64,
    /// CPU time during churn.
    pub cpu: f64,
    /// Peak RSS.
    pub peak_rss: f64,
    /// Saturated reconciles/s of the sync (target >= 0.95): the median,
    /// over rounds, of each round's guarded/bare (phases run back to back,
    /// so a pair shares the machine's state of the moment).
    pub sync_throughput: f64,
    /// The lowest and highest round's sync ratio.
    pub sync_throughput_range: (f64, f64),
    /// CPU time of the sync (median over rounds of each round's ratio).
    pub sync_cpu: f64,
}

/// The figures at one object count.
#[derive(Debug, Clone, Serialize)]
pub struct SizeResult {
    /// Objects preloaded.
    pub objects: usize,
    /// Bare controller.
    pub bare: Summary,
    /// Guarded controller.
    pub guarded: Summary,
    /// Guarded controller, GETs shared by overlapping checks.
    pub guarded_shared: Summary,
    /// Guarded controller, one GET per check.
    pub guarded_get: Summary,
    /// Bare controller whose reconcile awaits once (sync-only rounds).
    pub bare_await: Summary,
    /// Saturated (sync) reconciles/s, guarded with shared GETs over bare
    /// (median of the rounds' ratios).
    pub sync_throughput_shared: f64,
    /// Saturated (sync) reconciles/s, guarded with a GET per check over
    /// bare: the baseline of the other read modes (median of the rounds' ratios).
    pub sync_throughput_get: f64,
    /// Saturated (sync) reconciles/s, bare awaiting once over bare: what
    /// suspending every reconcile once costs by itself (median of the
    /// sync-only rounds' ratios).
    pub sync_throughput_await: f64,
    /// Saturated (sync) reconciles/s, guarded over bare awaiting once: the
    /// guard's cost beyond that suspension (median of the sync-only
    /// rounds' ratios).
    pub sync_throughput_over_await: f64,
    /// Guarded over bare.
    pub ratios: Ratios,
    /// Every phase, in the order run.
    pub phases: Vec<Phase>,
}

/// Part 1's results.
#[derive(Debug, Clone, Serialize)]
pub struct ChurnResults {
    /// Generator rate, writes/s.
    pub rate: f64,
    /// Churn window per phase, seconds.
    pub churn_secs: f64,
    /// Rounds per size.
    pub rounds: usize,
    /// Further sync-only rounds per size.
    pub sync_rounds: usize,
    /// The guards the guarded controller ran.
    pub guards: Vec<String>,
    /// By object count.
    pub sizes: Vec<SizeResult>,
}

/// What the reconcile body reports to the benchmark.
#[derive(Debug, Default)]
pub struct Probe {
    reconciles: AtomicU64,
    /// Whether the reconcile awaits once before its work ([`Variant::BareAwait`]).
    awaits: bool,
    /// The reconcile count that completes the sync.
    sync_target: AtomicU64,
    /// `now_micros` at the first reconcile and at the one completing the sync (0: not yet).
    first_at: AtomicU64,
    synced_at: AtomicU64,
    churn_start: AtomicU64,
    owner_reads: Arc<AtomicU64>,
    latencies: Mutex<Vec<u64>>,
    /// Notified at every reconcile (a permit kept when nobody waits).
    done: tokio::sync::Notify,
}

impl Probe {
    fn new(awaits: bool) -> Arc<Self> {
        Arc::new(Probe {
            awaits,
            churn_start: AtomicU64::new(u64::MAX),
            ..Probe::default()
        })
    }

    /// A probe that only counts (no latencies, no sync target).
    #[must_use]
    pub fn counting() -> Arc<Self> {
        Probe::new(false)
    }

    /// Reconciles so far.
    #[must_use]
    pub fn reconciles(&self) -> u64 {
        self.reconciles.load(Ordering::Relaxed)
    }

    /// Requests for Nodes so far.
    #[must_use]
    pub fn owner_reads(&self) -> u64 {
        self.owner_reads.load(Ordering::Relaxed)
    }

    /// Until the next reconcile (or at once, if one came since the last
    /// call).
    pub async fn reconciled(&self) {
        self.done.notified().await;
    }
}

/// The reconcile body both controllers run: read the stamp, hash the
/// data (the "work"), record the event-to-reconcile latency.
pub async fn reconcile(cm: Arc<ConfigMap>, probe: Arc<Probe>) -> Result<Action, Infallible> {
    if probe.awaits {
        tokio::task::yield_now().await;
    }
    let now = now_micros();
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut stamp = None;
    for (k, v) in cm.data.iter().flatten() {
        if k == "stamp" {
            stamp = v.parse::<u64>().ok();
        }
        for b in k.bytes().chain(v.bytes()) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    std::hint::black_box(h);
    let done = probe.reconciles.fetch_add(1, Ordering::Relaxed) + 1;
    probe.done.notify_one();
    if done == 1 {
        probe.first_at.store(now, Ordering::Relaxed);
    }
    if done == probe.sync_target.load(Ordering::Relaxed) {
        probe.synced_at.store(now_micros(), Ordering::Relaxed);
    }
    if let Some(s) = stamp
        && s >= probe.churn_start.load(Ordering::Relaxed)
    {
        probe
            .latencies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(now.saturating_sub(s));
    }
    Ok(Action::await_change())
}

fn error_policy(_: Arc<ConfigMap>, _: &Infallible, _: Arc<Probe>) -> Action {
    Action::requeue(Duration::from_secs(1))
}

/// The churn generator: writes straight to the store at a set rate.
#[derive(Debug)]
pub struct Churner {
    store: Arc<Store>,
    cms: Arc<ResourceInfo>,
    owners: Vec<Owner>,
    live: Vec<String>,
    next: u64,
    rng: Rng,
}

impl Churner {
    /// A generator over `store`, owning objects to `owners`, with `live` objects already there.
    #[must_use]
    pub fn new(store: Arc<Store>, owners: Vec<Owner>, live: Vec<String>, seed: u64) -> Self {
        Churner {
            store,
            cms: objects::core("configmaps"),
            owners,
            next: live.len() as u64,
            live,
            rng: Rng::stream(seed, "churn"),
        }
    }

    /// Objects alive now.
    #[must_use]
    pub fn live(&self) -> usize {
        self.live.len()
    }

    /// One write: 20% create, 20% delete, 60% update (index 0, 2, 1).
    pub fn step(&mut self) -> usize {
        let r = self.rng.next_u64() % 10;
        if r < 2 || self.live.is_empty() {
            let i = self.next;
            self.next += 1;
            let name = objects::name(i);
            let owner = &self.owners[i as usize % self.owners.len()];
            let obj = objects::configmap(&name, i, owner, now_micros());
            if self.store.create(&self.cms, obj).is_ok() {
                self.live.push(name);
            }
            0
        } else if r < 4 {
            let at = (self.rng.next_u64() % self.live.len() as u64) as usize;
            let name = self.live.swap_remove(at);
            let _ = self
                .store
                .delete(&self.cms, NAMESPACE, &name, &DeleteSpec::default());
            2
        } else {
            let at = (self.rng.next_u64() % self.live.len() as u64) as usize;
            let stamp = now_micros();
            let _ = self
                .store
                .update(&self.cms, NAMESPACE, &self.live[at], |old| {
                    Ok(objects::touched(old, stamp))
                });
            1
        }
    }

    /// Write at `rate` per second for `length` on the calling thread; the
    /// counts of creates, updates and deletes. The writes are paced by the
    /// OS clock, not tokio's timer, each at a random point of its slot
    /// (`(i + U[0,1)) / rate`), so that write times are spread evenly
    /// against the 1 ms timer wheel the controllers' schedulers run on
    /// (writes on timer ticks would make every latency a whole number of
    /// ticks, and the percentiles flip between them).
    pub fn run_blocking(&mut self, rate: f64, length: Duration) -> [u64; 3] {
        let mut counts = [0u64; 3];
        let start = Instant::now();
        let total = (rate * length.as_secs_f64()) as u64;
        for i in 0..total {
            let u = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            let at = start + Duration::from_secs_f64((i as f64 + u) / rate);
            let now = Instant::now();
            if at > now {
                std::thread::sleep(at - now);
            }
            counts[self.step()] += 1;
        }
        let end = start + length;
        let now = Instant::now();
        if end > now {
            std::thread::sleep(end - now);
        }
        counts
    }
}

/// A client of `server` that counts the requests for Nodes (the owners).
fn counting_client(server: &ApiServer, owner_reads: Arc<AtomicU64>) -> kube::Client {
    let svc = tower::ServiceBuilder::new()
        .map_request(move |req: http::Request<kube::client::Body>| {
            if req.uri().path().contains("/nodes") {
                owner_reads.fetch_add(1, Ordering::Relaxed);
            }
            req
        })
        .service(server.service());
    kube::Client::new(svc, NAMESPACE)
}

/// Start `variant` over the ConfigMaps of `server`, reporting to `probe`,
/// until `stop`.
pub(crate) fn spawn_controller(
    server: &ApiServer,
    variant: Variant,
    probe: Arc<Probe>,
    stop: tokio::sync::oneshot::Receiver<()>,
) -> tokio::task::JoinHandle<()> {
    let client = counting_client(server, probe.owner_reads.clone());
    let api: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);
    let stop = async move {
        let _ = stop.await;
    };
    match variant {
        Variant::Bare | Variant::BareAwait => tokio::spawn(
            Controller::new(api, watcher::Config::default())
                .graceful_shutdown_on(stop)
                .run(reconcile, error_policy, probe)
                .for_each(|_| async {}),
        ),
        Variant::Unguarded => tokio::spawn(
            GuardedController::new(api, watcher::Config::default())
                .graceful_shutdown_on(stop)
                .run(reconcile, error_policy, probe)
                .for_each(|_| async {}),
        ),
        Variant::Guarded | Variant::GuardedShared | Variant::GuardedGet => tokio::spawn(
            GuardedController::new(api, watcher::Config::default())
                .guard(OwnerUid::<Node>::new().reads(match variant {
                    Variant::GuardedShared => Reads::Shared,
                    Variant::GuardedGet => Reads::Get,
                    _ => Reads::Consistent,
                }))
                .graceful_shutdown_on(stop)
                .run(reconcile, error_policy, probe)
                .for_each(|_| async {}),
        ),
    }
}

fn secs_between(a: Option<f64>, b: Option<f64>) -> f64 {
    match (a, b) {
        (Some(a), Some(b)) => (b - a).max(0.0),
        _ => 0.0,
    }
}

async fn phase(
    server: &ApiServer,
    mut churner: Churner,
    variant: Variant,
    round: usize,
    sync_only: bool,
    config: &ChurnConfig,
) -> (Phase, Churner) {
    let probe = Probe::new(variant == Variant::BareAwait);
    let objects = churner.live();
    probe.sync_target.store(objects as u64, Ordering::Relaxed);
    sys::reset_peak_rss();
    let cpu0 = sys::cpu_seconds();
    let t0 = Instant::now();
    let t0_micros = now_micros();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
    let handle = spawn_controller(server, variant, probe.clone(), stop_rx);
    // Sync: every object reconciled once.
    let mut synced = true;
    while probe.reconciles.load(Ordering::Relaxed) < objects as u64 {
        if t0.elapsed() > config.sync_timeout {
            synced = false;
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // The poll above only bounds the wait; the sync's end is stamped by
    // its last reconcile.
    let since_t0 = |at: &AtomicU64| match at.load(Ordering::Relaxed) {
        0 => t0.elapsed().as_secs_f64(),
        at => at.saturating_sub(t0_micros) as f64 / 1e6,
    };
    let sync_secs = since_t0(&probe.synced_at);
    let sync_first_secs = since_t0(&probe.first_at);
    let cpu1 = sys::cpu_seconds();
    let sync_owner_reads = probe.owner_reads.load(Ordering::Relaxed);
    // Let the last sync reconciles settle before churning.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let cpu2 = sys::cpu_seconds();
    let r0 = probe.reconciles.load(Ordering::Relaxed);
    probe.churn_start.store(now_micros(), Ordering::Relaxed);
    let t1 = Instant::now();
    let (rate, length) = (
        config.rate,
        if sync_only {
            Duration::ZERO
        } else {
            config.churn
        },
    );
    let (churner, writes) = tokio::task::spawn_blocking(move || {
        let writes = churner.run_blocking(rate, length);
        (churner, writes)
    })
    .await
    .expect("the churn generator does not panic");
    let churn_secs = t1.elapsed().as_secs_f64();
    let reconciles = probe.reconciles.load(Ordering::Relaxed) - r0;
    let cpu3 = sys::cpu_seconds();
    // Drain: until no reconcile for 100 ms (at most 2 s).
    let mut last = probe.reconciles.load(Ordering::Relaxed);
    let drain_end = Instant::now() + Duration::from_secs(2);
    while Instant::now() < drain_end {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = probe.reconciles.load(Ordering::Relaxed);
        if now == last {
            break;
        }
        last = now;
    }
    let peak = sys::peak_rss_bytes().unwrap_or(0) as f64 / (1024.0 * 1024.0);
    let _ = stop_tx.send(());
    let stopping = Instant::now();
    let stopped = tokio::time::timeout(Duration::from_secs(10), handle)
        .await
        .is_ok();
    let stop_secs = stopping.elapsed().as_secs_f64();
    // Let the server drop the watch and the allocator take back the
    // controller's cache before the next phase starts.
    tokio::time::sleep(config.settle).await;
    let mut lat = std::mem::take(&mut *probe.latencies.lock().unwrap_or_else(|e| e.into_inner()));
    lat.sort_unstable();
    let ms = |us: u64| us as f64 / 1000.0;
    let phase = Phase {
        variant,
        round,
        sync_only,
        objects,
        sync_secs,
        sync_first_secs,
        sync_reconciles_per_sec: ratio(objects as f64, sync_secs),
        synced,
        sync_owner_reads,
        churn_secs,
        writes,
        reconciles,
        reconciles_per_sec: ratio(reconciles as f64, churn_secs),
        reconciled_fraction: ratio(lat.len() as f64, (writes[0] + writes[1]) as f64),
        p50_ms: ms(quantile(&lat, 0.5)),
        p99_ms: ms(quantile(&lat, 0.99)),
        max_ms: ms(lat.last().copied().unwrap_or(0)),
        churn_cpu_secs: secs_between(cpu2, cpu3),
        sync_cpu_secs: secs_between(cpu0, cpu1),
        peak_rss_mib: peak,
        stopped,
        stop_secs,
        latencies_us: lat,
    };
    (phase, churner)
}

fn summarize(phases: &[Phase], variant: Variant) -> Summary {
    let all: Vec<&Phase> = phases.iter().filter(|p| p.variant == variant).collect();
    let ps: Vec<&Phase> = all.iter().copied().filter(|p| !p.sync_only).collect();
    if all.is_empty() {
        return Summary::default();
    }
    // Churn figures over the rounds with churn (none: 0).
    let mean =
        |f: &dyn Fn(&Phase) -> f64| ratio(ps.iter().map(|p| f(p)).sum::<f64>(), ps.len() as f64);
    let median_all = |f: &dyn Fn(&Phase) -> f64| median(all.iter().map(|p| f(p)).collect());
    let mut lat: Vec<u64> = ps.iter().flat_map(|p| p.latencies_us.clone()).collect();
    lat.sort_unstable();
    Summary {
        reconciles_per_sec: mean(&|p| p.reconciles_per_sec),
        sync_reconciles_per_sec: median_all(&|p| p.sync_reconciles_per_sec),
        p50_ms: quantile(&lat, 0.5) as f64 / 1000.0,
        p99_ms: quantile(&lat, 0.99) as f64 / 1000.0,
        churn_cpu_secs: mean(&|p| p.churn_cpu_secs),
        sync_cpu_secs: median_all(&|p| p.sync_cpu_secs),
        sync_owner_reads_per_object: median_all(&|p| {
            ratio(p.sync_owner_reads as f64, p.objects as f64)
        }),
        peak_rss_mib: ps.iter().map(|p| p.peak_rss_mib).fold(0.0, f64::max),
        reconciled_fraction: mean(&|p| p.reconciled_fraction),
    }
}

/// Each round's `f(variant) / f(bare)`, paired within the round: the
/// median, the lowest and the highest.
fn paired(phases: &[Phase], variant: Variant, f: &dyn Fn(&Phase) -> f64) -> (f64, f64, f64) {
    paired_with(phases, variant, Variant::Bare, f)
}

/// Each round's `f(variant) / f(base)`, paired within the round (rounds
/// without both are left out): the median, the lowest and the highest.
fn paired_with(
    phases: &[Phase],
    variant: Variant,
    base: Variant,
    f: &dyn Fn(&Phase) -> f64,
) -> (f64, f64, f64) {
    let ratios: Vec<f64> = phases
        .iter()
        .filter(|p| p.variant == variant)
        .filter_map(|g| {
            let b = phases
                .iter()
                .find(|b| b.variant == base && b.round == g.round && b.sync_only == g.sync_only)?;
            Some(ratio(f(g), f(b)))
        })
        .collect();
    let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ratios.iter().copied().fold(0.0, f64::max);
    (median(ratios), if lo.is_finite() { lo } else { 0.0 }, hi)
}

/// Run part 1 on its own multi-thread runtime.
pub fn run(config: &ChurnConfig, log: &(dyn Fn(&str) + Sync)) -> ChurnResults {
    let rt = super::runtime();
    let mut sizes = Vec::new();
    for &n in &config.sizes {
        let result = rt.block_on(async {
            let server = ApiServer::start(ServerConfig::default().seed(config.seed))
                .await
                .expect("an in-process server");
            let owners = objects::create_nodes(server.store(), config.nodes);
            let live = objects::preload(&server, n, &owners).await;
            let mut churner = Churner::new(
                server.store().clone(),
                owners,
                live,
                config.seed ^ n as u64,
            );
            let mut phases = Vec::new();
            let rounds = config.rounds.max(1);
            for round in 0..rounds + config.sync_rounds {
                let sync_only = round >= rounds;
                // Each round starts with the next variant, so no variant
                // always runs right after the same one.
                let mut order = vec![
                    Variant::Bare,
                    Variant::Guarded,
                    Variant::GuardedShared,
                    Variant::GuardedGet,
                ];
                if sync_only {
                    order.push(Variant::BareAwait);
                }
                let turn = round % order.len();
                order.rotate_left(turn);
                for variant in order {
                    let (p, back) =
                        phase(&server, churner, variant, round, sync_only, config).await;
                    churner = back;
                    log(&format!(
                        "  churn n={n} round {round}{} {variant:?}: sync {:.4}s (first reconcile {:.4}s, {:.0}/s, {} owner reads, cpu {:.2}s), {:.0} reconciles/s, p50 {:.2} ms, p99 {:.2} ms, cpu {:.2}s, peak {:.0} MiB, stopped in {:.2}s",
                        if sync_only { " (sync only)" } else { "" },
                        p.sync_secs,
                        p.sync_first_secs,
                        p.sync_reconciles_per_sec,
                        p.sync_owner_reads,
                        p.sync_cpu_secs,
                        p.reconciles_per_sec,
                        p.p50_ms,
                        p.p99_ms,
                        p.churn_cpu_secs,
                        p.peak_rss_mib,
                        p.stop_secs
                    ));
                    phases.push(p);
                }
            }
            server.shutdown().await;
            phases
        });
        let bare = summarize(&result, Variant::Bare);
        let guarded = summarize(&result, Variant::Guarded);
        let guarded_shared = summarize(&result, Variant::GuardedShared);
        let guarded_get = summarize(&result, Variant::GuardedGet);
        let bare_await = summarize(&result, Variant::BareAwait);
        let sync_rate = |p: &Phase| p.sync_reconciles_per_sec;
        let (sync_throughput, sync_lo, sync_hi) = paired(&result, Variant::Guarded, &sync_rate);
        let ratios = Ratios {
            throughput: ratio(guarded.reconciles_per_sec, bare.reconciles_per_sec),
            p50: ratio(guarded.p50_ms, bare.p50_ms),
            p99: ratio(guarded.p99_ms, bare.p99_ms),
            cpu: ratio(guarded.churn_cpu_secs, bare.churn_cpu_secs),
            peak_rss: ratio(guarded.peak_rss_mib, bare.peak_rss_mib),
            sync_throughput,
            sync_throughput_range: (sync_lo, sync_hi),
            sync_cpu: paired(&result, Variant::Guarded, &|p| p.sync_cpu_secs).0,
        };
        sizes.push(SizeResult {
            objects: n,
            sync_throughput_shared: paired(&result, Variant::GuardedShared, &sync_rate).0,
            sync_throughput_get: paired(&result, Variant::GuardedGet, &sync_rate).0,
            sync_throughput_await: paired(&result, Variant::BareAwait, &sync_rate).0,
            sync_throughput_over_await: paired_with(
                &result,
                Variant::Guarded,
                Variant::BareAwait,
                &sync_rate,
            )
            .0,
            bare,
            guarded,
            guarded_shared,
            guarded_get,
            bare_await,
            ratios,
            phases: result,
        });
    }
    ChurnResults {
        rate: config.rate,
        churn_secs: config.churn.as_secs_f64(),
        rounds: config.rounds.max(1),
        sync_rounds: config.sync_rounds,
        guards: vec!["owner-uid (OwnerUid<Node>)".into()],
        sizes,
    }
}
