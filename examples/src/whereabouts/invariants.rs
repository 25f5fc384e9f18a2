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
use serde_json::Value;
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
#[derive(Debug, Clone)]
struct PodView {
    uid: String,
    phase: String,
    terminating: bool,
    ips: Vec<String>,
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
    orphaned_since: HashMap<Alloc, Instant>,
    /// When each allocation was first seen with its pod Pending without it.
    pending_since: HashMap<Alloc, Instant>,
    previous: HashSet<Alloc>,
    violations: Violations,
    /// Each pod and pool as last parsed, with its resourceVersion: a check
    /// parses only the objects written since the last one (most checks are
    /// the once-a-second tick that times the leak bounds, or follow a
    /// write to one object).
    pod_views: HashMap<String, (u64, PodView)>,
    pool_allocs: HashMap<String, (u64, Vec<Alloc>)>,
}

/// The allocations a stored IPPool holds.
fn pool_allocations(o: &ward_apiserver::store::StoredObject) -> Vec<Alloc> {
    let v: Value = o.value();
    let Some(range) = v["spec"]["range"]
        .as_str()
        .and_then(|r| Range::parse(r).ok())
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (off, a) in v["spec"]["allocations"].as_object().into_iter().flatten() {
        let Some(ip) = off.parse::<u128>().ok().and_then(|o| range.ip(o).ok()) else {
            continue;
        };
        let s = |k: &str| a[k].as_str().unwrap_or("").to_string();
        out.push(Alloc {
            pool: o.name().to_string(),
            ip: ip.to_string(),
            podref: s("podref"),
            pod_uid: s("podUid"),
            id: s("id"),
        });
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

    fn pods(&mut self) -> BTreeMap<String, PodView> {
        let page = self
            .store
            .list(&key("", "pods"), None, None, None, |_| true);
        let mut views = HashMap::with_capacity_and_hasher(page.items.len(), Default::default());
        let mut out = BTreeMap::new();
        for o in &page.items {
            let name = format!("{}/{}", o.namespace(), o.name());
            let view = match self.pod_views.remove(&name) {
                Some((rv, view)) if rv == o.rv => view,
                _ => {
                    let v = o.value();
                    let ips = v["metadata"]["annotations"][NETWORK_STATUS]
                        .as_str()
                        .and_then(|s| serde_json::from_str::<Vec<NetworkStatus>>(s).ok())
                        .map(|ns| ns.into_iter().flat_map(|n| n.ips).collect())
                        .unwrap_or_default();
                    PodView {
                        uid: o.uid.to_string(),
                        phase: v["status"]["phase"].as_str().unwrap_or("").to_string(),
                        terminating: o.terminating,
                        ips,
                    }
                }
            };
            views.insert(name.clone(), (o.rv, view.clone()));
            out.insert(name, view);
        }
        self.pod_views = views;
        out
    }

    fn allocations(&mut self) -> Vec<Alloc> {
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
            let allocs = match self.pool_allocs.remove(o.name()) {
                Some((rv, allocs)) if rv == o.rv => allocs,
                _ => pool_allocations(o),
            };
            out.extend(allocs.iter().cloned());
            cached.insert(o.name().to_string(), (o.rv, allocs));
        }
        self.pool_allocs = cached;
        out
    }

    /// Check every invariant against the current state.
    pub fn check(&mut self) {
        let now = Instant::now();
        let pods = self.pods();
        let allocs = self.allocations();
        let ranges = self.ranges.clone();
        let in_ranges = |ip: &str| ranges.iter().any(|r| r.offset(ip).is_some());
        // Journal the allocation changes.
        let current: HashSet<Alloc> = allocs.iter().cloned().collect();
        let mut added: Vec<&Alloc> = current.difference(&self.previous).collect();
        added.sort();
        let mut removed: Vec<&Alloc> = self.previous.difference(&current).collect();
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
        self.previous = current;

        // I1: an IP held by two live pods.
        let mut holders: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (name, p) in &pods {
            if p.terminating || p.phase != "Running" {
                continue;
            }
            for ip in p.ips.iter().filter(|ip| in_ranges(ip)) {
                holders.entry(ip.as_str()).or_default().push(name.as_str());
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
        let mut missing = Vec::new();
        for (name, p) in &pods {
            if p.terminating || p.phase != "Running" {
                continue;
            }
            for ip in p.ips.iter().filter(|ip| in_ranges(ip)) {
                let ok = allocs.iter().any(|a| {
                    a.ip == *ip && a.podref == *name && (a.pod_uid.is_empty() || a.pod_uid == p.uid)
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
        let live: HashSet<&Alloc> = allocs.iter().collect();
        self.orphaned_since.retain(|a, _| live.contains(a));
        self.pending_since.retain(|a, _| live.contains(a));
        for a in &allocs {
            let pod = pods
                .get(&a.podref)
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
                    self.orphaned_since.remove(a);
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
                    self.orphaned_since.remove(a);
                    self.pending_since.remove(a);
                }
            }
        }
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
