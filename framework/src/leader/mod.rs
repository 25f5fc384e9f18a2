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
//! Why an election of Ward's own rather than an existing crate: kube-rs
//! (kube-runtime 5) ships none, and Ward needs properties it tests itself,
//! which would otherwise depend on another crate's choices: the work
//! stopped at the deadline even while a renew is still in flight, a renew
//! that lands late refused or given back, a release the followers see at
//! once (they watch the Lease), followers' metrics and readiness from the
//! start, and the same Lease arithmetic for a shard member's Lease
//! ([`crate::shard`]). Any window where two leaders run is the race Ward
//! exists to close. The files: `lease.rs`, the pure Lease
//! arithmetic (when a Lease is free, the durations, the Lease a candidate
//! writes); `keeper.rs`, the task that acquires, renews and releases;
//! `lost.rs`, the work's signal; and here the public API, its metrics and
//! readiness.
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

mod keeper;
pub(crate) mod lease;
mod lost;

use std::fmt;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use tokio::sync::watch;

use crate::clock::Clock;
use crate::observe::readiness::RemoveOnDrop;
use crate::observe::{Readiness, ReadyCheck, catalog};
use keeper::{Keeper, Kept};
pub(crate) use lease::{Timing, available, holder, is_conflict};
pub use lost::Lost;
use lost::Phase;

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
    ///
    /// The states, and what moves between them:
    ///
    /// ```text
    /// Following ──acquired──► Leading ──shutdown, or the work returned──► Stopping
    ///     │                      │                                       │        │
    ///     │ shutdown             │ keeper: lost           work returned  │        │ keeper: lost
    ///     ▼                      ▼                                       ▼        ▼
    ///  NeverLed    Lost (the work told, then awaited)               Releasing    Lost
    ///                                                                    │
    ///                                                                    ▼
    ///                                                   Released (or a release error)
    /// ```
    ///
    /// `Following` is `acquire`; `Leading` and `Stopping` are the phases the
    /// [`Lost`] signal carries; `Releasing` is the keeper's release once told
    /// to stop.
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
}

#[cfg(test)]
mod tests {
    /// docs/production.md shows the module's example as it is compiled here.
    #[test]
    fn the_production_guide_shows_the_module_example() {
        let source = include_str!("mod.rs");
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
        let readme = include_str!("../../../docs/production.md");
        assert!(
            readme.contains(&format!("```rust\n{visible}```")),
            "docs/production.md lacks the leader example as compiled:\n{visible}"
        );
    }
}
