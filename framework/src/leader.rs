//! Leader election on a `coordination.k8s.io/v1` Lease.
//!
//! One candidate at a time holds the Lease (`spec.holderIdentity`) and runs
//! the work; the others wait. Every write to the Lease is an update carrying
//! the resourceVersion that was read, so two candidates racing for it cannot
//! both win: the loser gets 409.
//!
//! - **Acquire**: create the Lease when it is absent; take it over when it
//!   is free (no holder, or released) or when its holder's
//!   `renewTime + leaseDurationSeconds` is in the past — judged with the
//!   Lease's own timestamps against [`Clock`] (wall time that follows tokio's
//!   clock), bumping `leaseTransitions`.
//! - **Renew** every `renew_every`. A candidate stops leading — its [`Lost`]
//!   signal fires — when the Lease is taken over or deleted, or when no renew
//!   has succeeded for `lease_duration - clock_skew`, *even if a renew is
//!   still in flight*: a slow API call cannot keep a stale leader running.
//!   A renew that lands after that is rejected with 409 if another candidate
//!   took over meanwhile (its resourceVersion changed) and is given back at
//!   once if not.
//! - **Release** on shutdown (or when the work returns): the Lease's holder
//!   is cleared, and the other candidates — each watching the Lease —
//!   try at once instead of waiting for it to expire or for their next
//!   retry.
//!
//! Metrics (labels `lease` = `namespace/name`, `identity`), every series
//! present from the start, followers' included: gauge `ward_leader` (1
//! while leading, else 0); counters
//! `ward_leader_transitions_total{event=acquired|lost|released}`,
//! `ward_leader_acquire_attempts_total{result=acquired|held|conflict|error}`,
//! `ward_leader_renew_failures_total{reason=timeout|conflict|error}` and
//! `ward_leader_late_renewals_total{result=conflict|renewed|error}`.
//! [`LeaderElection::readiness`] adds a readiness check that passes while
//! the candidate is healthy, leading or not.
//!
//! [`LeaderElection::run`] ties it together: it waits for leadership, then
//! runs the work with a [`Lost`] future that completes as soon as the work
//! must stop (leadership lost, or shutdown begun) — made to be passed to
//! [`GuardedController::graceful_shutdown_on`](crate::GuardedController::graceful_shutdown_on).
//!
//! ```no_run
//! use std::sync::Arc;
//! use futures::StreamExt;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::Api;
//! use kube::runtime::{controller::Action, watcher};
//! use ward::GuardedController;
//! use ward::leader::{LeaderElection, Outcome};
//!
//! async fn reconcile(_cm: Arc<ConfigMap>, _: Arc<()>) -> Result<Action, kube::Error> {
//!     Ok(Action::await_change())
//! }
//!
//! # async fn demo(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let api = Api::<ConfigMap>::namespaced(client.clone(), "default");
//! let readiness = ward::Readiness::new(); // served at /readyz by ward::Observability
//! let outcome = LeaderElection::new(client, "default", "my-controller", "pod-a")
//!     .readiness(readiness.clone())
//!     .run(
//!         // Called once leadership is acquired; `lost` completes when it
//!         // ends: leadership lost, or SIGTERM/SIGINT (then the Lease is
//!         // released once the controller has stopped).
//!         |lost| async move {
//!             GuardedController::new(api, watcher::Config::default())
//!                 .readiness(readiness)
//!                 .graceful_shutdown_on(lost)
//!                 .run(reconcile, |_, _, _| Action::await_change(), Arc::new(()))
//!                 .for_each(|_| async {})
//!                 .await;
//!         },
//!         ward::shutdown::signal()?,
//!     )
//!     .await?;
//! if let Outcome::Lost(reason) = outcome {
//!     // Another replica leads now: exit and let the restart start a new candidate.
//!     eprintln!("leadership lost: {reason}");
//!     std::process::exit(1);
//! }
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until, timeout_at};

use crate::clock::Clock;
use crate::observe::readiness::RemoveOnDrop;
use crate::observe::{Readiness, ReadyCheck, catalog};

