//! Parts 2 and 3, ward-apiserver: sustained writes/s with 1, 10 and 100
//! raw watch streams, delivered watch events/s in aggregate, bytes built
//! per event against the watcher count, memory per stored object against
//! its JSON size, and the same figures at 1k, 10k and 100k objects.
//!
//! The watchers are raw streams from `ward_apiserver::internals::watch` —
//! the function behind every HTTP or in-process watch, with the client's
//! fault view attached as the handler attaches it — drained as bytes,
//! never parsed. "Sustained" means no watcher is left behind: the writer
//! pauses while the slowest watcher is more than a window of events behind,
//! so every watcher receives every event (a watcher cut off with 410 is
//! counted). Writes go either straight to the store ([`Store::update`]) or
//! through the in-process tower Service as merge patches (`PATCH`, what a
//! client sends), two writers at a time.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::Serialize;
use tower::{Service, ServiceExt};

type Full = http_body_util::Full<Bytes>;
use ward_apiserver::AuthorizationMode;
use ward_apiserver::internals::ObjectFilter;
use ward_apiserver::internals::{WatchSpec, watch};
use ward_apiserver::store::Store;
use ward_apiserver::{ApiServer, ServerConfig};
use ward_base::Rng;

use super::objects::{self, NAMESPACE};
use super::{ratio, sys};

/// Sizes of the API server benchmarks.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// Watcher counts of the fan-out runs.
    pub watchers: Vec<usize>,
    /// Unmeasured time at the start of each run.
    pub warmup: Duration,
    /// Measured time of each run.
    pub measure: Duration,
    /// Objects in the store during the fan-out runs.
    pub objects: usize,
    /// Object counts of the scaling runs (10 watchers, store writes).
    pub scaling_sizes: Vec<usize>,
    /// Rounds of scaling runs (each round runs every size once; each size
    /// reports its median round).
    pub scaling_rounds: usize,
    /// Object counts of the memory measurement.
    pub memory_sizes: Vec<usize>,
    /// How far (events) the slowest watcher may lag before the writers pause.
    pub window: u64,
    /// Lines per watcher whose buffers are compared (bytes built per event).
    pub sample: usize,
    /// Seed of the writers' choice of objects.
    pub seed: u64,
}

/// How writes reach the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WritePath {
    /// `Store::update` (one writer).
    Store,
    /// Merge-patch requests through the in-process tower Service (two writers).
    Service,
    /// The same, on a server authorizing with RBAC, as the admin
    /// (`system:masters`, allowed by the bootstrap `cluster-admin` binding).
    RbacAdmin,
    /// The same as a ServiceAccount bound to `edit` in the namespace, its
    /// token (a signed JWT from TokenRequest) on every request.
    RbacAccount,
}

impl WritePath {
    /// How the server authorizes this path's writes.
    fn authorization(self) -> AuthorizationMode {
        match self {
            WritePath::Store | WritePath::Service => AuthorizationMode::AlwaysAllow,
            WritePath::RbacAdmin | WritePath::RbacAccount => AuthorizationMode::Rbac,
        }
    }
}

/// One write run.
#[derive(Debug, Clone, Serialize)]
pub struct WriteRun {
    /// How writes reached the server.
    pub path: WritePath,
    /// Raw watch streams.
    pub watchers: usize,
    /// Objects in the store.
    pub objects: usize,
    /// Measured seconds.
    pub secs: f64,
    /// Writes completed in the measured window.
    pub writes: u64,
    /// Writes per second.
    pub writes_per_sec: f64,
    /// Watch lines delivered (all watchers) in the measured window.
    pub delivered: u64,
    /// Watch lines per second, all watchers together.
    pub delivered_per_sec: f64,
    /// Watch bytes per second, all watchers together, MiB/s.
    pub delivered_mib_per_sec: f64,
    /// Watchers cut off with 410 (none when sustained).
    pub cut_off: usize,
    /// Whether every watcher received every event by the end.
    pub all_delivered: bool,
    /// Mean stored JSON per event (serialized once, at the write), bytes.
    pub json_bytes_per_event: f64,
    /// Mean watch line length, bytes.
    pub line_bytes: f64,
    /// Distinct line buffers per event across all watchers (1 = built once, shared).
    pub line_buffers_per_event: f64,
    /// JSON + line bytes built per event: must not grow with the watcher count.
    pub bytes_built_per_event: f64,
    /// Process CPU seconds in the measured window.
    pub cpu_secs: f64,
}

