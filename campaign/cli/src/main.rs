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
//!
//! Beyond one machine: `--shards N` runs every N-th seed, from the index
//! `--shard-index` or `JOB_COMPLETION_INDEX` (a Kubernetes Indexed Job's
//! pod; campaign/deploy/indexed-job.yaml), each part writing its
//! `--json`; `ward-campaign merge part-*.json` folds them into one table
//! (and `--json`, `--report`).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod outcome;
mod report;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use outcome::{Judged, Outcome, Shard};
use ward_campaign::process::workload::{Workload, duration, load_manifests};
use ward_campaign::process::{self, Scenario};
use ward_campaign::{
    FrozenView, Partition, Perturbation, WebhookFaults,
    perturbations::{builtin, select},
};

/// Perturbation campaigns against any controller process, judged by a
/// differential oracle (see docs/campaigns.md).
#[derive(Debug, Parser)]
#[command(
    version,
    name = "ward-campaign",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Fold the `--json` parts of a split campaign into one table.
    Merge {
        /// The parts.
        #[arg(required = true)]
        parts: Vec<PathBuf>,
        /// Write the merged outcome as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Write the merged HTML report here.
        #[arg(long)]
        report: Option<PathBuf>,
    },
}

/// A campaign.
#[derive(Debug, clap::Args)]
struct RunArgs {
    /// The workload: a YAML list of steps (apply, patch, delete, wait, sleep, run).
    #[arg(long, required = true)]
    workload: Option<PathBuf>,
    /// Setup objects applied before the controller starts: a YAML file or
    /// a folder of them (repeatable).
    #[arg(long)]
    manifests: Vec<PathBuf>,
    /// Perturbation kinds: all (the first six), none, or a comma-separated
    /// list of gc-delay, gc-pause, stale-view, unobserved, crash,
    /// write-faults, partition, frozen-view, webhook-faults.
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
    /// A command run once a run has settled, with KUBECONFIG set (and
    /// WARD_RUN_DIR, the seed's folder, which the controller gets too); a
    /// non-zero exit is a violation (run by `sh -c`).
    #[arg(long)]
    invariant: Option<String>,
    /// A command that judges the run's whole history once it has settled
    /// (every committed write, a JSON object a line, on its standard
    /// input; run by `sh -c`); a non-zero exit is a violation.
    #[arg(long)]
    judge: Option<String>,
    /// The controller's name: its identity in plans, and its
    /// ServiceAccount (`system:serviceaccount:default:<name>`).
    #[arg(long, default_value = "controller")]
    name: String,
    /// Serve the controller's listener and the server's over HTTPS (the
    /// kubeconfigs trust the server's CA): client-go sends credentials
    /// only over TLS.
    #[arg(long)]
    tls: bool,
    /// How requests are authorized: AlwaysAllow, or RBAC over the setup
    /// manifests' Roles and bindings (implies --tls; a 403 the controller
    /// gets shows in its timeline and under the table).
    #[arg(long, default_value = "AlwaysAllow", value_parser = ["AlwaysAllow", "RBAC"])]
    authorization_mode: String,
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
    /// With --replay: the `--json` of the campaign the seed came from;
    /// says whether the replay's verdict is the one recorded there.
    #[arg(long, requires = "replay")]
    against: Option<PathBuf>,
    /// Split the seeds into this many parts and run one (every N-th seed).
    #[arg(long)]
    shards: Option<u64>,
    /// The part to run [default: $JOB_COMPLETION_INDEX].
    #[arg(long, requires = "shards")]
    shard_index: Option<u64>,
    /// Where runs keep kubeconfigs and the controller's output (default: a temporary folder).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The controller's command line.
    #[arg(last = true, required = true)]
    controller: Vec<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Command::Merge {
        parts,
        json,
        report,
    }) = cli.command
    {
        return match Outcome::merge(&parts) {
            Ok(merged) => finish(&merged, false, json.as_deref(), report.as_deref()),
            Err(e) => usage(e),
        };
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let code = runtime.block_on(async {
        tokio::select! {
            code = run(cli.run) => code,
            signal = interrupted() => {
                eprintln!("ward-campaign: {signal}: stopped; every controller process is killed");
                ExitCode::from(130)
            }
        }
    });
    // Dropping the runtime drops every run's supervisor, which kills its
    // controller's process group.
    drop(runtime);
    code
}

/// SIGINT or SIGTERM, whichever comes first.
async fn interrupted() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => "interrupted",
        _ = term.recv() => "terminated",
    }
}

fn usage(what: impl std::fmt::Display) -> ExitCode {
    eprintln!("ward-campaign: {what}");
    ExitCode::from(2)
}

/// Print `o` (its table, or its histories), write what was asked for,
/// and the exit status: 1 when something was found, 2 when nothing
/// could run.
fn finish(o: &Outcome, history: bool, json: Option<&Path>, report: Option<&Path>) -> ExitCode {
    if history {
        o.print_history();
    } else {
        o.print_table();
    }
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(o).expect("JSON of plain data");
        if let Err(e) = std::fs::write(path, text) {
            return usage(format!("cannot write {}: {e}", path.display()));
        }
    }
    if let Some(path) = report
        && let Err(e) = std::fs::write(path, report::render(o))
    {
        return usage(format!("cannot write {}: {e}", path.display()));
    }
    if o.found() {
        ExitCode::from(1)
    } else if o.nothing_ran() {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}

