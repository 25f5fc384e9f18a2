//! Output: JSON files, one SVG plot per benchmark and the markdown tables
//! docs/benchmarks.md quotes. The scaling view and the targets with their
//! measured values are computed in [`results`](super::results) (and
//! re-exported here).

use std::fmt::Write as _;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::Results;
use super::apiserver::{WritePath, WriteRun};
use super::results::fanout;
pub use super::results::{Scaling, ScalingRow, Target, scaling, targets};

/// Write every output file under `dir`.
pub fn write(r: &Results, dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let json = |v: &dyn erased::Json| v.to_json();
    std::fs::write(dir.join("results.json"), json(r))?;
    std::fs::write(dir.join("churn.json"), json(&r.churn))?;
    std::fs::write(dir.join("apiserver.json"), json(&r.api))?;
    std::fs::write(dir.join("scaling.json"), json(&r.scaling))?;
    std::fs::write(dir.join("campaign.json"), json(&r.campaign))?;
    std::fs::write(dir.join("blackbox.json"), json(&r.blackbox))?;
    std::fs::write(dir.join("shard.json"), json(&r.shard))?;
    std::fs::write(dir.join("results.md"), markdown(r))?;
    let plots: [(&str, PlotFn); 4] = [
        ("churn.svg", plot_churn),
        ("apiserver.svg", plot_api),
        ("scaling.svg", plot_scaling),
        ("campaign.svg", plot_campaign),
    ];
    for (file, f) in plots {
        f(r, &dir.join(file)).map_err(|e| std::io::Error::other(e.to_string()))?;
    }
    Ok(())
}

mod erased {
    /// Serialize anything `Serialize` behind one `dyn`.
    pub trait Json {
        fn to_json(&self) -> String;
    }
    impl<T: serde::Serialize> Json for T {
        fn to_json(&self) -> String {
            serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
        }
    }
}

