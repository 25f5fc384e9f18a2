//! Campaigns against a controller that runs as its own process, in any
//! language: point it at a command and a workload, get its races.
//!
//! Every seed gets a fresh ward-apiserver (in this process, on loopback)
//! with the [setup manifests](Scenario::manifests) applied; the controller
//! is started with `KUBECONFIG` naming a loopback listener of its own
//! (see the supervisor: its requests are counted, answered as its own
//! identity, cut off by partitions, and a `crash` SIGKILLs its process
//! group right after the server has answered its k-th read or write, then
//! starts it again with its memory and watches gone). The controller, the
//! workload's commands, the invariant and the judge also get [`RUN_DIR`]
//! (`WARD_RUN_DIR`), the seed's own folder: where a controller that keeps
//! its state outside the API writes it for the invariant to read. The seed's
//! [`Plan`](crate::Plan) is carried out while the [workload] runs; then
//! the run settles (the plan done, nothing written for
//! [`Scenario::quiet`], the garbage collector idle) and it is judged: its
//! end state, and the values its objects took on the way, by the
//! [differential oracle](oracle) against unperturbed runs; its end state
//! by the user's invariant command and its history by the user's judge,
//! if there are.
//!
//! ```no_run
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! use std::path::Path;
//! use ward_campaign::perturbations::builtin;
//! use ward_campaign::process::{self, Scenario, Verdict};
//! use ward_campaign::process::workload::{Workload, load_manifests};
//!
//! let workload = Workload::load(Path::new("workload.yaml"))?;
//! let scenario = Scenario::new(vec!["./my-controller".into()], workload)
//!     .manifests(load_manifests(Path::new("crds/"))?);
//! let (oracle, unperturbed) = process::learn(&scenario, 3, 2, |_| {}).await?;
//! let seeds: Vec<u64> = (0..20).collect();
//! for (run, verdict) in process::campaign(&scenario, &oracle, &builtin(), &seeds, 2, |_, _| {}).await {
//!     if verdict != Verdict::Holds {
//!         println!("seed {}: {verdict:?}\n{}", run.seed, run.plan.join("\n"));
//!     }
//! }
//! # let _ = unperturbed; Ok(()) }
//! ```
//!
//! A run of a real process cannot replay its interleaving exactly: the
//! *plan* replays exactly (same seed, same actions, same windows), and
//! the verdicts of two runs of a seed can be compared.

mod leaves;
pub mod oracle;
mod run;
mod scenario;
mod states;
mod supervisor;
mod timeline;
pub mod workload;

use std::sync::Arc;

use futures::StreamExt as _;
use serde::{Deserialize, Serialize};

use crate::plan::Perturbation;
use oracle::{Difference, Oracle, Snapshot};
pub use run::{Ending, Phases, Run, run};
pub use scenario::Scenario;
pub use supervisor::RUN_DIR;
pub use timeline::{Entry, Lane, refusals};

/// A seed's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict", content = "detail", rename_all = "kebab-case")]
pub enum Verdict {
    /// Its end state is the unperturbed one (beyond noise), and every
    /// check held.
    Holds,
    /// Its end state, or a value its objects took on the way, differs
    /// from the unperturbed runs'.
    Differs(Vec<Difference>),
    /// A step failed, the controller exited or livelocked, or the user's
    /// invariant or judge failed.
    Broken(String),
    /// No verdict: the run could not be carried out.
    CouldNotRun(String),
}

impl Verdict {
    /// Whether this is a finding (a difference or a breakage).
    #[must_use]
    pub fn is_finding(&self) -> bool {
        matches!(self, Verdict::Differs(_) | Verdict::Broken(_))
    }

    /// One word, for tables.
    #[must_use]
    pub fn word(&self) -> &'static str {
        match self {
            Verdict::Holds => "holds",
            Verdict::Differs(_) => "differs",
            Verdict::Broken(_) => "broken",
            Verdict::CouldNotRun(_) => "could-not-run",
        }
    }
}

