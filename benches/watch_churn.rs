//! `cargo bench`: every Ward benchmark at full size — controller churn
//! (bare vs guarded), ward-apiserver throughput, fan-out and memory,
//! scaling with the object count, campaign speed. Results and plots go to
//! `target/ward-bench/`; the tables are printed at the end.
//!
//! Benchmarks measure and report: this never fails on speed.

use std::time::Instant;

use ward_workspace::bench::{self, BenchConfig};

/// The allocator the binaries ship with, so the figures are theirs;
/// counted, so the memory figures are exact heap bytes.
#[global_allocator]
static ALLOC: bench::sys::Counting<mimalloc::MiMalloc> = bench::sys::Counting(mimalloc::MiMalloc);

fn main() {
    // `cargo bench -- <filter>` and `--bench` flags are accepted and ignored:
    // this target always runs everything (about 13 minutes on 2 cores).
    let started = Instant::now();
    let mut config = BenchConfig::full();
    // WARD_BENCH_PARTS=api,churn runs only those parts (memory, api, churn,
    // campaign, blackbox, shard).
    if let Ok(list) = std::env::var("WARD_BENCH_PARTS") {
        config.parts = bench::Parts::parse(&list);
        if config.parts != bench::Parts::default() {
            // A partial run never overwrites the full results.
            config.out_dir = bench::default_out_dir("ward-bench-partial");
        }
    }
    // WARD_BENCH_CHURN_SIZES=1000,10000 churns only those object counts.
    if let Ok(list) = std::env::var("WARD_BENCH_CHURN_SIZES") {
        config.churn.sizes = list
            .split(',')
            .filter_map(|n| n.trim().parse().ok())
            .collect();
        config.out_dir = bench::default_out_dir("ward-bench-partial");
    }
    // WARD_BENCH_CHURN_SECS=0 runs each churn phase for that long (0: the
    // syncs alone, e.g. to profile them).
    if let Some(secs) = env::<f64>("WARD_BENCH_CHURN_SECS") {
        config.churn.churn = std::time::Duration::from_secs_f64(secs);
        config.out_dir = bench::default_out_dir("ward-bench-partial");
    }
    // WARD_BENCH_SYNC_ROUNDS=20 runs that many sync-only rounds per size.
    if let Some(n) = env::<usize>("WARD_BENCH_SYNC_ROUNDS") {
        config.churn.sync_rounds = n;
        config.out_dir = bench::default_out_dir("ward-bench-partial");
    }
    // WARD_BENCH_SHARD_OBJECTS=10000 shards that many objects.
    if let Some(n) = env::<usize>("WARD_BENCH_SHARD_OBJECTS") {
        config.shard.objects = n;
        config.out_dir = bench::default_out_dir("ward-bench-partial");
    }
    let log = |line: &str| eprintln!("[{:>6.1}s] {line}", started.elapsed().as_secs_f64());
    let results = bench::run_all(&config, false, &log);
    ward_base::outln!("{}", bench::report::markdown(&results));
    ward_base::outln!(
        "Results: {}/results.json (+ churn, apiserver, scaling, campaign .json and .svg; results.md)",
        config.out_dir.display()
    );
}

/// The environment variable `name`, parsed, when it is set and parses.
fn env<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok()?.trim().parse().ok()
}
