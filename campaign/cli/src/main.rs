//! `ward-campaign`: perturbation campaigns against any controller process.
//!
//! ```text
//! ward-campaign --manifests crds/ --workload workload.yaml --seeds 20 -- ./my-controller --flag
//! ```
//!
//! Each seed: a fresh embedded ward-apiserver, the manifests applied, the
//! controller started with KUBECONFIG naming its own loopback listener,
//! the seed's perturbation plan carried out while the workload runs, the
//! run settled, its end state judged against unperturbed runs (the
//! differential oracle) and by `--invariant` if given. Exit status: 0 when
//! no seed found anything, 1 when one did, 2 on bad input or when the
//! scenario cannot run unperturbed. The method is in docs/campaigns.md.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod report;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use ward_campaign::process::workload::{Workload, duration, load_manifests};
use ward_campaign::process::{self, Run, Scenario, Verdict};
use ward_campaign::{Perturbation, builtin, select};

/// Perturbation campaigns against any controller process, judged by a
/// differential oracle (see docs/campaigns.md).
#[derive(Debug, Parser)]
#[command(version, name = "ward-campaign")]
struct Cli {
    /// The workload: a YAML list of steps (apply, patch, delete, wait, sleep, run).
    #[arg(long)]
    workload: PathBuf,
    /// Setup objects applied before the controller starts: a YAML file or
    /// a folder of them (repeatable).
    #[arg(long)]
    manifests: Vec<PathBuf>,
    /// Perturbation kinds: all, none, or a comma-separated list of
    /// gc-delay, gc-pause, stale-view, unobserved, crash, write-faults.
    #[arg(long, default_value = "all")]
    perturb: String,
    /// The seeds: a count (`20`: 0..20) or a range (`100..200`).
    #[arg(long, default_value = "20")]
    seeds: String,
    /// Unperturbed runs to learn what varies anyway.
    #[arg(long, default_value_t = 3)]
    unperturbed: usize,
    /// Runs at a time (default: the machine's cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// A command run once a run has settled, with KUBECONFIG set; a
    /// non-zero exit is a violation (run by `sh -c`).
    #[arg(long)]
    invariant: Option<String>,
    /// The controller's name: its identity in plans.
    #[arg(long, default_value = "controller")]
    name: String,
    /// Perturbation windows are drawn over this (default: the workload's sleeps, at least 5s).
    #[arg(long, value_parser = duration)]
    horizon: Option<Duration>,
    /// A run has settled once nothing was written for this long after the
    /// plan is done; it must outlast the controller's longest retry wait.
    #[arg(long, value_parser = duration, default_value = "3s")]
    quiet: Duration,
    /// At most this long to settle; past it the run could not be judged.
    #[arg(long, value_parser = duration, default_value = "30s")]
    settle: Duration,
    /// The controller's first API call must come within this.
    #[arg(long, value_parser = duration, default_value = "20s")]
    start_timeout: Duration,
    /// Write every run, verdict and timeline as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write a self-contained HTML report here: the table, and a timeline
    /// per seed that found something.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Run only this seed (after the unperturbed runs) and print its
    /// whole history.
    #[arg(long)]
    replay: Option<u64>,
    /// Where runs keep kubeconfigs and the controller's output (default: a temporary folder).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The controller's command line.
    #[arg(last = true, required = true)]
    controller: Vec<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(run(cli))
}

fn usage(what: impl std::fmt::Display) -> ExitCode {
    eprintln!("ward-campaign: {what}");
    ExitCode::from(2)
}

