//! The store: one linearizable map of objects, a global resourceVersion bumped
//! by every write, a bounded ring of past events for watches to resume from,
//! and a broadcast of new events.
//!
//! Every write commits under one lock, so writes are totally ordered and
//! each gets the next resourceVersion; an update does its work (the
//! caller's patch, the checks, indexing and serializing) before taking the
//! lock, and commits only if the version it read is still current. Objects
//! are kept as their serialized JSON (shared `Bytes`) plus a packed index
//! ([`StoredObject`]), so a GET, a LIST page and every watcher's copy of an
//! event reuse the same bytes: an event is serialized once, whatever the
//! number of watchers.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast;

use crate::clock::Clock;
use crate::resources::{ResourceInfo, StorageKey};
use crate::status::ApiError;

mod delete;
mod history;
mod object;

use object::{Named, Prepared, Slot};
pub use object::{OwnerRef, RefUid, StoredObject, Uid};

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
    uid_counter: u64,
}

impl Inner {
    fn get(&self, key: &StorageKey, ns: &str, name: &str) -> Option<&Arc<StoredObject>> {
        let id: &dyn Named = &(ns, name);
        self.collections.get(key)?.get(id).map(|s| &s.0)
    }

    /// Store `obj` under its (namespace, name), replacing what was there.
    fn put(&mut self, key: &StorageKey, obj: Arc<StoredObject>) {
        match self.collections.get_mut(key) {
            Some(c) => {
                c.replace(Slot(obj));
            }
            None => {
                self.collections
                    .insert(Arc::new(key.clone()), BTreeSet::from([Slot(obj)]));
            }
        }
    }

