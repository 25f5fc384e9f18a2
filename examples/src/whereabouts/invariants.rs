//! The invariants a scenario checks continuously, from the server's own
//! state (not from any controller's cache):
//!
//! - **I1** no IP is held by two live pods;
//! - **I2** every Running pod's IP is allocated to that pod in its pool;
//! - **I3** an allocation whose pod is gone for good is freed within 3
//!   reconcile intervals;
//! - **I4** an allocation of a pod stuck Pending is freed within the grace
//!   bound plus 3 intervals.

use std::collections::BTreeMap;

// A fixed-seed fast hasher: the checker hashes every allocation on every
// check, and SipHash was 9% of a whereabouts run's instructions (#61);
// nothing here depends on iteration order.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::FixedState>;
type HashSet<K> = std::collections::HashSet<K, foldhash::fast::FixedState>;
use std::sync::Arc;
use std::time::Duration;

use crate::run::key;
use tokio::time::Instant;
use ward_apiserver::store::Store;

use super::model::{NETWORK_STATUS, NetworkStatus, Range};
use crate::journal::Journal;

crate::journal::invariants! {
    "whereabouts":
    /// No IP held by two live pods.
    I1 => "I1 (duplicate IP)",
    /// Running pods' IPs are allocated to them.
    I2 => "I2 (running pod's IP not allocated to it)",
    /// Allocations of gone pods are freed in time.
    I3 => "I3 (leaked allocation of a gone pod)",
    /// Allocations of stuck-Pending pods are freed in time.
    I4 => "I4 (leaked allocation of a stuck pod)",
}

/// One allocation as the checker sees it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Alloc {
    pool: String,
    ip: String,
    podref: String,
    pod_uid: String,
    id: String,
}

/// One pod as the checker sees it.
#[derive(Debug)]
struct PodView {
    uid: String,
    phase: String,
    terminating: bool,
    ips: Vec<String>,
    /// Those of `ips` in the checked ranges.
    ranged: Vec<String>,
}

/// The continuous checker.
#[derive(Debug)]
pub struct Checker {
    store: Arc<Store>,
    ranges: Vec<Range>,
    interval: Duration,
    grace: Duration,
    journal: Journal,
    /// When each allocation was first seen with its pod gone.
    orphaned_since: HashMap<Arc<Alloc>, Instant>,
    /// When each allocation was first seen with its pod Pending without it.
    pending_since: HashMap<Arc<Alloc>, Instant>,
    previous: HashSet<Arc<Alloc>>,
    violations: Violations,
    /// Each pod and pool as last parsed, with its resourceVersion: a check
    /// parses only the objects written since the last one (most checks are
    /// the once-a-second tick that times the leak bounds, or follow a
    /// write to one object), and shares the rest.
    pod_views: HashMap<Arc<str>, (u64, Arc<PodView>)>,
    pool_allocs: HashMap<String, (u64, Vec<Arc<Alloc>>)>,
}

/// The fields of a stored Pod the checker reads (the rest skipped unparsed).
#[derive(Default, serde::Deserialize)]
#[serde(default)]
struct PodFields {
    metadata: PodMeta,
    status: PodStatus,
}

#[derive(Default, serde::Deserialize)]
#[serde(default)]
struct PodMeta {
    annotations: BTreeMap<String, String>,
}

#[derive(Default, serde::Deserialize)]
#[serde(default)]
struct PodStatus {
    phase: String,
}

/// The fields of a stored IPPool the checker reads.
#[derive(Default, serde::Deserialize)]
#[serde(default)]
struct PoolFields {
    spec: PoolSpec,
}

#[derive(Default, serde::Deserialize)]
#[serde(default)]
struct PoolSpec {
    range: String,
    allocations: BTreeMap<String, AllocFields>,
}

#[derive(Default, serde::Deserialize)]
#[serde(default)]
struct AllocFields {
    podref: String,
    #[serde(rename = "podUid")]
    pod_uid: String,
    id: String,
}

