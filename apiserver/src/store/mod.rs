//! The store: one linearizable map of objects, a global resourceVersion bumped
//! by every write, a bounded ring of past events for watches to resume from,
//! and a broadcast of new events.
//!
//! Every write commits under one lock, so writes are totally ordered and
//! each gets the next resourceVersion; every write — create, update,
//! delete — does its work (the caller's change, the checks, indexing and
//! serializing) before taking the lock, and commits only if the version it
//! read is still current (one path, `Store::write` in write.rs). Objects
//! are kept as their serialized JSON (shared `Bytes`) plus a packed index
//! ([`StoredObject`]), so a GET, a LIST page and every watcher's copy of an
//! event reuse the same bytes: an event is serialized once, whatever the
//! number of watchers.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::clock::Clock;
use crate::resources::{ResourceInfo, StorageKey};
use crate::status::ApiError;

mod delete;
mod history;
mod object;
mod write;

use object::{Id, Named, Slot};
pub use object::{OwnerRef, RefUid, StoredObject, Uid};
pub use write::Commit;

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Created.
    Added,
    /// Changed.
    Modified,
    /// Removed; the object carries the resourceVersion of the removal.
    Deleted,
}

impl EventType {
    /// The watch event `type` string.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One committed write, as the watch stream and the history ring hold it.
#[derive(Debug)]
pub struct Event {
    /// What happened.
    pub kind: EventType,
    /// Which collection (one shared key per collection).
    pub key: Arc<StorageKey>,
    /// The object after the write (for DELETED, its last state with the removal rv).
    pub object: Arc<StoredObject>,
    /// The object before the write (None for ADDED): lets a filtered watch
    /// turn "stopped matching" into DELETED and "started matching" into ADDED.
    pub prev: Option<Arc<StoredObject>>,
    /// The watch line for `kind`, built on first use and shared by every watcher.
    pub line: std::sync::OnceLock<Bytes>,
    /// The same as a `PartialObjectMetadata` (a metadata-only watch's line).
    pub metadata_line: std::sync::OnceLock<Bytes>,
}

/// Store sizing.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// How many past events are kept for watches to resume from.
    pub history: usize,
    /// How far a watcher may fall behind before it is cut off with 410.
    pub watch_buffer: usize,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            history: 10_000,
            watch_buffer: 16_384,
        }
    }
}

/// A collection's objects, ordered by (namespace, name).
type Collection = BTreeSet<Slot>;

/// An object with the collection it lives in.
pub type Keyed = (StorageKey, Arc<StoredObject>);

#[derive(Debug)]
struct Inner {
    rv: u64,
    /// rv of the newest event no longer in `history`: a watch from an older rv is 410.
    floor: u64,
    // Ordered, so every walk over the collections is reproducible.
    /// Keyed by a shared copy of the collection key, which events carry.
    collections: BTreeMap<Arc<StorageKey>, Collection>,
    history: VecDeque<Arc<Event>>,
}

impl Inner {
    fn get(&self, key: &StorageKey, ns: &str, name: &str) -> Option<&Arc<StoredObject>> {
        let id: &dyn Named = &Id::new(ns, name);
        self.collections.get(key)?.get(id).map(|s| &s.0)
    }
}

/// A page of a list.
#[derive(Debug)]
pub struct ListPage {
    /// The matching objects, ordered by namespace and name.
    pub items: Vec<Arc<StoredObject>>,
    /// The store's resourceVersion when the page was read.
    pub rv: u64,
    /// The (namespace, name) of the last item when more remain.
    pub continue_after: Option<(String, String)>,
}

/// Preconditions and options of a delete.
#[derive(Debug, Clone, Default)]
pub struct DeleteSpec {
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// Finalizers to add while marking the object terminating (`orphan`,
    /// `foregroundDeletion`, set by the propagation policy).
    pub add_finalizers: Vec<String>,
    /// `gracePeriodSeconds` asked for; the kind's [`Rules::grace`] decides
    /// what the object gets.
    pub grace_period_seconds: Option<i64>,
    /// Delete for real, or only its dry run (`dryRun=All`).
    pub commit: Commit,
}

