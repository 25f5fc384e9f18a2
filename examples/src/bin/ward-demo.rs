//! `ward-demo`: the three seed races, naive vs guarded, in simulated time
//! against an embedded ward-apiserver, each seed under its own plan of
//! perturbations (stale views, unobserved states, crashes between writes,
//! GC lag, write faults); one table; a non-zero exit if a guarded run
//! breaks an invariant. `--replay` prints one run's plan and history.

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

use clap::Parser;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use ward_examples::demo::{self, Cell, Selection, Stop};

/// Run every example scenario in every variant over many seeds, each under
/// the seed's plan of perturbations.
#[derive(Debug, Parser)]
#[command(name = "ward-demo", version)]
struct Args {
    /// Only this example (whereabouts, cns, lws, sharding).
    #[arg(long)]
    example: Option<String>,
    /// Only this scenario (S1, S2, S3; churn for sharding).
    #[arg(long)]
    scenario: Option<String>,
    /// Only this variant (naive, upstream, guarded).
    #[arg(long)]
    variant: Option<String>,
    /// Seeds per scenario and variant (the default run takes 35 s to a
    /// minute on 2 cores, by machine).
    #[arg(long, default_value_t = 200)]
    seeds: u64,
    /// The first seed (default 0; with `--soak`, drawn from the clock and
    /// printed).
    #[arg(long)]
    first_seed: Option<u64>,
    /// Stop at the first guarded run that breaks an invariant (runs under
    /// way finish) and print its `--replay` line.
    #[arg(long)]
    fail_fast: bool,
    /// Sweep seeds for this many minutes: batches of `--seeds` seeds from
    /// the first seed on, stopping at the first guarded failure; then the
    /// table of every run made, the seeds covered and, for a failure, its
    /// `--replay` line.
    #[arg(long, value_name = "MINUTES")]
    soak: Option<f64>,
    /// Perturbation kinds each seed's plan draws from: all, none, or a
    /// comma-separated list of gc-delay, gc-pause, stale-view, unobserved,
    /// crash, write-faults.
    #[arg(long, default_value = "all")]
    perturb: String,
    /// Replay one run, `example/scenario/variant/seed` (e.g.
    /// `lws/S2/naive/1`): print its plan, its history (the journal, then
    /// every committed write with its resourceVersion) and what it broke.
    #[arg(long, value_name = "EXAMPLE/SCENARIO/VARIANT/SEED")]
    replay: Option<String>,
    /// Print the rows as one JSON array, and nothing else on stdout.
    #[arg(long)]
    json: bool,
    /// Worker threads (each run is single-threaded, in simulated time).
    #[arg(long, default_value_t = 2)]
    threads: usize,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "error".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    match run(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ward-demo: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &Args) -> Result<ExitCode, String> {
    let examples = demo::all();
    let kinds = ward_campaign::perturbations::select(
        &args.perturb,
        &ward_campaign::perturbations::builtin(),
    )
    .map_err(|e| e.to_string())?;
    if let Some(what) = &args.replay {
        return replay(&examples, what, &kinds);
    }
    let soak = match args.soak {
        Some(m) if !(m.is_finite() && m > 0.0) => {
            return Err(format!(
                "--soak takes a positive number of minutes, got {m}"
            ));
        }
        Some(m) => Some(std::time::Duration::from_secs_f64(m * 60.0)),
        None => None,
    };
    let first = match (args.first_seed, soak) {
        (Some(s), _) => s,
        (None, None) => 0,
        // A soak walks seeds nobody has walked: start somewhere new.
        (None, Some(_)) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs() % 1_000_000_000),
    };
    if let Some(limit) = soak {
        eprintln!(
            "ward-demo: soaking for {:.1} min from seed {first}, {} seeds a batch",
            limit.as_secs_f64() / 60.0,
            args.seeds
        );
    }
    let mut selection = Selection {
        seeds: first..first.saturating_add(args.seeds),
        kinds,
        example: args.example.clone(),
        scenario: args.scenario.clone(),
        variant: args.variant.clone(),
    };
    let cells = selection.cells(&examples);
    if cells.is_empty() {
        return Err("no example, scenario and variant matches the selection".into());
    }
    let stop = if args.fail_fast || soak.is_some() {
        Stop::FirstGuardedFailure
    } else {
        Stop::Never
    };
    let total = soak.map_or(cells.len() as u64 * args.seeds, |_| 0);
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(if soak.is_some() {
            "{elapsed_precise} {pos} runs"
        } else {
            "{elapsed_precise} [{bar:40}] {pos}/{len} runs"
        })
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    let started = std::time::Instant::now();
    let mut rows = Vec::new();
    loop {
        let batch = demo::campaign_until(&examples, &selection, args.threads, stop, &|| bar.inc(1));
        demo::merge(&mut rows, batch);
        let Some(limit) = soak else { break };
        if demo::guarded_failed(&rows) || started.elapsed() >= limit {
            break;
        }
        let next = selection.seeds.end;
        selection.seeds = next..next.saturating_add(args.seeds);
    }
    bar.finish_and_clear();
    let runs: usize = rows.iter().map(|r| r.runs).sum();
    // The seeds every cell covered (a stopped batch covers a prefix).
    let last = rows.iter().map(|r| r.runs as u64).min().unwrap_or(0);
    if args.json {
        let json = serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?;
        ward_base::outln!("{json}");
    } else {
        ward_base::outln!("{}", demo::table(&rows));
        let kinds: Vec<_> = selection.kinds.iter().map(|k| k.kind()).collect();
        ward_base::outln!(
            "{runs} runs in {:.1} s (seeds {first}..{}, simulated time; perturbations: {}; `--replay example/scenario/variant/seed` replays one)",
            started.elapsed().as_secs_f64(),
            first + last,
            if kinds.is_empty() {
                "none".into()
            } else {
                kinds.join(", ")
            },
        );
    }
    if demo::guarded_failed(&rows) {
        eprintln!("ward-demo: a guarded variant broke an invariant (or failed to run)");
        let perturb = if args.perturb == "all" {
            String::new()
        } else {
            format!(" --perturb {}", args.perturb)
        };
        for r in rows.iter().filter(|r| r.guarded) {
            let mut seeds: Vec<u64> = r.violating_seeds.iter().take(3).copied().collect();
            seeds.extend(r.failed_seeds.iter().take(3));
            for seed in seeds {
                eprintln!(
                    "  replay: ward-demo --replay {}/{}/{}/{seed}{perturb}",
                    r.example, r.scenario, r.variant
                );
            }
        }
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// `--replay example/scenario/variant/seed`.
fn replay(
    examples: &[Cell],
    what: &str,
    kinds: &[std::sync::Arc<dyn ward_campaign::Perturbation>],
) -> Result<ExitCode, String> {
    let bad = || {
        format!("--replay takes example/scenario/variant/seed, e.g. lws/S2/naive/1; got {what:?}")
    };
    let parts: Vec<&str> = what.split('/').collect();
    let [example, scenario, variant, seed] = parts[..] else {
        return Err(bad());
    };
    let seed: u64 = seed.parse().map_err(|_| bad())?;
    let cells: Vec<&Cell> = examples.iter().filter(|c| c.example == example).collect();
    if cells.is_empty() {
        return Err(format!(
            "unknown example {example:?}: whereabouts, cns or lws"
        ));
    }
    let cells: Vec<&Cell> = cells.into_iter().filter(|c| c.variant == variant).collect();
    if cells.is_empty() {
        return Err(format!(
            "unknown variant {variant:?}: naive, upstream or guarded"
        ));
    }
    let Some(cell) = cells.iter().find(|c| c.scenario == scenario) else {
        let known: Vec<&str> = cells.iter().map(|c| c.scenario.as_str()).collect();
        return Err(format!(
            "unknown scenario {scenario:?}: {}",
            match known.split_last() {
                Some((last, [])) => last.to_string(),
                Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
                None => String::new(),
            }
        ));
    };
    let guarded = cell.guarded;
    let outcome = cell.run(seed, kinds)?;
    ward_base::outln!("{example} {scenario} {variant} seed {seed}");
    ward_base::out!("{}", outcome.plan);
    ward_examples::cli::print_events(&outcome.history, None);
    ward_base::outln!("\nstore events (every committed write):");
    for e in &outcome.events {
        ward_base::outln!("  {e}");
    }
    if let Some(verdict) = &outcome.livelock {
        ward_base::outln!("\nthe run ended early: {verdict}");
    }
    if outcome.violations.is_empty() {
        ward_base::outln!("\nno invariant broken");
    } else {
        ward_base::outln!("\nbroken:");
        for (inv, detail) in &outcome.violations {
            ward_base::outln!("  {inv}: {detail}");
        }
    }
    Ok(
        if guarded && (!outcome.violations.is_empty() || outcome.livelock.is_some()) {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        },
    )
}
