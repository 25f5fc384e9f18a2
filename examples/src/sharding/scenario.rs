//! The churn scenario: three replicas, then a seeded script of joins,
//! graceful leaves and crashes (a crash leaves its Lease to expire), while
//! the seed's plan partitions replicas and freezes their reads.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use tokio::sync::watch;
use ward_apiserver::{ApiServer, ServerConfig};
use ward_base::Rng;
use ward_campaign::{FrozenView, Partition, Perturbation};
use ward_runtime::clock::Clock;

use super::invariants::{Invariant, Marks, Running, Violations, balanced, writes_in_slots};
use super::replica::{self, LEASE, Mode, NAMESPACE, RENEW, WANT, WORK};
use crate::example::{Example, Report};
use crate::journal::Journal;
use crate::run::ScenarioError;

/// How many objects the replicas share from the start.
pub const OBJECTS: usize = 32;
/// How many changes the churn makes to the objects (creates and edits).
pub const EDITS: usize = 12;
/// How many of them may be creates, at most.
pub const CREATES: usize = 6;
/// The replicas that may run: three from the start, two that may join.
pub const REPLICAS: [&str; 5] = ["r0", "r1", "r2", "r3", "r4"];
/// How long the churn lasts (plans and the script are drawn over it).
pub const HORIZON: Duration = Duration::from_secs(40);
/// I3's bound: a Lease left to expire, a round to see it, a round to
/// claim the slot, and a reconcile.
pub const SETTLE: Duration = Duration::from_secs(LEASE.as_secs() + 2 * RENEW.as_secs() + 2);

/// The kinds every sharding run adds to the selected ones.
#[must_use]
pub fn isolation() -> Vec<Arc<dyn Perturbation>> {
    vec![Arc::new(Partition), Arc::new(FrozenView)]
}

/// The one sharding scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scenario {
    /// Joins, graceful leaves and crashes on a seeded script, under
    /// partitions and frozen views.
    Churn,
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("churn")
    }
}

/// One membership change of the script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Join(usize),
    Leave(usize),
    Crash(usize),
}

/// One change the scenario makes to the objects: its name and mark.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Edit {
    /// Create the object with `want` set to the mark.
    Create(String, u64),
    /// Set an existing object's `want` to the mark.
    Change(String, u64),
}

/// One step of the run: a membership change or an edit.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Member(Change),
    Edit(Edit),
}

/// The seed's edits: [`EDITS`] changes at drawn times between 3 s and 80%
/// of the horizon, each a create of the next new object (at most
/// [`CREATES`]) or an edit of one that exists by then, marks 1, 2, ...
/// in time order.
fn edits(seed: u64) -> Vec<(Duration, Edit)> {
    let mut rng = Rng::stream(seed, "sharding/edits");
    let mut at: Vec<Duration> = (0..EDITS)
        .map(|_| rng.between(Duration::from_secs(3), HORIZON.mul_f64(0.8)))
        .collect();
    at.sort();
    let mut existing = OBJECTS;
    at.into_iter()
        .zip(1u64..)
        .map(|(at, mark)| {
            let edit = if existing < OBJECTS + CREATES && rng.up_to(1) == 0 {
                existing += 1;
                Edit::Create(format!("obj-{:02}", existing - 1), mark)
            } else {
                let i = rng.up_to(existing as u64 - 1);
                Edit::Change(format!("obj-{i:02}"), mark)
            };
            (at, edit)
        })
        .collect()
}

/// The seed's membership script: r0 starts, r1 and r2 join a second
/// apart; then r3 and r4 join, one of r0–r2 leaves gracefully and another
/// crashes, in a drawn order at drawn times within the first 80% of the
/// horizon (at least two replicas always run).
fn script(seed: u64) -> Vec<(Duration, Change)> {
    let mut rng = Rng::stream(seed, "sharding/membership");
    let mut at: Vec<Duration> = (0..4)
        .map(|_| rng.between(Duration::from_secs(4), HORIZON.mul_f64(0.8)))
        .collect();
    at.sort();
    let gone = rng.up_to(2) as usize;
    let crashed = (gone + 1 + rng.up_to(1) as usize) % 3;
    let mut changes = vec![
        Change::Join(3),
        Change::Join(4),
        Change::Leave(gone),
        Change::Crash(crashed),
    ];
    // A drawn order (Fisher-Yates on the seed's stream).
    for i in (1..changes.len()).rev() {
        let j = rng.up_to(i as u64) as usize;
        changes.swap(i, j);
    }
    let mut script = vec![
        (Duration::from_secs(1), Change::Join(1)),
        (Duration::from_secs(2), Change::Join(2)),
    ];
    script.extend(at.into_iter().zip(changes));
    script
}

