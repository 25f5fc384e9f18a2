//! Campaigns against a controller that runs as its own process, in any
//! language: point it at a command and a workload, get its races.
//!
//! Every seed gets a fresh ward-apiserver (in this process, on loopback)
//! with the [setup manifests](Scenario::manifests) applied; the controller
//! is started with `KUBECONFIG` naming a loopback listener of its own
//! (see the supervisor: its requests are counted, answered as its own
//! identity, cut off by partitions, and a `crash` SIGKILLs its process
//! group right after the server has answered its k-th read or write, then
//! starts it again with its memory and watches gone). The seed's
//! [`Plan`](crate::Plan) is carried out while the [workload] runs; then
//! the run settles (the plan done, nothing written for
//! [`Scenario::quiet`], the garbage collector idle) and its end state is
//! judged by the [differential oracle](oracle), and by the user's own
//! invariant command if there is one.
//!
//! A run of a real process cannot replay its interleaving exactly: the
//! *plan* replays exactly (same seed, same actions, same windows), and
//! the verdicts of two runs of a seed can be compared.

pub mod oracle;
mod run;
pub mod states;
mod supervisor;
pub mod workload;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::time::Instant;

use crate::plan::Perturbation;
use crate::world::Limits;
use oracle::{Difference, Oracle, Snapshot};
use workload::Workload;

/// What a black-box campaign runs: one controller command, the setup,
/// the workload and the bounds of every wait.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The controller's command line (program and arguments).
    pub controller: Vec<String>,
    /// Its name: the identity the plan aims at (`controller` by default).
    pub name: String,
    /// Objects applied before the controller starts (CRDs, RBAC, initial
    /// objects), CRDs and Namespaces first.
    pub manifests: Vec<Value>,
    /// The workload.
    pub workload: Workload,
    /// A command run against the server once the run has settled
    /// (KUBECONFIG set): exit 0 or the run is a violation.
    pub invariant: Option<Vec<String>>,
    /// How long the plan's windows are drawn over (by default the
    /// workload's sleeps, at least 5s).
    pub horizon: Option<Duration>,
    /// Settled once nothing has been written for this long after the
    /// plan is done (3s). It must outlast the controller's longest wait
    /// before a retry: a controller that requeues a failed write after 2s
    /// has not finished when nothing was written for 1s.
    pub quiet: Duration,
    /// At most this long to settle (30s).
    pub settle: Duration,
    /// The controller must make its first API call within this (20s).
    pub start_timeout: Duration,
    /// Bounds on the controller's API calls.
    pub limits: Limits,
    /// Where each seed's kubeconfigs and the controller's output go
    /// (`<dir>/seed-N/`).
    pub dir: PathBuf,
}

impl Scenario {
    /// A scenario running `controller` under `workload`, its files under
    /// a fresh folder of the system's temporary directory.
    #[must_use]
    pub fn new(controller: Vec<String>, workload: Workload) -> Scenario {
        Scenario {
            controller,
            name: "controller".into(),
            manifests: Vec::new(),
            workload,
            invariant: None,
            horizon: None,
            quiet: Duration::from_secs(3),
            settle: Duration::from_secs(30),
            start_timeout: Duration::from_secs(20),
            limits: Limits {
                calls_per_instant: u64::MAX,
                calls: 200_000,
            },
            dir: std::env::temp_dir().join(format!("ward-campaign-{}", std::process::id())),
        }
    }

    /// The setup manifests.
    #[must_use]
    pub fn manifests(mut self, objects: Vec<Value>) -> Self {
        self.manifests = objects;
        self
    }

    /// The user's invariant command.
    #[must_use]
    pub fn invariant(mut self, argv: Vec<String>) -> Self {
        self.invariant = Some(argv);
        self
    }

    /// Where runs keep their files.
    #[must_use]
    pub fn dir(mut self, dir: PathBuf) -> Self {
        self.dir = dir;
        self
    }

    /// The plan's horizon: the `horizon` field, else the workload's
    /// sleeps, at least 5s.
    #[must_use]
    pub fn horizon(&self) -> Duration {
        self.horizon
            .unwrap_or_else(|| self.workload.sleeps.max(Duration::from_secs(5)))
    }

    /// Run one seed with `kinds` (none: unperturbed).
    pub async fn run(&self, kinds: &[Arc<dyn Perturbation>], seed: u64) -> Run {
        run::run(self, kinds, seed).await
    }
}

/// A swimlane of a run's timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lane {
    /// The workload's steps.
    Workload,
    /// The controller's requests, exits and restarts.
    Controller,
    /// Committed writes (the controller's, the workload's, the GC's).
    Store,
    /// The plan's actions.
    Perturbation,
}

/// One entry of a run's timeline.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    /// Milliseconds from the run's start.
    pub ms: u64,
    /// Its lane.
    pub lane: Lane,
    /// What happened.
    pub what: String,
}

/// A run's timeline, appended to by its tasks.
#[derive(Clone)]
pub(crate) struct Timeline(Arc<(Instant, Mutex<Vec<Entry>>)>);

impl Timeline {
    fn new() -> Timeline {
        Timeline(Arc::new((Instant::now(), Mutex::default())))
    }

    pub(crate) fn push(&self, lane: Lane, what: String) {
        let ms = self.0.0.elapsed().as_millis() as u64;
        let mut v = self.0.1.lock().unwrap_or_else(|e| e.into_inner());
        v.push(Entry { ms, lane, what });
    }

