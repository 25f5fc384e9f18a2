//! Phase-aware pod liveness: does a pod still own a record — an IP
//! allocation, a port, a lease of some resource — or may the record be
//! reclaimed?
//!
//! Two choices come first, and both are explicit:
//!
//! - **How a pod shows the resource** ([`ResourceCheck`], no default):
//!   [`ResourceCheck::Ips`] for IP addresses (the pod's IPs and the multus
//!   network-status annotation), [`ResourceCheck::PhaseOnly`] for resources
//!   a pod does not publish (ports, volumes, GPU slots), or
//!   [`ResourceCheck::custom`]. A check answers yes, no, or cannot tell;
//!   a Running pod loses its record for "not showing it" only on a
//!   positive no, so a check that does not understand a resource can never
//!   free a live pod's.
//! - **Which clock says "now"**: the policy reads Ward's
//!   [`Clock`], which follows tokio's. It must be the
//!   clock that stamps the pods and records: under
//!   `#[tokio::test(start_paused = true)]` hand it the embedded server's
//!   (`ApiServer::clock()`); against a real cluster the default (wall
//!   time) is that clock. [`LivenessPolicy::decide_now`],
//!   [`Snapshot::decide`] and [`is_alive`] read it;
//!   [`LivenessPolicy::decide`] takes `now` from the caller.
//!
//! The grace bound ([`LivenessPolicy::grace`], default 5 minutes) is how
//! long a pod that does not show the resource keeps it. It counts from the
//! record's allocation time ([`Record::allocated_at`]) — record it — and
//! only when the record has none, from the pod's creation.
//!
//! The race it stops (whereabouts: the reconciler frees a Pending pod's IP):
//!
//! ```text
//! 1. CREATE Pod web-2 -> phase Pending, no network-status annotation yet
//! 2. CNI ADD: GET pool @R, PATCH [test rv R, add /spec/allocations/47 {podref: default/web-2}] -> R1
//! 3. reconciler: LIST pods (web-2 Pending, no IPs), GET pool @R1 (47 -> default/web-2)
//! 4. naive rule "pod exists AND its network-status shows .47" -> dead
//! 5. PATCH pool [test rv R1, remove /spec/allocations/47] -> succeeds
//! 6. multus PATCHes web-2's network-status with .47; web-2 runs with .47
//! 7. the next CNI ADD finds 47 free and hands it out again: duplicate IP
//! ```
//!
//! [`LivenessPolicy::decide`] judges step 4 by phase and age instead: a
//! Pending pod that does not show the IP yet is alive within a grace bound
//! measured from the allocation (so a pod stuck Pending does not leak the IP
//! forever), a recorded pod UID that differs from the live pod's is dead
//! (same name, another pod), a terminating pod is alive until it is gone.
//! [`snapshot`] reads records before pods, so no record is judged against
//! a pod list older than itself, and [`is_alive`] judges one record
//! against a fresh (quorum) read of its pod.
//!
//! ```
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::Pod;
//! use ward_guards::liveness::{Liveness, LivenessPolicy, Reason, Record, ResourceCheck};
//!
//! let now: jiff::Timestamp = "2026-01-01T00:00:10Z".parse().unwrap();
//! let mut pod = Pod::default();
//! pod.metadata.name = Some("web-2".into());
//! pod.metadata.namespace = Some("default".into());
//! pod.status = Some(k8s_openapi::api::core::v1::PodStatus {
//!     phase: Some("Pending".into()),
//!     ..Default::default()
//! });
//! let record = Record::new("default", "web-2", "10.128.40.47")
//!     .allocated_at("2026-01-01T00:00:00Z".parse().unwrap());
//! let policy = LivenessPolicy::new(ResourceCheck::Ips).grace(Duration::from_secs(30));
//! // Pending, no IP shown yet, allocated 10 s ago: it still owns the IP.
//! assert!(matches!(
//!     policy.decide(&record, Some(&pod), now),
//!     Liveness::Alive(Reason::PendingWithinGrace(_))
//! ));
//! // The pod is gone: the IP may be reclaimed.
//! assert!(policy.decide(&record, None, now).is_dead());
//!
//! // A port: the pod does not publish it, so only phase and age count.
//! let ports = LivenessPolicy::new(ResourceCheck::PhaseOnly);
//! pod.status.as_mut().unwrap().phase = Some("Running".into());
//! let port = Record::new("default", "web-2", "8080");
//! assert_eq!(
//!     ports.decide(&port, Some(&pod), now),
//!     Liveness::Alive(Reason::RunningCannotTell)
//! );
//! ```