/// What a delete did.
#[derive(Debug)]
pub enum Deleted {
    /// The object is gone.
    Removed(Arc<StoredObject>),
    /// The object has finalizers: it is now (or already was) terminating.
    Terminating(Arc<StoredObject>),
}

/// The linearizable object store.
#[derive(Debug)]
pub struct Store {
    inner: Mutex<Inner>,
    events: broadcast::Sender<Arc<Event>>,
    config: StoreConfig,
    clock: Clock,
    rules: Arc<dyn Rules>,
    /// uids handed out so far.
    uids: AtomicU64,
}

/// The per-kind rules a delete follows, which the store leaves to the layer
/// above ([`crate::strategy::KindRules`] is the server's): the store knows
/// preconditions, finalizers, grace periods and namespaces as containers,
/// not which kind has a grace period or what marks a namespace terminating.
pub trait Rules: fmt::Debug + Send + Sync {
    /// The grace period in seconds that a delete asking for `requested`
    /// gives `obj` (of collection `key`) as it is now; 0 removes it at once.
    fn grace(&self, key: &StorageKey, obj: &Value, requested: Option<i64>) -> i64;
    /// Finalizers every delete of this collection's objects adds.
    fn delete_finalizers(&self, key: &StorageKey) -> &'static [&'static str];
    /// What else changes when `obj` starts terminating (beyond its
    /// deletionTimestamp and grace period).
    fn mark_terminating(&self, key: &StorageKey, obj: &mut Value);
    /// A terminating namespace holds no objects any more: drop what held
    /// it for them (its finalizer).
    fn namespace_emptied(&self, ns: &mut Value);
}

/// The store's namespace collection key.
pub fn namespaces_key() -> StorageKey {
    StorageKey {
        group: String::new(),
        plural: "namespaces".into(),
    }
}

/// A page of `objects` (in (namespace, name) order) read at `rv`: those
/// after `after`, in namespace `ns`, that pass `filter`; at most `limit`.
fn paginate<'a>(
    objects: impl Iterator<Item = &'a Arc<StoredObject>>,
    ns: Option<&str>,
    after: Option<&(String, String)>,
    limit: Option<usize>,
    filter: impl Fn(&StoredObject) -> bool,
    rv: u64,
) -> ListPage {
    let limit = limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
    let mut items: Vec<Arc<StoredObject>> = Vec::new();
    let mut continue_after = None;
    for o in objects {
        if after
            .is_some_and(|(ans, aname)| (o.namespace(), o.name()) <= (ans.as_str(), aname.as_str()))
        {
            continue;
        }
        if let Some(ns) = ns
            && o.namespace() != ns
        {
            if o.namespace() > ns {
                break;
            }
            continue;
        }
        if !filter(o) {
            continue;
        }
        if items.len() == limit {
            continue_after = items
                .last()
                .map(|l| (l.namespace().to_string(), l.name().to_string()));
            break;
        }
        items.push(o.clone());
    }
    ListPage {
        items,
        rv,
        continue_after,
    }
}