/// Errors from leader election.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The durations do not fit together.
    #[error("invalid leader election settings: {0}")]
    Config(String),
    /// The Lease could not be released on shutdown (the next candidate
    /// takes over once it expires).
    #[error("could not release lease {lease}: {source}")]
    Release {
        /// `namespace/name` of the Lease.
        lease: String,
        /// What went wrong.
        #[source]
        source: kube::Error,
    },
    /// Releasing the Lease took longer than a lease duration.
    #[error("releasing lease {lease} timed out")]
    ReleaseTimeout {
        /// `namespace/name` of the Lease.
        lease: String,
    },
}

/// Why leadership was lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LostReason {
    /// No renew succeeded in time (the API was slow or failing): the Lease
    /// may already be expired in the other candidates' eyes.
    Expired,
    /// Another candidate holds the Lease (`None`: it was released by someone else).
    TakenOver {
        /// The new holder.
        holder: Option<String>,
    },
    /// The Lease was deleted.
    Deleted,
}

impl fmt::Display for LostReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LostReason::Expired => f.write_str("no renew succeeded before the lease expired"),
            LostReason::TakenOver { holder: Some(h) } => write!(f, "taken over by {h}"),
            LostReason::TakenOver { holder: None } => f.write_str("released by another party"),
            LostReason::Deleted => f.write_str("the lease was deleted"),
        }
    }
}

/// How [`LeaderElection::run`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Shutdown came before this candidate ever led; the work never ran.
    NeverLed,
    /// Led, then lost the Lease; the work was told to stop and has returned.
    Lost(LostReason),
    /// Led until shutdown (or until the work returned), then released the Lease.
    Released,
}

/// What the work is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Leading,
    Stopping,
    Lost,
}

/// A future that completes when the work must stop leading: the Lease was
/// lost, or shutdown began (then the Lease is released once the work
/// returns). It is `Send + Sync + 'static`, for
/// [`GuardedController::graceful_shutdown_on`](crate::GuardedController::graceful_shutdown_on);
/// clones are independent futures on the same signal.
pub struct Lost {
    rx: watch::Receiver<Phase>,
    wait: Option<Pin<Box<dyn Future<Output = ()> + Send + Sync>>>,
}

impl Lost {
    fn new(rx: watch::Receiver<Phase>) -> Self {
        Lost { rx, wait: None }
    }

    /// Whether the work must stop now (the future has completed or would at once).
    #[must_use]
    pub fn is_lost(&self) -> bool {
        *self.rx.borrow() != Phase::Leading
    }

    /// Whether leadership was lost (as opposed to shutting down while leading).
    #[must_use]
    pub fn is_taken(&self) -> bool {
        *self.rx.borrow() == Phase::Lost
    }
}

impl Clone for Lost {
    fn clone(&self) -> Self {
        Lost::new(self.rx.clone())
    }
}

impl fmt::Debug for Lost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lost")
            .field("phase", &*self.rx.borrow())
            .finish()
    }
}

impl Future for Lost {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let rx = &this.rx;
        let wait = this.wait.get_or_insert_with(|| {
            let mut rx = rx.clone();
            // A dropped sender (the election itself was dropped) counts as lost.
            Box::pin(async move {
                let _ = rx.wait_for(|p| *p != Phase::Leading).await;
            })
        });
        wait.as_mut().poll(cx)
    }
}

/// The durations of an election (and of a shard member's Lease).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timing {
    pub(crate) lease_duration: Duration,
    pub(crate) renew_every: Duration,
    pub(crate) retry_every: Duration,
    pub(crate) clock_skew: Option<Duration>,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            lease_duration: Duration::from_secs(15),
            renew_every: Duration::from_secs(5),
            retry_every: Duration::from_secs(2),
            clock_skew: None,
        }
    }
}

impl Timing {
    pub(crate) fn skew(&self) -> Duration {
        self.clock_skew.unwrap_or_else(|| {
            Duration::from_secs(1).min(self.lease_duration.saturating_sub(self.renew_every) / 2)
        })
    }

    /// When a Lease written at `from` stops counting as held, for its holder.
    pub(crate) fn deadline(&self, from: Instant) -> Instant {
        from + self.lease_duration.saturating_sub(self.skew())
    }

