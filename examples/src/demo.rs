//! The campaign runner behind `ward-demo`: every example's scenarios in
//! every variant over many seeds, each seed with its plan of perturbations
//! (see [`ward_campaign`]), and one table of what broke.
//!
//! An example plugs in by implementing [`Example`]; [`cells`] turns it into
//! the table's cells, each a typed scenario and variant whose runs the
//! campaign's worker threads make without knowing the example's types.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ward_campaign::Perturbation;

use crate::example::{Example, Report};

/// What one seeded run found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunOutcome {
    /// The invariants broken, first first (name, detail).
    pub violations: Vec<(String, String)>,
    /// The perturbation plan carried out, as printed.
    pub plan: String,
    /// What happened, in simulated time (the run's journal).
    pub history: Vec<(Duration, String)>,
    /// Every write the server committed, with its resourceVersion.
    pub events: Vec<String>,
    /// The livelock verdict that ended the run early, if one did.
    pub livelock: Option<String>,
}

impl RunOutcome {
    /// A run's outcome from its report (each invariant named by its
    /// `Debug`, e.g. `I2`).
    #[must_use]
    pub fn of<E: Example>(report: Report<E>) -> Self {
        RunOutcome {
            violations: report
                .violations
                .iter()
                .map(|v| (format!("{:?}", v.invariant), v.detail.clone()))
                .collect(),
            plan: report.plan,
            history: report.journal,
            events: report.events,
            livelock: report.livelock,
        }
    }
}

/// One seeded run of a cell, with the seed's plan of the perturbation kinds.
type Runner = dyn Fn(u64, &[Arc<dyn Perturbation>]) -> Result<RunOutcome, String> + Send + Sync;

/// One cell of the table: an example's scenario in one of its variants.
#[derive(Clone)]
pub struct Cell {
    /// The example's name, e.g. `whereabouts`.
    pub example: &'static str,
    /// The scenario, e.g. `S1`.
    pub scenario: String,
    /// The variant, e.g. `naive`.
    pub variant: String,
    /// Whether the variant is built from Ward's guards (and so must never
    /// violate).
    pub guarded: bool,
    run: Arc<Runner>,
}

impl std::fmt::Debug for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.example, self.scenario, self.variant)
    }
}

impl Cell {
    /// `E`'s `scenario` in `mode`.
    #[must_use]
    pub fn new<E: Example>(scenario: E::Scenario, mode: E::Mode) -> Self {
        Cell {
            example: E::NAME,
            scenario: scenario.to_string(),
            variant: mode.to_string(),
            guarded: E::guarded(mode),
            run: Arc::new(move |seed, kinds| {
                let report = crate::run::simulate(|| E::run(scenario, mode, seed, kinds))
                    .map_err(|e| e.to_string())?;
                Ok(RunOutcome::of(report))
            }),
        }
    }

    /// Run it with `seed` (in simulated time, on a runtime of its own),
    /// carrying out the seed's plan of the perturbation `kinds`.
    pub fn run(&self, seed: u64, kinds: &[Arc<dyn Perturbation>]) -> Result<RunOutcome, String> {
        (self.run)(seed, kinds)
    }
}

/// Every cell of `E`: each scenario in each variant, in table order.
#[must_use]
pub fn cells<E: Example>() -> Vec<Cell> {
    E::SCENARIOS
        .iter()
        .flat_map(|&s| E::MODES.iter().map(move |&m| Cell::new::<E>(s, m)))
        .collect()
}