/// Memory per stored object at one object count.
#[derive(Debug, Clone, Serialize)]
pub struct MemoryRun {
    /// Objects created.
    pub objects: usize,
    /// Mean stored JSON size, bytes.
    pub json_bytes: f64,
    /// RSS growth per object, bytes.
    pub rss_per_object: f64,
    /// Heap (glibc `mallinfo2`) growth per object, bytes.
    pub heap_per_object: f64,
    /// `rss_per_object / json_bytes`.
    pub rss_ratio: f64,
    /// `heap_per_object / json_bytes`.
    pub heap_ratio: f64,
    /// Heap growth per object of the store alone (no garbage collector or
    /// other actor following it), bytes: the rest of `heap_per_object` is
    /// the collector's dependency graph.
    pub store_heap_per_object: f64,
}

/// Parts 2 and 3 (server side).
#[derive(Debug, Clone, Default, Serialize)]
pub struct ApiResults {
    /// Fan-out runs: each path × watcher count.
    pub fanout: Vec<WriteRun>,
    /// Store writes with 10 watchers at each object count: the median round.
    pub scaling: Vec<WriteRun>,
    /// Every scaling run, in the order run (rounds interleave the sizes).
    pub scaling_runs: Vec<WriteRun>,
    /// Memory per object at each object count.
    pub memory: Vec<MemoryRun>,
    /// Service writes (1 watcher) with AlwaysAllow, RBAC as the admin and
    /// RBAC as a ServiceAccount: the median round of each.
    pub authz: Vec<WriteRun>,
    /// Every authorization run, in the order run (rounds interleave the paths).
    pub authz_runs: Vec<WriteRun>,
}

#[repr(align(64))]
#[derive(Debug, Default)]
struct Drain {
    lines: AtomicU64,
    bytes: AtomicU64,
    cut: AtomicBool,
}

/// Start `n` raw watch streams from `from`, each drained by its own task.
fn start_watchers(
    server: &ApiServer,
    n: usize,
    from: u64,
    sample: usize,
    stop: &tokio::sync::watch::Receiver<bool>,
) -> (Vec<Arc<Drain>>, Vec<tokio::task::JoinHandle<Vec<Bytes>>>) {
    let info = objects::core("configmaps");
    let mut drains = Vec::new();
    let mut tasks = Vec::new();
    for i in 0..n {
        let spec = WatchSpec {
            info: info.clone(),
            filter: ObjectFilter::default(),
            from: Some(from),
            bookmarks: false,
            send_initial_events: false,
            timeout: None,
            bookmark_interval: Duration::from_secs(15),
            render: None,
            // What the handler attaches to every watch: the client's fault view.
            view: Some((server.faults().clone(), 1_000_000 + i as u64)),
        };
        let mut rx = watch(server.store(), spec, stop.clone());
        let d = Arc::new(Drain::default());
        drains.push(d.clone());
        tasks.push(tokio::spawn(async move {
            let mut seen = Vec::with_capacity(sample);
            let (mut lines, mut bytes) = (0u64, 0u64);
            while let Some(line) = rx.recv().await {
                lines += 1;
                bytes += line.len() as u64;
                if seen.len() < sample {
                    // Kept alive, so no address is reused within the sample.
                    seen.push(line.clone());
                }
                if line.starts_with(b"{\"type\":\"ERROR\"") {
                    d.cut.store(true, Ordering::Relaxed);
                }
                d.lines.store(lines, Ordering::Relaxed);
                d.bytes.store(bytes, Ordering::Relaxed);
            }
            seen
        }));
    }
    (drains, tasks)
}

fn slowest(drains: &[Arc<Drain>]) -> u64 {
    drains
        .iter()
        .map(|d| d.lines.load(Ordering::Relaxed))
        .min()
        .unwrap_or(u64::MAX)
}