    fn take(&mut self, key: &StorageKey, ns: &str, name: &str) -> Option<Arc<StoredObject>> {
        let id: &dyn Named = &(ns, name);
        self.collections.get_mut(key)?.take(id).map(|s| s.0)
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
    /// `gracePeriodSeconds`: pods default to their
    /// `terminationGracePeriodSeconds` (30 when unset); other kinds have none.
    pub grace_period_seconds: Option<i64>,
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
}

/// The store's namespace collection key.
pub fn namespaces_key() -> StorageKey {
    StorageKey {
        group: String::new(),
        plural: "namespaces".into(),
    }
}

/// Whether two maps are equal on the keys `keep` accepts, comparing the
/// values with `eq` (no copies: this runs on every write, under the lock).
fn map_eq_on(
    a: &Map<String, Value>,
    b: &Map<String, Value>,
    keep: impl Fn(&str) -> bool,
    eq: impl Fn(&str, &Value, &Value) -> bool,
) -> bool {
    let kept = |m: &Map<String, Value>| m.keys().filter(|k| keep(k)).count();
    kept(a) == kept(b)
        && a.iter()
            .filter(|(k, _)| keep(k))
            .all(|(k, av)| b.get(k).is_some_and(|bv| eq(k, av, bv)))
}

/// Whether `a` and `b` are the same object but for what changes on every
/// write (resourceVersion, the timestamps of managedFields): a write that
/// changes nothing else — not even who owns which field — is a no-op.
fn same_but_volatile(a: &Value, b: &Value) -> bool {
    let entry_eq = |x: &Value, y: &Value| match (x.as_object(), y.as_object()) {
        (Some(x), Some(y)) => map_eq_on(x, y, |k| k != "time", |_, p, q| p == q),
        _ => x == y,
    };
    let meta_eq = |x: &Value, y: &Value| match (x.as_object(), y.as_object()) {
        (Some(x), Some(y)) => map_eq_on(
            x,
            y,
            |k| k != "resourceVersion",
            |k, p, q| match (k, p.as_array(), q.as_array()) {
                ("managedFields", Some(p), Some(q)) => {
                    p.len() == q.len() && p.iter().zip(q).all(|(e, f)| entry_eq(e, f))
                }
                _ => p == q,
            },
        ),
        _ => x == y,
    };
    match (a.as_object(), b.as_object()) {
        (Some(a), Some(b)) => map_eq_on(
            a,
            b,
            |_| true,
            |k, x, y| {
                if k == "metadata" {
                    meta_eq(x, y)
                } else {
                    x == y
                }
            },
        ),
        _ => a == b,
    }
}

/// Whether anything outside metadata, status, apiVersion and kind differs.
fn spec_differs(a: &Value, b: &Value) -> bool {
    let spec = |k: &str| !matches!(k, "metadata" | "status" | "apiVersion" | "kind");
    let empty = Map::new();
    let (a, b) = (
        a.as_object().unwrap_or(&empty),
        b.as_object().unwrap_or(&empty),
    );
    !map_eq_on(a, b, spec, |_, x, y| x == y)
}

fn finalizers(v: &Value) -> Vec<String> {
    v["metadata"]["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
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

impl Store {
    /// An empty store holding the four initial namespaces.
    #[must_use]
    pub fn new(config: StoreConfig, clock: Clock) -> Self {
        let (events, _) = broadcast::channel(config.watch_buffer.max(16));
        let store = Store {
            inner: Mutex::new(Inner {
                rv: 0,
                floor: 0,
                collections: BTreeMap::new(),
                history: VecDeque::new(),
                uid_counter: 0,
            }),
            events,
            config,
            clock,
        };
        let ns = crate::resources::builtin_resources()
            .into_iter()
            .find(|r| r.plural == "namespaces")
            .expect("namespaces is built in");
        for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let obj = json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
                "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
            store
                .create(&ns, obj)
                .expect("initial namespaces are valid");
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

    /// Whether namespace `ns` exists and is not terminating; Err(true) when terminating.
    fn namespace_state(inner: &Inner, ns: &str) -> Result<(), bool> {
        let obj = inner.get(&namespaces_key(), "", ns).ok_or(false)?;
        if !obj.terminating { Ok(()) } else { Err(true) }
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
                after_id = (a.0.as_str(), a.1.as_str());
                Bound::Excluded(&after_id)
            }
            (None, Some(ns)) => {
                ns_start = (ns, "");
                Bound::Included(&ns_start)
            }
            (None, None) => Bound::Unbounded,
        };
        let objects = coll.range::<dyn Named, _>((lower, Bound::Unbounded));
        paginate(objects.map(|s| &s.0), ns, after, limit, filter, inner.rv)
    }

    fn commit(
        &self,
        inner: &mut Inner,
        kind: EventType,
        key: &StorageKey,
        object: Arc<StoredObject>,
        prev: Option<Arc<StoredObject>>,
    ) {
        let key = match inner.collections.get_key_value(key) {
            Some((k, _)) => k.clone(),
            // A dropped collection's last events.
            None => Arc::new(key.clone()),
        };
        let event = Arc::new(Event {
            kind,
            key,
            object,
            prev,
            line: std::sync::OnceLock::new(),
        });
        inner.history.push_back(event.clone());
        while inner.history.len() > self.config.history.max(1) {
            if let Some(old) = inner.history.pop_front() {
                inner.floor = old.object.rv;
            }
        }
        // No receivers is fine: nobody watches yet.
        let _ = self.events.send(event);
    }

    fn next_uid(inner: &mut Inner) -> String {
        inner.uid_counter += 1;
        // A version-4-shaped UID; unique within the server's life.
        let n = inner.uid_counter;
        let salt = inner.rv.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ n.rotate_left(17);
        format!(
            "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
            (salt >> 32) as u32,
            (salt >> 16) as u16,
            (salt & 0xfff) as u16,
            (n >> 48) as u16 & 0xfff,
            n & 0xffff_ffff_ffff
        )
    }

    /// Create an object. The caller has validated and defaulted it; the store
    /// assigns uid, creationTimestamp, generation and resourceVersion, and
    /// checks that the name is free and the namespace exists.
    pub fn create(
        &self,
        info: &ResourceInfo,
        mut obj: Value,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let key = info.storage_key();
        let mut inner = self.lock();
        let meta = obj["metadata"].as_object().cloned().unwrap_or_default();
        let name = meta
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let ns = if info.namespaced {
            meta.get("namespace")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        } else {
            String::new()
        };
        if info.namespaced {
            match Self::namespace_state(&inner, &ns) {
                Ok(()) => {}
                Err(false) => return Err(ApiError::not_found("", "namespaces", &ns)),
                Err(true) => {
                    return Err(ApiError::forbidden(format!(
                        "{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                        crate::status::group_resource(&info.group, &info.plural)
                    )));
                }
            }
        }
        if inner.get(&key, &ns, &name).is_some() {
            return Err(ApiError::already_exists(&info.group, &info.plural, &name));
        }
        let rv = inner.rv + 1;
        let uid = Self::next_uid(&mut inner);
        let m = obj["metadata"]
            .as_object_mut()
            .expect("caller ensures metadata is an object");
        m.insert("uid".into(), uid.into());
        m.insert("resourceVersion".into(), rv.to_string().into());
        m.insert("creationTimestamp".into(), self.clock.rfc3339().into());
        m.insert("generation".into(), 1.into());
        m.remove("deletionTimestamp");
        m.remove("deletionGracePeriodSeconds");
        if !info.namespaced {
            m.remove("namespace");
        }
        let stored = StoredObject::from_value(&obj, rv);
        inner.rv = rv;
        inner.put(&key, stored.clone());
        self.commit(&mut inner, EventType::Added, &key, stored.clone(), None);
        Ok(stored)
    }

    /// Read-modify-write one object. `f` gets the current object and returns
    /// the new one (or an error that aborts the write). The store then
    /// enforces what no client may change (uid, creationTimestamp,
    /// deletionTimestamp), checks a resourceVersion the new object carries
    /// (409 on mismatch), refuses new finalizers on a terminating object
    /// (422), bumps generation when anything outside metadata and status
    /// changed, and skips no-op writes. When the write leaves a terminating
    /// object without finalizers, the object is removed.
    ///
    /// `f` and the checks run outside the store's lock, on the version just
    /// read; the write commits only if that version is still current, else
    /// `f` runs again on the fresh one (after a few lost races, the whole
    /// write holds the lock, so `f` must not call back into the store). So
    /// writes to different objects run in parallel, and each write is
    /// decided on the state it replaces.
    pub fn update<F>(
        &self,
        info: &ResourceInfo,
        ns: &str,
        name: &str,
        mut f: F,
    ) -> Result<Arc<StoredObject>, ApiError>
    where
        F: FnMut(&Value) -> Result<Value, ApiError>,
    {
        const OPTIMISTIC_TRIES: u32 = 3;
        let key = info.storage_key();
        let ns = if info.namespaced { ns } else { "" };
        let not_found = || ApiError::not_found(&info.group, &info.plural, name);
        for attempt in 0.. {
            let mut held = (attempt >= OPTIMISTIC_TRIES).then(|| self.lock());
            let old = match &held {
                Some(inner) => inner.get(&key, ns, name).cloned(),
                None => self.lock().get(&key, ns, name).cloned(),
            }
            .ok_or_else(not_found)?;
            let old_v = old.value();
            let new = f(&old_v)?;
            let Some(new) = Self::checked_update(info, name, &old, &old_v, new)? else {
                return Ok(old);
            };
            // Indexed and serialized before taking the lock; only the
            // resourceVersion is spliced in under it.
            let remove = old.terminating
                && finalizers(&new).is_empty()
                && new["metadata"]["deletionGracePeriodSeconds"]
                    .as_i64()
                    .unwrap_or(0)
                    == 0;
            let prepared = Prepared::new(&new, old.raw.len() + 32);
            let mut inner = match held.take() {
                Some(inner) => inner,
                None => self.lock(),
            };
            if let Some(stored) = self.commit_update(&mut inner, &key, ns, old, prepared, remove) {
                return Ok(stored);
            }
        }
        unreachable!("the last attempt holds the lock")
    }

    /// The checks of [`Store::update`] on `new` against `old` (parsed as
    /// `old_v`): the object to write, or `None` for a no-op.
    fn checked_update(
        info: &ResourceInfo,
        name: &str,
        old: &StoredObject,
        old_v: &Value,
        mut new: Value,
    ) -> Result<Option<Value>, ApiError> {
        if !new["metadata"].is_object() {
            return Err(ApiError::bad_request("metadata must be an object"));
        }
        if let Some(rv) = new["metadata"]
            .get("resourceVersion")
            .filter(|v| !v.is_null())
            && rv.as_str() != Some(old.rv.to_string().as_str())
        {
            return Err(ApiError::conflict_modified(&info.group, &info.plural, name));
        }
        if old.terminating
            && let Some(f) = finalizers(&new).iter().find(|f| !old.has_finalizer(f))
        {
            return Err(ApiError::invalid(
                &info.kind,
                name,
                format!(
                    "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{\"{f}\"}}"
                ),
            ));
        }
        {
            let m = new["metadata"].as_object_mut().expect("checked above");
            let om = old_v["metadata"]
                .as_object()
                .expect("stored objects have metadata");
            for k in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "name",
                "namespace",
                "generation",
            ] {
                match om.get(k) {
                    Some(v) => m.insert(k.into(), v.clone()),
                    None => m.remove(k),
                };
            }
            m.insert("resourceVersion".into(), old.rv.to_string().into());
        }
        if same_but_volatile(&new, old_v) {
            return Ok(None);
        }
        let generation = old_v["metadata"]["generation"].as_i64().unwrap_or(1);
        if spec_differs(&new, old_v) {
            new["metadata"]["generation"] = (generation + 1).into();
        }
        Ok(Some(new))
    }

    /// Write `new` over `old` at the next resourceVersion (or remove the
    /// object when the write `remove`s it) if `old` is still the current
    /// version; `None`, changing nothing, when another write came first.
    /// One walk of the collection swaps the versions; a lost race swaps
    /// them back.
    fn commit_update(
        &self,
        inner: &mut Inner,
        key: &StorageKey,
        ns: &str,
        old: Arc<StoredObject>,
        new: Prepared,
        remove: bool,
    ) -> Option<Arc<StoredObject>> {
        let rv = inner.rv + 1;
        let stored = new.finish(rv);
        let coll = inner.collections.get_mut(key)?;
        let id: &dyn Named = &(ns, stored.name());
        let displaced = if remove {
            coll.take(id)
        } else {
            coll.replace(Slot(stored.clone()))
        };
        match displaced {
            Some(Slot(current)) if Arc::ptr_eq(&current, &old) => {}
            Some(current) => {
                coll.replace(current);
                return None;
            }
            None => {
                coll.take(id);
                return None;
            }
        }
        inner.rv = rv;
        let kind = if remove {
            EventType::Deleted
        } else {
            EventType::Modified
        };
        self.commit(inner, kind, key, stored.clone(), Some(old));
        if remove {
            self.after_remove(inner, key, ns);
        }
        Some(stored)
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
        )
    }

