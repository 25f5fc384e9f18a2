//! Everything one run measured ([`Results`]), the scaling view drawn from
//! it, and the targets judged against it.

use serde::Serialize;

use super::apiserver::{ApiResults, WritePath, WriteRun};
use super::churn::ChurnResults;
use super::{apiserver, blackbox, campaign, churn, shard};

/// Everything one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Results {
    /// The machine it ran on.
    pub machine: String,
    /// The date (UTC) it ran.
    pub date: String,
    /// Whether this was the smoke configuration.
    pub smoke: bool,
    /// Wall time of the whole run, seconds.
    pub total_secs: f64,
    /// Part 1.
    pub churn: churn::ChurnResults,
    /// Parts 2 and 3 (server side).
    pub api: apiserver::ApiResults,
    /// Part 3: the figures by object count.
    pub scaling: Scaling,
    /// Part 4.
    pub campaign: campaign::CampaignResults,
    /// Part 6.
    pub blackbox: blackbox::BlackboxResults,
    /// Part 5.
    pub shard: shard::ShardResults,
    /// Every target with its measured value.
    pub targets: Vec<Target>,
}

/// The figures at one object count (part 3).
#[derive(Debug, Clone, Default, Serialize)]
pub struct ScalingRow {
    /// Objects in the store.
    pub objects: usize,
    /// Store writes/s with 10 watchers (0 when not measured at this size).
    pub writes_per_sec: f64,
    /// Watch events/s delivered to the 10 watchers.
    pub delivered_per_sec: f64,
    /// Mean stored JSON per object, bytes.
    pub json_bytes: f64,
    /// Heap per stored object, bytes.
    pub heap_per_object: f64,
    /// RSS per stored object, bytes.
    pub rss_per_object: f64,
    /// Bare controller, reconciles/s under churn.
    pub churn_bare: f64,
    /// Guarded controller, reconciles/s under churn.
    pub churn_guarded: f64,
    /// Bare controller, saturated reconciles/s (sync).
    pub sync_bare: f64,
    /// Guarded controller, saturated reconciles/s (sync).
    pub sync_guarded: f64,
}

/// Part 3: the same figures by object count, and how far they spread.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Scaling {
    /// By object count, ascending.
    pub rows: Vec<ScalingRow>,
    /// Smallest over largest store writes/s across object counts (1 = flat).
    pub writes_min_over_max: f64,
    /// Smallest over largest churn reconciles/s (both controllers) across object counts.
    pub churn_min_over_max: f64,
    /// Smallest over largest saturated (sync) reconciles/s, bare controller.
    pub sync_min_over_max: f64,
    /// Smallest over largest heap bytes per object, averaged from an empty
    /// server (fixed costs, such as the watch buffers, weigh on small counts).
    pub memory_min_over_max: f64,
    /// Heap bytes each further object costs between consecutive object
    /// counts (`(h2·n2 - h1·n1) / (n2 - n1)`).
    pub memory_marginal: Vec<f64>,
    /// Smallest over largest of `memory_marginal` (1 = exactly linear).
    pub memory_marginal_min_over_max: f64,
}

/// The heap bytes each further object costs between consecutive counts.
fn marginal(rows: &[ScalingRow]) -> Vec<f64> {
    let pts: Vec<(f64, f64)> = rows
        .iter()
        .filter(|r| r.heap_per_object > 0.0)
        .map(|r| (r.objects as f64, r.heap_per_object * r.objects as f64))
        .collect();
    pts.windows(2)
        .map(|w| (w[1].1 - w[0].1) / (w[1].0 - w[0].0))
        .collect()
}

fn min_over_max(v: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = v.filter(|x| *x > 0.0).collect();
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(0.0, f64::max);
    if v.is_empty() { 0.0 } else { min / max }
}

