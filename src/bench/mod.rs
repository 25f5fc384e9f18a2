//! Benchmarks under watch churn: the guarded controller against a bare
//! `kube_runtime::Controller`, ward-apiserver's write throughput, watch
//! fan-out and memory, scaling with the object count, and the speed of the
//! example campaigns and of campaigns against a controller process.
//!
//! Benchmarks measure and report; they never fail on speed. `cargo bench`
//! (`benches/watch_churn.rs`) runs [`BenchConfig::full`]; the smoke test
//! (`tests/bench_smoke.rs`) runs [`BenchConfig::smoke`] to keep every part
//! compiling and working. Results go to `target/ward-bench/`: one JSON file
//! and one SVG plot per benchmark, `results.json` with everything, and
//! `results.md`, the tables docs/benchmarks.md quotes.

pub mod apiserver;
pub mod blackbox;
pub mod campaign;
pub mod churn;
pub mod cost;
pub mod objects;
pub mod report;
pub mod results;
pub mod shard;
pub mod stats;
pub mod sys;

pub use results::Results;
pub use stats::{median, quantile, ratio};
pub use sys::runtime;

use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What to run, and how big.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// Controller churn (part 1).
    pub churn: churn::ChurnConfig,
    /// API server throughput, fan-out and memory (parts 2 and 3).
    pub api: apiserver::ApiConfig,
    /// Campaign speed (part 4).
    pub campaign: campaign::CampaignConfig,
    /// Black-box campaign speed (part 6).
    pub blackbox: blackbox::BlackboxConfig,
    /// Sharded controllers (part 5).
    pub shard: shard::ShardConfig,
    /// Where results are written.
    pub out_dir: PathBuf,
    /// Which parts run (all by default).
    pub parts: Parts,
}

/// Which parts of the benchmark run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts {
    /// Memory per stored object.
    pub memory: bool,
    /// API server writes and fan-out (and their scaling runs).
    pub api: bool,
    /// Controller churn.
    pub churn: bool,
    /// Campaign speed.
    pub campaign: bool,
    /// Black-box campaign speed.
    pub blackbox: bool,
    /// Sharded controllers.
    pub shard: bool,
}

impl Default for Parts {
    fn default() -> Self {
        Parts {
            memory: true,
            api: true,
            churn: true,
            campaign: true,
            blackbox: true,
            shard: true,
        }
    }
}

impl Parts {
    /// Only the parts named in a comma-separated list (`memory`, `api`,
    /// `churn`, `campaign`, `shard`); every part for `all` or an empty list.
    #[must_use]
    pub fn parse(list: &str) -> Parts {
        let names: Vec<&str> = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        if names.is_empty() || names.contains(&"all") {
            return Parts::default();
        }
        Parts {
            memory: names.contains(&"memory"),
            api: names.contains(&"api"),
            churn: names.contains(&"churn"),
            campaign: names.contains(&"campaign"),
            blackbox: names.contains(&"blackbox"),
            shard: names.contains(&"shard"),
        }
    }
}

impl BenchConfig {
    /// The full sizes `cargo bench` runs (about 6 minutes on 2 cores).
    #[must_use]
    pub fn full() -> Self {
        BenchConfig {
            churn: churn::ChurnConfig {
                sizes: vec![1_000, 10_000, 100_000],
                rate: 1_000.0,
                churn: Duration::from_secs(10),
                rounds: 3,
                sync_rounds: 6,
                nodes: 64,
                sync_timeout: Duration::from_secs(120),
                settle: Duration::from_secs(1),
                seed: 1,
            },
            api: apiserver::ApiConfig {
                watchers: vec![1, 10, 100],
                warmup: Duration::from_millis(500),
                measure: Duration::from_secs(4),
                objects: 1_000,
                scaling_sizes: vec![1_000, 10_000, 100_000],
                scaling_rounds: 3,
                memory_sizes: vec![1_000, 10_000, 100_000],
                window: 8_192,
                sample: 4_096,
                seed: 2,
            },
            campaign: campaign::CampaignConfig {
                seeds: 20,
                threads: 2,
            },
            blackbox: blackbox::BlackboxConfig {
                seeds: 100,
                jobs: 8,
                unperturbed: 3,
                perturb: true,
                dir: default_out_dir("ward-bench-blackbox"),
            },
            shard: shard::ShardConfig {
                objects: 100_000,
                replicas: vec![1, 2, 4],
                lease: Duration::from_secs(5),
                timeout: Duration::from_secs(300),
            },
            out_dir: default_out_dir("ward-bench"),
            parts: Parts::default(),
        }
    }

