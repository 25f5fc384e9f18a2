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
use serde_json::Value;
use tokio::sync::broadcast;

use crate::machinery::clock::Clock;
use crate::machinery::status::ApiError;
use crate::registry::kind::Strategy;
use crate::registry::resources::{ResourceInfo, StorageKey};

mod delete;
mod history;
mod object;
mod order;
mod write;

pub use object::{OwnerRef, RefUid, StoredObject, Uid};
use order::{Id, Named, Slot};

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
    /// Renderings of this event its readers build once and share (the
    /// watch's lines), each under a slot the reader chooses.
    pub renderings: Renderings,
}

/// Bytes a reader of an event renders once and every other reader reuses
/// (a watch line, built by the first watcher that needs it). The store
/// neither builds nor reads them: a reader picks a slot per rendering, so
/// a new rendering adds a slot number in the reader, not a field here. They
/// live as long as the event, so they need no eviction.
#[derive(Debug, Default)]
pub struct Renderings([std::sync::OnceLock<Bytes>; Renderings::SLOTS]);

impl Renderings {
    /// How many renderings an event holds; a slot beyond is rendered each time.
    pub const SLOTS: usize = 4;

    /// The rendering in `slot`, built by `render` if it is the first asked for.
    pub fn get_or_init(&self, slot: usize, render: impl FnOnce() -> Bytes) -> Bytes {
        match self.0.get(slot) {
            Some(cell) => cell.get_or_init(render).clone(),
            None => render(),
        }
    }
}

/// Store sizing.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// How many past events are kept for watches to resume from.
    pub history: usize,
    /// How far a watcher may fall behind before it is cut off with 410.
    pub watch_buffer: usize,
    /// Compact the history this often, as kube-apiserver compacts etcd
    /// (`--etcd-compaction-interval`, 5 minutes there): each compaction
    /// drops what is older than the resourceVersion the previous one saw,
    /// so a version is served for one to two intervals (then a list at it,
    /// a watch from it or a continue token of it is 410). `None`: only
    /// `history` bounds it.
    pub compaction_interval: Option<std::time::Duration>,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            history: 10_000,
            watch_buffer: 16_384,
            compaction_interval: None,
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
    /// When the last compaction ran, and the resourceVersion then: what
    /// the next one compacts to ([`StoreConfig::compaction_interval`]).
    compaction: Option<(jiff::Timestamp, u64)>,
    /// Counters of writes per API group or resource
    /// ([`Store::writes_to_group`], [`Store::writes_to`]): the group and,
    /// for one resource's, its plural.
    write_counters: Vec<(String, Option<String>, Arc<AtomicU64>)>,
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
    /// How many more objects match after this page (0 when none do).
    pub remaining: u64,
}

/// Whether a write is stored or only tried (`dryRun=All`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Commit {
    /// Store the write and emit its event.
    #[default]
    Store,
    /// Decide and validate it, answer what would be stored, store nothing.
    DryRun,
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
    /// `gracePeriodSeconds` asked for; the kind's
    /// `KindStrategy::grace` decides what
    /// the object gets.
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
    /// uids handed out to the objects a namespace holds from its creation
    /// ([`Rules::namespace_objects`]): counted apart, so that adding them
    /// changes no other object's uid.
    namespace_object_uids: AtomicU64,
    /// What every uid's random part is drawn from, with its number.
    uid_seed: u64,
}