    fn entries(&self) -> Vec<Entry> {
        self.0.1.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "ending", content = "detail", rename_all = "kebab-case")]
pub enum Ending {
    /// The workload ran and the run settled.
    Settled,
    /// A workload step failed (a wait not met in time, a refused write).
    Step(String),
    /// The controller exited on its own.
    Exited(String),
    /// The controller passed the run's call limits.
    Livelock(String),
    /// Still writing when the settle time ran out.
    NotQuiet(String),
    /// The user's invariant command failed.
    Invariant(String),
    /// The run could not be carried out (bad setup, a controller that
    /// never starts): no verdict on the controller.
    CouldNotRun(String),
}

impl std::fmt::Display for Ending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ending::Settled => f.write_str("settled"),
            Ending::Step(w) => write!(f, "workload {w}"),
            Ending::Exited(w) => write!(f, "the controller exited: {w}"),
            Ending::Livelock(w) | Ending::NotQuiet(w) | Ending::CouldNotRun(w) => f.write_str(w),
            Ending::Invariant(w) => write!(f, "the invariant failed: {w}"),
        }
    }
}

/// Where a run's time went.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Phases {
    /// Server, setup, and the controller up to its first call.
    #[serde(with = "ms")]
    pub start: Duration,
    /// The workload.
    #[serde(with = "ms")]
    pub workload: Duration,
    /// Settling.
    #[serde(with = "ms")]
    pub settle: Duration,
    /// Killing the controller, stopping the server.
    #[serde(with = "ms")]
    pub teardown: Duration,
}

/// Durations as whole milliseconds in JSON.
mod ms {
    use std::time::Duration;

    pub(super) fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }

    pub(super) fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Duration, D::Error> {
        let ms: u64 = serde::Deserialize::deserialize(d)?;
        Ok(Duration::from_millis(ms))
    }
}

/// One run of one seed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    /// The seed (of the server and the plan).
    pub seed: u64,
    /// The plan, one line per action.
    pub plan: Vec<String>,
    /// How it ended.
    #[serde(flatten)]
    pub ending: Ending,
    /// The end state, when the run got that far.
    #[serde(skip)]
    pub end: Option<Snapshot>,
    /// The controller's API calls.
    pub requests: u64,
    /// Where its time went.
    pub phases: Phases,
    /// What happened, in order.
    pub timeline: Vec<Entry>,
}

impl Run {
    fn failed(seed: u64, plan: Vec<String>, ending: Ending, timeline: Timeline) -> Run {
        Run {
            seed,
            plan,
            ending,
            end: None,
            requests: 0,
            phases: Phases::default(),
            timeline: timeline.entries(),
        }
    }
}

/// A seed's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict", content = "detail", rename_all = "kebab-case")]
pub enum Verdict {
    /// Its end state is the unperturbed one (beyond noise), and every
    /// check held.
    Holds,
    /// Its end state differs from the unperturbed runs'.
    Differs(Vec<Difference>),
    /// A step failed, the controller exited, livelocked, or the user's
    /// invariant failed.
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
        (Ending::Invariant(w), _) => Verdict::Broken(format!("the invariant failed: {w}")),
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

/// Learn the oracle from `n` unperturbed runs (at most `jobs` at a time;
/// `each` sees every run as it ends). Each comes with its verdict: an
/// unperturbed run that fails the user's invariant is a finding of its
/// own (the bug needs no perturbation), and still teaches the oracle.
///
/// # Errors
/// [`CampaignError::Unperturbed`] if one of them did not settle.
pub async fn learn(
    scenario: &Scenario,
    n: usize,
    jobs: usize,
    mut each: impl FnMut(&Run),
) -> Result<(Oracle, Vec<(Run, Verdict)>), CampaignError> {
    let seeds: Vec<u64> = (0..n as u64).map(|i| UNPERTURBED_SEEDS + i).collect();
    let mut runs = Vec::with_capacity(n);
    let mut s = futures::stream::iter(seeds.iter().map(|&seed| scenario.run(&[], seed)))
        .buffered(jobs.max(1));
    while let Some(run) = s.next().await {
        each(&run);
        runs.push(run);
    }
    let mut ends = Vec::with_capacity(n);
    let mut judged = Vec::with_capacity(n);
    for (index, r) in runs.into_iter().enumerate() {
        let verdict = match (&r.ending, &r.end) {
            (Ending::Settled, Some(end)) => {
                ends.push(end.clone());
                Verdict::Holds
            }
            (Ending::Invariant(why), Some(end)) => {
                ends.push(end.clone());
                Verdict::Broken(format!("the invariant failed unperturbed: {why}"))
            }
            (ending, _) => {
                return Err(CampaignError::Unperturbed {
                    index,
                    seed: r.seed,
                    ending: ending.clone(),
                });
            }
        };
        judged.push((r, verdict));
    }
    Ok((Oracle::learn(&ends), judged))
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
    let mut s = futures::stream::iter(seeds.iter().map(|&seed| scenario.run(kinds, seed)))
        .buffer_unordered(jobs.max(1));
    while let Some(run) = s.next().await {
        let v = judge(oracle, &run);
        each(&run, &v);
        out.push((run, v));
    }
    out.sort_by_key(|(r, _)| r.seed);
    out
}