/// Every example's cells, in table order: whereabouts, CNS, LWS, sharding.
#[must_use]
pub fn all() -> Vec<Cell> {
    use crate::{cns::AzureCns, lws::Lws, sharding::Sharding, whereabouts::Whereabouts};
    [
        cells::<Whereabouts>(),
        cells::<AzureCns>(),
        cells::<Lws>(),
        cells::<Sharding>(),
    ]
    .concat()
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Row {
    /// Example name.
    pub example: String,
    /// Scenario.
    pub scenario: String,
    /// Variant.
    pub variant: String,
    /// Whether the variant is guarded.
    pub guarded: bool,
    /// Seeds run.
    pub runs: usize,
    /// Runs with at least one violation.
    pub violating_runs: usize,
    /// The smallest violating seed.
    pub first_seed: Option<u64>,
    /// Every violating seed, ascending.
    pub violating_seeds: Vec<u64>,
    /// The invariants the first violating seed broke, in order (`I2 then I1`).
    pub invariant: Option<String>,
    /// Runs that failed: could not be set up, or ended early on a
    /// livelock verdict (the table's `runs (N failed)`).
    pub errors: usize,
    /// Every failed seed, ascending.
    pub failed_seeds: Vec<u64>,
}

struct Job<'a> {
    cell: &'a Cell,
    seed: u64,
}

/// Which runs a campaign makes: the seeds, the perturbation kinds, and
/// (when set) only one example, scenario or variant.
#[derive(Clone)]
pub struct Selection {
    /// The seeds of every scenario and variant.
    pub seeds: std::ops::Range<u64>,
    /// The perturbation kinds each seed's plan draws from.
    pub kinds: Vec<Arc<dyn Perturbation>>,
    /// Only this example.
    pub example: Option<String>,
    /// Only this scenario.
    pub scenario: Option<String>,
    /// Only this variant.
    pub variant: Option<String>,
}

impl Selection {
    /// Every example, scenario and variant over `seeds`, without perturbation.
    #[must_use]
    pub fn seeds(seeds: std::ops::Range<u64>) -> Self {
        Selection {
            seeds,
            kinds: Vec::new(),
            example: None,
            scenario: None,
            variant: None,
        }
    }

    /// The cells of `all` selected, in table order.
    #[must_use]
    pub fn cells(&self, all: &[Cell]) -> Vec<Cell> {
        let keep = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        all.iter()
            .filter(|c| {
                keep(&self.example, c.example)
                    && keep(&self.scenario, &c.scenario)
                    && keep(&self.variant, &c.variant)
            })
            .cloned()
            .collect()
    }
}

/// When a campaign stops before its last run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Stop {
    /// Never: every selected run is made.
    #[default]
    Never,
    /// Once a guarded run has broken an invariant or failed to run: no new
    /// run starts (those under way finish and are counted).
    FirstGuardedFailure,
}

/// Run the selected cells of `all`, on `threads` worker threads,
/// reporting each finished run to `progress`.
pub fn campaign(
    all: &[Cell],
    selection: &Selection,
    threads: usize,
    progress: &(dyn Fn() + Sync),
) -> Vec<Row> {
    campaign_until(all, selection, threads, Stop::Never, progress)
}

