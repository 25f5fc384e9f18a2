//! The one commit path. Every write — create, update, delete, a grace
//! period's end, a namespace emptied, a collection dropped — reads the
//! current object, decides the change outside the store's lock, and commits
//! only if the object it decided on is still the current one; else it
//! decides again on the fresh version ([`Store::write`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Map, Value};

use super::object::Prepared;
use super::order::{Id, Named, Slot};
use super::*;

/// What a write decides, given the current object.
pub(super) enum Change {
    /// Nothing to write: the answer is this object.
    Keep(Arc<StoredObject>),
    /// Store this object (a create when there was none).
    Put(Value),
    /// Remove the object; this is its last state, which the DELETED event carries.
    Remove(Value),
}

/// What a committed write left.
pub(super) struct Written {
    /// The object written (for a removal, its last state).
    pub(super) object: Arc<StoredObject>,
    /// Whether the object is gone.
    pub(super) removed: bool,
}

impl Store {
    /// The one way a write happens. `decide` gets the current object of
    /// (`key`, `ns`, `name`) — `None` when there is none — and returns the
    /// change (or an error that aborts the write). It runs outside the lock,
    /// and the new object is indexed and serialized outside it too; the
    /// write commits only if the object `decide` saw is still current,
    /// else `decide` runs again on the fresh one. After a few lost races,
    /// the whole write holds the lock, so `decide` must not call back into
    /// the store. So writes to different objects run in parallel, and each
    /// write is decided on the state it replaces.
    ///
    /// A [`Commit::DryRun`] write decides, validates and checks everything a
    /// commit would (the name free, the namespace accepting), and answers
    /// the object it would have stored, at the current object's
    /// resourceVersion (none for a create) — storing nothing and emitting no
    /// event.
    pub(super) fn write<F>(
        &self,
        key: &StorageKey,
        ns: &str,
        name: &str,
        mode: Commit,
        mut decide: F,
    ) -> Result<Written, ApiError>
    where
        F: FnMut(Option<&Arc<StoredObject>>) -> Result<Change, ApiError>,
    {
        const OPTIMISTIC_TRIES: u32 = 3;
        for attempt in 0.. {
            let mut held = (attempt >= OPTIMISTIC_TRIES).then(|| self.lock());
            let old = match &held {
                Some(inner) => inner.get(key, ns, name).cloned(),
                None => self.lock().get(key, ns, name).cloned(),
            };
            let (new, remove) = match decide(old.as_ref())? {
                Change::Keep(object) => {
                    return Ok(Written {
                        object,
                        removed: false,
                    });
                }
                Change::Put(v) => (v, false),
                Change::Remove(v) => (v, true),
            };
            if mode == Commit::DryRun {
                return self.dry_run(key, ns, old, new, remove);
            }
            // Indexed and serialized before taking the lock; only the
            // resourceVersion is spliced in under it.
            let size_hint = old.as_ref().map_or(0, |o| o.raw.len() + 32);
            let prepared = Prepared::new(&new, size_hint, &*self.rules.strategy(key));
            let mut inner = match held.take() {
                Some(inner) => inner,
                None => self.lock(),
            };
            if let Some(object) = self.commit(&mut inner, key, ns, old, prepared, remove)? {
                drop(inner);
                if remove && !ns.is_empty() && *key != namespaces_key() {
                    self.finish_namespace_if_empty(ns);
                }
                return Ok(Written {
                    object,
                    removed: remove,
                });
            }
        }
        unreachable!("the last attempt holds the lock")
    }

    /// What [`Store::write`] answers for a dry run of `new` over `old`.
    fn dry_run(
        &self,
        key: &StorageKey,
        ns: &str,
        old: Option<Arc<StoredObject>>,
        mut new: Value,
        removed: bool,
    ) -> Result<Written, ApiError> {
        let rv = match &old {
            Some(old) => old.rv,
            None => {
                if !ns.is_empty() {
                    let name = new["metadata"]["name"].as_str().unwrap_or_default();
                    Self::namespace_accepts(&self.lock(), key, ns, name)?;
                }
                // Never stored, so it has no resourceVersion.
                if let Some(m) = new["metadata"].as_object_mut() {
                    m.remove("resourceVersion");
                }
                0
            }
        };
        Ok(Written {
            object: Prepared::new(&new, 0, &*self.rules.strategy(key)).finish(rv),
            removed,
        })
    }