/// Judge a perturbed run against what the unperturbed runs taught.
#[must_use]
pub fn judge(oracle: &Oracle, run: &Run) -> Verdict {
    match (&run.ending, &run.end) {
        (Ending::Settled, Some(end)) => {
            let d = oracle.judge(end);
            if d.is_empty() {
                Verdict::Holds
            } else {
                Verdict::Differs(d)
            }
        }
        (Ending::Settled, None) => Verdict::CouldNotRun("no end state was taken".into()),
        (Ending::Step(w), _) => Verdict::Broken(format!("workload {w}")),
        (Ending::Exited(w), _) => Verdict::Broken(format!("the controller exited: {w}")),
        (Ending::Livelock(w), _) => Verdict::Broken(w.clone()),
        (Ending::Invariant(w), end) => {
            // The oracle's differences too: a broken run that also ends
            // elsewhere says so.
            let mut why = format!("the invariant failed: {w}");
            let d = end.as_ref().map(|e| oracle.judge(e)).unwrap_or_default();
            if !d.is_empty() {
                why.push_str(&format!(
                    "\nand its end state differs from the unperturbed runs' ({} differences):",
                    d.len()
                ));
                for x in d.iter().take(10) {
                    why.push_str(&format!("\n  diff  {x}"));
                }
            }
            Verdict::Broken(why)
        }
        (Ending::NotQuiet(w) | Ending::CouldNotRun(w), _) => Verdict::CouldNotRun(w.clone()),
    }
}

/// Why a campaign could not judge anything.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CampaignError {
    /// An unperturbed run did not settle cleanly: the scenario itself
    /// fails, or the controller cannot run; nothing can be judged.
    #[error("unperturbed run {index} (seed {seed}) did not settle: {ending}")]
    Unperturbed {
        /// Which of the unperturbed runs.
        index: usize,
        /// Its seed.
        seed: u64,
        /// How it ended.
        ending: Ending,
    },
}

/// The seeds unperturbed runs use: far from the campaign's own.
pub const UNPERTURBED_SEEDS: u64 = 1 << 40;

/// Learn the oracle from `n` unperturbed runs (at least one; at most
/// `jobs` at a time; `each` sees every run as it ends). Each comes with
/// its verdict: an unperturbed run that fails the user's invariant is a
/// finding of its own (the bug needs no perturbation), and still teaches
/// the oracle.
///
/// # Errors
/// [`CampaignError::Unperturbed`] if one of them did not settle.
pub async fn learn(
    scenario: &Scenario,
    n: usize,
    jobs: usize,
    mut each: impl FnMut(&Run),
) -> Result<(Oracle, Vec<(Run, Verdict)>), CampaignError> {
    let mut s = futures::stream::iter(unperturbed_seeds(n).map(|seed| run(scenario, &[], seed)))
        .buffered(jobs.max(1));
    let mut runs = Vec::with_capacity(n);
    while let Some(run) = s.next().await {
        each(&run);
        runs.push(run);
    }
    learned(runs)
}

/// The seeds of `n` unperturbed runs (at least one).
fn unperturbed_seeds(n: usize) -> impl Iterator<Item = u64> {
    (0..n.max(1) as u64).map(|i| UNPERTURBED_SEEDS + i)
}

/// The oracle the unperturbed `runs` (in seed order) teach, and their
/// verdicts.
fn learned(runs: Vec<Run>) -> Result<(Oracle, Vec<(Run, Verdict)>), CampaignError> {
    let mut ends = Vec::with_capacity(runs.len());
    let mut judged = Vec::with_capacity(runs.len());
    for r in runs {
        let (verdict, end) = unperturbed_verdict(&r)?;
        ends.push(end.clone());
        judged.push((r, verdict));
    }
    Ok((Oracle::learn(&ends), judged))
}

/// An unperturbed run's verdict (it holds, or the invariant failed with
/// no perturbation) and its end state; a run that did not settle is an
/// error.
fn unperturbed_verdict(r: &Run) -> Result<(Verdict, &Snapshot), CampaignError> {
    match (&r.ending, &r.end) {
        (Ending::Settled, Some(end)) => Ok((Verdict::Holds, end)),
        (Ending::Invariant(why), Some(end)) => Ok((
            Verdict::Broken(format!("the invariant failed unperturbed: {why}")),
            end,
        )),
        (ending, _) => Err(CampaignError::Unperturbed {
            index: (r.seed - UNPERTURBED_SEEDS) as usize,
            seed: r.seed,
            ending: ending.clone(),
        }),
    }
}