/// A stored Pod as the checker sees it.
fn pod_view(o: &ward_apiserver::store::StoredObject, ranges: &[Range]) -> PodView {
    let fields: PodFields = serde_json::from_slice(&o.raw).unwrap_or_default();
    let ips: Vec<String> = fields
        .metadata
        .annotations
        .get(NETWORK_STATUS)
        .and_then(|s| serde_json::from_str::<Vec<NetworkStatus>>(s).ok())
        .map(|ns| ns.into_iter().flat_map(|n| n.ips).collect())
        .unwrap_or_default();
    let ranged = ips
        .iter()
        .filter(|ip| ranges.iter().any(|r| r.offset(ip).is_some()))
        .cloned()
        .collect();
    PodView {
        uid: o.uid.to_string(),
        phase: fields.status.phase,
        terminating: o.terminating,
        ips,
        ranged,
    }
}

/// The allocations a stored IPPool holds.
fn pool_allocations(o: &ward_apiserver::store::StoredObject) -> Vec<Arc<Alloc>> {
    let fields: PoolFields = serde_json::from_slice(&o.raw).unwrap_or_default();
    let Ok(range) = Range::parse(&fields.spec.range) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (off, a) in fields.spec.allocations {
        let Some(ip) = off.parse::<u128>().ok().and_then(|o| range.ip(o).ok()) else {
            continue;
        };
        out.push(Arc::new(Alloc {
            pool: o.name().to_string(),
            ip: ip.to_string(),
            podref: a.podref,
            pod_uid: a.pod_uid,
            id: a.id,
        }));
    }
    out
}

impl Checker {
    /// A checker over `store` for pools of `ranges`, with the reconciler's
    /// `interval` and liveness `grace`, journaling allocations to `journal`
    /// and what breaks to `violations`.
    #[must_use]
    pub fn new(
        store: Arc<Store>,
        ranges: Vec<Range>,
        interval: Duration,
        grace: Duration,
        journal: Journal,
        violations: Violations,
    ) -> Self {
        Checker {
            store,
            ranges,
            interval,
            grace,
            journal,
            orphaned_since: HashMap::default(),
            pending_since: HashMap::default(),
            previous: HashSet::default(),
            violations,
            pod_views: HashMap::default(),
            pool_allocs: HashMap::default(),
        }
    }

    /// Every pod by `namespace/name`.
    fn pods(&mut self) -> BTreeMap<Arc<str>, Arc<PodView>> {
        let page = self
            .store
            .list(&key("", "pods"), None, None, None, |_| true);
        let mut views = HashMap::with_capacity_and_hasher(page.items.len(), Default::default());
        let mut out = BTreeMap::new();
        let mut name = String::new();
        for o in &page.items {
            name.clear();
            name.push_str(o.namespace());
            name.push('/');
            name.push_str(o.name());
            let (name, cached) = match self.pod_views.remove_entry(name.as_str()) {
                Some((name, cached)) => (name, Some(cached)),
                None => (Arc::from(name.as_str()), None),
            };
            let view = match cached {
                Some((rv, view)) if rv == o.rv => view,
                _ => Arc::new(pod_view(o, &self.ranges)),
            };
            views.insert(name.clone(), (o.rv, view.clone()));
            out.insert(name, view);
        }
        self.pod_views = views;
        out
    }

    /// Every pool's allocations.
    fn allocations(&mut self) -> Vec<Arc<Alloc>> {
        let page = self.store.list(
            &key("whereabouts.cni.cncf.io", "ippools"),
            None,
            None,
            None,
            |_| true,
        );
        let mut cached = HashMap::with_capacity_and_hasher(page.items.len(), Default::default());
        let mut out = Vec::new();
        for o in &page.items {
            let (name, allocs) = match self.pool_allocs.remove_entry(o.name()) {
                Some((name, (rv, allocs))) if rv == o.rv => (name, allocs),
                Some((name, _)) => (name, pool_allocations(o)),
                None => (o.name().to_string(), pool_allocations(o)),
            };
            out.extend(allocs.iter().cloned());
            cached.insert(name, (o.rv, allocs));
        }
        self.pool_allocs = cached;
        out
    }