mod check;
mod read;

#[allow(deprecated)]
pub use check::pod_shows_ip;
pub use check::{NETWORK_STATUS_ANNOTATION, ResourceCheck, Shown, network_status_ips, shows_ip};
pub use read::{PodIndex, Snapshot, index_pods, is_alive, list_pod_index, snapshot};

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use ward_runtime::clock::Clock;

/// Errors reading or naming pods.
#[derive(Debug, thiserror::Error)]
pub enum LivenessError {
    /// The API call failed.
    #[error("reading pods failed: {0}")]
    Kube(#[from] kube::Error),
    /// A pod reference that is not `namespace/name`.
    #[error("pod reference {0:?} is not namespace/name")]
    BadPodRef(String),
}

/// A record a pod may own: who it was made for, what it holds, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The owning pod's namespace.
    pub pod_namespace: String,
    /// The owning pod's name.
    pub pod_name: String,
    /// The owning pod's uid, when the record carries it.
    pub pod_uid: Option<String>,
    /// What is held, e.g. the IP `10.128.40.47`.
    pub resource: String,
    /// When it was allocated, when known.
    pub allocated_at: Option<Timestamp>,
}

impl Record {
    /// A record of `resource` for the pod `namespace/name`.
    #[must_use]
    pub fn new(namespace: &str, name: &str, resource: &str) -> Self {
        Record {
            pod_namespace: namespace.to_string(),
            pod_name: name.to_string(),
            pod_uid: None,
            resource: resource.to_string(),
            allocated_at: None,
        }
    }

    /// A record from a `namespace/name` pod reference (whereabouts' `podref`).
    pub fn from_pod_ref(pod_ref: &str, resource: &str) -> Result<Self, LivenessError> {
        match pod_ref.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                Ok(Record::new(ns, name, resource))
            }
            _ => Err(LivenessError::BadPodRef(pod_ref.to_string())),
        }
    }

    /// The owning pod's uid.
    #[must_use]
    pub fn pod_uid(mut self, uid: impl Into<String>) -> Self {
        self.pod_uid = Some(uid.into());
        self
    }

    /// When the resource was allocated.
    #[must_use]
    pub fn allocated_at(mut self, t: Timestamp) -> Self {
        self.allocated_at = Some(t);
        self
    }
}

/// A pod's `status.phase`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Accepted, not (yet) running; also a pod with no phase yet.
    Pending,
    /// Bound to a node, containers started.
    Running,
    /// All containers ended successfully.
    Succeeded,
    /// All containers ended, at least one failed.
    Failed,
    /// The node stopped reporting (or a phase this code does not know).
    Unknown,
}

impl Phase {
    /// The phase of `pod` (no status or no phase: [`Phase::Pending`]).
    #[must_use]
    pub fn of(pod: &Pod) -> Phase {
        match pod.status.as_ref().and_then(|s| s.phase.as_deref()) {
            None | Some("Pending") => Phase::Pending,
            Some("Running") => Phase::Running,
            Some("Succeeded") => Phase::Succeeded,
            Some("Failed") => Phase::Failed,
            Some(_) => Phase::Unknown,
        }
    }
}

