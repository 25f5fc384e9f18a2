//! A campaign's outcome as `--json` writes it and `merge` reads it back:
//! the runs with their verdicts, printed as a table or a history.

use std::path::Path;

use serde::{Deserialize, Serialize};
use ward_campaign::process::{Run, UNPERTURBED_SEEDS, Verdict, refusals};

/// One run and its verdict.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Judged {
    /// The run.
    pub run: Run,
    /// Its verdict.
    pub verdict: Verdict,
}

/// Which part of a campaign split over an Indexed Job this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// This part's index (`JOB_COMPLETION_INDEX`).
    pub index: u64,
    /// How many parts.
    pub count: u64,
}

/// A campaign's outcome (or a part's, or several parts merged).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Outcome {
    /// The controller's command line.
    pub controller: Vec<String>,
    /// The perturbation kinds.
    pub perturb: Vec<String>,
    /// The unperturbed runs (of every part, once merged).
    pub unperturbed: Vec<Judged>,
    /// What the oracle learned as noise (one line a field).
    pub noise: Vec<String>,
    /// The perturbed runs, by seed.
    pub runs: Vec<Judged>,
    /// Wall-clock seconds (the longest part's, once merged).
    pub seconds: f64,
    /// The part, when split; None once merged.
    pub shard: Option<Shard>,
}

impl Outcome {
    /// Whether a run found something (a perturbed or an unperturbed one).
    #[must_use]
    pub fn found(&self) -> bool {
        self.runs
            .iter()
            .chain(&self.unperturbed)
            .any(|j| j.verdict.is_finding())
    }

    /// Whether every perturbed run could not run.
    #[must_use]
    pub fn nothing_ran(&self) -> bool {
        !self.runs.is_empty()
            && self
                .runs
                .iter()
                .all(|j| matches!(j.verdict, Verdict::CouldNotRun(_)))
    }

    /// Read parts written by `--json` and fold them into one: runs by
    /// seed, unperturbed runs and noise of every part.
    ///
    /// # Errors
    /// A part cannot be read or parsed, two parts ran different
    /// controllers or kinds, or a seed appears twice.
    pub fn merge(paths: &[impl AsRef<Path>]) -> Result<Outcome, String> {
        let mut merged: Option<Outcome> = None;
        for p in paths {
            let p = p.as_ref();
            let text = std::fs::read(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
            let part: Outcome = serde_json::from_slice(&text)
                .map_err(|e| format!("{}: not a ward-campaign --json file: {e}", p.display()))?;
            let Some(m) = &mut merged else {
                merged = Some(part);
                continue;
            };
            if m.controller != part.controller || m.perturb != part.perturb {
                return Err(format!(
                    "{} ran {:?} with {:?}, the first part {:?} with {:?}",
                    p.display(),
                    part.controller,
                    part.perturb,
                    m.controller,
                    m.perturb
                ));
            }
            m.unperturbed.extend(part.unperturbed);
            m.runs.extend(part.runs);
            m.noise.extend(part.noise);
            m.seconds = m.seconds.max(part.seconds);
        }
        let mut m = merged.ok_or("merge: no part given")?;
        m.runs.sort_by_key(|j| j.run.seed);
        if let Some(w) = m.runs.windows(2).find(|w| w[0].run.seed == w[1].run.seed) {
            return Err(format!("seed {} is in two parts", w[0].run.seed));
        }
        m.noise.sort();
        m.noise.dedup();
        m.shard = None;
        Ok(m)
    }

    /// The table, the unperturbed runs that broke, and each finding.
    pub fn print_table(&self) {
        let count = |w: &str| self.runs.iter().filter(|j| j.verdict.word() == w).count();
        let broken = self
            .unperturbed
            .iter()
            .filter(|j| j.verdict.is_finding())
            .count();
        let n = self.unperturbed.len();
        println!(
            "ward-campaign: {} ({n} unperturbed {}, {broken} broken, taught {} noisy {})",
            self.controller.join(" "),
            if n == 1 { "run" } else { "runs" },
            self.noise.len(),
            if self.noise.len() == 1 {
                "field"
            } else {
                "fields"
            }
        );
        println!(
            "{:>6}  {:<14} {:>7} {:>8}  first finding",
            "seed", "verdict", "calls", "seconds"
        );
        for Judged { run, verdict } in &self.runs {
            let p = run.phases;
            println!(
                "{:>6}  {:<14} {:>7} {:>8.1}  {}",
                run.seed,
                verdict.word(),
                run.requests,
                p.total().as_secs_f64(),
                first_finding(verdict)
            );
        }
        println!(
            "{} seeds: {} hold, {} differ, {} broken, {} could not run; {:.1} seeds/min ({:.0}s)",
            self.runs.len(),
            count("holds"),
            count("differs"),
            count("broken"),
            count("could-not-run"),
            self.runs.len() as f64 * 60.0 / self.seconds.max(0.001),
            self.seconds
        );
        for Judged { run, .. } in self.unperturbed.iter().chain(&self.runs) {
            let refused = refusals(&run.timeline);
            if let Some(first) = refused.first() {
                let which = if run.seed >= UNPERTURBED_SEEDS {
                    format!("unperturbed run {}", run.seed - UNPERTURBED_SEEDS)
                } else {
                    format!("seed {}", run.seed)
                };
                println!(
                    "{which}: the controller was refused {} requests (403 Forbidden), the first: {first}",
                    refused.len()
                );
            }
        }
        for (i, j) in self.unperturbed.iter().enumerate() {
            if let Verdict::Broken(why) = &j.verdict {
                println!(
                    "\nunperturbed run {i} broken (no perturbation needed):\n  {}",
                    why.replace('\n', "\n  ")
                );
            }
        }
        for Judged { run, verdict } in self.runs.iter().filter(|j| j.verdict.is_finding()) {
            println!("\nseed {} {}:", run.seed, verdict.word());
            for line in &run.plan {
                println!("  plan  {line}");
            }
            match verdict {
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

    /// Each run's plan, timeline and verdict (`--replay`).
    pub fn print_history(&self) {
        for Judged { run, verdict } in &self.runs {
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
                    println!("verdict: {}: {w}", verdict.word());
                }
                Verdict::Holds => println!("verdict: holds"),
            }
        }
    }
}

/// A verdict's first line, for tables.
pub fn first_finding(v: &Verdict) -> String {
    match v {
        Verdict::Holds => String::new(),
        Verdict::Differs(d) => format!("{} ({} differences)", d[0], d.len()),
        Verdict::Broken(w) | Verdict::CouldNotRun(w) => w.lines().next().unwrap_or("").to_string(),
    }
}