/// What [`sweep`] found.
#[derive(Debug)]
#[non_exhaustive]
pub struct Swept {
    /// What the unperturbed runs taught.
    pub oracle: Oracle,
    /// The unperturbed runs with their verdicts, in seed order.
    pub unperturbed: Vec<(Run, Verdict)>,
    /// The perturbed runs with their verdicts, in seed order.
    pub runs: Vec<(Run, Verdict)>,
}

/// A whole campaign in one queue: `n` unperturbed runs (at least one)
/// first, then `seeds` with `kinds`, at most `jobs` at a time. A perturbed
/// run starts as soon as a slot is free, beside the unperturbed runs; only
/// its verdict waits for the oracle they teach. With few seeds this ends
/// sooner than [`learn`] then [`campaign`] (3 runs on 3 jobs: one run's
/// time instead of two). `learning` sees each unperturbed run as it ends,
/// `each` each perturbed one once it is judged.
///
/// # Errors
/// [`CampaignError::Unperturbed`] as soon as an unperturbed run did not
/// settle; the runs still going are dropped.
pub async fn sweep(
    scenario: &Scenario,
    n: usize,
    kinds: &[Arc<dyn Perturbation>],
    seeds: &[u64],
    jobs: usize,
    mut learning: impl FnMut(&Run),
    mut each: impl FnMut(&Run, &Verdict),
) -> Result<Swept, CampaignError> {
    let n = n.max(1);
    let unperturbed = unperturbed_seeds(n).map(|seed| (seed, &[][..]));
    let perturbed = seeds.iter().map(|&seed| (seed, kinds));
    let mut s = futures::stream::iter(
        unperturbed
            .chain(perturbed)
            .enumerate()
            .map(|(i, (seed, kinds))| async move { (i < n, run(scenario, kinds, seed).await) }),
    )
    .buffer_unordered(jobs.max(1));
    let mut taught = Vec::with_capacity(n);
    let mut waiting = Vec::new();
    let mut learnt: Option<(Oracle, Vec<(Run, Verdict)>)> = None;
    let mut runs = Vec::with_capacity(seeds.len());
    while let Some((unperturbed, r)) = s.next().await {
        if unperturbed {
            learning(&r);
            unperturbed_verdict(&r)?;
            taught.push(r);
            if taught.len() == n {
                taught.sort_by_key(|r| r.seed);
                learnt = Some(learned(std::mem::take(&mut taught))?);
            }
        } else {
            waiting.push(r);
        }
        if let Some((oracle, _)) = &learnt {
            for r in waiting.drain(..) {
                let v = judge(oracle, &r);
                each(&r, &v);
                runs.push((r, v));
            }
        }
    }
    let (oracle, unperturbed) = learnt.expect("every unperturbed run ended");
    runs.sort_by_key(|(r, _)| r.seed);
    Ok(Swept {
        oracle,
        unperturbed,
        runs,
    })
}

/// Run `seeds` with `kinds`, at most `jobs` at a time, judging each as it
/// ends (`each` sees it then); the runs with their verdicts, in seed order.
pub async fn campaign(
    scenario: &Scenario,
    oracle: &Oracle,
    kinds: &[Arc<dyn Perturbation>],
    seeds: &[u64],
    jobs: usize,
    mut each: impl FnMut(&Run, &Verdict),
) -> Vec<(Run, Verdict)> {
    let mut out = Vec::with_capacity(seeds.len());
    let mut s = futures::stream::iter(seeds.iter().map(|&seed| run(scenario, kinds, seed)))
        .buffer_unordered(jobs.max(1));
    while let Some(run) = s.next().await {
        let v = judge(oracle, &run);
        each(&run, &v);
        out.push((run, v));
    }
    out.sort_by_key(|(r, _)| r.seed);
    out
}