    /// Tiny sizes for the smoke test (seconds, not minutes), written to
    /// `target/ward-bench-smoke/` so a smoke run never overwrites real results.
    #[must_use]
    pub fn smoke() -> Self {
        BenchConfig {
            churn: churn::ChurnConfig {
                sizes: vec![50],
                rate: 200.0,
                churn: Duration::from_millis(500),
                rounds: 1,
                sync_rounds: 1,
                nodes: 4,
                sync_timeout: Duration::from_secs(60),
                settle: Duration::from_millis(50),
                seed: 1,
            },
            api: apiserver::ApiConfig {
                watchers: vec![1, 4],
                warmup: Duration::from_millis(50),
                measure: Duration::from_millis(300),
                objects: 50,
                scaling_sizes: vec![50, 200],
                scaling_rounds: 1,
                memory_sizes: vec![50, 200],
                window: 1_024,
                sample: 256,
                seed: 2,
            },
            campaign: campaign::CampaignConfig {
                seeds: 1,
                threads: 2,
            },
            blackbox: blackbox::BlackboxConfig {
                seeds: 1,
                jobs: 2,
                unperturbed: 1,
                perturb: false,
                dir: default_out_dir("ward-bench-smoke-blackbox"),
            },
            shard: shard::ShardConfig {
                objects: 200,
                replicas: vec![1, 2, 3],
                lease: Duration::from_secs(2),
                timeout: Duration::from_secs(60),
            },
            out_dir: default_out_dir("ward-bench-smoke"),
            parts: Parts::default(),
        }
    }
}

/// `target/<name>` of this workspace (or of `CARGO_TARGET_DIR`).
#[must_use]
pub fn default_out_dir(name: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target")));
    target.join(name)
}

/// Run every benchmark, write the results under `config.out_dir`, and
/// return them. `log` gets one line per step (progress). A `smoke` run
/// runs the parts after the memory part at once, each on threads of its
/// own (a check that each works; its figures are not measurements);
/// otherwise one after another.
pub fn run_all(config: &BenchConfig, smoke: bool, log: &(dyn Fn(&str) + Sync)) -> Results {
    let started = Instant::now();
    // Memory first, while the process heap is fresh.
    let parts = config.parts;
    let mut memory = Vec::new();
    if parts.memory {
        log("api server: memory per stored object");
        memory = apiserver::memory(&config.api, log);
    }
    // The speed parts run on the bare allocator (see sys::Counting).
    sys::stop_counting();
    // A part left out runs with nothing to do.
    let mut churn_config = config.churn.clone();
    if !parts.churn {
        churn_config.sizes.clear();
    }
    let mut campaign_config = config.campaign.clone();
    if !parts.campaign {
        campaign_config.seeds = 0;
    }
    let mut blackbox_config = config.blackbox.clone();
    if !parts.blackbox {
        blackbox_config.seeds = 0;
    }
    let mut shard_config = config.shard.clone();
    if !parts.shard {
        shard_config.objects = 0;
    }
    let api_part = || {
        if !parts.api {
            return apiserver::ApiResults::default();
        }
        log("api server: writes and watch fan-out");
        apiserver::run(&config.api, log)
    };
    let churn_part = || {
        log("controller churn: bare vs guarded");
        churn::run(&churn_config, log)
    };
    let campaign_part = || {
        log("campaign speed");
        campaign::run(&campaign_config, log)
    };
    let blackbox_part = || {
        log("black-box campaign speed: a controller process, every kind");
        blackbox::run(&blackbox_config, log)
    };
    let shard_part = || {
        log("sharded controllers: 1, 2, 4 replicas, server and client filtering");
        shard::run(&shard_config, log)
    };
    let (mut api, churn, campaign, blackbox, shard) = if smoke {
        // The smoke run checks that each part works, never its speed, and
        // most of its time is each part's fixed windows and lease waits:
        // the parts run at once (21 s one after another, 2 cores).
        std::thread::scope(|s| {
            let api = s.spawn(api_part);
            let churn = s.spawn(churn_part);
            let campaign = s.spawn(campaign_part);
            let blackbox = s.spawn(blackbox_part);
            let shard = s.spawn(shard_part);
            fn join<T>(h: std::thread::ScopedJoinHandle<'_, T>) -> T {
                h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
            }
            (
                join(api),
                join(churn),
                join(campaign),
                join(blackbox),
                join(shard),
            )
        })
    } else {
        (
            api_part(),
            churn_part(),
            campaign_part(),
            blackbox_part(),
            shard_part(),
        )
    };
    api.memory = memory;
    let scaling = report::scaling(&churn, &api);
    let mut results = Results {
        machine: sys::machine(),
        date: sys::today(),
        smoke,
        total_secs: 0.0,
        churn,
        api,
        scaling,
        campaign,
        blackbox,
        shard,
        targets: Vec::new(),
    };
    results.targets = report::targets(&results);
    results.total_secs = started.elapsed().as_secs_f64();
    if let Err(e) = report::write(&results, &config.out_dir) {
        log(&format!(
            "writing results to {}: {e}",
            config.out_dir.display()
        ));
    }
    results
}
