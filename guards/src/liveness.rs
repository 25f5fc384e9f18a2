//! Phase-aware pod liveness: does a pod still own a record — an IP
//! allocation, a lease of some resource — or may the record be reclaimed?
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
//! use ward_guards::liveness::{Liveness, LivenessPolicy, Reason, Record};
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
//! let policy = LivenessPolicy::default().grace(Duration::from_secs(30));
//! // Pending, no IP shown yet, allocated 10 s ago: it still owns the IP.
//! assert!(matches!(
//!     policy.decide(&record, Some(&pod), now),
//!     Liveness::Alive(Reason::PendingWithinGrace(_))
//! ));
//! // The pod is gone: the IP may be reclaimed.
//! assert!(policy.decide(&record, None, now).is_dead());
//! ```

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

/// The multus annotation listing a pod's networks and their IPs.
pub const NETWORK_STATUS_ANNOTATION: &str = "k8s.v1.cni.cncf.io/network-status";

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

type ResourceCheck = Arc<dyn Fn(&Pod, &str) -> bool + Send + Sync>;

/// How to judge records: the grace bound and how a pod shows a resource.
#[derive(Clone)]
pub struct LivenessPolicy {
    grace: Duration,
    shows: ResourceCheck,
}

impl fmt::Debug for LivenessPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LivenessPolicy")
            .field("grace", &self.grace)
            .finish_non_exhaustive()
    }
}

impl Default for LivenessPolicy {
    fn default() -> Self {
        LivenessPolicy {
            grace: Self::DEFAULT_GRACE,
            shows: Arc::new(pod_shows_ip),
        }
    }
}

impl LivenessPolicy {
    /// The default grace bound: five minutes, longer than a CNI ADD may take
    /// (kubelet gives sandbox creation minutes, and multus writes the
    /// network-status annotation within it). Upstream whereabouts' 0.75 s
    /// re-check (#375) is what reopened the race.
    pub const DEFAULT_GRACE: Duration = Duration::from_secs(300);

    /// The default policy: [`Self::DEFAULT_GRACE`], resources are IPs ([`pod_shows_ip`]).
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// How long a pod that does not show the resource keeps it, counted
    /// from the allocation (else the pod's creation).
    #[must_use]
    pub fn grace(mut self, d: Duration) -> Self {
        self.grace = d;
        self
    }

    /// How to tell that a pod shows (uses) the resource of a record.
    #[must_use]
    pub fn resource_check(
        mut self,
        f: impl Fn(&Pod, &str) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.shows = Arc::new(f);
        self
    }

    /// The grace bound.
    #[must_use]
    pub fn grace_period(&self) -> Duration {
        self.grace
    }