/// Why a record's pod is alive or dead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// No pod of that namespace/name.
    PodAbsent,
    /// A pod of that name exists, but it is another pod (another uid).
    UidMismatch {
        /// The uid in the record.
        recorded: String,
        /// The live pod's uid.
        live: String,
    },
    /// The pod is being deleted: it holds the resource until it is gone.
    Terminating,
    /// The pod ran to completion (Succeeded or Failed).
    Finished(Phase),
    /// The pod shows the resource (in this phase: Pending, Running or Unknown).
    ShowsResource(Phase),
    /// Pending, not showing the resource, younger than the grace bound
    /// (the record's age: from the allocation, else the pod's creation).
    PendingWithinGrace(SignedDuration),
    /// Pending, not showing the resource, the grace bound passed (age).
    PendingPastGrace(SignedDuration),
    /// Running without the resource, younger than the grace bound (age).
    RunningWithoutResourceWithinGrace(SignedDuration),
    /// Running without the resource, the grace bound passed (age).
    RunningWithoutResourcePastGrace(SignedDuration),
    /// Phase Unknown (the node stopped reporting): the pod may still run
    /// and use the resource, so it is alive until the pod object goes.
    UnknownPhase,
    /// Running, and the [`ResourceCheck`] cannot tell whether the pod uses
    /// the resource: it keeps it until it finishes or goes.
    RunningCannotTell,
    /// Neither the allocation time nor the pod's creation time is known:
    /// the age cannot be measured, so the pod is given the benefit of the doubt.
    AgeUnknown(Phase),
}

/// The verdict on one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    /// The pod still owns the record: keep it.
    Alive(Reason),
    /// Nobody owns the record any more: it may be reclaimed (with a patch
    /// that tests the exact entry, see [`crate::occ_patch`]).
    Dead(Reason),
}

impl Liveness {
    /// Whether the pod still owns the record.
    #[must_use]
    pub fn is_alive(&self) -> bool {
        matches!(self, Liveness::Alive(_))
    }

    /// Whether the record may be reclaimed.
    #[must_use]
    pub fn is_dead(&self) -> bool {
        !self.is_alive()
    }

    /// Why.
    #[must_use]
    pub fn reason(&self) -> &Reason {
        match self {
            Liveness::Alive(r) | Liveness::Dead(r) => r,
        }
    }
}

/// How to judge records: how a pod shows a resource, the grace bound, and
/// the clock.
#[derive(Debug, Clone)]
pub struct LivenessPolicy {
    check: ResourceCheck,
    grace: Duration,
    clock: Clock,
}

impl LivenessPolicy {
    /// The default grace bound: five minutes, longer than a CNI ADD may take
    /// (kubelet gives sandbox creation minutes, and multus writes the
    /// network-status annotation within it). Upstream whereabouts' 0.75 s
    /// re-check (#375) is what reopened the race.
    pub const DEFAULT_GRACE: Duration = Duration::from_secs(300);

    /// Judge with `check`, [`Self::DEFAULT_GRACE`], and a [`Clock`] that
    /// follows wall time from now (see [`Self::clock`]).
    #[must_use]
    pub fn new(check: ResourceCheck) -> Self {
        LivenessPolicy {
            check,
            grace: Self::DEFAULT_GRACE,
            clock: Clock::new(),
        }
    }

    /// How long a pod that does not show the resource keeps it, counted
    /// from the allocation (else the pod's creation). A Pending pod past it
    /// loses the record whatever the check says (that is what stops a pod
    /// stuck Pending from holding it forever), so make it longer than your
    /// pods take to start.
    #[must_use]
    pub fn grace(mut self, d: Duration) -> Self {
        self.grace = d;
        self
    }

    /// The clock "now" is read from: the one that stamps the records and
    /// the pods (the embedded server's, `ApiServer::clock()`, under paused
    /// time).
    #[must_use]
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The grace bound.
    #[must_use]
    pub fn grace_period(&self) -> Duration {
        self.grace
    }

    /// The resource check.
    #[must_use]
    pub fn resource_check(&self) -> &ResourceCheck {
        &self.check
    }

