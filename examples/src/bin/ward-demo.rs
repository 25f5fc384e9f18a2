//! `ward-demo`: the three seed races, naive vs guarded, in simulated time
//! against an embedded ward-apiserver; one table; a non-zero exit if a
//! guarded run breaks an invariant.

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use ward_examples::demo::{self, Example};

/// Run every example scenario in every variant over many seeds.
#[derive(Debug, Parser)]
#[command(name = "ward-demo", version)]
struct Args {
    /// Seeds per scenario and variant.
    #[arg(long, default_value_t = 100)]
    seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 0)]
    first_seed: u64,
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
    let examples: Vec<&dyn Example> = vec![&demo::Whereabouts, &demo::Cns, &demo::Lws];
    let total: u64 = examples
        .iter()
        .map(|e| (e.scenarios().len() * e.variants().len()) as u64 * args.seeds)
        .sum();
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} runs")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let started = std::time::Instant::now();
    let rows = demo::campaign(
        &examples,
        args.first_seed..args.first_seed + args.seeds,
        args.threads,
        &|| bar.inc(1),
    );
    bar.finish_and_clear();
    ward_base::outln!("{}", demo::table(&rows));
    ward_base::outln!(
        "{total} runs in {:.1} s (seeds {}..{}, simulated time; `whereabouts|cns|lws scenario S1 --mode naive --seed N` replays one)",
        started.elapsed().as_secs_f64(),
        args.first_seed,
        args.first_seed + args.seeds
    );
    if demo::guarded_failed(&rows) {
        eprintln!("ward-demo: a guarded variant broke an invariant (or failed to run)");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