    /// `leaseDurationSeconds`: whole seconds, rounded up.
    pub(crate) fn seconds(&self) -> i32 {
        let d = self.lease_duration;
        let s = d.as_secs() + u64::from(d.subsec_nanos() > 0);
        i32::try_from(s).unwrap_or(i32::MAX)
    }

    pub(crate) fn validate(&self) -> Result<(), LeaderError> {
        let bad = |m: String| Err(LeaderError::Config(m));
        if self.lease_duration < Duration::from_secs(1) {
            return bad(format!(
                "lease duration {:?} is under 1s",
                self.lease_duration
            ));
        }
        if self.renew_every.is_zero() || self.retry_every.is_zero() {
            return bad("renew and retry periods must be positive".into());
        }
        if self.renew_every + self.skew() >= self.lease_duration {
            return bad(format!(
                "renew period {:?} plus clock skew {:?} must be shorter than the lease duration {:?}",
                self.renew_every,
                self.skew(),
                self.lease_duration
            ));
        }
        Ok(())
    }
}

/// Leader election for one candidate (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct LeaderElection {
    api: Api<Lease>,
    /// `namespace/name`, for logs and metric labels.
    lease: String,
    name: String,
    identity: String,
    timing: Timing,
    clock: Clock,
    readiness: Option<Readiness>,
    ready_only_when_leading: bool,
    /// Set by `run` when `readiness` is.
    check: Option<ReadyCheck>,
}

impl LeaderElection {
    /// A candidate called `identity` (unique per process, e.g. the pod name)
    /// for the Lease `namespace/lease_name`.
    #[must_use]
    pub fn new(
        client: Client,
        namespace: &str,
        lease_name: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        let name = lease_name.into();
        LeaderElection {
            api: Api::namespaced(client, namespace),
            lease: format!("{namespace}/{name}"),
            name,
            identity: identity.into(),
            timing: Timing::default(),
            clock: Clock::new(),
            readiness: None,
            ready_only_when_leading: false,
            check: None,
        }
    }

    /// How long a Lease stays valid after its last renew (default 15 s;
    /// written as whole seconds, rounded up).
    #[must_use]
    pub fn lease_duration(mut self, d: Duration) -> Self {
        self.timing.lease_duration = d;
        self
    }

    /// How often the leader renews (default 5 s; less than the lease duration).
    #[must_use]
    pub fn renew_every(mut self, d: Duration) -> Self {
        self.timing.renew_every = d;
        self
    }

    /// How often a follower tries to acquire, and a failed renew is retried (default 2 s).
    #[must_use]
    pub fn retry_every(mut self, d: Duration) -> Self {
        self.timing.retry_every = d;
        self
    }

    /// How much earlier than its Lease's expiry the leader stops leading, to
    /// absorb clock differences between candidates (default: 1 s, or half
    /// the gap between the lease duration and the renew period if smaller).
    #[must_use]
    pub fn clock_skew(mut self, d: Duration) -> Self {
        self.timing.clock_skew = Some(d);
        self
    }

    /// The clock that stamps and judges Lease times (default: a new
    /// [`Clock`]). Candidates in one process under a paused tokio clock
    /// should share one: each `Clock` anchors real wall time to tokio's
    /// instant when it is created.
    #[must_use]
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Drive a readiness check named `leader-election/<namespace>/<name>`
    /// from [`run`](Self::run): it passes while this candidate is healthy —
    /// its last attempt to acquire got an answer from the API server (the
    /// Lease held by another candidate counts), or it leads — fails when
    /// an attempt errs, and is removed once `run` returns. Followers are ready, so
    /// they do not stall a rolling update; the `ward_leader` gauge says who
    /// leads. See [`ready_only_when_leading`](Self::ready_only_when_leading)
    /// for the other meaning.
    #[must_use]
    pub fn readiness(mut self, readiness: Readiness) -> Self {
        self.readiness = Some(readiness);
        self
    }

    /// Make the [`readiness`](Self::readiness) check pass only while this
    /// candidate leads (a Service then sends traffic to the leader alone;
    /// a Deployment's rollout waits on followers that are never ready, so
    /// use `maxUnavailable` accordingly).
    #[must_use]
    pub fn ready_only_when_leading(mut self) -> Self {
        self.ready_only_when_leading = true;
        self
    }

