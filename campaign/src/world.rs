//! What a plan acts on: the server's fault knobs and the controllers under
//! test (run by the [`Perturber`](crate::Perturber), each under a
//! supervisor that can crash and restart it), reached through a transport
//! that counts their calls, cuts them off and crashes them.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use http::{Method, Request};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use ward_apiserver::faults::ClientId;
use ward_apiserver::store::Store;
use ward_apiserver::{Faults, WardService};

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
pub(crate) struct Target {
    pub(crate) name: String,
    pub(crate) client: ClientId,
    /// Requests answered, reads and writes.
    pub(crate) counts: [AtomicU64; 2],
    /// Crash once the read (write) count reaches this (0: never).
    pub(crate) crash_at: [AtomicU64; 2],
    pub(crate) crashed: Notify,
    /// Cut off from the server: its requests wait or fail.
    pub(crate) cut: watch::Sender<Option<Cut>>,
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
    pub(crate) start: Mutex<Instant>,
    pub(crate) faults: Faults,
    pub(crate) store: Arc<Store>,
    pub(crate) targets: Mutex<BTreeMap<String, Arc<Target>>>,
    pub(crate) log: Log,
    pub(crate) pace: Mutex<Pace>,
    pub(crate) verdict: watch::Sender<Option<RunError>>,
}

/// The controllers' API calls, for the livelock bound.
#[derive(Debug)]
pub(crate) struct Pace {
    /// The bounds the calls are held to.
    pub(crate) limits: Limits,
    /// The simulated instant of the latest call.
    pub(crate) instant: Instant,
    /// Calls made at that instant.
    pub(crate) at_instant: u64,
    /// Calls made in all.
    pub(crate) total: u64,
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
        /// The names registered with [`Perturber::supervise`](crate::Perturber::supervise).
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

    /// [`World::client_of`], logging that the action does nothing when
    /// `name` is no controller of this run.
    #[must_use]
    pub fn client_or_log(&self, name: &str) -> Option<ClientId> {
        let client = self.client_of(name);
        if client.is_none() {
            self.log(format!(
                "perturb: {name} is no controller of this run; nothing done"
            ));
        }
        client
    }

    /// A window of a plan: at `at` after the plan started, `begin`
    /// perturbs (and logs) and returns what `end` needs to undo it, or
    /// `None` when it did nothing; at `at + len`, `end` undoes it (and
    /// logs). False when `begin` did nothing.
    pub async fn window<T>(
        &self,
        at: Duration,
        len: Duration,
        begin: impl FnOnce(&World) -> Option<T>,
        end: impl FnOnce(&World, T),
    ) -> bool {
        self.until(at).await;
        let Some(undo) = begin(self) else {
            return false;
        };
        self.until(at + len).await;
        end(self, undo);
        true
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
            let stopped = p.at_instant > p.limits.calls_per_instant;
            if !stopped && p.total <= p.limits.calls {
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

/// A controller's transport: the in-process service, counting reads and
/// writes, and never answering the one a crash was armed for.
#[derive(Clone)]
pub(crate) struct Counted {
    pub(crate) inner: WardService,
    pub(crate) target: Arc<Target>,
    pub(crate) world: Arc<World>,
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
