//! `--report report.html`: one self-contained page (no script, no file
//! beside it) with the table of seeds and verdicts and, for every seed
//! that found something, its plan, its differences and its timeline as an
//! inline SVG: a swimlane each for the workload's steps, the plan's
//! perturbation windows, the controller's requests and the committed
//! writes, the writes to the objects that diverged drawn in red.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use ward_campaign::process::{Lane, Run, Verdict};

use crate::outcome::{Judged, Outcome, first_finding};

/// Escape text for HTML (element content and attribute values).
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse}td,th{padding:2px 10px;border-bottom:1px solid #ddd;text-align:left}td.n{text-align:right}.holds{color:#176}.differs,.broken{color:#b00;font-weight:bold}.could-not-run{color:#a60}code,pre{font:12px ui-monospace,monospace}pre{background:#f6f6f6;padding:.5em;overflow-x:auto}svg{border:1px solid #ccc;background:#fff}section{margin-top:2em}";

/// The page of `o`.
#[must_use]
pub fn render(o: &Outcome) -> String {
    let mut h = String::new();
    let count = |w: &str| o.runs.iter().filter(|j| j.verdict.word() == w).count();
    let controller = o.controller.join(" ");
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>ward-campaign: {c}</title><style>{STYLE}</style></head><body><h1>ward-campaign</h1><p><code>{c}</code></p><p>Perturbations: {k}. {u} unperturbed runs taught {n} noisy fields. {s} seeds: {h1} hold, {d} differ, {b} broken, {x} could not run ({secs:.0}s).</p>",
        c = esc(&controller),
        k = esc(&o.perturb.join(", ")),
        u = o.unperturbed.len(),
        n = o.noise.len(),
        s = o.runs.len(),
        h1 = count("holds"),
        d = count("differs"),
        b = count("broken"),
        x = count("could-not-run"),
        secs = o.seconds,
    );
    h.push_str("<table><tr><th>seed</th><th>verdict</th><th>calls</th><th>seconds</th><th>first finding</th></tr>");
    let all = || {
        o.unperturbed
            .iter()
            .enumerate()
            .map(|(i, j)| (format!("unperturbed {i}"), j))
            .chain(o.runs.iter().map(|j| (j.run.seed.to_string(), j)))
    };
    for (label, Judged { run, verdict: v }) in all() {
        let p = run.phases;
        let secs = p.total().as_secs_f64();
        let cell = if v.is_finding() {
            format!("<a href=\"#run-{}\">{}</a>", anchor(&label), esc(&label))
        } else {
            esc(&label)
        };
        let _ = write!(
            h,
            "<tr><td>{cell}</td><td class=\"{w}\">{w}</td><td class=\"n\">{}</td><td class=\"n\">{secs:.1}</td><td>{}</td></tr>",
            run.requests,
            esc(&first_finding(v)),
            w = v.word(),
        );
    }
    h.push_str("</table>");
    for (label, j) in all().filter(|(_, j)| j.verdict.is_finding()) {
        section(&mut h, &label, &j.run, &j.verdict);
    }
    h.push_str("</body></html>\n");
    h
}

fn anchor(label: &str) -> String {
    label.replace(' ', "-")
}

fn section(h: &mut String, label: &str, run: &Run, v: &Verdict) {
    let _ = write!(
        h,
        "<section id=\"run-{}\"><h2>{} — <span class=\"{w}\">{w}</span></h2>",
        anchor(label),
        esc(label),
        w = v.word()
    );
    if !run.plan.is_empty() {
        h.push_str("<h3>Plan</h3><ul>");
        for line in &run.plan {
            let _ = write!(h, "<li><code>{}</code></li>", esc(line));
        }
        h.push_str("</ul>");
    }
    let mut diverged = BTreeSet::new();
    match v {
        Verdict::Differs(ds) => {
            h.push_str("<h3>Differences</h3><ul>");
            for d in ds {
                diverged.insert(d.object.clone());
                let _ = write!(h, "<li><code>{}</code></li>", esc(&d.to_string()));
            }
            h.push_str("</ul>");
        }
        Verdict::Broken(w) | Verdict::CouldNotRun(w) => {
            let _ = write!(h, "<pre>{}</pre>", esc(w));
        }
        Verdict::Holds => {}
    }
    h.push_str("<h3>Timeline</h3>");
    timeline(h, run, &diverged);
    h.push_str("</section>");
}

