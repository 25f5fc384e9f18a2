//! What a plan acts on: the server's fault knobs and the controllers under
//! test, each run under a supervisor that can crash and restart it.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use http::{Method, Request};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use ward_apiserver::faults::ClientId;
use ward_apiserver::store::Store;
use ward_apiserver::{ApiServer, Faults, WardService};

use crate::history::{self, Shared, Violation, Write};
use crate::plan::Plan;

/// Where a run's perturbation events are written (the scenario's journal).
pub type Log = Arc<dyn Fn(String) + Send + Sync>;

/// A request a crash can follow: reads are GET/HEAD (gets, lists, watches),
/// writes everything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A GET or HEAD.
    Read,
    /// A POST, PUT, PATCH or DELETE.
    Write,
}

impl Op {
    fn index(self) -> usize {
        match self {
            Op::Read => 0,
            Op::Write => 1,
        }
    }
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Op::Read => "read",
            Op::Write => "write",
        })
    }
}

/// One controller under test, as the plan sees it.
#[derive(Debug)]
struct Target {
    name: String,
    client: ClientId,
    /// Requests answered, reads and writes.
    counts: [AtomicU64; 2],
    /// Crash once the read (write) count reaches this (0: never).
    crash_at: [AtomicU64; 2],
    crashed: Notify,
    /// Cut off from the server: its requests wait or fail.
    cut: watch::Sender<Option<Cut>>,
}

/// How a partitioned controller's requests fare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Each waits until the partition ends, then is delivered — unless the
    /// controller abandoned it meanwhile (then it never reaches the server).
    Hang,
    /// Each fails at once with a transport error.
    Fail,
}

impl Target {
    /// Count a request that has just been answered; true if the controller
    /// must die now (it never sees the answer).
    fn count(&self, op: Op) -> bool {
        let i = op.index();
        let n = self.counts[i].fetch_add(1, Ordering::SeqCst) + 1;
        let at = self.crash_at[i].load(Ordering::SeqCst);
        if at != 0 && n >= at {
            self.crash_at[i].store(0, Ordering::SeqCst);
            self.crashed.notify_one();
            return true;
        }
        false
    }
}

/// The run a plan acts on (handed to [`Action::run`](crate::Action::run)).
pub struct World {
    /// When the plan started: its times count from here.
    start: Mutex<Instant>,
    faults: Faults,
    store: Arc<Store>,
    targets: Mutex<BTreeMap<String, Arc<Target>>>,
    log: Log,
    limits: Limits,
    pace: Mutex<Pace>,
    verdict: watch::Sender<Option<RunError>>,
}

/// The controllers' API calls, for the livelock bound.
#[derive(Debug)]
struct Pace {
    /// The simulated instant of the latest call.
    instant: Instant,
    /// Calls made at that instant.
    at_instant: u64,
    /// Calls made in all.
    total: u64,
}

/// Bounds on a run: past either, the run ends with a livelock verdict
/// ([`RunError::TimeStopped`], [`RunError::TooManyCalls`]) instead of
/// spinning forever. Only the controllers under test count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// API calls the controllers may make while simulated time stands
    /// still: a controller whose writes trigger its own reconciles with no
    /// timer in between (create, the GC deletes, the DELETED event
    /// reconciles, create again) never lets tokio's paused clock advance.
    pub calls_per_instant: u64,
    /// API calls the controllers may make in all.
    pub calls: u64,
}

impl Default for Limits {
    /// 50,000 calls at one instant (a sync of thousands of objects makes a
    /// few per object), 5,000,000 in all.
    fn default() -> Self {
        Limits {
            calls_per_instant: 50_000,
            calls: 5_000_000,
        }
    }
}

/// Why a run ended without its scenario finishing, or could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// A plan's action names a controller that was never registered.
    #[error(
        "the plan's {kind} action targets {target:?}, which is no controller of this perturber (registered: {known})"
    )]
    UnknownTarget {
        /// The action's kind.
        kind: &'static str,
        /// The name it targets.
        target: String,
        /// The names registered with [`Perturber::controller`].
        known: String,
    },
    /// Livelock: simulated time stood still while the controllers kept
    /// calling the API.
    #[error(
        "livelock: {calls} API calls at {at:.3?} without simulated time advancing (the last by {controller})"
    )]
    TimeStopped {
        /// The controller whose call passed the bound.
        controller: String,
        /// Calls made at that instant.
        calls: u64,
        /// When (from the plan's start).
        at: Duration,
    },
    /// Livelock: the controllers passed [`Limits::calls`].
    #[error("livelock: {calls} API calls by {at:.3?}, past the limit (the last by {controller})")]
    TooManyCalls {
        /// The controller whose call passed the bound.
        controller: String,
        /// Calls made in all.
        calls: u64,
        /// When (from the plan's start).
        at: Duration,
    },
}