    /// Check every invariant against the current state.
    pub fn check(&mut self) {
        let now = Instant::now();
        let pods = self.pods();
        let allocs = self.allocations();
        // Journal the allocation changes.
        let current: HashSet<Arc<Alloc>> = allocs.iter().cloned().collect();
        let mut added: Vec<&Arc<Alloc>> = current.difference(&self.previous).collect();
        added.sort();
        let mut removed: Vec<&Arc<Alloc>> = self.previous.difference(&current).collect();
        removed.sort();
        for a in added {
            self.journal.log(format!(
                "pool {}: {} allocated to {}",
                a.pool, a.ip, a.podref
            ));
        }
        for a in removed {
            self.journal.log(format!(
                "pool {}: {} freed (was {})",
                a.pool, a.ip, a.podref
            ));
        }

        // I1: an IP held by two live pods.
        let running = || {
            pods.iter()
                .filter(|(_, p)| !p.terminating && p.phase == "Running")
        };
        let mut holders: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (name, p) in running() {
            for ip in &p.ranged {
                holders.entry(ip.as_str()).or_default().push(name);
            }
        }
        let dups: Vec<(String, String)> = holders
            .iter()
            .filter(|(_, h)| h.len() > 1)
            .map(|(ip, h)| (ip.to_string(), h.join(" and ")))
            .collect();
        for (ip, who) in dups {
            self.violations.violate(
                Invariant::I1,
                format!("{ip}|{who}"),
                format!("{ip} is held by {who}"),
            );
        }

        // I2: a Running pod's IP not allocated to it.
        let mut by_ip: HashMap<&str, Vec<&Alloc>> = HashMap::default();
        for a in &allocs {
            by_ip.entry(a.ip.as_str()).or_default().push(a);
        }
        let mut missing = Vec::new();
        for (name, p) in running() {
            for ip in &p.ranged {
                let ok = by_ip.get(ip.as_str()).is_some_and(|held| {
                    held.iter()
                        .any(|a| a.podref == **name && (a.pod_uid.is_empty() || a.pod_uid == p.uid))
                });
                if !ok {
                    missing.push((ip.clone(), name.clone(), p.uid.clone()));
                }
            }
        }
        for (ip, name, uid) in missing {
            self.violations.violate(
                Invariant::I2,
                format!("{ip}|{uid}"),
                format!("running pod {name} uses {ip}, which its pool does not allocate to it"),
            );
        }

        // I3 / I4: leaks, timed.
        let (i3_bound, i4_bound) = (self.interval * 3, self.grace + self.interval * 3);
        let mut leaks = Vec::new();
        self.orphaned_since.retain(|a, _| current.contains(a));
        self.pending_since.retain(|a, _| current.contains(a));
        for a in &allocs {
            let pod = pods
                .get(a.podref.as_str())
                .filter(|p| a.pod_uid.is_empty() || p.uid == a.pod_uid);
            match pod {
                None => {
                    let since = *self.orphaned_since.entry(a.clone()).or_insert(now);
                    if now.duration_since(since) > i3_bound {
                        leaks.push((
                            Invariant::I3,
                            a.clone(),
                            format!(
                                "{} of gone pod {} still allocated after {:?}",
                                a.ip,
                                a.podref,
                                now.duration_since(since)
                            ),
                        ));
                    }
                }
                Some(p) if p.phase == "Pending" && !p.ips.contains(&a.ip) => {
                    // (Each map is empty in most checks: no key hashed then.)
                    if !self.orphaned_since.is_empty() {
                        self.orphaned_since.remove(a);
                    }
                    let since = *self.pending_since.entry(a.clone()).or_insert(now);
                    if now.duration_since(since) > i4_bound {
                        leaks.push((
                            Invariant::I4,
                            a.clone(),
                            format!(
                                "{} of pod {} stuck Pending still allocated after {:?}",
                                a.ip,
                                a.podref,
                                now.duration_since(since)
                            ),
                        ));
                    }
                }
                Some(_) => {
                    if !self.orphaned_since.is_empty() {
                        self.orphaned_since.remove(a);
                    }
                    if !self.pending_since.is_empty() {
                        self.pending_since.remove(a);
                    }
                }
            }
        }
        self.previous = current;
        for (inv, a, detail) in leaks {
            self.violations
                .violate(inv, format!("{}|{}", a.ip, a.id), detail);
        }
    }

    /// Check after every change of the store, and at least every second,
    /// until the task is aborted.
    pub async fn run(mut self) {
        let store = self.store.clone();
        crate::run::follow_store(&store, |e| {
            if e.is_some_and(|e| e.key.plural != "pods" && e.key.plural != "ippools") {
                return;
            }
            self.check();
        })
        .await;
    }
}