    /// Wait for leadership, run `work` while leading, and release the Lease
    /// on shutdown.
    ///
    /// `work` is called once leadership is acquired, with a [`Lost`] future
    /// that completes when it must stop: the Lease was lost, or `shutdown`
    /// completed. The work is expected to return promptly then (finishing
    /// what is in flight); it is never dropped half-way. While it winds down
    /// after `shutdown`, the Lease is still renewed; once it returns the
    /// Lease is released. If `work` returns on its own, the Lease is released
    /// too.
    ///
    /// Transient API errors are retried (acquire every `retry_every`; renew
    /// until the Lease would expire). Dropping the returned future stops
    /// everything without releasing (the Lease then expires).
    pub async fn run<F, Fut, S>(self, work: F, shutdown: S) -> Result<Outcome, LeaderError>
    where
        F: FnOnce(Lost) -> Fut,
        Fut: Future<Output = ()>,
        S: Future,
    {
        self.timing.validate()?;
        let mut this = self;
        catalog::register_election(&this.lease, &this.identity);
        this.check = this
            .readiness
            .as_ref()
            .map(|r| r.check(format!("leader-election/{}", this.lease)));
        // The candidate stops with `run` (or when its future is dropped).
        let _stopped = this.check.clone().map(RemoveOnDrop);
        let me = Arc::new(this);
        me.leading(false);
        let mut shutdown = pin!(shutdown);
        let (lease, valid_from) = tokio::select! {
            biased;
            _ = &mut shutdown => return Ok(Outcome::NeverLed),
            got = me.acquire() => got,
        };
        me.leading(true);
        me.count("ward_leader_transitions_total", "event", "acquired");
        tracing::info!(lease = %me.lease, identity = %me.identity, "acquired leadership");

        let (phase_tx, phase_rx) = watch::channel(Phase::Leading);
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut keeper = Keeper(tokio::spawn(me.clone().keep(
            lease,
            valid_from,
            stop_rx,
            phase_tx.clone(),
        )));
        let mut work = pin!(work(Lost::new(phase_rx)));
        let mut work_done = false;
        let mut end = tokio::select! {
            _ = &mut work => { work_done = true; None }
            _ = &mut shutdown => None,
            end = &mut keeper => Some(end),
        };
        if end.is_none() {
            // Shutdown, or the work returned: stop the work, renewing meanwhile.
            phase_tx.send_if_modified(|p| {
                let leading = *p == Phase::Leading;
                if leading {
                    *p = Phase::Stopping;
                }
                leading
            });
            if !work_done {
                tokio::select! {
                    _ = &mut work => work_done = true,
                    lost = &mut keeper => end = Some(lost),
                }
            }
        }
        let end = match end {
            Some(end) => end,
            None => {
                let _ = stop_tx.send(true);
                (&mut keeper).await
            }
        };
        if !work_done {
            work.await;
        }
        match end {
            Kept::Lost(reason) => Ok(Outcome::Lost(reason)),
            Kept::Released(Ok(())) => Ok(Outcome::Released),
            Kept::Released(Err(e)) => Err(e),
        }
    }

    /// Leadership began or ended: the gauge, and readiness when it means leading.
    fn leading(&self, leading: bool) {
        metrics::gauge!("ward_leader", "lease" => self.lease.clone(), "identity" => self.identity.clone())
            .set(if leading { 1.0 } else { 0.0 });
        if let Some(check) = &self.check
            && (leading || self.ready_only_when_leading)
        {
            check.set(leading);
        }
    }

    /// An attempt to acquire got an answer (`true`) or failed: readiness
    /// when it means a healthy candidate.
    fn healthy(&self, answered: bool) {
        if let Some(check) = &self.check
            && !self.ready_only_when_leading
        {
            check.set(answered);
        }
    }

    /// Count one event in the counter `name`, labelled with `key` = `value`.
    fn count(&self, name: &'static str, key: &'static str, value: &'static str) {
        metrics::counter!(name, "lease" => self.lease.clone(), "identity" => self.identity.clone(), key => value)
            .increment(1);
    }