/// Gather part 3 from parts 1 and 2.
#[must_use]
pub fn scaling(churn: &ChurnResults, api: &ApiResults) -> Scaling {
    let mut sizes: Vec<usize> = churn
        .sizes
        .iter()
        .map(|s| s.objects)
        .chain(api.scaling.iter().map(|r| r.objects))
        .chain(api.memory.iter().map(|m| m.objects))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    let rows: Vec<ScalingRow> = sizes
        .iter()
        .map(|&n| {
            let w = api.scaling.iter().find(|r| r.objects == n);
            let m = api.memory.iter().find(|r| r.objects == n);
            let c = churn.sizes.iter().find(|s| s.objects == n);
            ScalingRow {
                objects: n,
                writes_per_sec: w.map_or(0.0, |w| w.writes_per_sec),
                delivered_per_sec: w.map_or(0.0, |w| w.delivered_per_sec),
                json_bytes: m.map_or(0.0, |m| m.json_bytes),
                heap_per_object: m.map_or(0.0, |m| m.heap_per_object),
                rss_per_object: m.map_or(0.0, |m| m.rss_per_object),
                churn_bare: c.map_or(0.0, |c| c.bare.reconciles_per_sec),
                churn_guarded: c.map_or(0.0, |c| c.guarded.reconciles_per_sec),
                sync_bare: c.map_or(0.0, |c| c.bare.sync_reconciles_per_sec),
                sync_guarded: c.map_or(0.0, |c| c.guarded.sync_reconciles_per_sec),
            }
        })
        .collect();
    Scaling {
        writes_min_over_max: min_over_max(rows.iter().map(|r| r.writes_per_sec)),
        churn_min_over_max: min_over_max(
            rows.iter()
                .flat_map(|r| [r.churn_bare, r.churn_guarded].into_iter()),
        ),
        sync_min_over_max: min_over_max(rows.iter().map(|r| r.sync_bare)),
        memory_min_over_max: min_over_max(rows.iter().map(|r| r.heap_per_object)),
        memory_marginal: marginal(&rows),
        memory_marginal_min_over_max: min_over_max(marginal(&rows).into_iter()),
        rows,
    }
}

/// One target of the issue, with its measured value.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    /// Which part of the issue.
    pub part: String,
    /// What is measured.
    pub name: String,
    /// The target, as the issue states it.
    pub target: String,
    /// The measured value, with its unit.
    pub measured: String,
    /// Whether the target is met.
    pub met: bool,
}

fn target(part: &str, name: &str, target: &str, measured: String, met: bool) -> Target {
    Target {
        part: part.into(),
        name: name.into(),
        target: target.into(),
        measured,
        met,
    }
}

pub(super) fn fanout(api: &ApiResults, path: WritePath, watchers: usize) -> Option<&WriteRun> {
    api.fanout
        .iter()
        .find(|r| r.path == path && r.watchers == watchers)
}