/// What the store leaves to the layer above ([`crate::storage::strategy::KindRules`]
/// is the server's): which `Strategy` each collection's objects follow,
/// what a fresh cluster holds, what an emptied namespace drops. The store
/// knows preconditions, finalizers, grace periods and namespaces as
/// containers, and no kind by name: it applies the strategy it is handed.
pub trait Rules: fmt::Debug + Send + Sync {
    /// The strategy the objects of collection `key` follow (their grace
    /// period, the finalizers a delete adds, their selectable fields).
    /// `Strategy::generic` by default.
    fn strategy(&self, key: &StorageKey) -> Strategy {
        let _ = key;
        Strategy::generic()
    }
    /// A terminating namespace holds no objects any more: drop what held
    /// it for them (its finalizer).
    fn namespace_emptied(&self, ns: &mut Value);
    /// The objects a new store holds, each with its resource: what a fresh
    /// cluster holds. None by default.
    fn bootstrap(&self) -> Vec<(ResourceInfo, Value)> {
        Vec::new()
    }
    /// The objects a new store holds that kube-apiserver computes on read
    /// rather than stores (the ComponentStatuses), each with its resource:
    /// created after [`bootstrap`](Self::bootstrap)'s, their uids counted
    /// apart (variant nibble `a`), so no other object's uid moves. None by
    /// default.
    fn computed_objects(&self) -> Vec<(ResourceInfo, Value)> {
        Vec::new()
    }
    /// The objects namespace `namespace` holds from its creation on (what
    /// kube-controller-manager's publishers put in every namespace), each
    /// with its resource: the store creates them with it, each a write of
    /// its own right after the namespace's. None by default.
    fn namespace_objects(&self, namespace: &str) -> Vec<(ResourceInfo, Value)> {
        let _ = namespace;
        Vec::new()
    }
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
    let mut remaining = 0;
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
            // The page is full: what follows is only counted.
            if continue_after.is_none() {
                continue_after = items
                    .last()
                    .map(|l| (l.namespace().to_string(), l.name().to_string()));
            }
            remaining += 1;
            continue;
        }
        items.push(o.clone());
    }
    ListPage {
        items,
        rv,
        continue_after,
        remaining,
    }
}

impl Store {
    /// A store holding what `rules` says a fresh cluster holds
    /// ([`Rules::bootstrap`]); [`Store::seeded`] with seed 0.
    #[must_use]
    pub fn new(config: StoreConfig, clock: Clock, rules: Arc<dyn Rules>) -> Self {
        Store::seeded(config, clock, rules, 0)
    }

    /// [`Store::new`], its uids drawn from `seed`: every uid is unique
    /// within the store's life (its last group counts them) and its first
    /// 64 bits come from `seed` and that count, so different seeds give
    /// different uids — and different shard slots — for the same objects.
    #[must_use]
    pub fn seeded(config: StoreConfig, clock: Clock, rules: Arc<dyn Rules>, seed: u64) -> Self {
        let (events, _) = broadcast::channel(config.watch_buffer.max(16));
        let store = Store {
            inner: Mutex::new(Inner {
                rv: 0,
                floor: 0,
                collections: BTreeMap::new(),
                history: VecDeque::new(),
                compaction: None,
                write_counters: Vec::new(),
            }),
            events,
            config,
            clock,
            rules,
            uids: AtomicU64::new(0),
            namespace_object_uids: AtomicU64::new(0),
            uid_seed: seed,
        };
        for (info, obj) in store.rules.bootstrap() {
            store
                .create(&info, obj)
                .expect("bootstrap objects are valid");
        }
        for (n, (info, obj)) in (1..).zip(store.rules.computed_objects()) {
            store
                .insert(&info, obj, Commit::Store, store.uid(n, 10))
                .expect("computed objects are valid");
        }
        store
    }

    /// A counter of the writes to `group`'s kinds from now on, bumped as
    /// each is committed (before its watch event goes out): what a cache
    /// derived from those kinds (the RBAC authorizer's) checks to know it
    /// is current.
    pub fn writes_to_group(&self, group: &str) -> Arc<AtomicU64> {
        self.counter(group, None)
    }

    /// A counter of the writes to the resource `key` from now on, bumped as
    /// each is committed (before its watch event goes out): what a cache
    /// of facts about those objects (a ServiceAccount token's liveness)
    /// checks to know it is current.
    pub fn writes_to(&self, key: &StorageKey) -> Arc<AtomicU64> {
        self.counter(&key.group, Some(&key.plural))
    }

    fn counter(&self, group: &str, plural: Option<&str>) -> Arc<AtomicU64> {
        let counter = Arc::new(AtomicU64::new(0));
        self.lock().write_counters.push((
            group.to_string(),
            plural.map(String::from),
            counter.clone(),
        ));
        counter
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
    use serde_json::json;

    use super::*;
    use crate::registry::resources::builtin_resources;

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
                compaction_interval: None,
            },
            Clock::new(),
            Arc::new(crate::storage::strategy::KindRules),
        )
    }

    pub(crate) fn cm(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "default"}, "data": {"k": "v"}})
    }
}
