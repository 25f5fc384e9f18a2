//! Part 4, campaign speed: seeded runs per second of every example's
//! scenarios in each variant, each seed under its plan of every
//! perturbation kind (one thread, each run on its own single-threaded
//! runtime in simulated time, as `ward-demo` runs them), and of the whole
//! `ward-demo` campaign on its worker threads.

use std::time::Instant;

use serde::Serialize;
use ward_examples::cns::AzureCns;
use ward_examples::demo::{self, Selection};
use ward_examples::lws::Lws;
use ward_examples::whereabouts::Whereabouts;

/// Sizes of the campaign benchmark.
#[derive(Debug, Clone)]
pub struct CampaignConfig {
    /// Seeds per scenario and variant.
    pub seeds: u64,
    /// Worker threads of the whole-campaign run.
    pub threads: usize,
}

/// One scenario in one variant.
#[derive(Debug, Clone, Serialize)]
pub struct CampaignRow {
    /// Example name.
    pub example: String,
    /// Scenario.
    pub scenario: String,
    /// Variant.
    pub variant: String,
    /// Seeded runs.
    pub runs: u64,
    /// Runs that broke an invariant.
    pub violating_runs: u64,
    /// Runs that failed to run.
    pub errors: u64,
    /// Wall seconds, one thread.
    pub secs: f64,
    /// Runs per second, one thread.
    pub runs_per_sec: f64,
}

/// Part 4's results.
#[derive(Debug, Clone, Serialize)]
pub struct CampaignResults {
    /// Seeds per row.
    pub seeds: u64,
    /// Per scenario and variant, one thread.
    pub rows: Vec<CampaignRow>,
    /// The whole campaign (every row's runs) on `threads` threads.
    pub campaign_runs: u64,
    /// Its worker threads.
    pub threads: usize,
    /// Its wall seconds.
    pub campaign_secs: f64,
    /// Its runs per second.
    pub campaign_runs_per_sec: f64,
}

/// Run part 4.
pub fn run(config: &CampaignConfig, log: &(dyn Fn(&str) + Sync)) -> CampaignResults {
    let mut rows = Vec::new();
    if config.seeds == 0 {
        return CampaignResults {
            seeds: 0,
            rows,
            campaign_runs: 0,
            threads: config.threads,
            campaign_secs: 0.0,
            campaign_runs_per_sec: 0.0,
        };
    }
    let examples = [
        demo::cells::<Whereabouts>(),
        demo::cells::<AzureCns>(),
        demo::cells::<Lws>(),
    ]
    .concat();
    let kinds = ward_campaign::perturbations::builtin();
    for cell in &examples {
        let t0 = Instant::now();
        let (mut violating, mut errors) = (0, 0);
        for seed in 0..config.seeds {
            match cell.run(seed, &kinds) {
                Ok(r) if !r.violations.is_empty() => violating += 1,
                Ok(_) => {}
                Err(_) => errors += 1,
            }
        }
        let secs = t0.elapsed().as_secs_f64();
        let row = CampaignRow {
            example: cell.example.into(),
            scenario: cell.scenario.clone(),
            variant: cell.variant.clone(),
            runs: config.seeds,
            violating_runs: violating,
            errors,
            secs,
            runs_per_sec: super::ratio(config.seeds as f64, secs),
        };
        log(&format!(
            "  campaign {} {} {}: {} runs in {:.2}s ({:.1} runs/s)",
            row.example, row.scenario, row.variant, row.runs, row.secs, row.runs_per_sec
        ));
        rows.push(row);
    }
    let t0 = Instant::now();
    let selection = Selection {
        kinds,
        ..Selection::seeds(0..config.seeds)
    };
    let table = demo::campaign(&examples, &selection, config.threads, &|| {});
    let campaign_secs = t0.elapsed().as_secs_f64();
    let campaign_runs: u64 = table.iter().map(|r| r.runs as u64).sum();
    log(&format!(
        "  campaign (ward-demo, {} threads): {campaign_runs} runs in {campaign_secs:.2}s",
        config.threads
    ));
    CampaignResults {
        seeds: config.seeds,
        rows,
        campaign_runs,
        threads: config.threads,
        campaign_secs,
        campaign_runs_per_sec: super::ratio(campaign_runs as f64, campaign_secs),
    }
}