impl RunError {
    /// Whether this is a livelock verdict (the run started, and spun).
    #[must_use]
    pub fn is_livelock(&self) -> bool {
        !matches!(self, RunError::UnknownTarget { .. })
    }
}

impl World {
    /// Sleep until `at` after the plan started.
    pub async fn until(&self, at: Duration) {
        let start = *self.start.lock().unwrap_or_else(|e| e.into_inner());
        tokio::time::sleep_until(start + at).await;
    }

    /// The server's fault knobs.
    #[must_use]
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// The server's resourceVersion now.
    #[must_use]
    pub fn current_rv(&self) -> u64 {
        self.store.current_rv()
    }

    /// The client identity of controller `name` (its views key on it).
    #[must_use]
    pub fn client_of(&self, name: &str) -> Option<ClientId> {
        self.target(name).map(|t| t.client)
    }

    /// Kill controller `name` right after its `k`-th `op` from now (the
    /// request is served, the answer never seen), and restart it with its
    /// memory lost. False if there is no such controller.
    pub fn arm_crash(&self, name: &str, op: Op, k: u64) -> bool {
        let Some(t) = self.target(name) else {
            return false;
        };
        let now = t.counts[op.index()].load(Ordering::SeqCst);
        t.crash_at[op.index()].store(now + k.max(1), Ordering::SeqCst);
        true
    }

    /// Cut controller `name` off from the server (`Some`), or reconnect
    /// it (`None`); while cut it still runs. False if there is no such
    /// controller.
    pub fn partition(&self, name: &str, cut: Option<Cut>) -> bool {
        let Some(t) = self.target(name) else {
            return false;
        };
        t.cut.send_replace(cut);
        true
    }

    /// Write a line to the run's history.
    pub fn log(&self, what: String) {
        (self.log)(what);
    }

    /// Count a controller's call; false once the run is over its limits
    /// (the verdict is set, and the call never answered).
    fn pace(&self, controller: &str) -> bool {
        if self.verdict.borrow().is_some() {
            return false;
        }
        let now = Instant::now();
        let verdict = {
            let mut p = self.pace.lock().unwrap_or_else(|e| e.into_inner());
            if p.instant != now {
                p.instant = now;
                p.at_instant = 0;
            }
            p.at_instant += 1;
            p.total += 1;
            let stopped = p.at_instant > self.limits.calls_per_instant;
            if !stopped && p.total <= self.limits.calls {
                return true;
            }
            let start = *self.start.lock().unwrap_or_else(|e| e.into_inner());
            let (controller, at) = (controller.to_string(), now.saturating_duration_since(start));
            if stopped {
                RunError::TimeStopped {
                    controller,
                    calls: p.at_instant,
                    at,
                }
            } else {
                RunError::TooManyCalls {
                    controller,
                    calls: p.total,
                    at,
                }
            }
        };
        self.log(format!("verdict: {verdict}"));
        self.verdict.send_replace(Some(verdict));
        false
    }

    fn target(&self, name: &str) -> Option<Arc<Target>> {
        self.targets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }
}

/// Runs a plan against one server: register the controllers under test
/// with [`Perturber::controller`] (and any judges of the history with
/// [`Perturber::judge`]), then [`Perturber::start`] the plan and
/// [`Perturber::run`] the scenario's workload. Dropping it stops the plan
/// and the controllers.
pub struct Perturber {
    world: Arc<World>,
    plan: Plan,
    history: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
}

impl Perturber {
    /// A perturber for `server`, carrying out `plan` once started,
    /// writing what it does to `log`. From now on it also records every
    /// write the server commits (see [`Perturber::events`]).
    #[must_use]
    pub fn new(
        server: &ApiServer,
        plan: Plan,
        log: impl Fn(String) + Send + Sync + 'static,
    ) -> Self {
        let store = server.store().clone();
        let history = Arc::new(Shared::default());
        let recorder = tokio::spawn(history::record(&store, history.clone()));
        Perturber {
            world: Arc::new(World {
                start: Mutex::new(Instant::now()),
                faults: server.faults().clone(),
                store,
                targets: Mutex::default(),
                log: Arc::new(log),
                limits: Limits::default(),
                pace: Mutex::new(Pace {
                    instant: Instant::now(),
                    at_instant: 0,
                    total: 0,
                }),
                verdict: watch::Sender::new(None),
            }),
            plan,
            history,
            tasks: vec![recorder],
        }
    }