fn k(v: f64) -> String {
    if v >= 1_000_000.0 {
        format!("{:.2}M", v / 1_000_000.0)
    } else if v >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v >= 1000.0 {
        format!("{:.1}k", v / 1000.0)
    } else if v >= 10.0 || v == v.trunc() {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn count(n: usize) -> String {
    if n >= 1000 && n.is_multiple_of(1000) {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}

/// The markdown tables (what docs/benchmarks.md quotes).
#[must_use]
pub fn markdown(r: &Results) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Ran {} on {} in {:.0} s{}.\n",
        r.date,
        r.machine,
        r.total_secs,
        if r.smoke { " (smoke sizes)" } else { "" }
    );
    let c = &r.churn;
    let _ = writeln!(
        s,
        "**Controller churn** ({} writes/s: 20% create, 60% update, 20% delete; {:.0} s per phase, {} rounds of bare, guarded (consistent reads), guarded with shared GETs, guarded with a GET per check, then {} rounds that only sync, which also run bare with a reconcile that awaits once (a yield) before its work — what suspending each reconcile once, as a guard waiting for a read does, costs by itself; guard: {}; sync figures: medians over all {} rounds, the ratios the median of each round's guarded/bare, with the lowest and highest round's in brackets):\n",
        c.rate,
        c.churn_secs,
        c.rounds,
        c.sync_rounds,
        c.guards.join(", "),
        c.rounds + c.sync_rounds
    );
    s.push_str("| objects | reconciles/s bare / guarded (ratio) | p50 ms bare / guarded | p99 ms bare / guarded (ratio) | CPU s bare / guarded (ratio) | peak RSS MiB bare / guarded | sync reconciles/s bare / guarded (ratio) | sync reconciles/s, shared GETs (ratio) | sync reconciles/s, a GET per check (ratio) | sync owner reads per object, consistent / shared / a GET per check | sync reconciles/s, bare awaiting once (ratio to bare) | sync guarded / bare awaiting once |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for z in &c.sizes {
        let (b, g, q) = (&z.bare, &z.guarded, &z.ratios);
        let _ = writeln!(
            s,
            "| {} | {:.0} / {:.0} ({:.3}) | {:.2} / {:.2} | {:.2} / {:.2} ({:.2}) | {:.2} / {:.2} ({:.2}) | {:.0} / {:.0} | {} / {} ({:.2} [{:.2}, {:.2}]) | {} ({:.2}) | {} ({:.2}) | {:.3} / {:.3} / {:.3} | {} ({:.2}) | {:.2} |",
            count(z.objects),
            b.reconciles_per_sec,
            g.reconciles_per_sec,
            q.throughput,
            b.p50_ms,
            g.p50_ms,
            b.p99_ms,
            g.p99_ms,
            q.p99,
            b.churn_cpu_secs,
            g.churn_cpu_secs,
            q.cpu,
            b.peak_rss_mib,
            g.peak_rss_mib,
            k(b.sync_reconciles_per_sec),
            k(g.sync_reconciles_per_sec),
            q.sync_throughput,
            q.sync_throughput_range.0,
            q.sync_throughput_range.1,
            k(z.guarded_shared.sync_reconciles_per_sec),
            z.sync_throughput_shared,
            k(z.guarded_get.sync_reconciles_per_sec),
            z.sync_throughput_get,
            g.sync_owner_reads_per_object,
            z.guarded_shared.sync_owner_reads_per_object,
            z.guarded_get.sync_owner_reads_per_object,
            k(z.bare_await.sync_reconciles_per_sec),
            z.sync_throughput_await,
            z.sync_throughput_over_await
        );
    }
    s.push_str("\n**API server** (raw watch streams, every watcher receives every event; the last rows, store writes at each object count, are the median of rounds that interleave the sizes):\n\n");
    s.push_str("| writes | watchers | objects | writes/s | watch events/s delivered | MiB/s delivered | line buffers/event | bytes built/event | cut off |\n|---|---|---|---|---|---|---|---|---|\n");
    for f in r.api.fanout.iter().chain(r.api.scaling.iter()) {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {:.0} | {:.2} | {:.0} | {} |",
            path_name(f.path),
            f.watchers,
            count(f.objects),
            k(f.writes_per_sec),
            k(f.delivered_per_sec),
            f.delivered_mib_per_sec,
            f.line_buffers_per_event,
            f.bytes_built_per_event,
            f.cut_off
        );
    }
    if let Some(base) = r.api.authz.iter().find(|f| f.path == WritePath::Service) {
        s.push_str("\n**Authorization cost** (merge patches through the in-process service, 1 watcher; the median of rounds that interleave the modes; ratio to AlwaysAllow in the same run):\n\n| writes | authorization | writes/s | ratio | CPU s per 1k writes |\n|---|---|---|---|---|\n");
        for f in &r.api.authz {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.3} | {:.3} |",
                path_name(f.path),
                match f.path {
                    WritePath::RbacAdmin | WritePath::RbacAccount => "RBAC",
                    _ => "AlwaysAllow",
                },
                k(f.writes_per_sec),
                super::ratio(f.writes_per_sec, base.writes_per_sec),
                super::ratio(f.cpu_secs * 1000.0, f.writes as f64)
            );
        }
    }
    s.push_str("\n**Memory per stored object** (whole server; the store alone in the last column):\n\n| objects | JSON B/object | heap B/object (ratio) | RSS B/object (ratio) | store alone, heap B/object (ratio) |\n|---|---|---|---|---|\n");
    for m in &r.api.memory {
        let _ = writeln!(
            s,
            "| {} | {:.0} | {:.0} ({:.2}) | {:.0} ({:.2}) | {:.0} ({:.2}) |",
            count(m.objects),
            m.json_bytes,
            m.heap_per_object,
            m.heap_ratio,
            m.rss_per_object,
            m.rss_ratio,
            m.store_heap_per_object,
            super::ratio(m.store_heap_per_object, m.json_bytes)
        );
    }
    let cp = &r.campaign;
    let _ = writeln!(
        s,
        "\n**Campaign speed** (every perturbation kind on; {} seeds per row, one thread; the whole campaign on {} threads: {:.1} runs/s):\n",
        cp.seeds, cp.threads, cp.campaign_runs_per_sec
    );
    s.push_str("| scenario | variant | runs/s |\n|---|---|---|\n");
    for row in &cp.rows {
        let _ = writeln!(
            s,
            "| {} {} | {} | {:.1} |",
            row.example, row.scenario, row.variant, row.runs_per_sec
        );
    }
    let b = &r.blackbox;
    match &b.skipped {
        Some(why) => {
            let _ = writeln!(s, "\n**Black-box campaign speed**: not run ({why}).");
        }
        None => {
            let _ = writeln!(
                s,
                "\n**Black-box campaign speed** (`{}` as a process; kinds: {}; {} seeds, {} at a time): {:.1} seeds/min; verdicts {} hold, {} differ, {} broken, {} could not run; a seed's mean ms: start {:.0}, workload {:.0}, settle {:.0}, teardown {:.0}.",
                b.controller.lines().next().unwrap_or(""),
                if b.kinds.is_empty() {
                    "none".to_string()
                } else {
                    b.kinds.join(", ")
                },
                b.seeds,
                b.jobs,
                b.seeds_per_min,
                b.verdicts[0],
                b.verdicts[1],
                b.verdicts[2],
                b.verdicts[3],
                b.phase_ms[0],
                b.phase_ms[1],
                b.phase_ms[2],
                b.phase_ms[3]
            );
        }
    }
    let sharding = super::shard::markdown(&r.shard);
    if !sharding.is_empty() {
        s.push('\n');
        s.push_str(&sharding);
    }
    s.push_str("\n**Targets**:\n\n| part | target | measured | met |\n|---|---|---|---|\n");
    for t in &r.targets {
        let _ = writeln!(
            s,
            "| {} | {} {} | {} | {} |",
            t.part,
            t.name,
            t.target,
            t.measured,
            if t.met { "yes" } else { "**no**" }
        );
    }
    s
}

