//! Part 1, controller churn: the same reconcile body run by a bare
//! `kube_runtime::Controller` and by Ward's
//! [`GuardedController`](ward_runtime::GuardedController), against an
//! in-process ward-apiserver holding N objects while a churn generator
//! creates, updates and deletes at a set rate.
//!
//! The setup is the CNS shape: ConfigMaps standing in for node-scoped
//! configuration records, each with a controller ownerReference to a Node.
//! The guarded controller runs the guard that applies to such objects,
//! [`OwnerUid`](ward_guards::owner_uid::OwnerUid)`<Node>` (the owner read
//! as it is now and compared by UID;
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

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ward_apiserver::{ApiServer, ServerConfig};

use super::objects::{self, now_micros};
use super::{quantile, ratio, sys};

mod config;
mod controllers;
mod generator;
mod results;

pub use config::{ChurnConfig, Variant};
pub(crate) use controllers::spawn_controller;
pub use controllers::{Probe, reconcile};
use generator::Churner;
pub use results::{ChurnResults, Phase, Ratios, SizeResult, Summary};
use results::{paired, paired_with, summarize};

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