    /// Whether `pod` shows `resource`.
    #[must_use]
    pub fn shows_resource(&self, pod: &Pod, resource: &str) -> bool {
        (self.shows)(pod, resource)
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
    /// | shows the resource | alive ([`Reason::ShowsResource`]) |
    /// | Unknown | alive ([`Reason::UnknownPhase`]) |
    /// | Pending / Running, age < grace | alive (`*WithinGrace`) |
    /// | Pending / Running, age >= grace | dead (`*PastGrace`) |
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
        match phase {
            Phase::Succeeded | Phase::Failed => return Liveness::Dead(Reason::Finished(phase)),
            _ if self.shows_resource(pod, &record.resource) => {
                return Liveness::Alive(Reason::ShowsResource(phase));
            }
            Phase::Unknown => return Liveness::Alive(Reason::UnknownPhase),
            Phase::Pending | Phase::Running => {}
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

/// The default resource check: `ip` appears in `status.podIPs[].ip`,
/// `status.podIP`, or the `ips` of any network in the
/// [`NETWORK_STATUS_ANNOTATION`]. Addresses compare as IPs (so `fd00::1`
/// equals `fd00:0::1`; a `/prefix` suffix is ignored), anything else as text.
#[must_use]
pub fn pod_shows_ip(pod: &Pod, ip: &str) -> bool {
    let status = pod.status.as_ref();
    let pod_ips = status
        .and_then(|s| s.pod_ips.as_ref())
        .into_iter()
        .flatten()
        .map(|p| p.ip.clone());
    let pod_ip = status.and_then(|s| s.pod_ip.clone());
    pod_ips
        .chain(pod_ip)
        .chain(network_status_ips(pod))
        .any(|shown| same_address(&shown, ip))
}

/// The IPs listed in `pod`'s [`NETWORK_STATUS_ANNOTATION`] (a JSON array of
/// `{name, interface, ips, mac, default}`). A missing or malformed
/// annotation lists none.
#[must_use]
pub fn network_status_ips(pod: &Pod) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct Network {
        #[serde(default)]
        ips: Vec<String>,
    }
    let Some(raw) = pod.annotations().get(NETWORK_STATUS_ANNOTATION) else {
        return Vec::new();
    };
    match serde_json::from_str::<Vec<Network>>(raw) {
        Ok(nets) => nets.into_iter().flat_map(|n| n.ips).collect(),
        Err(e) => {
            tracing::debug!(error = %e, "ignoring a malformed network-status annotation");
            Vec::new()
        }
    }
}

fn same_address(a: &str, b: &str) -> bool {
    fn addr(s: &str) -> Option<IpAddr> {
        s.split('/').next()?.trim().parse().ok()
    }
    match (addr(a), addr(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// Pods by (namespace, name).
pub type PodIndex = HashMap<(String, String), Pod>;

/// Index `pods` by (namespace, name).
#[must_use]
pub fn index_pods(pods: impl IntoIterator<Item = Pod>) -> PodIndex {
    let key = |p: &Pod| (p.namespace().unwrap_or_default(), p.name_any());
    pods.into_iter().map(|p| (key(&p), p)).collect()
}

/// List the pods of `api` with quorum reads (no resourceVersion, so never
/// from a cache), page by page, into a [`PodIndex`].
pub async fn list_pod_index(api: &Api<Pod>) -> Result<PodIndex, kube::Error> {
    let mut pods = Vec::new();
    let mut lp = ListParams::default().limit(500);
    loop {
        let page = api.list(&lp).await?;
        pods.extend(page.items);
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    Ok(index_pods(pods))
}

/// Records and the pods read after them.
#[derive(Debug, Clone)]
pub struct Snapshot<R> {
    /// The records, as read first.
    pub records: R,
    /// The pods, read after the records.
    pub pods: PodIndex,
}

impl<R> Snapshot<R> {
    /// The pod `record` names, if the pod read found it.
    #[must_use]
    pub fn pod(&self, record: &Record) -> Option<&Pod> {
        self.pods
            .get(&(record.pod_namespace.clone(), record.pod_name.clone()))
    }

    /// Judge `record` against this snapshot's pods.
    #[must_use]
    pub fn decide(&self, policy: &LivenessPolicy, record: &Record, now: Timestamp) -> Liveness {
        policy.decide(record, self.pod(record), now)
    }
}

/// Read the records, THEN the pods, and keep both.
///
/// The order is the point. A record is written after its pod exists (CNI
/// ADD runs for a created pod), so a pod read that starts after the record
/// read finished sees every pod a record in it names, unless that pod
/// really is gone. Read the other way round — pods, then records — a pod
/// created and given an allocation between the two reads has a record but
/// no pod in the snapshot, and is judged [`Reason::PodAbsent`]: its IP is
/// freed while it starts. `list_pods` must be a fresh read (a quorum list
/// such as [`list_pod_index`], or a cache known to be synced past the
/// record read), and `now` for judging should be taken after this returns.
pub async fn snapshot<R, E, FR, FP>(
    read_records: impl FnOnce() -> FR,
    list_pods: impl FnOnce() -> FP,
) -> Result<Snapshot<R>, E>
where
    FR: Future<Output = Result<R, E>>,
    FP: Future<Output = Result<PodIndex, E>>,
{
    let records = read_records().await?;
    let pods = list_pods().await?;
    Ok(Snapshot { records, pods })
}

/// Judge `record` against a fresh read of its pod (a quorum GET, never a
/// cache).
pub async fn is_alive(
    client: &Client,
    record: &Record,
    policy: &LivenessPolicy,
    now: Timestamp,
) -> Result<Liveness, LivenessError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &record.pod_namespace);
    let pod = api.get_opt(&record.pod_name).await?;
    Ok(policy.decide(record, pod.as_ref(), now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use Liveness::{Alive, Dead};
    use Reason::*;
    use k8s_openapi::api::core::v1::{PodIP, PodStatus};
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
        LivenessPolicy::default().grace(Duration::from_secs(30))
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

    #[test]
    fn where_an_ip_is_shown() {
        let mut p = pod(Some("Running"));
        assert!(!pod_shows_ip(&p, IP));
        p.status.as_mut().unwrap().pod_ip = Some(IP.into());
        assert!(pod_shows_ip(&p, IP));
        let mut p = pod(Some("Running"));
        let ips = ["fd00::2f", IP].map(|ip| PodIP { ip: ip.into() });
        p.status.as_mut().unwrap().pod_ips = Some(ips.to_vec());
        assert!(pod_shows_ip(&p, IP) && pod_shows_ip(&p, "fd00:0:0::2f"));
        assert!(!pod_shows_ip(&p, "10.128.40.4"));
        // Secondary networks: any network's ips, CIDR-style entries too.
        let p = with_annotation(
            pod(Some("Running")),
            r#"[{"name":"ovn","interface":"eth0","ips":["10.0.0.9"],"default":true},
                {"name":"macvlan","interface":"net1","ips":["10.128.40.47/24"]}]"#,
        );
        assert!(pod_shows_ip(&p, IP));
        assert_eq!(network_status_ips(&p), vec!["10.0.0.9", "10.128.40.47/24"]);
        assert!(
            !pod_shows_ip(&p, "lease-a"),
            "non-IP resources compare as text"
        );
    }

    #[test]
    fn malformed_annotations_show_nothing() {
        let r = Record::new("default", "web-2", IP).allocated_at(t(0));
        for bad in [
            "",
            "not json",
            r#"{"ips":["10.128.40.47"]}"#,
            r#"[{"ips":"10.128.40.47"}]"#,
            r#"[{"ips":["10.128.40.47"]"#,
            r#"[{"name":"no ips"}]"#,
        ] {
            let p = with_annotation(pod(Some("Pending")), bad);
            assert!(network_status_ips(&p).is_empty(), "{bad}");
            let early = policy().decide(&r, Some(&p), t(1));
            assert!(matches!(early, Alive(PendingWithinGrace(_))), "{bad}");
            assert!(policy().decide(&r, Some(&p), t(31)).is_dead(), "{bad}");
        }
    }

    #[test]
    fn custom_resource_check() {
        let policy = policy().resource_check(|pod, res| {
            let labels = pod.metadata.labels.as_ref();
            labels.is_some_and(|l| l.get("lease").map(String::as_str) == Some(res))
        });
        let mut p = pod(Some("Running"));
        let r = Record::new("default", "web-2", "gpu-3").allocated_at(t(0));
        assert!(policy.decide(&r, Some(&p), t(60)).is_dead());
        p.metadata.labels = Some([("lease".into(), "gpu-3".into())].into_iter().collect());
        assert!(policy.decide(&r, Some(&p), t(60)).is_alive());
        assert_eq!(policy.grace_period(), Duration::from_secs(30));
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