/// [`campaign`], stopping early as `stop` says. Runs are made seed by
/// seed (every cell of a seed before the next seed), so a stopped campaign
/// has covered its first seeds in every cell.
pub fn campaign_until(
    all: &[Cell],
    selection: &Selection,
    threads: usize,
    stop: Stop,
    progress: &(dyn Fn() + Sync),
) -> Vec<Row> {
    let cells = selection.cells(all);
    let mut jobs = Vec::new();
    for seed in selection.seeds.clone() {
        for cell in &cells {
            jobs.push(Job { cell, seed });
        }
    }
    let results: Mutex<Vec<(usize, Result<RunOutcome, String>)>> = Mutex::new(Vec::new());
    let next = AtomicUsize::new(0);
    let stopped = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                loop {
                    if stopped.load(Ordering::Relaxed) {
                        return;
                    }
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(i) else { return };
                    let r = job.cell.run(job.seed, &selection.kinds).map(|mut o| {
                        // The table needs the violations only.
                        o.history = Vec::new();
                        o.events = Vec::new();
                        o
                    });
                    let failed =
                        !matches!(&r, Ok(o) if o.violations.is_empty() && o.livelock.is_none());
                    if stop == Stop::FirstGuardedFailure && job.cell.guarded && failed {
                        stopped.store(true, Ordering::Relaxed);
                    }
                    results
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((i, r));
                    progress();
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|(i, _)| *i);
    // Rows in table order, whichever cells the runs made reached.
    let mut rows: Vec<Row> = cells
        .iter()
        .map(|c| Row {
            example: c.example.into(),
            scenario: c.scenario.clone(),
            variant: c.variant.clone(),
            guarded: c.guarded,
            runs: 0,
            violating_runs: 0,
            first_seed: None,
            violating_seeds: Vec::new(),
            invariant: None,
            errors: 0,
            failed_seeds: Vec::new(),
        })
        .collect();
    for (i, r) in results {
        let job = &jobs[i];
        let row = &mut rows[i % cells.len()];
        row.runs += 1;
        match r {
            Ok(o) => {
                if !o.violations.is_empty() {
                    row.violating_runs += 1;
                    row.violating_seeds.push(job.seed);
                    // Results come seed by seed: the first is the smallest.
                    if row.first_seed.is_none() {
                        row.first_seed = Some(job.seed);
                        row.invariant = Some(broken(&o));
                    }
                }
                if let Some(verdict) = o.livelock {
                    row.errors += 1;
                    row.failed_seeds.push(job.seed);
                    tracing::error!(example = job.cell.example, scenario = %job.cell.scenario, seed = job.seed, %verdict, "run ended early");
                }
            }
            Err(e) => {
                row.errors += 1;
                row.failed_seeds.push(job.seed);
                tracing::error!(example = job.cell.example, scenario = %job.cell.scenario, seed = job.seed, error = %e, "run failed");
            }
        }
    }
    rows.retain(|r| r.runs > 0);
    rows
}

/// The invariants a run broke, in the order they first broke (`I2 then I1`).
fn broken(o: &RunOutcome) -> String {
    let mut broken: Vec<&str> = Vec::new();
    for (inv, _) in &o.violations {
        if !broken.contains(&inv.as_str()) {
            broken.push(inv);
        }
    }
    broken.join(" then ")
}

/// Add `more` (rows of later seeds of the same cells) into `rows`: the
/// totals of a campaign made in parts, as `ward-demo --soak` makes it.
pub fn merge(rows: &mut Vec<Row>, more: Vec<Row>) {
    for m in more {
        let same = |r: &&mut Row| {
            (&r.example, &r.scenario, &r.variant) == (&m.example, &m.scenario, &m.variant)
        };
        let Some(r) = rows.iter_mut().find(same) else {
            rows.push(m);
            continue;
        };
        r.runs += m.runs;
        r.violating_runs += m.violating_runs;
        r.errors += m.errors;
        if let Some(s) = m.first_seed
            && r.first_seed.is_none_or(|f| s < f)
        {
            r.first_seed = Some(s);
            r.invariant = m.invariant;
        }
        r.violating_seeds.extend(m.violating_seeds);
        r.violating_seeds.sort_unstable();
        r.failed_seeds.extend(m.failed_seeds);
        r.failed_seeds.sort_unstable();
    }
}