async fn run(cli: Cli) -> ExitCode {
    let workload = match Workload::load(&cli.workload) {
        Ok(w) => w,
        Err(e) => return usage(e),
    };
    let mut manifests = Vec::new();
    for m in &cli.manifests {
        match load_manifests(m) {
            Ok(os) => manifests.extend(os),
            Err(e) => return usage(e),
        }
    }
    let kinds: Vec<Arc<dyn Perturbation>> = match select(&cli.perturb, &builtin()) {
        Ok(k) => k,
        Err(e) => return usage(e),
    };
    let seeds = match cli.replay {
        Some(s) => vec![s],
        None => match seeds(&cli.seeds) {
            Ok(s) => s,
            Err(e) => return usage(e),
        },
    };
    let dir = cli.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("ward-campaign-{}", std::process::id()))
    });
    let mut scenario = Scenario::new(cli.controller.clone(), workload)
        .manifests(manifests)
        .dir(dir.clone());
    if let Some(inv) = &cli.invariant {
        scenario = scenario.invariant(vec!["sh".into(), "-c".into(), inv.clone()]);
    }
    scenario.name = cli.name.clone();
    scenario.horizon = cli.horizon;
    scenario.quiet = cli.quiet;
    scenario.settle = cli.settle;
    scenario.start_timeout = cli.start_timeout;
    let jobs = cli.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
    });
    let started = Instant::now();
    let bar = ProgressBar::new((cli.unperturbed.max(1) + seeds.len()) as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} runs {elapsed} {msg}")
            .expect("a progress template"),
    );
    bar.set_message("unperturbed");
    let learned = process::learn(&scenario, cli.unperturbed.max(1), jobs, |_| bar.inc(1)).await;
    let (oracle, baseline) = match learned {
        Ok(l) => l,
        Err(e) => {
            bar.finish_and_clear();
            eprintln!(
                "ward-campaign: could not run: {e}\n(kubeconfigs and the controller's output are under {})",
                dir.display()
            );
            return ExitCode::from(2);
        }
    };
    bar.set_message("perturbed");
    let mut findings = 0;
    let runs = process::campaign(&scenario, &oracle, &kinds, &seeds, jobs, |_, v| {
        bar.inc(1);
        if v.is_finding() {
            findings += 1;
            bar.set_message(format!("perturbed, {findings} found"));
        }
    })
    .await;
    bar.finish_and_clear();
    let elapsed = started.elapsed();
    if cli.replay.is_some() {
        for (run, verdict) in &runs {
            print_history(run, verdict);
        }
    } else {
        print_table(&cli, &oracle, &baseline, &runs, elapsed);
    }
    if let Some(path) = &cli.json {
        let json = serde_json::json!({
            "controller": cli.controller,
            "perturb": kinds.iter().map(|k| k.kind()).collect::<Vec<_>>(),
            "unperturbed": baseline.iter().map(|(r, v)| serde_json::json!({"run": r, "verdict": v})).collect::<Vec<_>>(),
            "noise": oracle.noise(),
            "runs": runs.iter().map(|(r, v)| serde_json::json!({"run": r, "verdict": v})).collect::<Vec<_>>(),
            "seconds": elapsed.as_secs_f64(),
        });
        let text = serde_json::to_string_pretty(&json).expect("JSON of plain data");
        if let Err(e) = std::fs::write(path, text) {
            return usage(format!("cannot write {}: {e}", path.display()));
        }
    }
    if let Some(path) = &cli.report {
        let kinds: Vec<&str> = kinds.iter().map(|k| k.kind()).collect();
        let page = report::Page {
            controller: &cli.controller.join(" "),
            kinds: &kinds,
            unperturbed: &baseline,
            runs: &runs,
            noise: oracle.noise().len(),
            seconds: elapsed.as_secs_f64(),
        };
        if let Err(e) = std::fs::write(path, page.render()) {
            return usage(format!("cannot write {}: {e}", path.display()));
        }
    }
    let could_not = runs
        .iter()
        .filter(|(_, v)| matches!(v, Verdict::CouldNotRun(_)))
        .count();
    if runs.iter().chain(&baseline).any(|(_, v)| v.is_finding()) {
        ExitCode::from(1)
    } else if could_not == runs.len() && !runs.is_empty() {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}

