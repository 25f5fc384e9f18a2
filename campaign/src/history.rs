//! A run's history: every write the server commits, as a line, and judged
//! by the scenario's invariants over the history — each write with the
//! object before and after it, not only the final state.
//!
//! A final-state check misses what was wrong only for a while: two live
//! pods holding one IP for a second, a child re-parented and then
//! collected. A judge sees every committed write in resourceVersion order:
//!
//! ```
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, Patch, PatchParams, PostParams};
//! use ward_apiserver::{ApiServer, ServerConfig};
//! use ward_campaign::{Perturber, Plan, simulate};
//!
//! let violations = simulate(|| async {
//!     let server = ApiServer::start(ServerConfig::default().seed(1)).await.unwrap();
//!     let plan = Plan::draw(1, &[], Duration::from_secs(10), &[]).unwrap();
//!     let mut perturber = Perturber::new(&server, plan, |_| {});
//!     // "A ConfigMap's `owner` never changes once set."
//!     perturber.judge("owner-is-stable", |w| {
//!         let owner = |o: Option<&serde_json::Value>| o.and_then(|o| o["data"]["owner"].as_str().map(str::to_string));
//!         match (owner(w.before), owner(w.after)) {
//!             (Some(a), Some(b)) if a != b => Err(format!("{}: owner {a} became {b}", w.name)),
//!             _ => Ok(()),
//!         }
//!     });
//!     perturber.start().unwrap();
//!     let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
//!     let mut cm = ConfigMap::default();
//!     cm.metadata.name = Some("lease".into());
//!     cm.data = Some([("owner".to_string(), "a".to_string())].into());
//!     cms.create(&PostParams::default(), &cm).await.unwrap();
//!     let steal = serde_json::json!({"data": {"owner": "b"}});
//!     cms.patch("lease", &PatchParams::default(), &Patch::Merge(&steal)).await.unwrap();
//!     perturber.settled().await;
//!     perturber.violations()
//! });
//! assert_eq!(violations.len(), 1);
//! assert_eq!(violations[0].invariant, "owner-is-stable");
//! assert!(violations[0].to_string().contains("lease: owner a became b"));
//! ```

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Notify;
use tokio::time::Instant;
use ward_apiserver::store::{Event, EventType, Store};

/// One committed write, as a judge sees it.
#[derive(Debug)]
pub struct Write<'a> {
    /// Its resourceVersion.
    pub rv: u64,
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub verb: &'static str,
    /// The resource (plural), e.g. `configmaps`.
    pub resource: &'a str,
    /// The object's namespace (empty for a cluster-scoped one).
    pub namespace: &'a str,
    /// The object's name.
    pub name: &'a str,
    /// The object before the write (None for a create).
    pub before: Option<&'a Value>,
    /// The object after the write (None for a removal).
    pub after: Option<&'a Value>,
    /// When, from the perturber's creation (simulated time).
    pub at: Duration,
}

/// A judge's finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The judge's name.
    pub invariant: &'static str,
    /// The resourceVersion of the write it was found at.
    pub rv: u64,
    /// When (simulated time from the perturber's creation).
    pub at: Duration,
    /// What the judge said.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} broken at rv {} ({:.3}s): {}",
            self.invariant,
            self.rv,
            self.at.as_secs_f64(),
            self.message
        )
    }
}

type Check = Box<dyn FnMut(&Write<'_>) -> Result<(), String> + Send>;

/// What the recorder keeps: the lines, the judges and what they found.
#[derive(Default)]
pub(crate) struct History {
    pub(crate) lines: Vec<String>,
    pub(crate) judges: Vec<(&'static str, Check)>,
    pub(crate) violations: Vec<Violation>,
    /// The resourceVersion of the last write recorded.
    pub(crate) rv: u64,
    /// Each live object's last version as the judges saw it, by
    /// resourceVersion: the next write's `before` (parsed once, not twice).
    parsed: HashMap<u64, Value>,
}

/// The recorder's shared state, and a wake-up for whoever waits on it.
#[derive(Default)]
pub(crate) struct Shared {
    pub(crate) history: Mutex<History>,
    pub(crate) recorded: Notify,
}

impl Shared {
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, History> {
        self.history.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Subscribe to `store` now (no write committed from here on is missed),
/// and return the task that records each event as a line and hands it to
/// the judges, until the store closes.
pub(crate) fn record(
    store: &Store,
    shared: Arc<Shared>,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let (_, rv, rx) = store.snapshot_all_and_subscribe();
    shared.lock().rv = rv;
    follow(rx, shared)
}

async fn follow(mut rx: tokio::sync::broadcast::Receiver<Arc<Event>>, shared: Arc<Shared>) {
    use tokio::sync::broadcast::error::RecvError;
    let start = Instant::now();
    loop {
        match rx.recv().await {
            Ok(e) => shared.lock().record(&e, start.elapsed()),
            Err(RecvError::Lagged(n)) => {
                let mut h = shared.lock();
                // The versions parsed before the gap are no write's
                // `before` any more.
                h.parsed.clear();
                h.lines
                    .push(format!("({n} events not recorded: the recorder lagged)"));
                let (rv, at) = (h.rv, start.elapsed());
                let names: Vec<_> = h.judges.iter().map(|(name, _)| *name).collect();
                for invariant in names {
                    h.violations.push(Violation {
                        invariant,
                        rv,
                        at,
                        message: format!("{n} writes after this one were not judged"),
                    });
                }
            }
            Err(RecvError::Closed) => return,
        }
        shared.recorded.notify_waiters();
    }
}

impl History {
    fn record(&mut self, e: &Event, at: Duration) {
        let o = &e.object;
        let ns = if o.namespace().is_empty() {
            String::new()
        } else {
            format!("{}/", o.namespace())
        };
        self.lines.push(format!(
            "rv {} {} {} {ns}{} (uid {})",
            o.rv,
            e.kind.as_str(),
            e.key.plural,
            o.name(),
            o.uid
        ));
        self.rv = o.rv;
        if self.judges.is_empty() {
            return;
        }
        let before = e
            .prev
            .as_ref()
            .map(|p| self.parsed.remove(&p.rv).unwrap_or_else(|| p.value()));
        let after = (e.kind != EventType::Deleted).then(|| o.value());
        let write = Write {
            rv: o.rv,
            verb: e.kind.as_str(),
            resource: &e.key.plural,
            namespace: o.namespace(),
            name: o.name(),
            before: before.as_ref(),
            after: after.as_ref(),
            at,
        };
        let mut found = Vec::new();
        for (invariant, check) in &mut self.judges {
            if let Err(message) = check(&write) {
                found.push(Violation {
                    invariant,
                    rv: o.rv,
                    at,
                    message,
                });
            }
        }
        self.violations.extend(found);
        if let Some(after) = after {
            self.parsed.insert(o.rv, after);
        }
    }
}
