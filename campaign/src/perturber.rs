//! The perturber: carries out a plan against one server, runs the
//! controllers under test (each under a supervisor that can crash and
//! restart it) and records the history of the run.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use ward_apiserver::{ApiServer, Services, WardService};

use crate::history::{self, Shared, Violation, Write};
use crate::plan::Plan;
use crate::world::{Counted, Limits, Pace, RunError, Target, World};

/// Runs a plan against one server: register the controllers under test
/// with [`Perturber::supervise`] (and any judges of the history with
/// [`Perturber::judge`]), then [`Perturber::start`] the plan and
/// [`Perturber::run`] the scenario's workload. Dropping it stops the plan
/// and the controllers.
pub struct Perturber {
    services: Services,
    world: Arc<World>,
    plan: Plan,
    history: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
    actions: Vec<JoinHandle<()>>,
}

impl Perturber {
    /// A perturber for `server`, carrying out `plan` once started,
    /// writing what it does to `log`, within [`Limits::default`]. From now
    /// on it also records every write the server commits (see
    /// [`Perturber::events`]).
    #[must_use]
    pub fn new(
        server: &ApiServer,
        plan: Plan,
        log: impl Fn(String) + Send + Sync + 'static,
    ) -> Self {
        Self::with_limits(server, plan, Limits::default(), log)
    }

    /// [`Perturber::new`], the run held to `limits`.
    #[must_use]
    pub fn with_limits(
        server: &ApiServer,
        plan: Plan,
        limits: Limits,
        log: impl Fn(String) + Send + Sync + 'static,
    ) -> Self {
        let store = server.store().clone();
        let history = Arc::new(Shared::default());
        let recorder = tokio::spawn(history::record(&store, history.clone()));
        Perturber {
            services: server.services(),
            world: Arc::new(World {
                start: Mutex::new(Instant::now()),
                faults: server.faults().clone(),
                store,
                targets: Mutex::default(),
                log: Arc::new(log),
                pace: Mutex::new(Pace {
                    limits,
                    instant: Instant::now(),
                    at_instant: 0,
                    total: 0,
                }),
                verdict: watch::Sender::new(None),
            }),
            plan,
            history,
            tasks: vec![recorder],
            actions: Vec::new(),
        }
    }

    /// The run's bounds, from the next API call on.
    #[deprecated(since = "0.3.0", note = "pass the limits to `Perturber::with_limits`")]
    #[must_use]
    pub fn limits(self, limits: Limits) -> Self {
        self.world
            .pace
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .limits = limits;
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
    pub fn supervise<F, Fut>(&mut self, name: &str, start: F) -> Controller
    where
        F: Fn(kube::Client) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (svc, target) = self.target(name);
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

    /// [`Perturber::supervise`], on the perturber's own server (which
    /// `server` must be).
    #[deprecated(
        since = "0.3.0",
        note = "use `Perturber::supervise(name, start)`: the perturber has its server"
    )]
    pub fn controller<F, Fut>(&mut self, _server: &ApiServer, name: &str, start: F) -> Controller
    where
        F: Fn(kube::Client) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.supervise(name, start)
    }

    /// Register a controller under test as `name`: its transport's inner
    /// service (the identity the plan aims at) and its target.
    pub(crate) fn target(&mut self, name: &str) -> (WardService, Arc<Target>) {
        let svc = self.services.service();
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
        (svc, target)
    }

    /// The world the plan acts on.
    pub(crate) fn world(&self) -> &Arc<World> {
        &self.world
    }

    /// Keep `task` running until the perturber is dropped.
    pub(crate) fn hold(&mut self, task: JoinHandle<()>) {
        self.tasks.push(task);
    }

    /// Wait until every action of the plan has been carried out (each has
    /// restored what it changed; an armed crash may still be pending).
    pub(crate) async fn plan_done(&mut self) {
        for t in &mut self.actions {
            let _ = t.await;
        }
    }

    /// Start carrying out the plan: its times count from now.
    ///
    /// # Errors
    /// [`RunError::UnknownTarget`] if an action of the plan targets a name
    /// no [`Perturber::supervise`] was registered under (nothing starts).
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
            self.actions
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
        for t in self.tasks.iter().chain(&self.actions) {
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