/// Every target of the issue against this run.
#[must_use]
pub fn targets(r: &Results) -> Vec<Target> {
    let mut out = Vec::new();
    let sizes = &r.churn.sizes;
    if !sizes.is_empty() {
        let each = |f: &dyn Fn(&super::churn::SizeResult) -> f64| {
            sizes
                .iter()
                .map(|s| format!("{:.3} at {}", f(s), s.objects))
                .collect::<Vec<_>>()
                .join(", ")
        };
        // A ratio target is met when every object count meets it.
        let ratio = |what: &str,
                     goal: &str,
                     f: &dyn Fn(&super::churn::SizeResult) -> f64,
                     met: fn(f64) -> bool| {
            target("1", what, goal, each(f), sizes.iter().all(|s| met(f(s))))
        };
        out.push(ratio(
            "churn reconciles/s, guarded/bare",
            ">= 0.97",
            &|s| s.ratios.throughput,
            |x| x >= 0.97,
        ));
        out.push(ratio(
            "churn p99 event-to-reconcile latency, guarded/bare",
            "<= 1.10",
            &|s| s.ratios.p99,
            |x| x <= 1.10,
        ));
        out.push(ratio(
            "saturated (sync) reconciles/s, guarded/bare",
            ">= 0.95",
            &|s| s.ratios.sync_throughput,
            |x| x >= 0.95,
        ));
    }
    let api = &r.api;
    let max_w = api.fanout.iter().map(|f| f.watchers).max().unwrap_or(0);
    for path in [WritePath::Store, WritePath::Service] {
        if let Some(f) = fanout(api, path, 10) {
            out.push(target(
                "2",
                &format!("writes/s with 10 watchers ({path:?} writes)"),
                ">= 50000",
                format!("{:.0}", f.writes_per_sec),
                f.writes_per_sec >= 50_000.0 && f.cut_off == 0,
            ));
        }
    }
    for path in [WritePath::Store, WritePath::Service] {
        if let Some(f) = fanout(api, path, 100) {
            out.push(target(
                "2",
                &format!("watch events/s to 100 raw streams, aggregate ({path:?} writes)"),
                ">= 1000000",
                format!("{:.0}", f.delivered_per_sec),
                f.delivered_per_sec >= 1_000_000.0 && f.cut_off == 0,
            ));
        }
    }
    if let (Some(one), Some(many)) = (
        fanout(api, WritePath::Store, 1),
        fanout(api, WritePath::Store, max_w),
    ) {
        let growth = super::ratio(many.bytes_built_per_event, one.bytes_built_per_event);
        out.push(target(
            "2",
            &format!("bytes built per event, {max_w} watchers over 1"),
            "no growth (1.00)",
            format!(
                "{:.2} ({:.0} B vs {:.0} B; {:.2} line buffers/event)",
                growth,
                many.bytes_built_per_event,
                one.bytes_built_per_event,
                many.line_buffers_per_event
            ),
            growth <= 1.05,
        ));
    }
    if let Some(m) = api.memory.iter().max_by_key(|m| m.objects) {
        out.push(target(
            "2",
            &format!(
                "memory per stored object / JSON size ({} objects)",
                m.objects
            ),
            "<= 1.5",
            format!(
                "{:.2} heap ({:.0} B per {:.0} B of JSON), {:.2} RSS",
                m.heap_ratio, m.heap_per_object, m.json_bytes, m.rss_ratio
            ),
            m.heap_ratio <= 1.5 && m.rss_ratio <= 1.5,
        ));
    }
    let s = &r.scaling;
    if s.rows.len() > 1 {
        let span = format!(
            "{}..{} objects",
            s.rows.first().map_or(0, |r| r.objects),
            s.rows.last().map_or(0, |r| r.objects)
        );
        out.push(target(
            "3",
            &format!("store writes/s min/max, {span}"),
            ">= 0.80 (within 20%)",
            format!("{:.2}", s.writes_min_over_max),
            s.writes_min_over_max >= 0.8,
        ));
        out.push(target(
            "3",
            &format!("churn reconciles/s min/max, {span}"),
            ">= 0.80 (within 20%)",
            format!("{:.2}", s.churn_min_over_max),
            s.churn_min_over_max >= 0.8,
        ));
        out.push(target(
            "3",
            &format!("saturated (sync) reconciles/s min/max, bare, {span}"),
            ">= 0.80 (within 20%)",
            format!("{:.2}", s.sync_min_over_max),
            s.sync_min_over_max >= 0.8,
        ));
        out.push(target(
            "3",
            &format!("memory per further object min/max (linear), {span}"),
            ">= 0.80 (linear)",
            format!(
                "{:.2} (B per further object: {}; averages from an empty server, with its fixed buffers: {:.2})",
                s.memory_marginal_min_over_max,
                s.memory_marginal
                    .iter()
                    .map(|m| format!("{m:.0}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                s.memory_min_over_max
            ),
            s.memory_marginal_min_over_max >= 0.8,
        ));
    }
    // A 1,000-seed campaign of one scenario and variant, on the campaign's
    // threads, projected from the slowest row's one-thread rate.
    let cp = &r.campaign;
    if let Some(slowest) = cp
        .rows
        .iter()
        .filter(|row| row.runs_per_sec > 0.0)
        .min_by(|a, b| a.runs_per_sec.total_cmp(&b.runs_per_sec))
    {
        let secs = 1000.0 / (slowest.runs_per_sec * cp.threads.max(1) as f64);
        out.push(target(
            "4",
            "1,000 seeds of the slowest scenario/variant (projected from its one-thread rate)",
            &format!("<= 60 s on {} threads", cp.threads),
            format!(
                "{secs:.1} s ({} {} {})",
                slowest.example, slowest.scenario, slowest.variant
            ),
            secs <= 60.0,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marginal_memory_ignores_fixed_costs() {
        // 400 kB fixed plus 1000 B per object: averages differ, marginals do not.
        let rows: Vec<ScalingRow> = [1_000usize, 10_000, 100_000]
            .iter()
            .map(|&n| ScalingRow {
                objects: n,
                heap_per_object: (400_000.0 + 1_000.0 * n as f64) / n as f64,
                ..ScalingRow::default()
            })
            .collect();
        let m = marginal(&rows);
        assert_eq!(m.len(), 2);
        assert!(m.iter().all(|x| (x - 1_000.0).abs() < 1e-6), "{m:?}");
        assert!(min_over_max(rows.iter().map(|r| r.heap_per_object)) < 0.8);
    }
}