/// What a fresh cluster holds that clients look up: the four initial
/// namespaces, the `default/kubernetes` Service, and the bootstrap
/// ClusterRoles `cluster-admin` (bound to `system:masters`), `admin`,
/// `edit` and `view`. The last three carry their aggregation rules with
/// empty rules: no controller aggregates them here.
fn bootstrap_objects() -> Vec<serde_json::Value> {
    let mut objects: Vec<_> = ["default", "kube-system", "kube-public", "kube-node-lease"]
        .into_iter()
        .map(|name| {
            json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
                "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
        })
        .collect();
    objects.push(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kubernetes", "namespace": "default",
            "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"],
            "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
            "sessionAffinity": "None", "internalTrafficPolicy": "Cluster"}}));
    let bootstrap = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
    let autoupdate = json!({"rbac.authorization.kubernetes.io/autoupdate": "true"});
    objects.push(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "cluster-admin", "labels": bootstrap, "annotations": autoupdate},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                  {"nonResourceURLs": ["*"], "verbs": ["*"]}]}),
    );
    objects.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "cluster-admin", "labels": bootstrap, "annotations": autoupdate},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:masters"}]}));
    for name in ["admin", "edit", "view"] {
        let label = format!("rbac.authorization.k8s.io/aggregate-to-{name}");
        objects.push(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": bootstrap, "annotations": autoupdate},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {label: "true"}}]},
            "rules": []}),
        );
    }
    objects
}

impl Store {
    /// A store holding what a fresh cluster holds (`bootstrap_objects`).
    #[must_use]
    pub fn new(config: StoreConfig, clock: Clock, rules: Arc<dyn Rules>) -> Self {
        let (events, _) = broadcast::channel(config.watch_buffer.max(16));
        let store = Store {
            inner: Mutex::new(Inner {
                rv: 0,
                floor: 0,
                collections: BTreeMap::new(),
                history: VecDeque::new(),
            }),
            events,
            config,
            clock,
            rules,
            uids: AtomicU64::new(0),
        };
        let builtins = crate::resources::builtin_resources();
        for obj in bootstrap_objects() {
            let info = builtins
                .iter()
                .find(|r| {
                    r.is_api_version(obj["apiVersion"].as_str().unwrap_or(""))
                        && r.kind == obj["kind"]
                })
                .expect("bootstrap kinds are built in");
            store
                .create(info, obj)
                .expect("bootstrap objects are valid");
        }
        store
    }

    /// The server's clock.
    #[must_use]
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// The newest resourceVersion.
    #[must_use]
    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock would leave a half-done write; every
        // write path validates before mutating, so recover the guard.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Read one object.
    #[must_use]
    pub fn get(&self, key: &StorageKey, ns: &str, name: &str) -> Option<Arc<StoredObject>> {
        self.lock().get(key, ns, name).cloned()
    }

    /// List objects of a collection (optionally one namespace) that pass
    /// `filter`, in (namespace, name) order, starting after `after`, at most
    /// `limit` of them.
    pub fn list(
        &self,
        key: &StorageKey,
        ns: Option<&str>,
        after: Option<&(String, String)>,
        limit: Option<usize>,
        filter: impl Fn(&StoredObject) -> bool,
    ) -> ListPage {
        use std::ops::Bound;
        let inner = self.lock();
        let Some(coll) = inner.collections.get(key) else {
            return paginate(std::iter::empty(), ns, after, limit, filter, inner.rv);
        };
        let (after_id, ns_start);
        let lower: Bound<&dyn Named> = match (after, ns) {
            (Some(a), _) => {
                after_id = Id::new(a.0.as_str(), a.1.as_str());
                Bound::Excluded(&after_id)
            }
            (None, Some(ns)) => {
                ns_start = Id::new(ns, "");
                Bound::Included(&ns_start)
            }
            (None, None) => Bound::Unbounded,
        };
        let objects = coll.range::<dyn Named, _>((lower, Bound::Unbounded));
        paginate(objects.map(|s| &s.0), ns, after, limit, filter, inner.rv)
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Fixtures shared by the store's tests.
    use super::*;
    use crate::resources::builtin_resources;

    pub(crate) fn info(plural: &str) -> ResourceInfo {
        builtin_resources()
            .into_iter()
            .find(|r| r.plural == plural)
            .unwrap()
    }

    pub(crate) fn store() -> Store {
        Store::new(
            StoreConfig {
                history: 8,
                watch_buffer: 16,
            },
            Clock::new(),
            Arc::new(crate::strategy::KindRules),
        )
    }

    pub(crate) fn cm(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "default"}, "data": {"k": "v"}})
    }
}