    /// The run's bounds ([`Limits::default`] unless set).
    ///
    /// # Panics
    /// If a controller was registered or the plan started already (they
    /// hold the limits they started with).
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Self {
        let world = Arc::get_mut(&mut self.world)
            .expect("Perturber::limits is set before `controller` and `start`");
        world.limits = limits;
        self
    }

    /// Every write the server committed since [`Perturber::new`], in
    /// order, as `rv 42 MODIFIED pods default/web-0 (uid …)`: with the
    /// plan's log and the scenario's journal, a run's history; a replay
    /// of the seed yields the same lines, resourceVersions included.
    #[must_use]
    pub fn events(&self) -> Vec<String> {
        self.history.lock().lines.clone()
    }

    /// Judge every write the server commits from now on, in order, with
    /// the object before and after it: `check` returns `Err(what broke)`
    /// for a write that breaks `invariant` (see [`crate::history`]). It runs
    /// on the recorder's task with the history locked: it must not call
    /// back into the perturber.
    pub fn judge(
        &mut self,
        invariant: &'static str,
        check: impl FnMut(&Write<'_>) -> Result<(), String> + Send + 'static,
    ) {
        self.history
            .lock()
            .judges
            .push((invariant, Box::new(check)));
    }

    /// What the judges found so far, in the order of the writes.
    #[must_use]
    pub fn violations(&self) -> Vec<Violation> {
        self.history.lock().violations.clone()
    }

    /// Wait until every write committed so far has been recorded and
    /// judged.
    pub async fn settled(&self) {
        loop {
            let recorded = self.history.recorded.notified();
            let mut recorded = std::pin::pin!(recorded);
            recorded.as_mut().enable();
            if self.history.lock().rv >= self.world.store.current_rv() {
                return;
            }
            recorded.await;
        }
    }

    /// Run a controller under test as `name`: `start` is called with a
    /// client of its own (the identity stale views and write faults aim
    /// at) and the future it returns is the controller. A crash aborts that
    /// future right after the read or write it was armed for (the controller never
    /// sees that answer) and calls `start` again — same identity, nothing
    /// else kept (state the controller shares outside its future, `start`
    /// must reset). The scenario can stop and start it too, through the
    /// returned [`Controller`].
    pub fn controller<F, Fut>(&mut self, server: &ApiServer, name: &str, start: F) -> Controller
    where
        F: Fn(kube::Client) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let svc = server.service();
        let target = Arc::new(Target {
            name: name.to_string(),
            client: svc.client_id(),
            counts: Default::default(),
            crash_at: Default::default(),
            crashed: Notify::new(),
            cut: watch::Sender::new(None),
        });
        self.world
            .targets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string(), target.clone());
        let (want, mut wanted) = watch::channel(true);
        // The supervisor holds the sender too: the scenario may drop its
        // handle without stopping the controller.
        let want = Arc::new(want);
        let keep_open = want.clone();
        let world = self.world.clone();
        let name = name.to_string();
        self.tasks.push(tokio::spawn(async move {
            let _keep_open = keep_open;
            loop {
                if !wait(&mut wanted, true).await {
                    return;
                }
                let client = kube::Client::new(
                    Counted {
                        inner: svc.clone(),
                        target: target.clone(),
                        world: world.clone(),
                    },
                    "default",
                );
                // Aborted with the supervisor, when the perturber is dropped.
                let mut run = AbortOnDrop(tokio::spawn(start(client)));
                tokio::select! {
                    _ = &mut run.0 => {
                        // Ended on its own: it runs again after a stop and a start.
                        if !wait(&mut wanted, false).await {
                            return;
                        }
                    }
                    () = target.crashed.notified() => {
                        run.stop().await;
                        world.log(format!(
                            "crash: {name} killed after {} reads and {} writes; restarted with its memory lost",
                            target.counts[0].load(Ordering::SeqCst),
                            target.counts[1].load(Ordering::SeqCst),
                        ));
                    }
                    _ = wait(&mut wanted, false) => run.stop().await,
                }
            }
        }));
        Controller { want }
    }

    /// Start carrying out the plan: its times count from now.
    ///
    /// # Errors
    /// [`RunError::UnknownTarget`] if an action of the plan targets a name
    /// no [`Perturber::controller`] was registered under (nothing starts).
    pub fn start(&mut self) -> Result<(), RunError> {
        let known = self
            .world
            .targets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect::<Vec<_>>();
        for (kind, action) in &self.plan.actions {
            if let Some(target) = action.target().filter(|t| !known.iter().any(|k| k == t)) {
                return Err(RunError::UnknownTarget {
                    kind,
                    target: target.to_string(),
                    known: if known.is_empty() {
                        "none".into()
                    } else {
                        known.join(", ")
                    },
                });
            }
        }
        *self.world.start.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        for (_, action) in &self.plan.actions {
            self.tasks
                .push(tokio::spawn(action.run(self.world.clone())));
        }
        Ok(())
    }

    /// Run the scenario's `workload` (and its settling and checks) to its
    /// end, unless the controllers livelock first: then the verdict, with
    /// the history up to it in [`Perturber::events`] and the log.
    ///
    /// # Errors
    /// [`RunError::TimeStopped`] or [`RunError::TooManyCalls`] when the
    /// controllers pass the run's [`Limits`].
    pub async fn run<F: Future>(&self, workload: F) -> Result<F::Output, RunError> {
        let mut verdict = self.world.verdict.subscribe();
        tokio::select! {
            biased;
            v = verdict.wait_for(Option::is_some) => {
                let v = v.expect("the world keeps the verdict's sender");
                Err(v.clone().expect("waited for a verdict"))
            }
            out = workload => Ok(out),
        }
    }

    /// The livelock verdict, if the controllers passed the run's limits.
    #[must_use]
    pub fn verdict(&self) -> Option<RunError> {
        self.world.verdict.borrow().clone()
    }

    /// The plan.
    #[must_use]
    pub fn plan(&self) -> &Plan {
        &self.plan
    }
}