    /// The Lease as this candidate writes it when taking it, from `current`.
    fn taken(&self, current: Option<Lease>) -> Lease {
        let now = MicroTime(self.clock.now());
        let mut lease = current.unwrap_or_else(|| {
            let mut l = Lease::default();
            l.metadata.name = Some(self.name.clone());
            l
        });
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let mine = spec.holder_identity.as_deref() == Some(self.identity.as_str());
        if !mine {
            let transitions = spec.lease_transitions.unwrap_or(0);
            spec.lease_transitions = Some(if lease.metadata.resource_version.is_some() {
                transitions.saturating_add(1)
            } else {
                0
            });
            spec.acquire_time = Some(now.clone());
            spec.holder_identity = Some(self.identity.clone());
        }
        spec.acquire_time.get_or_insert_with(|| now.clone());
        spec.lease_transitions.get_or_insert(0);
        spec.renew_time = Some(now);
        spec.lease_duration_seconds = Some(self.timing.seconds());
        lease
    }

    /// One attempt: the Lease if this candidate holds it now.
    async fn try_acquire(&self) -> Result<Attempt, kube::Error> {
        let current = self.api.get_opt(&self.name).await?;
        let spec = current.as_ref().and_then(|l| l.spec.clone());
        let (now, fallback) = (self.clock.now(), self.timing.lease_duration);
        if spec.is_some_and(|s| !available(&s, &self.identity, now, fallback)) {
            return Ok(Attempt::Held);
        }
        let pp = PostParams::default();
        let written = match current {
            None => self.api.create(&pp, &self.taken(None)).await,
            Some(c) => {
                self.api
                    .replace(&self.name, &pp, &self.taken(Some(c)))
                    .await
            }
        };
        match written {
            Ok(l) => Ok(Attempt::Acquired(Box::new(l))),
            // Another candidate wrote first.
            Err(e) if is_conflict(&e) => Ok(Attempt::Conflict),
            Err(e) => Err(e),
        }
    }

    /// Try until this candidate holds the Lease; returns it and when the
    /// successful write started (its validity counts from there).
    async fn acquire(&self) -> (Lease, Instant) {
        let mut released = pin!(self.released());
        loop {
            let started = Instant::now();
            let attempt = self.try_acquire().await;
            let result = match &attempt {
                Ok(Attempt::Acquired(_)) => "acquired",
                Ok(Attempt::Held) => "held",
                Ok(Attempt::Conflict) => "conflict",
                Err(_) => "error",
            };
            self.count("ward_leader_acquire_attempts_total", "result", result);
            self.healthy(attempt.is_ok());
            match attempt {
                Ok(Attempt::Acquired(lease)) if Instant::now() < self.timing.deadline(started) => {
                    return (*lease, started);
                }
                Ok(Attempt::Acquired(_)) => {
                    tracing::warn!(lease = %self.lease, "acquired too late to lead; trying again")
                }
                Ok(Attempt::Held | Attempt::Conflict) => {}
                Err(e) => {
                    tracing::warn!(lease = %self.lease, error = %e, "acquiring the lease failed")
                }
            }
            // Try again after `retry_every`, or at once when the holder
            // gives the Lease up (or it is deleted).
            tokio::select! {
                biased;
                Some(()) = released.next() => {}
                () = tokio::time::sleep(self.timing.retry_every) => {}
            }
        }
    }