async fn run(cli: RunArgs) -> ExitCode {
    let Some(workload) = &cli.workload else {
        return usage("--workload is required");
    };
    let workload = match Workload::load(workload) {
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
    let kinds: Vec<Arc<dyn Perturbation>> = match cli.perturb.trim() {
        "all" => builtin(),
        spec => {
            // By name, the opt-in kinds too.
            let mut available = builtin();
            available.push(Arc::new(Partition));
            available.push(Arc::new(FrozenView));
            available.push(Arc::new(WebhookFaults));
            match select(spec, &available) {
                Ok(k) => k,
                Err(e) => return usage(e),
            }
        }
    };
    let mut seeds = match cli.replay {
        Some(s) => vec![s],
        None => match seeds(&cli.seeds) {
            Ok(s) => s,
            Err(e) => return usage(e),
        },
    };
    let shard = match shard(&cli) {
        Ok(s) => s,
        Err(e) => return usage(e),
    };
    if let Some(Shard { index, count }) = shard {
        seeds = seeds
            .into_iter()
            .enumerate()
            .filter(|(i, _)| *i as u64 % count == index)
            .map(|(_, s)| s)
            .collect();
    }
    let dir = cli.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("ward-campaign-{}", std::process::id()))
    });
    let mut scenario = Scenario::new(cli.controller.clone(), workload)
        .manifests(manifests)
        .dir(dir.clone());
    if let Some(inv) = &cli.invariant {
        scenario = scenario.invariant(vec!["sh".into(), "-c".into(), inv.clone()]);
    }
    if let Some(judge) = &cli.judge {
        scenario = scenario.judge(vec!["sh".into(), "-c".into(), judge.clone()]);
    }
    scenario.name = cli.name.clone();
    scenario.tls = cli.tls;
    scenario.rbac = cli.authorization_mode == "RBAC";
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
    // Where the bar is not drawn (output to a file or a pipe, as in CI), a
    // line per run says how far the campaign is.
    let lines = !std::io::stderr().is_terminal();
    let learned = process::learn(&scenario, cli.unperturbed.max(1), jobs, |run| {
        bar.inc(1);
        if lines {
            eprintln!(
                "unperturbed run {} of {}: {:.1}s",
                bar.position(),
                cli.unperturbed.max(1),
                run.phases.total().as_secs_f64()
            );
        }
    })
    .await;
    let (oracle, unperturbed) = match learned {
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
    let runs = process::campaign(&scenario, &oracle, &kinds, &seeds, jobs, |run, v| {
        bar.inc(1);
        if lines {
            eprintln!(
                "seed {}: {} ({:.1}s)",
                run.seed,
                v.word(),
                run.phases.total().as_secs_f64()
            );
        }
        if v.is_finding() {
            findings += 1;
            bar.set_message(format!("perturbed, {findings} found"));
        }
    })
    .await;
    bar.finish_and_clear();
    let judged = |v: Vec<_>| {
        v.into_iter()
            .map(|(run, verdict)| Judged { run, verdict })
            .collect()
    };
    let outcome = Outcome {
        controller: cli.controller.clone(),
        perturb: kinds.iter().map(|k| k.kind().to_string()).collect(),
        unperturbed: judged(unperturbed),
        noise: oracle.noise(),
        runs: judged(runs),
        seconds: started.elapsed().as_secs_f64(),
        shard,
    };
    let code = finish(
        &outcome,
        cli.replay.is_some(),
        cli.json.as_deref(),
        cli.report.as_deref(),
    );
    if let (Some(seed), Some(path)) = (cli.replay, &cli.against) {
        match Outcome::merge(&[path]) {
            Ok(then) => match (
                then.runs.iter().find(|j| j.run.seed == seed),
                outcome.runs.first(),
            ) {
                (Some(then), Some(now)) => {
                    let same = then.verdict.word() == now.verdict.word();
                    println!(
                        "replay of seed {seed}: {} then, {} now: {}",
                        then.verdict.word(),
                        now.verdict.word(),
                        if same {
                            "the same verdict"
                        } else {
                            "a different verdict (a real process's interleaving does not replay; the plan did)"
                        }
                    );
                }
                _ => return usage(format!("{} has no seed {seed}", path.display())),
            },
            Err(e) => return usage(e),
        }
    }
    code
}

/// The part of a split campaign this process runs.
fn shard(cli: &RunArgs) -> Result<Option<Shard>, String> {
    let Some(count) = cli.shards else {
        return Ok(None);
    };
    let index = match cli.shard_index {
        Some(i) => i,
        None => std::env::var("JOB_COMPLETION_INDEX")
            .map_err(|_| "--shards needs --shard-index or JOB_COMPLETION_INDEX".to_string())?
            .parse()
            .map_err(|_| "JOB_COMPLETION_INDEX is not a number".to_string())?,
    };
    if count == 0 || index >= count {
        return Err(format!(
            "shard {index} of {count}: the index must be below the count"
        ));
    }
    Ok(Some(Shard { index, count }))
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