/// `20` → 0..20; `100..200`.
fn seeds(spec: &str) -> Result<Vec<u64>, String> {
    let bad = || format!("--seeds {spec:?}: a count (20) or a range (100..200)");
    match spec.split_once("..") {
        Some((a, b)) => {
            let (a, b): (u64, u64) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
            if a >= b {
                return Err(bad());
            }
            Ok((a..b).collect())
        }
        None => Ok((0..spec.parse::<u64>().map_err(|_| bad())?).collect()),
    }
}

fn print_table(
    cli: &Cli,
    oracle: &ward_campaign::process::oracle::Oracle,
    baseline: &[(Run, Verdict)],
    runs: &[(Run, Verdict)],
    elapsed: Duration,
) {
    let broken = baseline.iter().filter(|(_, v)| v.is_finding()).count();
    println!(
        "ward-campaign: {} ({} unperturbed runs, {broken} broken, taught {} noisy fields)",
        cli.controller.join(" "),
        baseline.len(),
        oracle.noise().len()
    );
    println!(
        "{:>6}  {:<14} {:>7} {:>8}  first finding",
        "seed", "verdict", "calls", "seconds"
    );
    for (run, v) in runs {
        let secs = run.phases.start + run.phases.workload + run.phases.settle + run.phases.teardown;
        let first = match v {
            Verdict::Holds => String::new(),
            Verdict::Differs(d) => format!("{} ({} differences)", d[0], d.len()),
            Verdict::Broken(w) | Verdict::CouldNotRun(w) => {
                w.lines().next().unwrap_or("").to_string()
            }
        };
        println!(
            "{:>6}  {:<14} {:>7} {:>8.1}  {first}",
            run.seed,
            v.word(),
            run.requests,
            secs.as_secs_f64()
        );
    }
    let count = |w: &str| runs.iter().filter(|(_, v)| v.word() == w).count();
    println!(
        "{} seeds: {} hold, {} differ, {} broken, {} could not run; {:.1} seeds/min ({:.0}s)",
        runs.len(),
        count("holds"),
        count("differs"),
        count("broken"),
        count("could-not-run"),
        runs.len() as f64 * 60.0 / elapsed.as_secs_f64().max(0.001),
        elapsed.as_secs_f64()
    );
    for (i, (_, v)) in baseline.iter().enumerate() {
        if let Verdict::Broken(why) = v {
            println!(
                "\nunperturbed run {i} broken (no perturbation needed):\n  {}",
                why.replace('\n', "\n  ")
            );
        }
    }
    for (run, v) in runs.iter().filter(|(_, v)| v.is_finding()) {
        println!("\nseed {} {}:", run.seed, v.word());
        for line in &run.plan {
            println!("  plan  {line}");
        }
        match v {
            Verdict::Differs(d) => {
                for d in d.iter().take(10) {
                    println!("  diff  {d}");
                }
                if d.len() > 10 {
                    println!("  diff  … {} more (--json has them all)", d.len() - 10);
                }
            }
            Verdict::Broken(w) => println!("  {}", w.replace('\n', "\n  ")),
            _ => {}
        }
        println!("  (--replay {} prints its history)", run.seed);
    }
}

fn print_history(run: &Run, verdict: &Verdict) {
    println!("seed {}", run.seed);
    for line in &run.plan {
        println!("  plan  {line}");
    }
    for e in &run.timeline {
        println!(
            "{:>9.3}s {:<12} {}",
            e.ms as f64 / 1000.0,
            format!("{:?}", e.lane).to_lowercase(),
            e.what
        );
    }
    match verdict {
        Verdict::Differs(d) => {
            println!("verdict: differs");
            for d in d {
                println!("  diff  {d}");
            }
        }
        Verdict::Broken(w) | Verdict::CouldNotRun(w) => {
            println!("verdict: {}: {w}", verdict.word())
        }
        Verdict::Holds => println!("verdict: holds"),
    }
}
