//! What a churn run measured: each phase, the per-variant summaries, the
//! guarded/bare ratios, and how they are paired.

use serde::Serialize;

use super::config::Variant;
use crate::bench::{median, quantile, ratio};

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

pub(super) fn summarize(phases: &[Phase], variant: Variant) -> Summary {
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
pub(super) fn paired(
    phases: &[Phase],
    variant: Variant,
    f: &dyn Fn(&Phase) -> f64,
) -> (f64, f64, f64) {
    paired_with(phases, variant, Variant::Bare, f)
}

/// Each round's `f(variant) / f(base)`, paired within the round (rounds
/// without both are left out): the median, the lowest and the highest.
pub(super) fn paired_with(
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