    /// An item each time a watch of the Lease sees it released (no
    /// holder) or deleted. A watch that fails (no `list`/`watch` RBAC, say)
    /// is retried with kube-runtime's default backoff and yields nothing:
    /// then only the retry period is left.
    fn released(&self) -> impl futures::Stream<Item = ()> + Send + 'static {
        use kube::runtime::{WatchStreamExt, watcher};
        let wc = watcher::Config::default().fields(&format!("metadata.name={}", self.name));
        watcher::watcher(self.api.clone(), wc)
            .default_backoff()
            .filter_map(|event| {
                futures::future::ready(match event {
                    Ok(watcher::Event::Apply(l)) if holder(l.spec.as_ref()).is_none() => Some(()),
                    Ok(watcher::Event::Delete(_)) => Some(()),
                    _ => None,
                })
            })
    }

    /// Renew until lost or told to stop (then release).
    async fn keep(
        self: Arc<Self>,
        mut lease: Lease,
        mut valid_from: Instant,
        mut stop: watch::Receiver<bool>,
        phase: watch::Sender<Phase>,
    ) -> Kept {
        let mut next = valid_from + self.timing.renew_every;
        let reason = loop {
            let deadline = self.timing.deadline(valid_from);
            tokio::select! {
                biased;
                _ = async { drop(stop.wait_for(|s| *s).await) } => {
                    let released = self.release(lease).await;
                    self.leading(false);
                    self.count("ward_leader_transitions_total", "event", "released");
                    tracing::info!(lease = %self.lease, identity = %self.identity, "released leadership");
                    return Kept::Released(released);
                }
                _ = sleep_until(deadline) => break LostReason::Expired,
                _ = sleep_until(next) => {}
            }
            let started = Instant::now();
            match self.clone().renew(&lease, deadline).await {
                Renewed::Ok(l) => {
                    lease = l;
                    valid_from = started;
                    next = started + self.timing.renew_every;
                }
                Renewed::Stale(l) => {
                    lease = l;
                    next = Instant::now() + self.timing.retry_every;
                }
                Renewed::Failed => next = Instant::now() + self.timing.retry_every,
                Renewed::Lost(reason) => break reason,
            }
        };
        phase.send_replace(Phase::Lost);
        self.leading(false);
        self.count("ward_leader_transitions_total", "event", "lost");
        tracing::warn!(lease = %self.lease, identity = %self.identity, %reason, "lost leadership");
        Kept::Lost(reason)
    }

    /// One renew, abandoned at `deadline` (it may still land later: then a
    /// conflict is expected, and a success is given back).
    async fn renew(self: Arc<Self>, lease: &Lease, deadline: Instant) -> Renewed {
        let mut next = lease.clone();
        let spec = next.spec.get_or_insert_with(LeaseSpec::default);
        spec.renew_time = Some(MicroTime(self.clock.now()));
        spec.lease_duration_seconds = Some(self.timing.seconds());
        let me = self.clone();
        // A task of its own: abandoned at the deadline, it still completes.
        let mut call = tokio::spawn(async move {
            me.api
                .replace(&me.name, &PostParams::default(), &next)
                .await
        });
        let result = tokio::select! {
            r = &mut call => r.unwrap_or_else(|e| Err(kube::Error::Service(Box::new(e)))),
            _ = sleep_until(deadline) => {
                self.count("ward_leader_renew_failures_total", "reason", "timeout");
                let me = self.clone();
                tokio::spawn(async move { me.late_renew(call).await });
                return Renewed::Lost(LostReason::Expired);
            }
        };
        match result {
            Ok(l) => Renewed::Ok(l),
            Err(e) if is_conflict(&e) => {
                self.count("ward_leader_renew_failures_total", "reason", "conflict");
                // Still ours with another resourceVersion (someone touched
                // it)? Renew again; otherwise it is gone.
                match timeout_at(deadline, self.api.get_opt(&self.name)).await {
                    Err(_) => Renewed::Lost(LostReason::Expired),
                    Ok(Ok(None)) => Renewed::Lost(LostReason::Deleted),
                    Ok(Ok(Some(l))) => match holder(l.spec.as_ref()) {
                        Some(h) if h == self.identity => Renewed::Stale(l),
                        h => Renewed::Lost(LostReason::TakenOver {
                            holder: h.map(str::to_string),
                        }),
                    },
                    Ok(Err(e)) => {
                        tracing::warn!(lease = %self.lease, error = %e, "reading the lease after a conflict failed");
                        Renewed::Failed
                    }
                }
            }
            Err(kube::Error::Api(s)) if s.code == 404 => Renewed::Lost(LostReason::Deleted),
            Err(e) => {
                self.count("ward_leader_renew_failures_total", "reason", "error");
                tracing::warn!(lease = %self.lease, error = %e, "renewing the lease failed");
                Renewed::Failed
            }
        }
    }

    /// The outcome of a renew abandoned at its deadline.
    async fn late_renew(&self, call: JoinHandle<Result<Lease, kube::Error>>) {
        let result = match call.await {
            Ok(Ok(lease)) => {
                // Nobody took over meanwhile: give the Lease back rather than
                // keep it while not leading.
                if let Err(e) = self.release(lease).await {
                    tracing::warn!(lease = %self.lease, error = %e, "releasing after a late renew failed");
                }
                "renewed"
            }
            Ok(Err(e)) if is_conflict(&e) => "conflict",
            _ => "error",
        };
        tracing::info!(lease = %self.lease, identity = %self.identity, result, "a late renew completed");
        self.count("ward_leader_late_renewals_total", "result", result);
    }

    /// Give the Lease up (holder cleared, duration 1 s), with optimistic concurrency.
    async fn release(&self, lease: Lease) -> Result<(), LeaderError> {
        let attempt = async {
            let mut lease = lease;
            for _ in 0..3 {
                if holder(lease.spec.as_ref()) != Some(self.identity.as_str()) {
                    return Ok(());
                }
                let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
                spec.holder_identity = None;
                spec.lease_duration_seconds = Some(1);
                spec.renew_time = Some(MicroTime(self.clock.now()));
                match self
                    .api
                    .replace(&self.name, &PostParams::default(), &lease)
                    .await
                {
                    Ok(_) => return Ok(()),
                    Err(e) if is_conflict(&e) => match self.api.get_opt(&self.name).await {
                        Ok(Some(l)) => lease = l,
                        Ok(None) => return Ok(()),
                        Err(source) => return Err(source),
                    },
                    Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
                    Err(source) => return Err(source),
                }
            }
            Ok(())
        };
        let lease = self.lease.clone();
        match tokio::time::timeout(self.timing.lease_duration, attempt).await {
            Ok(result) => result.map_err(|source| LeaderError::Release { lease, source }),
            Err(_) => Err(LeaderError::ReleaseTimeout { lease }),
        }
    }
}

