//! One seed of a black-box campaign: a fresh server, the setup applied,
//! the controller started under its supervisor, the plan carried out
//! while the workload runs, the run settled, the end state taken, the
//! controller killed.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{broadcast, watch};
use tokio::time::Instant;
use ward_apiserver::store::{Event, Keyed, Store};
use ward_apiserver::{ApiServer, AuthorizationMode, ServerConfig};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::oracle::{Incarnations, Snapshot, key, normalize};
use super::scenario::Scenario;
use super::states::States;
use super::supervisor;
use super::timeline::{Entry, Lane, Timeline};
use super::workload::Runner;
use crate::perturber::Perturber;
use crate::plan::{Perturbation, Plan};

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

impl Phases {
    /// The whole run: start, workload, settling and teardown.
    #[must_use]
    pub fn total(&self) -> Duration {
        self.start + self.workload + self.settle + self.teardown
    }
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
    pub(crate) fn failed(seed: u64, plan: Vec<String>, ending: Ending, timeline: Timeline) -> Run {
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

/// Run one seed of `scenario` with `kinds` (none: unperturbed).
pub async fn run(scenario: &Scenario, kinds: &[Arc<dyn Perturbation>], seed: u64) -> Run {
    let timeline = Timeline::new();
    let mut phases = Phases::default();
    let names = [scenario.name.clone()];
    let plan = match Plan::draw(seed, kinds, scenario.horizon(), &names) {
        Ok(p) => p,
        Err(e) => {
            return Run::failed(
                seed,
                Vec::new(),
                Ending::CouldNotRun(e.to_string()),
                timeline,
            );
        }
    };
    let plan_lines: Vec<String> = plan
        .actions
        .iter()
        .map(|(k, a)| format!("{k}: {a}"))
        .collect();
    let failed = |ending: Ending, timeline: Timeline| {
        Run::failed(seed, plan_lines.clone(), ending, timeline)
    };
    let dir = scenario.dir.join(format!("seed-{seed}"));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        let why = format!("cannot make {}: {e}", dir.display());
        return failed(Ending::CouldNotRun(why), timeline);
    }
    let t0 = Instant::now();
    // The controller authenticates as a ServiceAccount of its name.
    let token = format!("ward-campaign-{}-{seed}", scenario.name);
    let user = ward_apiserver::UserInfo {
        name: format!("system:serviceaccount:default:{}", scenario.name),
        uid: String::new(),
        groups: vec![
            "system:serviceaccounts".into(),
            "system:serviceaccounts:default".into(),
            "system:authenticated".into(),
        ],
        extra: Default::default(),
    };
    let mode = if scenario.rbac {
        AuthorizationMode::Rbac
    } else {
        AuthorizationMode::AlwaysAllow
    };
    // The controller is a real process reading the wall clock: the
    // server stamps with it too (the default, anchored on the whole second
    // the server started, lags it by up to a second: for simulations).
    let config = ServerConfig::default()
        .clock(ward_apiserver::Clock::new())
        .seed(seed)
        .listen(([127, 0, 0, 1], 0).into())
        .tls(scenario.https())
        .authorization_mode(mode)
        .static_tokens([(token.clone(), user)].into());
    let server = match ApiServer::start(config).await {
        Ok(s) => s,
        Err(e) => {
            return failed(
                Ending::CouldNotRun(format!("the server did not start: {e}")),
                timeline,
            );
        }
    };
    let admin = dir.join("admin.kubeconfig");
    if let Err(e) = std::fs::write(&admin, server.kubeconfig().unwrap_or_default()) {
        return failed(
            Ending::CouldNotRun(format!("cannot write {}: {e}", admin.display())),
            timeline,
        );
    }
    let seen = Arc::new(Mutex::new((Incarnations::default(), States::default())));
    let history = scenario
        .judge
        .as_ref()
        .map(|_| Arc::new(Mutex::new(Vec::new())));
    let (wrote, written) = watch::channel(0);
    // Subscribed here, not in the task: every write from the setup on is
    // recorded, whenever the task first runs.
    let (items, _, rx) = server.store().snapshot_all_and_subscribe();
    let recorder = tokio::spawn(record(
        (items, rx),
        server.store().clone(),
        seen.clone(),
        timeline.clone(),
        history.clone(),
        wrote,
    ));
    let _recorder = AbortOnDrop(recorder);
    let tl = timeline.clone();
    let log = move |line: String| tl.push(Lane::Workload, line);
    let runner = Runner {
        client: server.client(),
        kubeconfig: &admin,
        log: &log,
    };
    if let Err(e) = runner.setup(&scenario.manifests).await {
        return failed(Ending::CouldNotRun(format!("setup: {e}")), timeline);
    }
    let tl = timeline.clone();
    let mut perturber = Perturber::with_limits(&server, plan, scenario.limits, move |line| {
        tl.push(Lane::Perturbation, line)
    });
    let started = supervisor::start(
        &mut perturber,
        &scenario.name,
        &scenario.controller,
        &token,
        scenario.https().then_some(&server),
        &dir,
        timeline.clone(),
    )
    .await;
    let mut ctrl = match started {
        Ok(s) => s,
        Err(e) => return failed(Ending::CouldNotRun(e.to_string()), timeline),
    };
    // Started once it has asked the server something.
    let first = tokio::time::timeout(scenario.start_timeout, async {
        tokio::select! {
            _ = ctrl.requests.wait_for(|n| *n > 0) => None,
            e = ctrl.exited.wait_for(Option::is_some) => e.ok().and_then(|e| e.clone()),
        }
    })
    .await;
    let ending = match first {
        Err(_) => Some(Ending::CouldNotRun(format!(
            "{} made no API call within {:?}; its output ends:\n{}",
            scenario.name,
            scenario.start_timeout,
            supervisor::tail(&ctrl.log)
        ))),
        Ok(Some(exit)) => Some(Ending::CouldNotRun(format!(
            "{} exited before its first API call: {exit}",
            scenario.name
        ))),
        Ok(None) => None,
    };
    if let Some(ending) = ending {
        ctrl.stop().await;
        server.shutdown().await;
        return failed(ending, timeline);
    }
    phases.start = t0.elapsed();
    if let Err(e) = perturber.start() {
        ctrl.stop().await;
        return failed(Ending::CouldNotRun(e.to_string()), timeline);
    }
    let t1 = Instant::now();
    let mut exited = ctrl.exited.clone();
    let exit = async move {
        let e = exited.wait_for(Option::is_some).await;
        e.ok().and_then(|e| e.clone()).unwrap_or_default()
    };
    tokio::pin!(exit);
    let workload = perturber.run(runner.run(&scenario.workload.steps));
    let ending = tokio::select! {
        done = workload => match done {
            Err(livelock) => Some(Ending::Livelock(livelock.to_string())),
            Ok(Err(step)) => Some(Ending::Step(with_refusals(step.to_string(), &timeline))),
            Ok(Ok(())) => None,
        },
        why = &mut exit => Some(Ending::Exited(why)),
    };
    phases.workload = t1.elapsed();
    let t2 = Instant::now();
    let ending = match ending {
        Some(e) => e,
        None => tokio::select! {
            e = settle(&mut perturber, &server, scenario, written) => e,
            why = &mut exit => Ending::Exited(why),
        },
    };
    phases.settle = t2.elapsed();
    let end = {
        let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
        let states = std::mem::take(&mut seen.1);
        Snapshot::take(server.store(), &mut seen.0, states)
    };
    let ending = match (&ending, &scenario.invariant) {
        (Ending::Settled, Some(argv)) => {
            match supervisor::command(argv, &admin, Duration::from_secs(60), None).await {
                Ok(_) => Ending::Settled,
                Err(why) => Ending::Invariant(why),
            }
        }
        _ => ending,
    };
    let ending = match (&ending, &scenario.judge, &history) {
        (Ending::Settled, Some(argv), Some(lines)) => {
            let path = dir.join("history.jsonl");
            let text = lines.lock().unwrap_or_else(|e| e.into_inner()).join("\n");
            match std::fs::write(&path, text + "\n") {
                Err(e) => Ending::CouldNotRun(format!("cannot write {}: {e}", path.display())),
                Ok(()) => {
                    let limit = Duration::from_secs(60);
                    match supervisor::command(argv, &admin, limit, Some(&path)).await {
                        Ok(_) => Ending::Settled,
                        Err(why) => Ending::Invariant(why),
                    }
                }
            }
        }
        _ => ending,
    };
    let t3 = Instant::now();
    ctrl.stop().await;
    drop(perturber);
    server.shutdown().await;
    phases.teardown = t3.elapsed();
    Run {
        seed,
        plan: plan_lines,
        ending,
        end: Some(end),
        requests: *ctrl.requests.borrow(),
        phases,
        timeline: timeline.entries(),
    }
}

/// `why` a workload step failed, and the requests of the controller the
/// server refused (403) by then: a controller without the RBAC it needs
/// fails the workload's waits, and says why only there.
fn with_refusals(why: String, timeline: &Timeline) -> String {
    let entries = timeline.entries();
    let refused = super::timeline::refusals(&entries);
    match refused.first() {
        None => why,
        Some(first) => format!(
            "{why}; the controller was refused {} requests (403 Forbidden), the first: {first}",
            refused.len()
        ),
    }
}

/// Wait until the plan is carried out, then until nothing has been
/// written for `quiet` and the garbage collector is idle — for at most
/// `settle`.
async fn settle(
    perturber: &mut Perturber,
    server: &ApiServer,
    scenario: &Scenario,
    mut written: watch::Receiver<u64>,
) -> Ending {
    let quiet = async {
        perturber.plan_done().await;
        loop {
            written.mark_unchanged();
            // A write starts the quiet period over.
            if let Ok(Ok(())) = tokio::time::timeout(scenario.quiet, written.changed()).await {
                continue;
            }
            // Delayed collections too: the run is judged after them.
            server.gc_idle().await;
            if let Some(v) = perturber.verdict() {
                return Ending::Livelock(v.to_string());
            }
            if !written.has_changed().unwrap_or(false) {
                return Ending::Settled;
            }
        }
    };
    let writes_before = server.store().current_rv();
    match tokio::time::timeout(scenario.settle, quiet).await {
        Ok(e) => e,
        Err(_) => Ending::NotQuiet(format!(
            "not quiet {:?} after the workload: {} writes in the {:?} allowed to settle",
            scenario.quiet,
            server.store().current_rv().saturating_sub(writes_before),
            scenario.settle
        )),
    }
}

/// Note every object the run creates (for the oracle's names of uids),
/// every write on the timeline, and the resourceVersion of the latest
/// write in `wrote` (what settling waits on).
async fn record(
    (items, mut rx): (Vec<Keyed>, broadcast::Receiver<Arc<Event>>),
    store: Arc<Store>,
    seen: Arc<Mutex<(Incarnations, States)>>,
    timeline: Timeline,
    history: Option<Arc<Mutex<Vec<String>>>>,
    wrote: watch::Sender<u64>,
) {
    use tokio::sync::broadcast::error::RecvError;
    {
        let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
        for (k, o) in &items {
            seen.0
                .saw(&key(&k.group, &k.plural, &o.value()), &o.uid.to_string());
        }
    }
    loop {
        match rx.recv().await {
            Ok(e) => {
                wrote.send_replace(e.object.rv);
                if e.key.plural == "events" {
                    continue;
                }
                let o = &e.object;
                let mut v = o.value();
                let k = key(&e.key.group, &e.key.plural, &v);
                let uid = o.uid.to_string();
                let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
                seen.0.saw(&k, &uid);
                if e.kind != ward_apiserver::store::EventType::Deleted {
                    normalize(&mut v, &seen.0);
                    seen.1.saw(&super::states::group(&k, &v), &v);
                }
                drop(seen);
                if let Some(h) = &history {
                    let line = format!(
                        "{{\"rv\":{},\"type\":\"{}\",\"key\":{},\"object\":{}}}",
                        o.rv,
                        e.kind.as_str(),
                        Value::String(k.clone()),
                        String::from_utf8_lossy(&o.raw)
                    );
                    h.lock().unwrap_or_else(|e| e.into_inner()).push(line);
                }
                timeline.push(Lane::Store, format!("rv {} {} {k}", o.rv, e.kind.as_str()));
            }
            Err(RecvError::Lagged(n)) => {
                wrote.send_replace(store.current_rv());
                timeline.push(
                    Lane::Store,
                    format!("({n} writes not recorded: the recorder lagged)"),
                );
            }
            Err(RecvError::Closed) => return,
        }
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
