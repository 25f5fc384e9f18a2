//! The candidate: [`LeaderElection`], its settings, and the metrics and
//! readiness it reports as it leads or follows.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;

use super::lease::Timing;
use crate::clock::Clock;
use crate::observe::{Readiness, ReadyCheck};

/// Leader election for one candidate (see the [module docs](crate::leader)).
#[derive(Clone, Debug)]
pub struct LeaderElection {
    pub(super) api: Api<Lease>,
    /// `namespace/name`, for logs and metric labels.
    pub(super) lease: String,
    pub(super) name: String,
    pub(super) identity: String,
    pub(super) timing: Timing,
    pub(super) clock: Clock,
    pub(super) readiness: Option<Readiness>,
    pub(super) ready_only_when_leading: bool,
    /// Set by `run` when `readiness` is.
    pub(super) check: Option<ReadyCheck>,
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

    /// Leadership began or ended: the gauge, and readiness when it means leading.
    pub(super) fn leading(&self, leading: bool) {
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
    pub(super) fn healthy(&self, answered: bool) {
        if let Some(check) = &self.check
            && !self.ready_only_when_leading
        {
            check.set(answered);
        }
    }

    /// Count one event in the counter `name`, labelled with `key` = `value`.
    pub(super) fn count(&self, name: &'static str, key: &'static str, value: &'static str) {
        metrics::counter!(name, "lease" => self.lease.clone(), "identity" => self.identity.clone(), key => value)
            .increment(1);
    }
}