/// One attempt to acquire.
enum Attempt {
    Acquired(Box<Lease>),
    /// Another candidate holds it.
    Held,
    /// Another candidate wrote first.
    Conflict,
}

/// How the keeper ended.
enum Kept {
    Lost(LostReason),
    Released(Result<(), LeaderError>),
}

enum Renewed {
    Ok(Lease),
    /// Still ours, at another resourceVersion: retry with it.
    Stale(Lease),
    /// A transient error: retry.
    Failed,
    Lost(LostReason),
}

/// The keeper task, aborted when dropped (it must not outlive `run`).
struct Keeper(JoinHandle<Kept>);

impl Drop for Keeper {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Future for Keeper {
    type Output = Kept;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Kept> {
        Pin::new(&mut self.0).poll(cx).map(|r| match r {
            Ok(kept) => kept,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Kept::Lost(LostReason::Expired),
        })
    }
}

pub(crate) fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// The holder named in `spec`, if any (an empty identity is no holder).
pub(crate) fn holder(spec: Option<&LeaseSpec>) -> Option<&str> {
    spec.and_then(|s| s.holder_identity.as_deref())
        .filter(|h| !h.is_empty())
}

/// Whether `identity` may take a Lease with `spec` at `now`: it is free,
/// already its own, or its holder's `renewTime + leaseDurationSeconds` has
/// passed (`fallback` when the Lease names no duration).
pub(crate) fn available(
    spec: &LeaseSpec,
    identity: &str,
    now: jiff::Timestamp,
    fallback: Duration,
) -> bool {
    let Some(h) = holder(Some(spec)) else {
        return true;
    };
    if h == identity {
        return true;
    }
    let Some(renewed) = spec.renew_time.as_ref().or(spec.acquire_time.as_ref()) else {
        return true;
    };
    let duration = spec.lease_duration_seconds.map_or(
        jiff::SignedDuration::try_from(fallback).unwrap_or(jiff::SignedDuration::MAX),
        |s| jiff::SignedDuration::from_secs(i64::from(s)),
    );
    renewed
        .0
        .checked_add(duration)
        .is_ok_and(|expiry| expiry < now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(holder: Option<&str>, renewed: jiff::Timestamp, secs: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(str::to_string),
            renew_time: Some(MicroTime(renewed)),
            lease_duration_seconds: Some(secs),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn a_held_lease_is_available_only_after_it_expires() {
        let t0: jiff::Timestamp = "2025-01-01T00:00:00Z".parse().unwrap();
        let s = spec(Some("a"), t0, 15);
        let at = |secs: i64| t0 + jiff::SignedDuration::from_secs(secs);
        let fallback = Duration::from_secs(15);
        assert!(!available(&s, "b", at(10), fallback));
        assert!(!available(&s, "b", at(15), fallback), "expiry is exclusive");
        assert!(available(&s, "b", at(16), fallback));
        assert!(available(&s, "a", at(1), fallback), "its own lease");
        assert!(
            available(&spec(None, t0, 15), "b", at(1), fallback),
            "released"
        );
        assert!(
            available(&spec(Some(""), t0, 15), "b", at(1), fallback),
            "empty holder"
        );
        let no_duration = LeaseSpec {
            lease_duration_seconds: None,
            ..s.clone()
        };
        assert!(!available(&no_duration, "b", at(14), fallback));
        assert!(available(&no_duration, "b", at(16), fallback));
    }

    #[tokio::test]
    async fn lost_fires_on_stop_and_on_a_dropped_sender() {
        let (tx, rx) = watch::channel(Phase::Leading);
        let lost = Lost::new(rx.clone());
        assert!(!lost.is_lost());
        tx.send_replace(Phase::Stopping);
        assert!(lost.is_lost() && !lost.is_taken());
        lost.clone().await;
        tx.send_replace(Phase::Lost);
        assert!(lost.is_taken());

        let (tx, rx) = watch::channel(Phase::Leading);
        let lost = Lost::new(rx);
        drop(tx);
        lost.await;
    }

    #[test]
    fn lost_is_send_sync_static() {
        fn check<T: Future<Output = ()> + Send + Sync + 'static>() {}
        check::<Lost>();
    }

    fn timing(lease_ms: u64, renew_ms: u64, retry_ms: u64, skew_ms: Option<u64>) -> Timing {
        let ms = Duration::from_millis;
        Timing {
            lease_duration: ms(lease_ms),
            renew_every: ms(renew_ms),
            retry_every: ms(retry_ms),
            clock_skew: skew_ms.map(ms),
        }
    }

    /// docs/production.md shows the module's example as it is compiled here.
    #[test]
    fn the_production_guide_shows_the_module_example() {
        let source = include_str!("leader.rs");
        let block = source
            .split_once("//! ```no_run\n")
            .and_then(|(_, rest)| rest.split_once("//! ```\n"))
            .map(|(b, _)| b)
            .expect("the module example");
        let visible: String = block
            .lines()
            .map(|l| {
                l.strip_prefix("//! ")
                    .unwrap_or(l.trim_start_matches("//!"))
            })
            .filter(|l| !(l.starts_with("# ") || *l == "#"))
            .map(|l| format!("{l}\n"))
            .collect();
        let readme = include_str!("../../docs/production.md");
        assert!(
            readme.contains(&format!("```rust\n{visible}```")),
            "docs/production.md lacks the leader example as compiled:\n{visible}"
        );
    }

    #[test]
    fn timing_is_validated() {
        let t = Timing::default();
        assert_eq!(t, timing(15_000, 5_000, 2_000, None));
        assert!(t.validate().is_ok());
        assert_eq!((t.skew(), t.seconds()), (Duration::from_secs(1), 15));
        let bad = |t: Timing| matches!(t.validate(), Err(LeaderError::Config(_)));
        assert!(bad(timing(15_000, 15_000, 2_000, None)), "renew >= lease");
        assert!(bad(timing(500, 100, 100, None)), "lease under 1 s");
        assert!(bad(timing(15_000, 5_000, 0, None)), "zero retry");
        assert!(
            bad(timing(15_000, 5_000, 2_000, Some(10_000))),
            "skew too big"
        );
        // The default skew shrinks to fit a tight renew period.
        let tight = timing(3_000, 2_000, 1_000, None);
        assert!(tight.validate().is_ok());
        assert_eq!(tight.skew(), Duration::from_millis(500));
        assert_eq!(timing(2_500, 1_000, 1_000, None).seconds(), 3, "rounded up");
        let t0 = Instant::now();
        assert_eq!(
            t.deadline(t0) - t0,
            Duration::from_secs(14),
            "minus the skew"
        );
    }
}