/// Run the churn with `mode` and `seed`, carrying out the seed's plan of
/// `kinds` plus [`isolation`]'s.
pub async fn run(
    mode: Mode,
    seed: u64,
    kinds: &[Arc<dyn Perturbation>],
) -> Result<Report<Sharding>, ScenarioError> {
    let clock = Clock::on_the_second();
    let server = ApiServer::start(
        ServerConfig::default()
            .seed(seed)
            .clock(clock)
            .sharded_list_and_watch(true),
    )
    .await?;
    let client = server.client();
    let mut ns = Namespace::default();
    ns.metadata.name = Some(NAMESPACE.into());
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    for i in 0..OBJECTS {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(format!("obj-{i:02}"));
        cms.create(&PostParams::default(), &cm).await?;
    }

    let journal = Journal::new();
    let violations = Violations::new(journal.clone());
    let running = Running::new(violations.clone());
    let mut all: Vec<Arc<dyn Perturbation>> = kinds.to_vec();
    for k in isolation() {
        if !all.iter().any(|a| a.kind() == k.kind()) {
            all.push(k);
        }
    }
    let targets: Vec<String> = REPLICAS.iter().map(|r| (*r).to_string()).collect();
    let plan = ward_campaign::Plan::draw(seed, &all, HORIZON, &targets)
        .map_err(|e| ScenarioError::Plan(e.to_string()))?;
    let mut printed = plan.to_string();
    let mut steps: Vec<(Duration, Step)> = script(seed)
        .into_iter()
        .map(|(at, c)| (at, Step::Member(c)))
        .chain(edits(seed).into_iter().map(|(at, e)| (at, Step::Edit(e))))
        .collect();
    for (at, step) in &steps {
        let line = match step {
            Step::Member(change) => format!("membership: {change:?}"),
            Step::Edit(edit) => format!("edit: {edit:?}"),
        };
        printed.push_str(&format!("  {line} at {:.3}s\n", at.as_secs_f64()));
    }
    steps.sort_by_key(|(at, _)| *at); // stable: a membership change first
    let log = journal.clone();
    let t0 = clock.now();
    let mut perturber = ward_campaign::Perturber::new(&server, plan, move |line| log.log(line));
    perturber.judge("I2", writes_in_slots(t0, violations.clone()));
    let marks = Marks::default();
    perturber.judge("I5", marks.recorder());

    let mut leave = Vec::new();
    let mut controllers = Vec::new();
    for (i, name) in REPLICAS.iter().enumerate() {
        let (tx, rx) = watch::channel(false);
        leave.push(tx);
        let (running, name) = (running.clone(), (*name).to_string());
        let ctl = perturber.supervise(&name.clone(), move |client| {
            replica::run(
                mode,
                client,
                name.clone(),
                clock,
                running.clone(),
                rx.clone(),
            )
        });
        if i > 0 {
            ctl.stop(); // joins on the script
        }
        controllers.push(ctl);
    }
    perturber
        .start()
        .map_err(|e| ScenarioError::Plan(e.to_string()))?;

    let outcome = perturber
        .run(async {
            let mut live = [true, false, false, false, false];
            for (at, step) in &steps {
                tokio::time::sleep(at.saturating_sub(journal.elapsed())).await;
                let change = match step {
                    Step::Member(change) => change,
                    Step::Edit(edit) => {
                        journal.log(format!("edit: {edit:?}"));
                        if let Err(e) = apply(&cms, edit).await {
                            journal.log(format!("edit failed: {e}"));
                        }
                        continue;
                    }
                };
                journal.log(format!("membership: {change:?}"));
                match *change {
                    Change::Join(i) => {
                        controllers[i].start();
                        live[i] = true;
                    }
                    Change::Leave(i) => {
                        leave[i].send_replace(true);
                        live[i] = false;
                    }
                    Change::Crash(i) => {
                        controllers[i].stop();
                        live[i] = false;
                    }
                }
            }
            // Quiet from the last change and the last perturbation window
            // (each opens in the first 80% of the horizon and lasts at most
            // half of it: write-faults and gc-delay may; the others a third).
            let quiet = HORIZON.mul_f64(0.8) + HORIZON / 2;
            tokio::time::sleep(quiet.saturating_sub(journal.elapsed())).await;
            let quiet = journal.elapsed();
            journal.log("quiet: no more membership changes or perturbations");
            tokio::time::sleep(SETTLE + WORK).await;
            (live, quiet)
        })
        .await;
    let (live, quiet) = match outcome {
        Ok(v) => v,
        Err(verdict) => {
            journal.log(format!("run ended early: {verdict}"));
            perturber.settled().await;
            return Ok(Report {
                livelock: Some(verdict.to_string()),
                ..report(mode, seed, printed, &perturber, &violations, &journal)
            });
        }
    };
    perturber.settled().await;

    // I3: every object reconciled by the owner the final ring names.
    let members: Vec<String> = REPLICAS
        .iter()
        .zip(live)
        .filter(|(_, l)| *l)
        .map(|(r, _)| (*r).to_string())
        .collect();
    let ring = ward_runtime::shard::Ring::new(members.iter().cloned());
    for cm in cms.list(&ListParams::default()).await?.items {
        let hash = ward_base::fnv1a(cm.uid().unwrap_or_default().as_bytes());
        let owner = ring.owner_of(hash).unwrap_or_default();
        if !running.finished(owner, &cm.name_any(), quiet, quiet + SETTLE + WORK) {
            violations.violate(
                Invariant::I3,
                cm.name_any(),
                format!(
                    "{} was not reconciled by its final owner {owner} within {:?} of the quiet",
                    cm.name_any(),
                    SETTLE + WORK
                ),
            );
        }
    }
    // I5: every change answered by the end of the settle window.
    for (name, mark, at) in marks.unanswered(|at| at.max(quiet) + SETTLE + WORK) {
        violations.violate(
            Invariant::I5,
            name.clone(),
            format!(
                "{name}'s change to mark {mark} at {:.3}s was not answered within {:?} of the quiet",
                at.as_secs_f64(),
                SETTLE + WORK
            ),
        );
    }
    if marks.changes() != EDITS {
        violations.violate(
            Invariant::I5,
            "edits".into(),
            format!(
                "the server recorded {} of the churn's {EDITS} edits",
                marks.changes()
            ),
        );
    }
    // I4: the final ring's balance.
    if let Err(e) = balanced(&members, seed) {
        violations.violate(Invariant::I4, "ring".into(), e);
    }
    Ok(report(
        mode,
        seed,
        printed,
        &perturber,
        &violations,
        &journal,
    ))
}