    /// Whether `pod` positively shows `resource`.
    #[deprecated(
        since = "0.2.0",
        note = "use `resource_check().shows(pod, resource)`, which tells `No` from `CannotTell`"
    )]
    #[must_use]
    pub fn shows_resource(&self, pod: &Pod, resource: &str) -> bool {
        self.check.shows(pod, resource) == Shown::Yes
    }

    /// The current time by the policy's clock.
    #[must_use]
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// [`Self::decide`] at [`Self::now`].
    #[must_use]
    pub fn decide_now(&self, record: &Record, pod: Option<&Pod>) -> Liveness {
        self.decide(record, pod, self.now())
    }

    /// Judge `record` against its pod as read (None: no pod of that
    /// namespace/name) at `now`. Rows, first match wins:
    ///
    /// | pod | verdict |
    /// |---|---|
    /// | absent | dead ([`Reason::PodAbsent`]) |
    /// | record has a uid, the pod another | dead ([`Reason::UidMismatch`]) |
    /// | deletionTimestamp set | alive until gone ([`Reason::Terminating`]) |
    /// | Succeeded, Failed | dead ([`Reason::Finished`]) |
    /// | check: shows the resource | alive ([`Reason::ShowsResource`]) |
    /// | Unknown | alive ([`Reason::UnknownPhase`]) |
    /// | Running, check: cannot tell | alive ([`Reason::RunningCannotTell`]) |
    /// | Pending, or Running and check: does not show; age < grace | alive (`*WithinGrace`) |
    /// | Pending, or Running and check: does not show; age >= grace | dead (`*PastGrace`) |
    ///
    /// The age runs from `record.allocated_at`, else from the pod's
    /// creationTimestamp; with neither, the pod is alive
    /// ([`Reason::AgeUnknown`]). Exactly at the grace bound the grace is over.
    #[must_use]
    pub fn decide(&self, record: &Record, pod: Option<&Pod>, now: Timestamp) -> Liveness {
        let Some(pod) = pod else {
            return Liveness::Dead(Reason::PodAbsent);
        };
        if let (Some(recorded), Some(live)) = (&record.pod_uid, &pod.metadata.uid)
            && recorded != live
        {
            return Liveness::Dead(Reason::UidMismatch {
                recorded: recorded.clone(),
                live: live.clone(),
            });
        }
        if pod.metadata.deletion_timestamp.is_some() {
            return Liveness::Alive(Reason::Terminating);
        }
        let phase = Phase::of(pod);
        if let Phase::Succeeded | Phase::Failed = phase {
            return Liveness::Dead(Reason::Finished(phase));
        }
        match (phase, self.check.shows(pod, &record.resource)) {
            (_, Shown::Yes) => return Liveness::Alive(Reason::ShowsResource(phase)),
            (Phase::Unknown, _) => return Liveness::Alive(Reason::UnknownPhase),
            (Phase::Running, Shown::CannotTell) => {
                return Liveness::Alive(Reason::RunningCannotTell);
            }
            _ => {}
        }
        let since = record
            .allocated_at
            .or_else(|| pod.metadata.creation_timestamp.as_ref().map(|t| t.0));
        let Some(since) = since else {
            return Liveness::Alive(Reason::AgeUnknown(phase));
        };
        let age = now.duration_since(since);
        let grace = SignedDuration::try_from(self.grace).unwrap_or(SignedDuration::MAX);
        let past = age >= grace;
        match (phase, past) {
            (Phase::Pending, false) => Liveness::Alive(Reason::PendingWithinGrace(age)),
            (Phase::Pending, true) => Liveness::Dead(Reason::PendingPastGrace(age)),
            (_, false) => Liveness::Alive(Reason::RunningWithoutResourceWithinGrace(age)),
            (_, true) => Liveness::Dead(Reason::RunningWithoutResourcePastGrace(age)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Liveness::{Alive, Dead};
    use Reason::*;
    use k8s_openapi::api::core::v1::PodStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    const IP: &str = "10.128.40.47";

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn pod(phase: Option<&str>) -> Pod {
        let mut p = Pod::default();
        p.metadata.namespace = Some("default".into());
        p.metadata.name = Some("web-2".into());
        p.metadata.uid = Some("u1".into());
        p.metadata.creation_timestamp = Some(Time(t(0)));
        p.status = Some(PodStatus {
            phase: phase.map(String::from),
            ..PodStatus::default()
        });
        p
    }

    fn with_annotation(mut p: Pod, value: &str) -> Pod {
        let a = [(NETWORK_STATUS_ANNOTATION.to_string(), value.to_string())];
        p.metadata.annotations = Some(a.into_iter().collect());
        p
    }

    /// A pod in `phase` whose network-status shows `ip`.
    fn showing(phase: &str, ip: &str) -> Pod {
        let v = format!(r#"[{{"name":"ovn","interface":"eth0","ips":["{ip}"],"default":true}}]"#);
        with_annotation(pod(Some(phase)), &v)
    }

    fn policy() -> LivenessPolicy {
        LivenessPolicy::new(ResourceCheck::Ips).grace(Duration::from_secs(30))
    }

    fn age(secs: i64) -> SignedDuration {
        SignedDuration::from_secs(secs)
    }

    #[test]
    fn decision_table() {
        let r = Record::new("default", "web-2", IP).allocated_at(t(0));
        let unaged = Record::new("default", "web-2", IP);
        let (late, ahead) = (
            unaged.clone().allocated_at(t(100)),
            unaged.clone().allocated_at(t(10)),
        );
        let (ours, theirs) = (r.clone().pod_uid("u1"), r.clone().pod_uid("u0"));
        let gone_uid = || UidMismatch {
            recorded: "u0".into(),
            live: "u1".into(),
        };
        let terminating = |phase| {
            let mut p = pod(Some(phase));
            p.metadata.deletion_timestamp = Some(Time(t(5)));
            p
        };
        let mut no_uid = showing("Running", IP);
        no_uid.metadata.uid = None;
        let mut no_created = pod(Some("Pending"));
        no_created.metadata.creation_timestamp = None;
        let pending = || Some(pod(Some("Pending")));
        let other_ip = || Some(showing("Running", "10.128.40.48"));
        #[rustfmt::skip]
        let rows: Vec<(&str, Option<Pod>, &Record, i64, Liveness)> = vec![
            ("absent", None, &r, 1, Dead(PodAbsent)),
            ("same uid", Some(showing("Running", IP)), &ours, 1, Alive(ShowsResource(Phase::Running))),
            ("pod without uid", Some(no_uid), &ours, 1, Alive(ShowsResource(Phase::Running))),
            ("same name, other uid", Some(showing("Running", IP)), &theirs, 1, Dead(gone_uid())),
            ("other uid, terminating", Some(terminating("Running")), &theirs, 1, Dead(gone_uid())),
            ("terminating Pending", Some(terminating("Pending")), &r, 3600, Alive(Terminating)),
            ("terminating Failed", Some(terminating("Failed")), &r, 3600, Alive(Terminating)),
            ("Succeeded", Some(showing("Succeeded", IP)), &r, 1, Dead(Finished(Phase::Succeeded))),
            ("Failed", Some(showing("Failed", IP)), &r, 1, Dead(Finished(Phase::Failed))),
            ("Pending shows", Some(showing("Pending", IP)), &r, 3600, Alive(ShowsResource(Phase::Pending))),
            ("Running shows", Some(showing("Running", IP)), &r, 3600, Alive(ShowsResource(Phase::Running))),
            ("Unknown shows", Some(showing("Unknown", IP)), &r, 3600, Alive(ShowsResource(Phase::Unknown))),
            ("Unknown", Some(pod(Some("Unknown"))), &r, 3600, Alive(UnknownPhase)),
            ("Pending at 0", pending(), &r, 0, Alive(PendingWithinGrace(age(0)))),
            ("Pending at 29", pending(), &r, 29, Alive(PendingWithinGrace(age(29)))),
            ("Pending at grace", pending(), &r, 30, Dead(PendingPastGrace(age(30)))),
            ("no phase = Pending", Some(pod(None)), &r, 5, Alive(PendingWithinGrace(age(5)))),
            ("from allocation", pending(), &late, 110, Alive(PendingWithinGrace(age(10)))),
            ("from allocation, past", pending(), &late, 130, Dead(PendingPastGrace(age(30)))),
            ("from creation", pending(), &unaged, 29, Alive(PendingWithinGrace(age(29)))),
            ("from creation, past", pending(), &unaged, 30, Dead(PendingPastGrace(age(30)))),
            ("clock ahead", pending(), &ahead, 0, Alive(PendingWithinGrace(age(-10)))),
            ("no age", Some(no_created), &unaged, 1 << 30, Alive(AgeUnknown(Phase::Pending))),
            ("Running without", other_ip(), &r, 29, Alive(RunningWithoutResourceWithinGrace(age(29)))),
            ("Running without, past", other_ip(), &r, 30, Dead(RunningWithoutResourcePastGrace(age(30)))),
            ("Running, cannot tell", Some(pod(Some("Running"))), &r, 3600, Alive(RunningCannotTell)),
            ("Pending, cannot tell, past", pending(), &r, 30, Dead(PendingPastGrace(age(30)))),
        ];
        for (case, pod, record, secs, want) in rows {
            assert_eq!(
                policy().decide(record, pod.as_ref(), t(secs)),
                want,
                "{case}"
            );
        }
        let just_before = t(30) - SignedDuration::from_millis(1);
        assert!(
            policy()
                .decide(&r, pending().as_ref(), just_before)
                .is_alive()
        );
        assert_eq!(Phase::of(&pod(Some("Weird"))), Phase::Unknown);
    }

    impl LivenessPolicy {
        fn clone_with(&self, check: ResourceCheck) -> Self {
            LivenessPolicy {
                check,
                ..self.clone()
            }
        }
    }

    #[test]
    fn a_check_that_cannot_tell_never_frees_a_running_pod() {
        let port = Record::new("default", "web-2", "8080").allocated_at(t(0));
        let running = showing("Running", IP);
        let week = t(7 * 24 * 3600);
        for check in [ResourceCheck::Ips, ResourceCheck::PhaseOnly] {
            let p = policy().clone_with(check.clone());
            assert_eq!(
                p.decide(&port, Some(&running), week),
                Alive(RunningCannotTell),
                "{check:?}"
            );
            let stuck = p.decide(&port, Some(&pod(Some("Pending"))), t(30));
            assert_eq!(stuck, Dead(PendingPastGrace(age(30))), "{check:?}");
        }
        // A custom check that positively says no frees it after the grace.
        let labelled = ResourceCheck::custom(|pod, res| {
            let labels = pod.metadata.labels.as_ref();
            labels
                .is_some_and(|l| l.get("lease").map(String::as_str) == Some(res))
                .into()
        });
        let p = policy().clone_with(labelled);
        let mut leased = pod(Some("Running"));
        let r = Record::new("default", "web-2", "gpu-3").allocated_at(t(0));
        assert!(p.decide(&r, Some(&leased), t(60)).is_dead());
        leased.metadata.labels = Some([("lease".into(), "gpu-3".into())].into_iter().collect());
        assert!(p.decide(&r, Some(&leased), t(60)).is_alive());
        assert_eq!(p.grace_period(), Duration::from_secs(30));
    }

    #[tokio::test(start_paused = true)]
    async fn decide_now_reads_the_policy_clock() {
        let clock = Clock::new();
        let r = Record::new("default", "web-2", IP).allocated_at(clock.now());
        let p = policy().clock(clock);
        let pending = pod(Some("Pending"));
        assert!(matches!(
            p.decide_now(&r, Some(&pending)),
            Alive(PendingWithinGrace(_))
        ));
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(p.now(), clock.now(), "paused: the same instant");
        assert!(matches!(
            p.decide_now(&r, Some(&pending)),
            Dead(PendingPastGrace(_))
        ));
    }

    #[test]
    fn pod_refs() {
        let r = Record::from_pod_ref("default/web-2", IP).unwrap();
        assert_eq!((&*r.pod_namespace, &*r.pod_name), ("default", "web-2"));
        for bad in ["web-2", "/web-2", "default/", "a/b/c"] {
            assert!(Record::from_pod_ref(bad, IP).is_err(), "{bad}");
        }
    }
}
