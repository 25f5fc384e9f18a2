//! The campaign runner behind `ward-demo`: every example's scenarios in
//! every variant over many seeds, each seed with its plan of perturbations
//! (see [`ward_campaign`]), and one table of what broke.
//!
//! An example plugs in by implementing [`Example`].

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ward_campaign::Perturbation;

/// One variant of an example's controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    /// Its name, e.g. `naive`.
    pub name: String,
    /// Whether it is built from Ward's guards (and so must never violate).
    pub guarded: bool,
}

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
}

/// An example controller the demo can run.
pub trait Example: Send + Sync {
    /// Its name, e.g. `whereabouts`.
    fn name(&self) -> &'static str;
    /// Its scenarios, e.g. `S1`.
    fn scenarios(&self) -> Vec<String>;
    /// Its variants.
    fn variants(&self) -> Vec<Variant>;
    /// Run one scenario in one variant with one seed (in simulated time),
    /// carrying out the seed's plan of the perturbation `kinds`.
    fn run(
        &self,
        scenario: &str,
        variant: &str,
        seed: u64,
        kinds: &[Arc<dyn Perturbation>],
    ) -> Result<RunOutcome, String>;
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
    /// Runs that could not be set up (errors).
    pub errors: usize,
}

struct Job<'a> {
    example: &'a dyn Example,
    scenario: String,
    variant: Variant,
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

    /// The (example, scenario, variant) triples selected, in table order.
    #[must_use]
    pub fn cells<'a>(
        &self,
        examples: &[&'a dyn Example],
    ) -> Vec<(&'a dyn Example, String, Variant)> {
        let keep = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        let mut out = Vec::new();
        for ex in examples {
            if !keep(&self.example, ex.name()) {
                continue;
            }
            for s in ex.scenarios() {
                for v in ex.variants() {
                    if keep(&self.scenario, &s) && keep(&self.variant, &v.name) {
                        out.push((*ex, s.clone(), v));
                    }
                }
            }
        }
        out
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

/// Run the selected scenarios × variants of `examples`, on `threads`
/// worker threads, reporting each finished run to `progress`.
pub fn campaign(
    examples: &[&dyn Example],
    selection: &Selection,
    threads: usize,
    progress: &(dyn Fn() + Sync),
) -> Vec<Row> {
    campaign_until(examples, selection, threads, Stop::Never, progress)
}

/// [`campaign`], stopping early as `stop` says. Runs are made seed by
/// seed (every cell of a seed before the next seed), so a stopped campaign
/// has covered its first seeds in every cell.
pub fn campaign_until(
    examples: &[&dyn Example],
    selection: &Selection,
    threads: usize,
    stop: Stop,
    progress: &(dyn Fn() + Sync),
) -> Vec<Row> {
    let cells = selection.cells(examples);
    let mut jobs = Vec::new();
    for seed in selection.seeds.clone() {
        for (ex, s, v) in &cells {
            jobs.push(Job {
                example: *ex,
                scenario: s.clone(),
                variant: v.clone(),
                seed,
            });
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
                    let r = job
                        .example
                        .run(&job.scenario, &job.variant.name, job.seed, &selection.kinds)
                        .map(|mut o| {
                            // The table needs the violations only.
                            o.history = Vec::new();
                            o.events = Vec::new();
                            o
                        });
                    let failed = !matches!(&r, Ok(o) if o.violations.is_empty());
                    if stop == Stop::FirstGuardedFailure && job.variant.guarded && failed {
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
        .map(|(ex, s, v)| Row {
            example: ex.name().into(),
            scenario: s.clone(),
            variant: v.name.clone(),
            guarded: v.guarded,
            runs: 0,
            violating_runs: 0,
            first_seed: None,
            violating_seeds: Vec::new(),
            invariant: None,
            errors: 0,
        })
        .collect();
    for (i, r) in results {
        let job = &jobs[i];
        let row = &mut rows[i % cells.len()];
        row.runs += 1;
        match r {
            Ok(o) if !o.violations.is_empty() => {
                row.violating_runs += 1;
                row.violating_seeds.push(job.seed);
                // Results come seed by seed: the first is the smallest.
                if row.first_seed.is_none() {
                    row.first_seed = Some(job.seed);
                    row.invariant = Some(broken(&o));
                }
            }
            Ok(_) => {}
            Err(e) => {
                row.errors += 1;
                tracing::error!(example = job.example.name(), scenario = %job.scenario, seed = job.seed, error = %e, "run failed");
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

/// An example restricted to its guarded variants (what the tests run over
/// many seeds).
#[derive(Clone, Copy)]
pub struct GuardedOnly<'a>(pub &'a dyn Example);

impl Example for GuardedOnly<'_> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn scenarios(&self) -> Vec<String> {
        self.0.scenarios()
    }

    fn variants(&self) -> Vec<Variant> {
        self.0
            .variants()
            .into_iter()
            .filter(|v| v.guarded)
            .collect()
    }

    fn run(
        &self,
        scenario: &str,
        variant: &str,
        seed: u64,
        kinds: &[Arc<dyn Perturbation>],
    ) -> Result<RunOutcome, String> {
        self.0.run(scenario, variant, seed, kinds)
    }
}

/// Whether any guarded variant violated an invariant or failed to run.
#[must_use]
pub fn guarded_failed(rows: &[Row]) -> bool {
    rows.iter()
        .any(|r| r.guarded && (r.violating_runs > 0 || r.errors > 0))
}

/// The scenarios and variants every example has: S1–S3, naive, upstream
/// and guarded (the guarded one built from Ward's guards).
fn standard() -> (Vec<String>, Vec<Variant>) {
    use crate::run::{Mode, Scenario};
    let scenarios = Scenario::ALL.iter().map(ToString::to_string).collect();
    let variants = Mode::ALL
        .iter()
        .map(|m| Variant {
            name: m.to_string(),
            guarded: *m == Mode::Guarded,
        })
        .collect();
    (scenarios, variants)
}

/// A run's outcome from its report's parts (each invariant named by its
/// `Debug`, e.g. `I2`).
fn outcome<I: std::fmt::Debug>(
    violations: &[crate::journal::Violation<I>],
    plan: String,
    history: Vec<(Duration, String)>,
    events: Vec<String>,
) -> RunOutcome {
    RunOutcome {
        violations: violations
            .iter()
            .map(|v| (format!("{:?}", v.invariant), v.detail.clone()))
            .collect(),
        plan,
        history,
        events,
    }
}

/// One run of an example whose scenario module has `run(scenario, mode,
/// seed, kinds)` returning a report with its violations, plan, journal and
/// committed writes.
macro_rules! example {
    ($(#[$doc:meta])* $ty:ident, $name:literal, $module:path) => {
        $(#[$doc])*
        #[derive(Debug, Default, Clone, Copy)]
        pub struct $ty;

        impl Example for $ty {
            fn name(&self) -> &'static str {
                $name
            }

            fn scenarios(&self) -> Vec<String> {
                standard().0
            }

            fn variants(&self) -> Vec<Variant> {
                standard().1
            }

            fn run(
                &self,
                scenario: &str,
                variant: &str,
                seed: u64,
                kinds: &[Arc<dyn Perturbation>],
            ) -> Result<RunOutcome, String> {
                use $module as scenario_module;
                let run = scenario_module::run(scenario.parse()?, variant.parse()?, seed, kinds);
                let report = crate::run::simulate(run).map_err(|e| e.to_string())?;
                Ok(outcome(&report.violations, report.plan, report.journal, report.events))
            }
        }
    };
}

example!(
    /// The whereabouts example.
    Whereabouts,
    "whereabouts",
    crate::whereabouts::scenario
);
example!(
    /// The Azure CNS example.
    Cns,
    "cns",
    crate::cns::scenario
);
example!(
    /// The LWS example.
    Lws,
    "lws",
    crate::lws::scenario
);

/// The sharding example: one scenario (`churn`), naive and guarded.
#[derive(Debug, Default, Clone, Copy)]
pub struct Sharding;

impl Example for Sharding {
    fn name(&self) -> &'static str {
        "sharding"
    }

    fn scenarios(&self) -> Vec<String> {
        vec!["churn".into()]
    }

    fn variants(&self) -> Vec<Variant> {
        vec![
            Variant {
                name: "naive".into(),
                guarded: false,
            },
            Variant {
                name: "guarded".into(),
                guarded: true,
            },
        ]
    }

    fn run(
        &self,
        scenario: &str,
        variant: &str,
        seed: u64,
        kinds: &[Arc<dyn Perturbation>],
    ) -> Result<RunOutcome, String> {
        use crate::sharding::replica::Mode;
        if scenario != "churn" {
            return Err(format!("unknown sharding scenario {scenario:?}: churn"));
        }
        let mode = match variant {
            "naive" => Mode::Naive,
            "guarded" => Mode::Guarded,
            other => {
                return Err(format!(
                    "unknown sharding variant {other:?}: naive or guarded"
                ));
            }
        };
        let report = crate::run::simulate(crate::sharding::scenario::run(mode, seed, kinds))
            .map_err(|e| e.to_string())?;
        Ok(outcome(
            &report.violations,
            report.plan,
            report.journal,
            report.events,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fake;
    impl Example for Fake {
        fn name(&self) -> &'static str {
            "fake"
        }
        fn scenarios(&self) -> Vec<String> {
            vec!["A".into()]
        }
        fn variants(&self) -> Vec<Variant> {
            vec![
                Variant {
                    name: "naive".into(),
                    guarded: false,
                },
                Variant {
                    name: "guarded".into(),
                    guarded: true,
                },
            ]
        }
        fn run(
            &self,
            _: &str,
            variant: &str,
            seed: u64,
            _: &[Arc<dyn Perturbation>],
        ) -> Result<RunOutcome, String> {
            let bad = variant == "naive" && seed % 3 == 2;
            Ok(RunOutcome {
                violations: if bad {
                    vec![("I1".into(), "dup".into())]
                } else {
                    vec![]
                },
                ..RunOutcome::default()
            })
        }
    }

    #[test]
    fn the_table_counts_runs_and_names_the_first_violating_seed() {
        let rows = campaign(&[&Fake], &Selection::seeds(0..9), 2, &|| {});
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

    /// Fake, but its guarded variant breaks on seed 4.
    struct Broken;
    impl Example for Broken {
        fn name(&self) -> &'static str {
            "broken"
        }
        fn scenarios(&self) -> Vec<String> {
            Fake.scenarios()
        }
        fn variants(&self) -> Vec<Variant> {
            Fake.variants()
        }
        fn run(
            &self,
            s: &str,
            variant: &str,
            seed: u64,
            k: &[Arc<dyn Perturbation>],
        ) -> Result<RunOutcome, String> {
            if variant == "guarded" && seed == 4 {
                return Ok(RunOutcome {
                    violations: vec![("I9".into(), "broken".into())],
                    ..RunOutcome::default()
                });
            }
            Fake.run(s, variant, seed, k)
        }
    }

    #[test]
    fn a_fail_fast_campaign_stops_at_the_first_guarded_failure_seed_by_seed() {
        let stop = Stop::FirstGuardedFailure;
        let rows = campaign_until(&[&Broken], &Selection::seeds(0..100), 1, stop, &|| {});
        // One thread: seeds 0..=4 in both cells, then nothing.
        assert_eq!(rows.iter().map(|r| r.runs).collect::<Vec<_>>(), [5, 5]);
        assert_eq!(rows[1].violating_seeds, [4]);
        assert_eq!(rows[1].invariant.as_deref(), Some("I9"));
        assert!(guarded_failed(&rows));
        // Naive breaks do not stop it.
        let rows = campaign_until(&[&Fake], &Selection::seeds(0..30), 2, stop, &|| {});
        assert_eq!(rows[0].runs, 30);
    }

    #[test]
    fn campaigns_made_in_parts_merge_to_the_whole() {
        let whole = campaign(&[&Fake], &Selection::seeds(0..12), 2, &|| {});
        let mut parts = campaign(&[&Fake], &Selection::seeds(5..12), 2, &|| {});
        merge(
            &mut parts,
            campaign(&[&Fake], &Selection::seeds(0..5), 2, &|| {}),
        );
        assert_eq!(parts, whole);
    }
}