    /// Write `new` over `old` at the next resourceVersion (or remove the
    /// object when `remove`), if `old` is still the current version (`None`
    /// for a create: the name must be free); `Ok(None)`, changing nothing,
    /// when another write came first. A create also needs its namespace to
    /// exist and not be terminating, checked here so that no object lands
    /// in a namespace after its deletion began. One walk of the collection
    /// swaps the versions; a lost race swaps them back.
    fn commit(
        &self,
        inner: &mut Inner,
        key: &StorageKey,
        ns: &str,
        old: Option<Arc<StoredObject>>,
        new: Prepared,
        remove: bool,
    ) -> Result<Option<Arc<StoredObject>>, ApiError> {
        let rv = inner.rv + 1;
        let stored = new.finish(rv);
        if old.is_none() && !ns.is_empty() {
            Self::namespace_accepts(inner, key, ns, stored.name())?;
        }
        let coll = match inner.collections.get_mut(key) {
            Some(c) => c,
            None if old.is_none() => inner.collections.entry(Arc::new(key.clone())).or_default(),
            None => return Ok(None),
        };
        let id: &dyn Named = &Id::new(ns, stored.name());
        let displaced = if remove {
            coll.take(id)
        } else {
            coll.replace(Slot::new(stored.clone()))
        };
        match (displaced, &old) {
            (Some(current), Some(old)) if Arc::ptr_eq(&current.0, old) => {}
            (None, None) => {}
            (Some(current), _) => {
                coll.replace(current);
                return Ok(None);
            }
            (None, Some(_)) => {
                coll.take(id);
                return Ok(None);
            }
        }
        inner.rv = rv;
        let kind = match (&old, remove) {
            (_, true) => EventType::Deleted,
            (None, false) => EventType::Added,
            (Some(_), false) => EventType::Modified,
        };
        self.publish(inner, kind, key, stored.clone(), old);
        Ok(Some(stored))
    }

    /// A create in namespace `ns` needs it to exist and not be terminating.
    fn namespace_accepts(
        inner: &Inner,
        key: &StorageKey,
        ns: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        match inner.get(&namespaces_key(), "", ns) {
            None => Err(ApiError::not_found("", "namespaces", ns)),
            Some(n) if n.terminating => Err(ApiError::forbidden(format!(
                "{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                crate::machinery::status::group_resource(&key.group, &key.plural)
            ))),
            Some(_) => Ok(()),
        }
    }