const LANES: [(Lane, &str); 4] = [
    (Lane::Workload, "workload"),
    (Lane::Perturbation, "perturbations"),
    (Lane::Controller, "controller"),
    (Lane::Store, "writes"),
];

/// The swimlanes of `run` as an inline SVG; writes to `diverged` objects in red.
fn timeline(h: &mut String, run: &Run, diverged: &BTreeSet<String>) {
    let (left, width, lane_h) = (110.0, 900.0, 34.0);
    let end_ms = run
        .timeline
        .iter()
        .map(|e| e.ms)
        .max()
        .unwrap_or(0)
        .max(1000) as f64;
    let x = |ms: f64| left + width * ms / end_ms;
    let height = lane_h * LANES.len() as f64 + 24.0;
    let _ = write!(
        h,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" viewBox=\"0 0 {} {height}\" role=\"img\" aria-label=\"timeline\">",
        left + width + 10.0,
        left + width + 10.0
    );
    for (i, (_, name)) in LANES.iter().enumerate() {
        let y = lane_h * i as f64;
        let _ = write!(
            h,
            "<rect x=\"0\" y=\"{y}\" width=\"{}\" height=\"{lane_h}\" fill=\"{}\"/><text x=\"6\" y=\"{}\" font-size=\"12\">{name}</text>",
            left + width + 10.0,
            if i % 2 == 0 { "#f7f7f7" } else { "#fff" },
            y + lane_h / 2.0 + 4.0,
        );
    }
    // The plan's windows, from its lines ("from 1.234s for 2.000s"); the
    // plan's times count from the workload's start.
    let start = run
        .timeline
        .iter()
        .find(|e| e.lane == Lane::Workload)
        .map_or(0.0, |e| e.ms as f64);
    let py = lane_h;
    for (i, line) in run.plan.iter().enumerate() {
        let Some((at, len)) = window(line) else {
            continue;
        };
        let (x0, x1) = (x(start + at * 1000.0), x(start + (at + len) * 1000.0));
        let _ = write!(
            h,
            "<rect x=\"{x0:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"4\" fill=\"#e69500\"><title>{}</title></rect>",
            py + 4.0 + (i % 6) as f64 * 4.5,
            (x1 - x0).max(2.0),
            esc(line)
        );
    }
    for e in &run.timeline {
        let Some(i) = LANES.iter().position(|(l, _)| *l == e.lane) else {
            continue;
        };
        let red = e.lane == Lane::Store && diverged.iter().any(|d| e.what.ends_with(d.as_str()));
        let colour = match (e.lane, red) {
            (_, true) => "#c00",
            (Lane::Workload, _) => "#1a5fb4",
            (Lane::Perturbation, _) => "#e69500",
            (Lane::Controller, _) => "#555",
            (Lane::Store, _) => "#2a8",
        };
        let y = lane_h * i as f64
            + if e.lane == Lane::Perturbation {
                30.0
            } else {
                8.0
            };
        let _ = write!(
            h,
            "<rect x=\"{:.1}\" y=\"{y}\" width=\"2\" height=\"{}\" fill=\"{colour}\"><title>{:.3}s {}</title></rect>",
            x(e.ms as f64),
            if e.lane == Lane::Perturbation {
                4.0
            } else {
                lane_h - 16.0
            },
            e.ms as f64 / 1000.0,
            esc(&e.what)
        );
    }
    let _ = write!(
        h,
        "<text x=\"{left}\" y=\"{}\" font-size=\"11\">0s</text><text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{:.1}s</text></svg>",
        height - 6.0,
        left + width,
        height - 6.0,
        end_ms / 1000.0
    );
}

/// `from 1.234s for 2.000s` in a plan line (a crash's `from 1.234s`: a
/// mark), seconds.
fn window(line: &str) -> Option<(f64, f64)> {
    let rest = &line[line.rfind(" from ")? + 6..];
    let (at, len) = match rest.split_once(" for ") {
        Some((a, l)) => (a, l),
        None => (rest, "0.05s"),
    };
    let secs = |s: &str| s.trim().strip_suffix('s')?.parse::<f64>().ok();
    Some((secs(at)?, secs(len)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_read_off_plan_lines() {
        assert_eq!(
            window("gc-pause: GC paused from 3.524s for 2.000s"),
            Some((3.524, 2.0))
        );
        assert_eq!(
            window("crash: c crashes right after its read #3 from 0.291s"),
            Some((0.291, 0.05))
        );
        assert_eq!(window("no window"), None);
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }
}