type PlotFn = fn(&Results, &Path) -> Result<(), Box<dyn std::error::Error>>;
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

const BLUE: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const ORANGE: RGBColor = RGBColor(0xff, 0x7f, 0x0e);
const GREEN: RGBColor = RGBColor(0x2c, 0xa0, 0x2c);
const PALETTE: [RGBColor; 3] = [BLUE, ORANGE, GREEN];

/// Grouped bars: one group per label, one bar per series.
fn bars(
    area: &Area<'_>,
    title: &str,
    y_desc: &str,
    groups: &[String],
    series: &[(&str, Vec<f64>)],
) -> Result<(), Box<dyn std::error::Error>> {
    let max = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(0.0, f64::max);
    let top = if max > 0.0 { max * 1.2 } else { 1.0 };
    let n = groups.len().max(1);
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..top)?;
    let labels = groups.to_vec();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&move |x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                labels.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc(y_desc)
        .y_label_formatter(&|y| k(*y))
        .draw()?;
    let width = 0.8 / series.len().max(1) as f64;
    for (si, (name, values)) in series.iter().enumerate() {
        let color = PALETTE[si % PALETTE.len()];
        chart
            .draw_series(values.iter().enumerate().map(|(gi, v)| {
                let x0 = gi as f64 - 0.4 + si as f64 * width;
                Rectangle::new([(x0, 0.0), (x0 + width * 0.92, *v)], color.filled())
            }))?
            .label(*name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

fn plot_churn(r: &Results, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (1500, 460)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, 3));
    let sizes = &r.churn.sizes;
    let groups: Vec<String> = sizes
        .iter()
        .map(|s| format!("{} objects", count(s.objects)))
        .collect();
    let pick = |f: &dyn Fn(&super::churn::Summary) -> f64, guarded: bool| -> Vec<f64> {
        sizes
            .iter()
            .map(|s| f(if guarded { &s.guarded } else { &s.bare }))
            .collect()
    };
    bars(
        &panels[0],
        &format!("Reconciles/s under churn ({} writes/s)", r.churn.rate),
        "reconciles/s",
        &groups,
        &[
            ("bare kube-runtime", pick(&|s| s.reconciles_per_sec, false)),
            ("guarded (ward)", pick(&|s| s.reconciles_per_sec, true)),
        ],
    )?;
    bars(
        &panels[1],
        "Event-to-reconcile latency p99",
        "ms",
        &groups,
        &[
            ("bare p99", pick(&|s| s.p99_ms, false)),
            ("guarded p99", pick(&|s| s.p99_ms, true)),
        ],
    )?;
    bars(
        &panels[2],
        "Saturated reconciles/s (initial sync)",
        "reconciles/s",
        &groups,
        &[
            ("bare", pick(&|s| s.sync_reconciles_per_sec, false)),
            ("guarded", pick(&|s| s.sync_reconciles_per_sec, true)),
        ],
    )?;
    root.present()?;
    Ok(())
}