/// Make one edit through the scenario's own (never perturbed) client.
async fn apply(cms: &Api<ConfigMap>, edit: &Edit) -> Result<(), kube::Error> {
    match edit {
        Edit::Create(name, mark) => {
            let mut cm = ConfigMap::default();
            cm.metadata.name = Some(name.clone());
            cm.data = Some([(WANT.to_string(), mark.to_string())].into());
            cms.create(&PostParams::default(), &cm).await?;
        }
        Edit::Change(name, mark) => {
            let patch = serde_json::json!({ "data": { WANT: mark.to_string() } });
            cms.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
    }
    Ok(())
}

fn report(
    mode: Mode,
    seed: u64,
    plan: String,
    perturber: &ward_campaign::Perturber,
    violations: &Violations,
    journal: &Journal,
) -> Report<Sharding> {
    Report {
        scenario: Scenario::Churn,
        mode,
        seed,
        plan,
        events: perturber.events(),
        violations: violations.all(),
        journal: journal.entries(),
        measured: (),
        livelock: None,
    }
}

/// The sharding example: one scenario (`churn`), naive and guarded.
#[derive(Debug, Default, Clone, Copy)]
pub struct Sharding;

impl Example for Sharding {
    const NAME: &'static str = "sharding";
    type Scenario = Scenario;
    type Mode = Mode;
    type Invariant = Invariant;
    type Measured = ();
    const SCENARIOS: &'static [Scenario] = &[Scenario::Churn];
    const MODES: &'static [Mode] = &Mode::ALL;

    fn guarded(mode: Mode) -> bool {
        mode == Mode::Guarded
    }

    fn run(
        _: Scenario,
        mode: Mode,
        seed: u64,
        kinds: &[std::sync::Arc<dyn ward_campaign::Perturbation>],
    ) -> impl Future<Output = Result<Report<Self>, ScenarioError>> + Send {
        run(mode, seed, kinds)
    }
}