    /// Record a committed write in the history ring and send it to watchers.
    fn publish(
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
            renderings: Renderings::default(),
        });
        for (group, plural, writes) in &inner.write_counters {
            let (g, p) = (&event.key.group, &event.key.plural);
            if group == g && plural.as_ref().is_none_or(|plural| plural == p) {
                writes.fetch_add(1, Ordering::Release);
            }
        }
        inner.history.push_back(event.clone());
        while inner.history.len() > self.config.history.max(1) {
            if let Some(old) = inner.history.pop_front() {
                inner.floor = old.object.rv;
            }
        }
        self.compact_if_due(inner);
        // No receivers is fine: nobody watches yet.
        let _ = self.events.send(event);
    }

    /// A new uid, unique within the server's life, version-4-shaped, its
    /// random part drawn from the store's seed (seed 0 draws what the
    /// store did before it had one).
    fn next_uid(&self) -> String {
        let n = self.uids.fetch_add(1, Ordering::Relaxed) + 1;
        self.uid(n, 8)
    }

    /// The uid of the `n`-th object, its variant nibble `variant` (8 for
    /// every object but those [`Rules::namespace_objects`] names, 9 for
    /// those, and `a` for [`Rules::computed_objects`]', which are counted
    /// apart).
    pub(super) fn uid(&self, n: u64, variant: u8) -> String {
        // Rotated, not shifted: every bit of the seed counts.
        let seed = self.uid_seed.rotate_left(32) ^ n ^ (u64::from(variant != 8) << 63);
        let salt = ward_base::Rng::new(seed).next_u64();
        format!(
            "{:08x}-{:04x}-4{:03x}-{variant:x}{:03x}-{:012x}",
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
    pub fn create(&self, info: &ResourceInfo, obj: Value) -> Result<Arc<StoredObject>, ApiError> {
        self.create_with(info, obj, Commit::Store)
    }

    /// [`Store::create`], or only its dry run.
    pub fn create_with(
        &self,
        info: &ResourceInfo,
        obj: Value,
        mode: Commit,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let created = self.insert(info, obj, mode, self.next_uid())?;
        if mode == Commit::Store && info.group.is_empty() && info.plural == "namespaces" {
            for (info, obj) in self.rules.namespace_objects(created.name()) {
                let n = self.namespace_object_uids.fetch_add(1, Ordering::Relaxed) + 1;
                // The namespace was just created: nothing else can be there.
                if let Err(e) = self.insert(&info, obj, Commit::Store, self.uid(n, 9)) {
                    tracing::warn!(namespace = created.name(), error = %e.message, "a namespace's own object was not created");
                }
            }
        }
        Ok(created)
    }

    /// Create `obj` with uid `uid` (see [`Store::create`]).
    pub(super) fn insert(
        &self,
        info: &ResourceInfo,
        mut obj: Value,
        mode: Commit,
        uid: String,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let key = info.storage_key();
        let meta = obj["metadata"]
            .as_object_mut()
            .ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
        let name = meta
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let ns = match meta.get("namespace").and_then(Value::as_str) {
            Some(ns) if info.namespaced => ns.to_string(),
            _ => String::new(),
        };
        if info.namespaced && ns.is_empty() {
            // No namespace named "" exists.
            return Err(ApiError::not_found("", "namespaces", ""));
        }
        drop_empty_maps(meta);
        meta.insert("uid".into(), uid.clone().into());
        // Spliced in at commit.
        meta.insert("resourceVersion".into(), "".into());
        meta.insert("creationTimestamp".into(), self.clock.rfc3339().into());
        if tracks_generation(info) {
            meta.insert("generation".into(), 1.into());
        } else {
            meta.remove("generation");
        }
        meta.remove("deletionTimestamp");
        meta.remove("deletionGracePeriodSeconds");
        if !info.namespaced {
            meta.remove("namespace");
        }
        info.strategy.created(&mut obj, &uid)?;
        let mut obj = Some(obj);
        let written = self.write(&key, &ns, &name, mode, |current| match current {
            Some(_) => Err(ApiError::already_exists(&info.group, &info.plural, &name)),
            // Only a lost race runs this twice, and it ends in the arm above.
            None => Ok(Change::Put(obj.take().unwrap_or_default())),
        })?;
        Ok(written.object)
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
        f: F,
    ) -> Result<Arc<StoredObject>, ApiError>
    where
        F: FnMut(&Value) -> Result<Value, ApiError>,
    {
        self.update_with(info, ns, name, Commit::Store, f)
    }

    /// [`Store::update`], or only its dry run.
    pub fn update_with<F>(
        &self,
        info: &ResourceInfo,
        ns: &str,
        name: &str,
        mode: Commit,
        mut f: F,
    ) -> Result<Arc<StoredObject>, ApiError>
    where
        F: FnMut(&Value) -> Result<Value, ApiError>,
    {
        let key = info.storage_key();
        let ns = if info.namespaced { ns } else { "" };
        let mut had_rv = 0;
        let written = self.write(&key, ns, name, mode, |old| {
            let old = old.ok_or_else(|| ApiError::not_found(&info.group, &info.plural, name))?;
            had_rv = old.rv;
            let old_v = old.value();
            let new = f(&old_v)?;
            let Some(new) = Self::checked_update(info, name, old, &old_v, new)? else {
                return Ok(Change::Keep(old.clone()));
            };
            let remove = old.terminating
                && finalizers(&new).is_empty()
                && !info.strategy.held(&new)
                && new["metadata"]["deletionGracePeriodSeconds"]
                    .as_i64()
                    .unwrap_or(0)
                    == 0;
            Ok(if remove {
                Change::Remove(new)
            } else {
                Change::Put(new)
            })
        })?;
        if written.removed && mode == Commit::Store {
            // As kube answers an update that lets a terminating object go:
            // the object as the update made it, at the resourceVersion it
            // had (the removal is the write; its DELETED event carries it).
            let strategy = self.rules.strategy(&key);
            return Ok(Prepared::new(&written.object.value(), 0, &*strategy).finish(had_rv));
        }
        Ok(written.object)
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
                &info.group_kind(),
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
            // Before the no-op check: `labels: {}` sent to an object
            // without labels changes nothing (kube's semantic equality).
            drop_empty_maps(m);
        }
        if same_but_volatile(&new, old_v) {
            return Ok(None);
        }
        let generation = old_v["metadata"]["generation"].as_i64().unwrap_or(1);
        if tracks_generation(info) && spec_differs(&new, old_v) {
            new["metadata"]["generation"] = (generation + 1).into();
        }
        Ok(Some(new))
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

/// Whether objects of this kind carry `metadata.generation`: custom
/// resources and built-in kinds with a spec; ConfigMaps, Secrets and the
/// other kinds without one do not, as in Kubernetes.
fn tracks_generation(info: &ResourceInfo) -> bool {
    info.has_spec || !info.builtin
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

pub(super) fn finalizers(v: &Value) -> Vec<String> {
    v["metadata"]["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// What Go's `omitempty` drops from an object's `metadata` as
/// kube-apiserver stores it: empty `labels` and `annotations` (`labels: {}`
/// reads back without them). Creates and updates call it; every other
/// write starts from a stored object, already without them.
fn drop_empty_maps(meta: &mut Map<String, Value>) {
    for key in ["labels", "annotations"] {
        if meta
            .get(key)
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty)
        {
            meta.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::testing::*;
    use super::*;

    #[test]
    fn uids_are_drawn_from_the_seed_and_unique_under_each() {
        let uids = |seed| {
            let s = Store::seeded(
                StoreConfig::default(),
                crate::machinery::clock::Clock::new(),
                Arc::new(crate::storage::strategy::KindRules),
                seed,
            );
            let cms = info("configmaps");
            (0..50)
                .map(|i| {
                    let o = s.create(&cms, cm(&format!("c{i}"))).unwrap();
                    o.value()["metadata"]["uid"].as_str().unwrap().to_string()
                })
                .collect::<Vec<_>>()
        };
        let (a, a_again, b) = (uids(7), uids(7), uids(8));
        assert_eq!(a, a_again, "one seed, one sequence");
        assert_ne!(a, uids(7 | 1 << 32), "every bit of the seed counts");
        let all: std::collections::BTreeSet<&String> = a.iter().chain(&b).collect();
        assert_eq!(all.len(), 100, "no uid repeats within or across the seeds");
    }

    /// Every namespace gets its `kube-root-ca.crt` as it is created, the
    /// initial ones too, with uids counted apart: the other objects' uids
    /// are what they are without it.
    #[test]
    fn a_namespace_holds_the_root_ca_from_its_creation_and_no_other_uid_moves() {
        let store = |rules: Arc<dyn Rules>| {
            Store::seeded(
                StoreConfig::default(),
                crate::machinery::clock::Clock::new(),
                rules,
                3,
            )
        };
        let plain = store(Arc::new(crate::storage::strategy::KindRules));
        let cluster = store(Arc::new(crate::storage::strategy::ClusterRules::new("PEM")));
        let namespaces = info("namespaces");
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}});
        let mut uids = Vec::new();
        for s in [&plain, &cluster] {
            let team = s.create(&namespaces, ns.clone()).unwrap();
            let c = s.create(&info("configmaps"), cm("c")).unwrap();
            uids.push((team.uid, c.uid));
        }
        assert_eq!(uids[0], uids[1]);
        let cms = info("configmaps").storage_key();
        for ns in [
            "default",
            "kube-system",
            "kube-public",
            "kube-node-lease",
            "team",
        ] {
            let ca = cluster.get(&cms, ns, "kube-root-ca.crt").unwrap();
            assert_eq!(ca.value()["data"], json!({"ca.crt": "PEM"}));
            assert_eq!(
                ca.value()["metadata"]["uid"].as_str().unwrap().as_bytes()[19],
                b'9'
            );
            assert!(plain.get(&cms, ns, "kube-root-ca.crt").is_none());
        }
    }

    #[test]
    fn every_write_bumps_the_global_rv() {
        let s = store();
        let cms = info("configmaps");
        let r0 = s.current_rv();
        let a = s.create(&cms, cm("a")).unwrap();
        assert_eq!(a.rv, r0 + 1);
        let v = a.value();
        assert!(
            v["metadata"].get("generation").is_none(),
            "ConfigMaps have no spec, so no generation"
        );
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