/// The table, as `ward-demo` prints it.
#[must_use]
pub fn table(rows: &[Row]) -> String {
    let header = [
        "example",
        "scenario",
        "variant",
        "runs",
        "violations",
        "first violating seed",
        "invariant broken",
    ];
    let cells: Vec<[String; 7]> = rows
        .iter()
        .map(|r| {
            [
                r.example.clone(),
                r.scenario.clone(),
                if r.guarded {
                    format!("{} (ward)", r.variant)
                } else {
                    r.variant.clone()
                },
                if r.errors > 0 {
                    format!("{} ({} failed)", r.runs, r.errors)
                } else {
                    r.runs.to_string()
                },
                r.violating_runs.to_string(),
                r.first_seed.map_or("-".into(), |s| s.to_string()),
                r.invariant.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for c in &cells {
        for (w, s) in widths.iter_mut().zip(c) {
            *w = (*w).max(s.len());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, c: &[String]| {
        let parts: Vec<String> = c
            .iter()
            .zip(widths)
            .map(|(s, w)| format!("{s:<w$}"))
            .collect();
        let _ = writeln!(out, "| {} |", parts.join(" | "));
    };
    line(&mut out, &header.map(String::from));
    let _ = writeln!(
        out,
        "|{}|",
        widths
            .iter()
            .map(|w| "-".repeat(w + 2))
            .collect::<Vec<_>>()
            .join("|")
    );
    for c in &cells {
        line(&mut out, c);
    }
    out
}

/// Whether any guarded variant violated an invariant or failed to run.
#[must_use]
pub fn guarded_failed(rows: &[Row]) -> bool {
    rows.iter()
        .any(|r| r.guarded && (r.violating_runs > 0 || r.errors > 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sharding::replica::Mode;

    crate::journal::invariants! {
        "fake":
        /// Broken by naive runs.
        I1 => "I1 (dup)",
        /// Broken by `Broken`'s guarded run of seed 4.
        I9 => "I9 (broken)",
    }

    /// The one scenario of the fakes.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct A;
    impl std::fmt::Display for A {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("A")
        }
    }

    /// A fake example, naive and guarded: naive breaks I1 on every third
    /// seed; when `BROKEN`, guarded breaks I9 on seed 4.
    #[derive(Debug, Clone)]
    struct Fake<const BROKEN: bool>;
    type Broken = Fake<true>;

    impl<const BROKEN: bool> Example for Fake<BROKEN> {
        const NAME: &'static str = if BROKEN { "broken" } else { "fake" };
        type Scenario = A;
        type Mode = Mode;
        type Invariant = Invariant;
        type Measured = ();
        const SCENARIOS: &'static [A] = &[A];
        const MODES: &'static [Mode] = &Mode::ALL;
        fn guarded(mode: Mode) -> bool {
            mode == Mode::Guarded
        }
        async fn run(
            _: A,
            mode: Mode,
            seed: u64,
            _: &[Arc<dyn Perturbation>],
        ) -> Result<Report<Self>, crate::run::ScenarioError> {
            let sink = Violations::new(crate::journal::Journal::new());
            if mode == Mode::Naive && seed % 3 == 2 {
                sink.violate(Invariant::I1, "subject".into(), "dup".into());
            }
            if BROKEN && mode == Mode::Guarded && seed == 4 {
                sink.violate(Invariant::I9, "subject".into(), "broken".into());
            }
            let violations: Vec<Violation> = sink.all();
            Ok(Report {
                scenario: A,
                mode,
                seed,
                plan: String::new(),
                events: Vec::new(),
                violations,
                journal: Vec::new(),
                measured: (),
                livelock: None,
            })
        }
    }

    /// A controller that lists in a loop without ever letting simulated
    /// time move, and a workload that never ends: the run ends only by the
    /// campaign's bound, as every example's scenario does.
    #[derive(Debug, Clone)]
    struct Livelocks;

    impl Example for Livelocks {
        const NAME: &'static str = "livelocks";
        type Scenario = A;
        type Mode = Mode;
        type Invariant = Invariant;
        type Measured = ();
        const SCENARIOS: &'static [A] = &[A];
        const MODES: &'static [Mode] = &Mode::ALL;
        fn guarded(mode: Mode) -> bool {
            mode == Mode::Guarded
        }
        async fn run(
            _: A,
            mode: Mode,
            seed: u64,
            kinds: &[Arc<dyn Perturbation>],
        ) -> Result<Report<Self>, crate::run::ScenarioError> {
            use crate::run::ScenarioError;
            let server = ward_apiserver::ApiServer::start(
                ward_apiserver::ServerConfig::default().seed(seed),
            )
            .await?;
            let plan = ward_campaign::Plan::draw(seed, kinds, Duration::from_secs(10), &[])
                .map_err(|e| ScenarioError::Plan(e.to_string()))?;
            let limits = ward_campaign::Limits {
                calls_per_instant: 200,
                calls: 1_000_000,
            };
            let mut perturber =
                ward_campaign::Perturber::with_limits(&server, plan, limits, |_| {});
            perturber.supervise("spin", |client| async move {
                let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
                    kube::Api::default_namespaced(client);
                loop {
                    let _ = api.list(&Default::default()).await;
                }
            });
            perturber
                .start()
                .map_err(|e| ScenarioError::Plan(e.to_string()))?;
            let verdict = perturber.run(std::future::pending::<()>()).await.err();
            Ok(Report {
                scenario: A,
                mode,
                seed,
                plan: String::new(),
                events: Vec::new(),
                violations: Vec::new(),
                journal: Vec::new(),
                measured: (),
                livelock: verdict.map(|v| v.to_string()),
            })
        }
    }

    #[test]
    fn a_livelock_ends_its_run_with_a_verdict_the_table_counts_as_failed() {
        let rows = campaign(&cells::<Livelocks>(), &Selection::seeds(0..2), 2, &|| {});
        assert_eq!(rows.len(), 2);
        for r in &rows {
            assert_eq!((r.runs, r.errors, r.violating_runs), (2, 2, 0), "{r:?}");
            assert_eq!(r.failed_seeds, [0, 1]);
        }
        assert!(guarded_failed(&rows));
        assert!(
            table(&rows).contains("| 2 (2 failed) |"),
            "{}",
            table(&rows)
        );
        let report = crate::run::simulate(|| Livelocks::run(A, Mode::Guarded, 0, &[])).unwrap();
        let verdict = report.livelock.expect("a verdict");
        assert!(
            verdict.starts_with("livelock: 201 API calls at"),
            "{verdict}"
        );
    }

    #[test]
    fn the_table_counts_runs_and_names_the_first_violating_seed() {
        let rows = campaign(&cells::<Fake<false>>(), &Selection::seeds(0..9), 2, &|| {});
        assert_eq!(rows.len(), 2);
        assert_eq!(
            (rows[0].runs, rows[0].violating_runs, rows[0].first_seed),
            (9, 3, Some(2))
        );
        assert_eq!(rows[0].invariant.as_deref(), Some("I1"));
        assert_eq!((rows[1].violating_runs, rows[1].first_seed), (0, None));
        assert!(!guarded_failed(&rows));
        assert_eq!(rows[0].violating_seeds, [2, 5, 8]);
        let t = table(&rows);
        assert!(t.contains("| fake    | A        | naive"), "{t}");
        assert!(t.contains("guarded (ward)"));
    }

    #[test]
    fn a_fail_fast_campaign_stops_at_the_first_guarded_failure_seed_by_seed() {
        let stop = Stop::FirstGuardedFailure;
        let rows = campaign_until(
            &cells::<Broken>(),
            &Selection::seeds(0..100),
            1,
            stop,
            &|| {},
        );
        // One thread: seeds 0..=4 in both cells, then nothing.
        assert_eq!(rows.iter().map(|r| r.runs).collect::<Vec<_>>(), [5, 5]);
        assert_eq!(rows[1].violating_seeds, [4]);
        assert_eq!(rows[1].invariant.as_deref(), Some("I9"));
        assert!(guarded_failed(&rows));
        // Naive breaks do not stop it.
        let rows = campaign_until(
            &cells::<Fake<false>>(),
            &Selection::seeds(0..30),
            2,
            stop,
            &|| {},
        );
        assert_eq!(rows[0].runs, 30);
    }

    #[test]
    fn campaigns_made_in_parts_merge_to_the_whole() {
        let whole = campaign(&cells::<Fake<false>>(), &Selection::seeds(0..12), 2, &|| {});
        let mut parts = campaign(&cells::<Fake<false>>(), &Selection::seeds(5..12), 2, &|| {});
        merge(
            &mut parts,
            campaign(&cells::<Fake<false>>(), &Selection::seeds(0..5), 2, &|| {}),
        );
        assert_eq!(parts, whole);
    }
}
