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
use ward_examples::demo::{self, Example, Selection};

/// Run every example scenario in every variant over many seeds, each under
/// the seed's plan of perturbations.
#[derive(Debug, Parser)]
#[command(name = "ward-demo", version)]
struct Args {
    /// Only this example (whereabouts, cns, lws).
    #[arg(long)]
    example: Option<String>,
    /// Only this scenario (S1, S2, S3).
    #[arg(long)]
    scenario: Option<String>,
    /// Only this variant (naive, upstream, guarded).
    #[arg(long)]
    variant: Option<String>,
    /// Seeds per scenario and variant (the default run takes about a
    /// minute on 2 cores).
    #[arg(long, default_value_t = 200)]
    seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 0)]
    first_seed: u64,
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
    let examples: Vec<&dyn Example> = vec![&demo::Whereabouts, &demo::Cns, &demo::Lws];
    let kinds = ward_campaign::select(&args.perturb, &ward_campaign::builtin())
        .map_err(|e| e.to_string())?;
    if let Some(what) = &args.replay {
        return replay(&examples, what, &kinds);
    }
    let selection = Selection {
        seeds: args.first_seed..args.first_seed + args.seeds,
        kinds,
        example: args.example.clone(),
        scenario: args.scenario.clone(),
        variant: args.variant.clone(),
    };
    let cells = selection.cells(&examples);
    if cells.is_empty() {
        return Err("no example, scenario and variant matches the selection".into());
    }
    let total = cells.len() as u64 * args.seeds;
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} runs")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let started = std::time::Instant::now();
    let rows = demo::campaign(&examples, &selection, args.threads, &|| bar.inc(1));
    bar.finish_and_clear();
    if args.json {
        let json = serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?;
        ward_base::outln!("{json}");
    } else {
        ward_base::outln!("{}", demo::table(&rows));
        let kinds: Vec<_> = selection.kinds.iter().map(|k| k.kind()).collect();
        ward_base::outln!(
            "{total} runs in {:.1} s (seeds {}..{}, simulated time; perturbations: {}; `--replay example/scenario/variant/seed` replays one)",
            started.elapsed().as_secs_f64(),
            selection.seeds.start,
            selection.seeds.end,
            if kinds.is_empty() {
                "none".into()
            } else {
                kinds.join(", ")
            },
        );
    }
    if demo::guarded_failed(&rows) {
        eprintln!("ward-demo: a guarded variant broke an invariant (or failed to run)");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// `--replay example/scenario/variant/seed`.
fn replay(
    examples: &[&dyn Example],
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
    let ex = examples
        .iter()
        .find(|e| e.name() == example)
        .ok_or_else(|| format!("unknown example {example:?}: whereabouts, cns or lws"))?;
    let guarded = ex
        .variants()
        .iter()
        .find(|v| v.name == variant)
        .ok_or_else(|| format!("unknown variant {variant:?}: naive, upstream or guarded"))?
        .guarded;
    let outcome = ex.run(scenario, variant, seed, kinds)?;
    ward_base::outln!("{example} {scenario} {variant} seed {seed}");
    ward_base::out!("{}", outcome.plan);
    ward_examples::run::print_events(&outcome.history, None);
    ward_base::outln!("\nstore events (every committed write):");
    for e in &outcome.events {
        ward_base::outln!("  {e}");
    }
    if outcome.violations.is_empty() {
        ward_base::outln!("\nno invariant broken");
    } else {
        ward_base::outln!("\nbroken:");
        for (inv, detail) in &outcome.violations {
            ward_base::outln!("  {inv}: {detail}");
        }
    }
    Ok(if guarded && !outcome.violations.is_empty() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