    pub(crate) fn cm(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "default"}, "data": {"k": "v"}})
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    #[test]
    fn every_write_bumps_the_global_rv() {
        let s = store();
        let cms = info("configmaps");
        let r0 = s.current_rv();
        let a = s.create(&cms, cm("a")).unwrap();
        assert_eq!(a.rv, r0 + 1);
        let v = a.value();
        assert_eq!(v["metadata"]["generation"], 1);
        assert!(v["metadata"]["uid"].as_str().is_some_and(|u| u.len() == 36));
        let b = s.create(&cms, cm("b")).unwrap();
        assert_ne!(a.uid, b.uid);
        let a2 = s
            .update(&cms, "default", "a", |old| {
                let mut n = old.clone();
                n["data"]["k"] = "w".into();
                Ok(n)
            })
            .unwrap();
        assert_eq!(a2.rv, r0 + 3);
        let gone = s
            .delete(&cms, "default", "b", &DeleteSpec::default())
            .unwrap();
        assert!(matches!(gone, Deleted::Removed(ref o) if o.rv == r0 + 4));
        assert_eq!(s.current_rv(), r0 + 4);
    }

    #[test]
    fn stale_rv_conflicts_and_noop_writes_are_skipped() {
        let s = store();
        let cms = info("configmaps");
        let a = s.create(&cms, cm("a")).unwrap();
        let stale = a.value();
        s.update(&cms, "default", "a", |old| {
            let mut n = old.clone();
            n["data"]["k"] = "1".into();
            Ok(n)
        })
        .unwrap();
        let err = s
            .update(&cms, "default", "a", |_| Ok(stale.clone()))
            .unwrap_err();
        assert_eq!(err.code, 409);
        let rv = s.current_rv();
        let same = s
            .update(&cms, "default", "a", |old| Ok(old.clone()))
            .unwrap();
        assert_eq!(same.rv, rv, "a no-op update does not write");
        assert_eq!(s.current_rv(), rv);
    }

    #[test]
    fn a_write_that_loses_a_race_decides_again_on_the_fresh_version() {
        let s = store();
        let cms = info("configmaps");
        s.create(&cms, cm("a")).unwrap();
        let rv0 = s.current_rv();
        let mut seen = Vec::new();
        let out = s
            .update(&cms, "default", "a", |old| {
                seen.push(old["data"]["k"].clone());
                if seen.len() == 1 {
                    // Another write lands between this one's read and commit.
                    s.update(&cms, "default", "a", |o| {
                        let mut n = o.clone();
                        n["data"]["k"] = "other".into();
                        Ok(n)
                    })
                    .unwrap();
                }
                let mut n = old.clone();
                n["data"]["n"] = format!("{}+mine", old["data"]["k"].as_str().unwrap()).into();
                Ok(n)
            })
            .unwrap();
        assert_eq!(seen, [json!("v"), json!("other")]);
        assert_eq!(out.rv, rv0 + 2, "the lost attempt wrote nothing");
        let v = s.get(&cms.storage_key(), "default", "a").unwrap().value();
        assert_eq!(v["data"], json!({"k": "other", "n": "other+mine"}));
        assert_eq!(v["metadata"]["resourceVersion"], (rv0 + 2).to_string());
    }

    #[test]
    fn only_volatile_differences_make_a_write_a_no_op() {
        let a = json!({"kind": "X", "metadata": {"resourceVersion": "1",
            "managedFields": [{"manager": "m", "time": "t1"}, "odd"]}, "spec": {"a": 1}});
        let mut b = a.clone();
        b["metadata"]["resourceVersion"] = "2".into();
        b["metadata"]["managedFields"][0]["time"] = "t2".into();
        assert!(same_but_volatile(&a, &b));
        assert!(!spec_differs(&a, &b));
        b["metadata"]["managedFields"][0]["manager"] = "n".into();
        assert!(!same_but_volatile(&a, &b));
        let mut c = a.clone();
        c["status"] = json!({"phase": "Running"});
        assert!(!same_but_volatile(&a, &c));
        assert!(!spec_differs(&a, &c));
        c["spec"]["a"] = 2.into();
        assert!(spec_differs(&a, &c));
        c["spec"] = Value::Null;
        c.as_object_mut().unwrap().remove("spec");
        assert!(spec_differs(&a, &c));
    }

    #[test]
    fn generation_follows_spec_only_and_identity_is_immutable() {
        let s = store();
        let pods = info("pods");
        let p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                       "spec": {"containers": [{"name": "c", "image": "i"}]}});
        let created = s.create(&pods, p).unwrap();
        let after_status = s
            .update(&pods, "default", "p", |old| {
                let mut n = old.clone();
                n["status"] = json!({"phase": "Running"});
                n["metadata"]["labels"] = json!({"a": "b"});
                n["metadata"]["uid"] = "forged".into();
                n["metadata"]["deletionTimestamp"] = "2020-01-01T00:00:00Z".into();
                Ok(n)
            })
            .unwrap()
            .value();
        assert_eq!(after_status["metadata"]["generation"], 1);
        assert_eq!(after_status["metadata"]["uid"], created.uid.to_string());
        assert!(after_status["metadata"]["deletionTimestamp"].is_null());
        let after_spec = s
            .update(&pods, "default", "p", |old| {
                let mut n = old.clone();
                n["spec"]["containers"][0]["image"] = "j".into();
                Ok(n)
            })
            .unwrap()
            .value();
        assert_eq!(after_spec["metadata"]["generation"], 2);
    }
}