fn plot_api(r: &Results, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (1500, 460)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, 3));
    let mut watchers: Vec<usize> = r.api.fanout.iter().map(|f| f.watchers).collect();
    watchers.sort_unstable();
    watchers.dedup();
    let groups: Vec<String> = watchers.iter().map(|w| format!("{w} watchers")).collect();
    let pick = |path: WritePath, f: &dyn Fn(&WriteRun) -> f64| -> Vec<f64> {
        watchers
            .iter()
            .map(|w| fanout(&r.api, path, *w).map_or(0.0, f))
            .collect()
    };
    bars(
        &panels[0],
        "Sustained writes/s",
        "writes/s",
        &groups,
        &[
            ("store", pick(WritePath::Store, &|f| f.writes_per_sec)),
            (
                "service (merge patch)",
                pick(WritePath::Service, &|f| f.writes_per_sec),
            ),
        ],
    )?;
    bars(
        &panels[1],
        "Watch events/s delivered (aggregate)",
        "events/s",
        &groups,
        &[
            (
                "store writes",
                pick(WritePath::Store, &|f| f.delivered_per_sec),
            ),
            (
                "service writes",
                pick(WritePath::Service, &|f| f.delivered_per_sec),
            ),
        ],
    )?;
    bars(
        &panels[2],
        "Bytes built per event",
        "bytes",
        &groups,
        &[
            (
                "store writes",
                pick(WritePath::Store, &|f| f.bytes_built_per_event),
            ),
            (
                "service writes",
                pick(WritePath::Service, &|f| f.bytes_built_per_event),
            ),
        ],
    )?;
    root.present()?;
    Ok(())
}

fn plot_scaling(r: &Results, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (1500, 460)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, 3));
    let rows = &r.scaling.rows;
    let groups: Vec<String> = rows
        .iter()
        .map(|s| format!("{} objects", count(s.objects)))
        .collect();
    let col = |f: &dyn Fn(&ScalingRow) -> f64| -> Vec<f64> { rows.iter().map(f).collect() };
    bars(
        &panels[0],
        "Store writes/s, 10 watchers",
        "writes/s",
        &groups,
        &[("writes/s", col(&|s| s.writes_per_sec))],
    )?;
    bars(
        &panels[1],
        "Memory per stored object",
        "bytes",
        &groups,
        &[
            ("JSON", col(&|s| s.json_bytes)),
            ("heap", col(&|s| s.heap_per_object)),
            ("RSS", col(&|s| s.rss_per_object)),
        ],
    )?;
    bars(
        &panels[2],
        "Controller reconciles/s",
        "reconciles/s",
        &groups,
        &[
            ("churn, bare", col(&|s| s.churn_bare)),
            ("churn, guarded", col(&|s| s.churn_guarded)),
            ("sync, bare", col(&|s| s.sync_bare)),
        ],
    )?;
    root.present()?;
    Ok(())
}

fn plot_campaign(r: &Results, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (900, 460)).into_drawing_area();
    root.fill(&WHITE)?;
    let rows = &r.campaign.rows;
    let mut scenarios: Vec<String> = rows
        .iter()
        .map(|r| format!("{} {}", r.example, r.scenario))
        .collect();
    scenarios.dedup();
    let mut variants: Vec<String> = Vec::new();
    for row in rows {
        if !variants.contains(&row.variant) {
            variants.push(row.variant.clone());
        }
    }
    let series: Vec<(&str, Vec<f64>)> = variants
        .iter()
        .map(|v| {
            (
                v.as_str(),
                scenarios
                    .iter()
                    .map(|s| {
                        rows.iter()
                            .find(|r| {
                                &format!("{} {}", r.example, r.scenario) == s && &r.variant == v
                            })
                            .map_or(0.0, |r| r.runs_per_sec)
                    })
                    .collect(),
            )
        })
        .collect();
    let groups = scenarios;
    bars(
        &root,
        "Seeded runs per second (one thread, simulated time)",
        "runs/s",
        &groups,
        &series,
    )?;
    root.present()?;
    Ok(())
}

/// How a write path reads in the tables.
fn path_name(p: WritePath) -> &'static str {
    match p {
        WritePath::Store => "store",
        WritePath::Service => "service (merge patch)",
        WritePath::RbacAdmin => "service, as the admin",
        WritePath::RbacAccount => "service, as a ServiceAccount (JWT)",
    }
}