impl Drop for Perturber {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// A controller's task, aborted when dropped.
struct AbortOnDrop(JoinHandle<()>);

impl AbortOnDrop {
    /// Abort it and wait until it is gone.
    async fn stop(&mut self) {
        self.0.abort();
        let _ = (&mut self.0).await;
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Wait until `wanted` says `run`; false once nobody can say anything.
async fn wait(wanted: &mut watch::Receiver<bool>, run: bool) -> bool {
    wanted.wait_for(|w| *w == run).await.is_ok()
}

/// A controller under test, as the scenario holds it: stopped and started
/// by the scenario's own script (a node dying, say), crashed by the plan.
#[derive(Debug)]
pub struct Controller {
    want: Arc<watch::Sender<bool>>,
}

impl Controller {
    /// Stop it (its future is aborted) until [`Controller::start`].
    pub fn stop(&self) {
        self.want.send_replace(false);
    }

    /// Start it again (a fresh call of its `start`).
    pub fn start(&self) {
        self.want.send_replace(true);
    }
}

/// A controller's transport: the in-process service, counting reads and
/// writes, and never answering the one a crash was armed for.
#[derive(Clone)]
struct Counted {
    inner: WardService,
    target: Arc<Target>,
    world: Arc<World>,
}

impl<B> tower::Service<Request<B>> for Counted
where
    B: Send + 'static,
    WardService: tower::Service<Request<B>>,
    <WardService as tower::Service<Request<B>>>::Future: Send + 'static,
    <WardService as tower::Service<Request<B>>>::Response: Send + 'static,
    <WardService as tower::Service<Request<B>>>::Error: Into<tower::BoxError> + Send + 'static,
{
    type Response = <WardService as tower::Service<Request<B>>>::Response;
    type Error = tower::BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let op = if req.method() == Method::GET || req.method() == Method::HEAD {
            Op::Read
        } else {
            Op::Write
        };
        if !self.world.pace(&self.target.name) {
            // Past the run's limits: the controller stops here, and the
            // run ends with the verdict.
            return Box::pin(std::future::pending());
        }
        let mut inner = self.inner.clone();
        let target = self.target.clone();
        let mut cut = target.cut.subscribe();
        Box::pin(async move {
            // Partitioned: nothing reaches the server until it ends.
            loop {
                let now = *cut.borrow_and_update();
                match now {
                    None => break,
                    Some(Cut::Fail) => {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::NetworkUnreachable,
                            "partitioned from the API server",
                        )
                        .into());
                    }
                    Some(Cut::Hang) => {
                        if cut.changed().await.is_err() {
                            break;
                        }
                    }
                }
            }
            let resp = inner.call(req).await.map_err(Into::into)?;
            if target.count(op) {
                // Crashed: the request is served, its answer never seen.
                std::future::pending::<()>().await;
            }
            Ok(resp)
        })
    }
}