struct Writers {
    written: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Wait while the slowest watcher is more than `window` events behind.
async fn throttle(written: &AtomicU64, drains: &[Arc<Drain>], window: u64, stop: &AtomicBool) {
    while written.load(Ordering::Relaxed) > slowest(drains).saturating_add(window)
        && !stop.load(Ordering::Relaxed)
    {
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
}

fn start_writers(
    server: &ApiServer,
    path: WritePath,
    token: Option<http::HeaderValue>,
    names: Arc<Vec<String>>,
    drains: Vec<Arc<Drain>>,
    config: &ApiConfig,
) -> Writers {
    let written = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let drains = Arc::new(drains);
    let window = config.window;
    let mut tasks = Vec::new();
    match path {
        WritePath::Store => {
            let store: Arc<Store> = server.store().clone();
            let cms = objects::core("configmaps");
            let (written, stop, names, drains) =
                (written.clone(), stop.clone(), names.clone(), drains.clone());
            let mut rng = Rng::stream(config.seed, "store-writer");
            tasks.push(tokio::spawn(async move {
                let mut stamp = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    throttle(&written, &drains, window, &stop).await;
                    for _ in 0..32 {
                        stamp += 1;
                        let name = &names[(rng.next_u64() % names.len() as u64) as usize];
                        if store
                            .update(&cms, NAMESPACE, name, |old| {
                                Ok(objects::touched(old, stamp))
                            })
                            .is_ok()
                        {
                            written.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    tokio::task::yield_now().await;
                }
            }));
        }
        WritePath::Service | WritePath::RbacAdmin | WritePath::RbacAccount => {
            for w in 0..2u64 {
                let mut svc = server.service();
                let token = token.clone();
                let (written, stop, names, drains) =
                    (written.clone(), stop.clone(), names.clone(), drains.clone());
                let mut rng = Rng::stream(config.seed ^ w, "service-writer");
                tasks.push(tokio::spawn(async move {
                    let mut stamp = w << 40;
                    while !stop.load(Ordering::Relaxed) {
                        throttle(&written, &drains, window, &stop).await;
                        for _ in 0..8 {
                            stamp += 1;
                            let name = &names[(rng.next_u64() % names.len() as u64) as usize];
                            let body = format!("{{\"data\":{{\"stamp\":\"{stamp}\"}}}}");
                            let mut req = http::Request::builder()
                                .method("PATCH")
                                .uri(format!("/api/v1/namespaces/{NAMESPACE}/configmaps/{name}"))
                                .header("content-type", "application/merge-patch+json")
                                .body(Full::new(Bytes::from(body)))
                                .expect("a valid request");
                            if let Some(t) = &token {
                                req.headers_mut()
                                    .insert(http::header::AUTHORIZATION, t.clone());
                            }
                            let Ok(ready) =
                                ServiceExt::<http::Request<Full>>::ready(&mut svc).await;
                            let Ok(resp) = ready.call(req).await;
                            if resp.status() == http::StatusCode::OK {
                                written.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        tokio::task::yield_now().await;
                    }
                }));
            }
        }
    }
    Writers {
        written,
        stop,
        tasks,
    }
}

/// One write run: a fresh server with `objects` objects, `watchers` raw
/// watch streams, writers along `path`.
async fn write_run(
    path: WritePath,
    watchers: usize,
    objects_n: usize,
    config: &ApiConfig,
) -> WriteRun {
    sys::trim_heap();
    let server = ApiServer::start(
        ServerConfig::default()
            .seed(config.seed)
            .authorization_mode(path.authorization()),
    )
    .await
    .expect("an in-process server");
    let owners = objects::create_nodes(server.store(), 16);
    let names = Arc::new(objects::preload(&server, objects_n.max(1), &owners).await);
    let token = match path {
        WritePath::RbacAccount => Some(account_token(&server).await),
        _ => None,
    };
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let from = server.store().current_rv();
    let (drains, tasks) = start_watchers(&server, watchers, from, config.sample, &stop_rx);
    let writers = start_writers(&server, path, token, names, drains.clone(), config);
    let total = |drains: &[Arc<Drain>]| -> (u64, u64) {
        drains.iter().fold((0, 0), |(l, b), d| {
            (
                l + d.lines.load(Ordering::Relaxed),
                b + d.bytes.load(Ordering::Relaxed),
            )
        })
    };
    tokio::time::sleep(config.warmup).await;
    let (w0, (l0, b0), c0, t0) = (
        writers.written.load(Ordering::Relaxed),
        total(&drains),
        sys::cpu_seconds(),
        Instant::now(),
    );
    tokio::time::sleep(config.measure).await;
    let (w1, (l1, b1), c1, secs) = (
        writers.written.load(Ordering::Relaxed),
        total(&drains),
        sys::cpu_seconds(),
        t0.elapsed().as_secs_f64(),
    );
    writers.stop.store(true, Ordering::Relaxed);
    for t in writers.tasks {
        let _ = t.await;
    }
    // Every watcher should catch up with every write.
    let written = writers.written.load(Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(10);
    while slowest(&drains) < written
        && Instant::now() < deadline
        && !drains.iter().any(|d| d.cut.load(Ordering::Relaxed))
    {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let all_delivered = slowest(&drains) >= written;
    let cut_off = drains
        .iter()
        .filter(|d| d.cut.load(Ordering::Relaxed))
        .count();
    let _ = stop_tx.send(true);
    let mut samples = Vec::new();
    for t in tasks {
        samples.push(t.await.unwrap_or_default());
    }
    let (line_bytes, buffers) = shared_buffers(&samples);
    // The stored JSON of an event is its line minus the `{"type":"MODIFIED","object":` frame.
    let frame = br#"{"type":"MODIFIED","object":}"#.len() as f64 + 1.0;
    let json = (line_bytes - frame).max(0.0);
    server.shutdown().await;
    let delivered = l1 - l0;
    WriteRun {
        path,
        watchers,
        objects: objects_n,
        secs,
        writes: w1 - w0,
        writes_per_sec: ratio((w1 - w0) as f64, secs),
        delivered,
        delivered_per_sec: ratio(delivered as f64, secs),
        delivered_mib_per_sec: ratio((b1 - b0) as f64, secs) / (1024.0 * 1024.0),
        cut_off,
        all_delivered,
        json_bytes_per_event: json,
        line_bytes,
        line_buffers_per_event: buffers,
        bytes_built_per_event: json + line_bytes * buffers,
        cpu_secs: match (c0, c1) {
            (Some(a), Some(b)) => b - a,
            _ => 0.0,
        },
    }
}

/// A ServiceAccount `writer` in the benchmark's namespace, bound to the
/// ClusterRole `edit` there: the `Authorization` header of its token.
async fn account_token(server: &ApiServer) -> http::HeaderValue {
    let admin = server.client();
    let post = |path: String, body: serde_json::Value| {
        let admin = admin.clone();
        async move {
            let req = http::Request::post(path)
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&body).expect("JSON"))
                .expect("a valid request");
            admin
                .request::<serde_json::Value>(req)
                .await
                .expect("the admin may set up the account")
        }
    };
    let ns = format!("/api/v1/namespaces/{NAMESPACE}");
    post(
        format!("{ns}/serviceaccounts"),
        serde_json::json!({"metadata": {"name": "writer"}}),
    )
    .await;
    post(
        format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}/rolebindings"),
        serde_json::json!({"metadata": {"name": "writer-edits"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": [{"kind": "ServiceAccount", "name": "writer", "namespace": NAMESPACE}]}),
    )
    .await;
    let answer = post(
        format!("{ns}/serviceaccounts/writer/token"),
        serde_json::json!({"spec": {}}),
    )
    .await;
    let token = answer["status"]["token"].as_str().unwrap_or_default();
    http::HeaderValue::from_str(&format!("Bearer {token}")).expect("a JWT is a valid header")
}

/// From each watcher's first lines: the mean line length and the mean
/// number of distinct buffers per event across watchers (every watcher
/// sees the same events in the same order).
fn shared_buffers(samples: &[Vec<Bytes>]) -> (f64, f64) {
    let n = samples.iter().map(Vec::len).min().unwrap_or(0);
    if n == 0 {
        return (0.0, 0.0);
    }
    let (mut len_sum, mut distinct_sum) = (0f64, 0f64);
    for k in 0..n {
        let mut ptrs: Vec<usize> = samples.iter().map(|s| s[k].as_ptr() as usize).collect();
        ptrs.sort_unstable();
        ptrs.dedup();
        distinct_sum += ptrs.len() as f64;
        len_sum += samples[0][k].len() as f64;
    }
    (len_sum / n as f64, distinct_sum / n as f64)
}

/// Memory per stored object at each of `config.memory_sizes` (run first,
/// on a fresh heap).
pub fn memory(config: &ApiConfig, log: &(dyn Fn(&str) + Sync)) -> Vec<MemoryRun> {
    let rt = super::runtime();
    let mut out = Vec::new();
    for &n in &config.memory_sizes {
        let run = rt.block_on(async {
            let server = ApiServer::start(ServerConfig::default().seed(config.seed))
                .await
                .expect("an in-process server");
            let owners = objects::create_nodes(server.store(), 16);
            server.gc_caught_up().await;
            let (h0, r0) = (sys::heap_bytes(), sys::rss_bytes());
            let names = objects::preload(&server, n, &owners).await;
            let (h1, r1) = (sys::heap_bytes(), sys::rss_bytes());
            let cms = objects::core("configmaps");
            let json: usize = names
                .iter()
                .filter_map(|name| server.store().get(&cms.storage_key(), NAMESPACE, name))
                .map(|o| o.raw.len())
                .sum();
            server.shutdown().await;
            let per = |a: Option<u64>, b: Option<u64>| match (a, b) {
                (Some(a), Some(b)) => (b as f64 - a as f64) / n as f64,
                _ => 0.0,
            };
            // The store alone, for the split between it and the collector.
            let store = ward_apiserver::store::Store::new(
                ward_apiserver::store::StoreConfig::default(),
                ward_apiserver::Clock::new(),
                std::sync::Arc::new(ward_apiserver::store::KindRules),
            );
            let bare_owners = objects::create_nodes(&store, 16);
            let h2 = sys::heap_bytes();
            let _names = objects::preload_store(&store, n, &bare_owners);
            let h3 = sys::heap_bytes();
            drop(store);
            let json = json as f64 / n as f64;
            let (rss, heap) = (per(r0, r1), per(h0, h1));
            MemoryRun {
                objects: n,
                json_bytes: json,
                rss_per_object: rss,
                heap_per_object: heap,
                rss_ratio: ratio(rss, json),
                heap_ratio: ratio(heap, json),
                store_heap_per_object: per(h2, h3),
            }
        });
        log(&format!(
            "  memory n={n}: JSON {:.0} B/object, RSS +{:.0} B/object ({:.2}x), heap +{:.0} B/object ({:.2}x; store alone {:.0})",
            run.json_bytes,
            run.rss_per_object,
            run.rss_ratio,
            run.heap_per_object,
            run.heap_ratio,
            run.store_heap_per_object
        ));
        out.push(run);
    }
    out
}

fn log_run(log: &(dyn Fn(&str) + Sync), r: &WriteRun) {
    log(&format!(
        "  {:?} writes, {} watchers, {} objects: {:.0} writes/s, {:.0} events/s delivered ({:.0} MiB/s), {:.2} buffers/event, {:.0} B built/event, cut off {}",
        r.path,
        r.watchers,
        r.objects,
        r.writes_per_sec,
        r.delivered_per_sec,
        r.delivered_mib_per_sec,
        r.line_buffers_per_event,
        r.bytes_built_per_event,
        r.cut_off
    ));
}

/// Run the fan-out and scaling runs on a multi-thread runtime (memory is
/// [`memory`], run separately and first).
pub fn run(config: &ApiConfig, log: &(dyn Fn(&str) + Sync)) -> ApiResults {
    let rt = super::runtime();
    let mut results = ApiResults::default();
    for path in [WritePath::Store, WritePath::Service] {
        for &w in &config.watchers {
            let r = rt.block_on(write_run(path, w, config.objects, config));
            log_run(log, &r);
            results.fanout.push(r);
        }
    }
    for _ in 0..config.scaling_rounds.max(1) {
        for &n in &config.scaling_sizes {
            let r = rt.block_on(write_run(WritePath::Store, 10, n, config));
            log_run(log, &r);
            results.scaling_runs.push(r);
        }
    }
    let authz = [
        WritePath::Service,
        WritePath::RbacAdmin,
        WritePath::RbacAccount,
    ];
    for _ in 0..config.scaling_rounds.max(1) {
        for path in authz {
            let r = rt.block_on(write_run(path, 1, config.objects, config));
            log_run(log, &r);
            results.authz_runs.push(r);
        }
    }
    for path in authz {
        results
            .authz
            .extend(median(&results.authz_runs, |r| r.path == path));
    }
    for &n in &config.scaling_sizes {
        results
            .scaling
            .extend(median(&results.scaling_runs, |r| r.objects == n));
    }
    results
}

/// The run of median writes/s among `runs` that `pick` picks.
fn median(runs: &[WriteRun], pick: impl Fn(&WriteRun) -> bool) -> Option<WriteRun> {
    let mut runs: Vec<&WriteRun> = runs.iter().filter(|r| pick(r)).collect();
    runs.sort_by(|a, b| a.writes_per_sec.total_cmp(&b.writes_per_sec));
    runs.get(runs.len() / 2).map(|r| (*r).clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_buffers_count_distinct_addresses_per_event() {
        let shared = Bytes::from(vec![b'x'; 10]);
        let a = vec![shared.clone(), Bytes::from(vec![b'y'; 20])];
        let b = vec![shared, Bytes::from(vec![b'y'; 20])];
        let (len, buffers) = shared_buffers(&[a, b]);
        assert_eq!(len, 15.0);
        assert_eq!(buffers, 1.5);
    }
}
