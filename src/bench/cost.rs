//! What one reconcile costs (#49): a closed loop for profilers.
//!
//! One in-process ward-apiserver holding `objects` ConfigMaps owned by
//! `nodes` Nodes (the churn benchmark's shape), one controller of the
//! chosen [`Variant`] (or none), synced; then `writes` updates, each to the
//! next object in turn, each awaited until the controller has reconciled
//! it. A write at a time is the churn benchmark's set-rate regime (every
//! event reconciled on its own, nothing coalesced) without its clock, so a
//! profiler that slows the process fiftyfold (callgrind) measures the same
//! work. Instructions per reconcile are the difference between a run with
//! `writes` and one with none, divided by `writes`: the setup and the sync
//! cancel out. `benches/reconcile_cost.rs` runs it from the environment;
//! docs/benchmarks.md ("Where a guarded reconcile's instructions go") has
//! the method and the figures.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::core::PartialObjectMeta;
use kube::runtime::watcher::{self, watcher};

use super::churn::{self, Probe, Variant};
use super::objects::{self, NAMESPACE, now_micros};
use super::sys;
use ward_apiserver::{ApiServer, ServerConfig};

/// What to run.
#[derive(Debug, Clone)]
pub struct CostConfig {
    /// The controller; `None` runs the writes with no controller (what the
    /// writes themselves cost).
    pub variant: Option<Variant>,
    /// Objects in the store.
    pub objects: usize,
    /// Nodes owning them.
    pub nodes: usize,
    /// Updates, each awaited until reconciled.
    pub writes: usize,
    /// Longest the sync or one reconcile may take.
    pub timeout: Duration,
    /// Also keep an idle metadata watch of the Nodes (nothing in it
    /// changes): what a consistent-read cache's watch costs by itself
    /// while other kinds are written.
    pub node_watch: bool,
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct CostResult {
    /// Reconciles during the loop.
    pub reconciles: u64,
    /// CPU seconds of the loop (the process's; 10 ms resolution).
    pub cpu: f64,
    /// Wall seconds of the loop.
    pub wall: f64,
    /// Requests for Nodes during the loop (the guard's owner reads).
    pub owner_reads: u64,
}

/// Run `config` on the current tokio runtime; why it could not, as text.
pub async fn run(config: &CostConfig) -> Result<CostResult, String> {
    let server = ApiServer::start(ServerConfig::default())
        .await
        .map_err(|e| format!("the server did not start: {e}"))?;
    let store = server.store().clone();
    let owners = objects::create_nodes(&store, config.nodes);
    let live = objects::preload_store(&store, config.objects, &owners);
    let probe = Probe::counting();
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let task = config
        .variant
        .map(|v| churn::spawn_controller(&server, v, probe.clone(), stopped));
    let watch = config.node_watch.then(|| {
        let nodes: kube::Api<PartialObjectMeta<Node>> = kube::Api::all(server.client());
        tokio::spawn(watcher(nodes, watcher::Config::default()).for_each(|_| async {}))
    });
    if task.is_some() {
        wait(&probe, config.objects as u64, config.timeout, "the sync").await?;
    }
    let cms = objects::core("configmaps");
    let before = probe.reconciles();
    let reads = probe.owner_reads();
    let (cpu0, t0) = (sys::cpu_seconds().unwrap_or(0.0), Instant::now());
    for i in 0..config.writes {
        let name = &live[i % live.len()];
        let stamp = now_micros();
        store
            .update(&cms, NAMESPACE, name, |old| {
                Ok(objects::touched(old, stamp))
            })
            .map_err(|e| format!("updating {name}: {e}"))?;
        if task.is_some() {
            wait(&probe, before + i as u64 + 1, config.timeout, "a reconcile").await?;
        }
    }
    let result = CostResult {
        reconciles: probe.reconciles() - before,
        cpu: sys::cpu_seconds().unwrap_or(0.0) - cpu0,
        wall: t0.elapsed().as_secs_f64(),
        owner_reads: probe.owner_reads() - reads,
    };
    let _ = stop.send(());
    if let Some(watch) = watch {
        watch.abort();
    }
    if let Some(task) = task {
        let _ = task.await;
    }
    server.shutdown().await;
    Ok(result)
}

/// Wait until `probe` has counted `n` reconciles.
async fn wait(probe: &Probe, n: u64, timeout: Duration, what: &str) -> Result<(), String> {
    tokio::time::timeout(timeout, async {
        while probe.reconciles() < n {
            probe.reconciled().await;
        }
    })
    .await
    .map_err(|_| format!("{what} timed out"))
}
