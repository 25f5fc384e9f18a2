//! The garbage collector: an actor inside the server that deletes
//! dependents whose owners are gone, by UID, off the store's event stream.
//!
//! - A dependent is deleted (with a uid precondition) when every owner it
//!   references is missing or is another object under the same name (a
//!   different UID). References to missing owners are dropped from a
//!   dependent that still has a live owner.
//! - **Foreground**: an owner deleted with `propagationPolicy: Foreground`
//!   carries the `foregroundDeletion` finalizer; its dependents are deleted
//!   first (in foreground themselves when they have dependents), and the
//!   finalizer goes once no dependent with `blockOwnerDeletion` remains.
//! - **Orphan**: the `orphan` finalizer: references to the owner are stripped
//!   from its dependents, then the finalizer goes.
//!
//! Every collection waits for the GC delay fault (fixed or jittered) and
//! nothing is collected while GC is paused: that is the window in which a
//! dependent outlives its owner, and a same-named owner can be recreated
//! beside it.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, HashSet};
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

use crate::faults::Faults;
use crate::registry::resources::{Registry, ResourceInfo, StorageKey};
use crate::storage::store::{DeleteSpec, Deleted, EventType, OwnerRef, Store, StoredObject, Uid};

/// The `foregroundDeletion` finalizer.
pub const FOREGROUND: &str = "foregroundDeletion";
/// The `orphan` finalizer.
pub const ORPHAN: &str = "orphan";

/// Where an object lives: collection, namespace, name.
type ObjKey = (StorageKey, String, String);

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Work {
    /// Should this dependent go (or lose dangling references)?
    Dependent(ObjKey),
    /// This owner is terminating with `orphan` or `foregroundDeletion`.
    Owner(ObjKey),
}

/// The dependency graph, as seen through events: for each owner uid and
/// collection, the objects of that collection that reference the owner —
/// the latest version seen of each, ordered by uid. Only owned objects
/// cost anything here (a pointer each), and no strings are copied.
#[derive(Debug, Default)]
struct Graph {
    /// Collections, named by index.
    colls: Vec<StorageKey>,
    dependents: HashMap<(Uid, u16), BTreeSet<ByUid>>,
}

/// An object ordered (and found) by its uid.
#[derive(Debug)]
struct ByUid(Arc<StoredObject>);

impl PartialEq for ByUid {
    fn eq(&self, other: &Self) -> bool {
        self.0.uid == other.0.uid
    }
}

impl Eq for ByUid {}

impl PartialOrd for ByUid {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ByUid {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.uid.cmp(&other.0.uid)
    }
}

impl std::borrow::Borrow<Uid> for ByUid {
    fn borrow(&self) -> &Uid {
        &self.0.uid
    }
}

/// The canonical uids `o` references (others name no object here).
fn owner_uids(o: &StoredObject) -> impl Iterator<Item = Uid> + '_ {
    o.owners().filter_map(|r| r.uid.uid())
}

impl Graph {
    fn coll(&mut self, k: &StorageKey) -> u16 {
        let i = match self.colls.iter().position(|c| c == k) {
            Some(i) => i,
            None => {
                self.colls.push(k.clone());
                self.colls.len() - 1
            }
        };
        u16::try_from(i).expect("fewer than 65536 collections")
    }

    /// Link `o` (in collection `k`) to every owner it references, or keep
    /// its newest version where it is linked already.
    fn link(&mut self, k: &StorageKey, o: &Arc<StoredObject>) {
        if !o.has_owners() {
            return;
        }
        let c = self.coll(k);
        for owner in owner_uids(o) {
            self.dependents
                .entry((owner, c))
                .or_default()
                .replace(ByUid(o.clone()));
        }
    }

    /// Unlink `o` (in collection `k`) from every owner it references.
    fn unlink(&mut self, k: &StorageKey, o: &StoredObject) {
        if !o.has_owners() {
            return;
        }
        let c = self.coll(k);
        for owner in owner_uids(o) {
            if let Some(set) = self.dependents.get_mut(&(owner, c)) {
                set.remove(&o.uid);
                if set.is_empty() {
                    self.dependents.remove(&(owner, c));
                }
            }
        }
    }

    fn has_dependents(&self, owner: Uid) -> bool {
        (0..self.colls.len()).any(|c| self.dependents.contains_key(&(owner, c as u16)))
    }

    /// Where the dependents of `owner` live.
    fn dependents_of(&self, owner: Uid) -> Vec<ObjKey> {
        let mut out = Vec::new();
        for (c, k) in self.colls.iter().enumerate() {
            for d in self
                .dependents
                .get(&(owner, c as u16))
                .into_iter()
                .flatten()
            {
                out.push((
                    k.clone(),
                    d.0.namespace().to_string(),
                    d.0.name().to_string(),
                ));
            }
        }
        out
    }
}

/// The garbage collector actor.
#[derive(Debug)]
pub struct GarbageCollector {
    store: Arc<Store>,
    registry: Arc<Registry>,
    faults: Faults,
    graph: Graph,
    queue: BinaryHeap<Reverse<(Instant, u64, Work)>>,
    queued: HashSet<Work>,
    seq: u64,
    /// The resourceVersion of the newest event observed.
    seen: u64,
    /// `seen`, published whenever nothing is due: see [`GarbageCollector::caught_up`].
    caught_up: tokio::sync::watch::Sender<u64>,
    /// Collections queued, due or not: see [`GarbageCollector::pending`].
    pending: tokio::sync::watch::Sender<usize>,
}

fn key_of(k: &StorageKey, o: &StoredObject) -> ObjKey {
    (k.clone(), o.namespace().to_string(), o.name().to_string())
}

/// Whether `o` is terminating with a finalizer the collector handles.
fn collector_finalizing(o: &StoredObject) -> bool {
    o.terminating && o.finalizers().any(|f| f == FOREGROUND || f == ORPHAN)
}

impl GarbageCollector {
    /// A collector over `store`.
    #[must_use]
    pub fn new(store: Arc<Store>, registry: Arc<Registry>, faults: Faults) -> Self {
        GarbageCollector {
            store,
            registry,
            faults,
            graph: Graph::default(),
            queue: BinaryHeap::new(),
            queued: HashSet::new(),
            seq: 0,
            seen: 0,
            caught_up: tokio::sync::watch::channel(0).0,
            pending: tokio::sync::watch::channel(0).0,
        }
    }

    /// How many collections are queued, delayed ones included (0: the
    /// collector has nothing left to do for what it has observed).
    #[must_use]
    pub fn pending(&self) -> tokio::sync::watch::Receiver<usize> {
        self.pending.subscribe()
    }

    /// The resourceVersion up to which the collector has observed every
    /// event with no collection due that it could do now (while collection
    /// is delayed or paused, pending work does not hold it back). Waiting
    /// for it to reach the store's current resourceVersion waits for the
    /// collector to catch up with every write so far.
    #[must_use]
    pub fn caught_up(&self) -> tokio::sync::watch::Receiver<u64> {
        self.caught_up.subscribe()
    }

    /// Run until `stopped` flips to true.
    pub async fn run(mut self, mut stopped: tokio::sync::watch::Receiver<bool>) {
        let (items, rv, mut rx) = self.store.snapshot_all_and_subscribe();
        self.rebuild(items, rv);
        let mut changed = self.faults.subscribe();
        loop {
            let paused = self.faults.gc().paused;
            let due = self.queue.peek().map(|Reverse((t, _, _))| *t);
            let queued = self.queue.len();
            self.pending
                .send_if_modified(|p| std::mem::replace(p, queued) != queued);
            if paused || due.is_none_or(|t| t > Instant::now()) {
                let seen = self.seen;
                self.caught_up
                    .send_if_modified(|p| std::mem::replace(p, seen) != seen);
            }
            tokio::select! {
                // Biased: a fixed poll order keeps seeded runs reproducible.
                biased;
                _ = stopped.wait_for(|s| *s) => return,
                ev = rx.recv() => match ev {
                    Ok(e) => {
                        self.seen = e.object.rv;
                        self.observe(&e.key, e.kind, &e.object, e.prev.as_deref());
                    }
                    Err(RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "garbage collector fell behind; rebuilding its graph");
                        let (items, rv, fresh) = self.store.snapshot_all_and_subscribe();
                        rx = fresh;
                        self.rebuild(items, rv);
                    }
                    Err(RecvError::Closed) => return,
                },
                _ = changed.changed() => {}
                _ = crate::machinery::clock::sleep_until_opt(due), if !paused && due.is_some() => {
                    let now = Instant::now();
                    while let Some(Reverse((t, _, _))) = self.queue.peek() {
                        if *t > now || self.faults.gc().paused {
                            break;
                        }
                        let Some(Reverse((_, _, work))) = self.queue.pop() else { break };
                        self.queued.remove(&work);
                        self.process(work);
                    }
                }
            }
        }
    }

    fn rebuild(&mut self, items: Vec<(StorageKey, Arc<StoredObject>)>, rv: u64) {
        self.seen = rv;
        self.graph = Graph::default();
        for (k, o) in &items {
            self.graph.link(k, o);
        }
        for (k, o) in &items {
            if o.has_owners() {
                self.enqueue(Work::Dependent(key_of(k, o)));
            }
            if collector_finalizing(o) {
                self.enqueue(Work::Owner(key_of(k, o)));
            }
        }
    }

    fn enqueue(&mut self, work: Work) {
        if !self.queued.insert(work.clone()) {
            return;
        }
        let due = Instant::now() + self.faults.draw(self.faults.gc().delay);
        self.seq += 1;
        self.queue.push(Reverse((due, self.seq, work)));
    }

    fn observe(
        &mut self,
        k: &StorageKey,
        kind: EventType,
        o: &Arc<StoredObject>,
        prev: Option<&StoredObject>,
    ) {
        match kind {
            EventType::Modified
                if prev.is_some_and(|p| p.uid == o.uid && p.owners().eq(o.owners())) =>
            {
                // Its references are as they were (already judged when they
                // last changed): only a deletion under way may need an
                // owner's finalizer handled. Most writes take this path.
                self.graph.link(k, o);
                if collector_finalizing(o) {
                    self.enqueue(Work::Owner(key_of(k, o)));
                }
            }
            EventType::Added | EventType::Modified => {
                if let Some(p) = prev {
                    self.graph.unlink(k, p);
                    // An owner it stopped referencing may be waiting on it.
                    for r in p.owners().filter(|r| !o.owners().any(|n| n.uid == r.uid)) {
                        if let Some(owner) = self.owner_key(o, &r) {
                            self.enqueue(Work::Owner(owner));
                        }
                    }
                }
                self.graph.link(k, o);
                if o.has_owners() {
                    self.enqueue(Work::Dependent(key_of(k, o)));
                }
                if collector_finalizing(o) {
                    self.enqueue(Work::Owner(key_of(k, o)));
                }
            }
            EventType::Deleted => {
                // Owners waiting on this dependent re-check.
                for r in o.owners() {
                    if let Some(owner) = self.owner_key(o, &r) {
                        self.enqueue(Work::Owner(owner));
                    }
                }
                self.graph.unlink(k, prev.unwrap_or(o));
                for d in self.graph.dependents_of(o.uid) {
                    self.enqueue(Work::Dependent(d));
                }
            }
        }
    }

    /// Where the owner a reference names lives (whichever object is there now).
    fn owner_key(&self, dep: &StoredObject, r: &OwnerRef<'_>) -> Option<ObjKey> {
        let info = self.registry.by_kind(r.api_version, r.kind)?;
        let ns = if info.namespaced { dep.namespace() } else { "" };
        Some((info.storage_key(), ns.to_string(), r.name.to_string()))
    }

    fn info(&self, k: &StorageKey) -> Option<Arc<ResourceInfo>> {
        self.registry
            .all()
            .into_iter()
            .find(|r| r.group == k.group && r.plural == k.plural)
    }

    fn process(&mut self, work: Work) {
        match work {
            Work::Dependent(key) => self.process_dependent(&key),
            Work::Owner(key) => self.process_owner(&key),
        }
    }

    /// The live owner a reference points at, if it is that very object (same uid).
    fn live_owner(&self, dep: &StoredObject, r: &OwnerRef<'_>) -> Option<Arc<StoredObject>> {
        let (k, ns, name) = self.owner_key(dep, r)?;
        self.store
            .get(&k, &ns, &name)
            .filter(|o| r.uid.uid() == Some(o.uid))
    }

    fn process_dependent(&mut self, key: &ObjKey) {
        let (k, ns, name) = key;
        let Some(dep) = self.store.get(k, ns, name) else {
            return;
        };
        if !dep.has_owners() {
            return;
        }
        let Some(info) = self.info(k) else { return };
        let mut solid = 0;
        let mut waiting = Vec::new();
        let mut dangling = Vec::new();
        for r in dep.owners() {
            match self.live_owner(&dep, &r) {
                None => dangling.push(r.uid.to_string()),
                Some(o) if o.terminating && o.has_finalizer(FOREGROUND) => {
                    waiting.push(r.uid.to_string());
                }
                Some(_) => solid += 1,
            }
        }
        if solid > 0 {
            // Kept alive by another owner: drop the references to owners that
            // are gone or waiting for their dependents.
            dangling.extend(waiting);
            if !dangling.is_empty() {
                let uid = dep.uid;
                let res = self.store.update(&info, ns, name, |old| {
                    if !old["metadata"]["uid"].as_str().is_some_and(|u| uid.is(u)) {
                        return Err(crate::machinery::status::ApiError::conflict(
                            "dependent replaced",
                        ));
                    }
                    let mut new = old.clone();
                    strip_owner_refs(&mut new, &dangling);
                    Ok(new)
                });
                if let Err(e) = res {
                    tracing::debug!(dependent = %name, error = %e, "dropping dangling owner references failed");
                }
            }
            return;
        }
        if dep.terminating {
            return;
        }
        // Every owner is gone or waiting for its dependents: delete, by uid.
        let has_dependents = self.graph.has_dependents(dep.uid);
        let foreground = !waiting.is_empty() && has_dependents;
        let spec = DeleteSpec {
            uid: Some(dep.uid.to_string()),
            add_finalizers: if foreground {
                vec![FOREGROUND.to_string()]
            } else {
                Vec::new()
            },
            ..DeleteSpec::default()
        };
        match self.store.delete(&info, ns, name, &spec) {
            Ok(Deleted::Removed(_)) => {
                tracing::debug!(kind = %info.kind, namespace = %ns, name = %name, uid = %dep.uid, "garbage collected");
            }
            Ok(Deleted::Terminating(_)) => {}
            Err(e) => tracing::debug!(name = %name, error = %e, "garbage collection skipped"),
        }
    }

    fn process_owner(&mut self, key: &ObjKey) {
        let (k, ns, name) = key;
        let Some(owner) = self.store.get(k, ns, name) else {
            return;
        };
        if !owner.terminating {
            return;
        }
        let Some(info) = self.info(k) else { return };
        let deps = self.graph.dependents_of(owner.uid);
        if owner.has_finalizer(ORPHAN) {
            for (dk, dns, dname) in &deps {
                let Some(dinfo) = self.info(dk) else { continue };
                let owner_uid = vec![owner.uid.to_string()];
                let res = self.store.update(&dinfo, dns, dname, |old| {
                    let mut new = old.clone();
                    strip_owner_refs(&mut new, &owner_uid);
                    Ok(new)
                });
                if let Err(e) = res {
                    tracing::debug!(dependent = %dname, error = %e, "orphaning failed");
                }
            }
            self.remove_finalizer(&info, &owner, ORPHAN);
            return;
        }
        if owner.has_finalizer(FOREGROUND) {
            let mut blocking = 0;
            for d in &deps {
                let Some(dep) = self.store.get(&d.0, &d.1, &d.2) else {
                    continue;
                };
                let Some(r) = dep.owners().find(|r| r.uid.uid() == Some(owner.uid)) else {
                    continue;
                };
                if r.block_owner_deletion {
                    blocking += 1;
                }
                if !dep.terminating {
                    self.enqueue(Work::Dependent(d.clone()));
                }
            }
            if blocking == 0 {
                self.remove_finalizer(&info, &owner, FOREGROUND);
            }
        }
    }

    fn remove_finalizer(&self, info: &ResourceInfo, owner: &StoredObject, finalizer: &str) {
        let uid = owner.uid;
        let res = self
            .store
            .update(info, owner.namespace(), owner.name(), |old| {
                if !old["metadata"]["uid"].as_str().is_some_and(|u| uid.is(u)) {
                    return Err(crate::machinery::status::ApiError::conflict(
                        "owner replaced",
                    ));
                }
                let mut new = old.clone();
                if let Some(f) = new["metadata"]["finalizers"].as_array_mut() {
                    f.retain(|x| x != finalizer);
                }
                Ok(new)
            });
        if let Err(e) = res {
            tracing::debug!(owner = %owner.name(), error = %e, "removing finalizer failed");
        }
    }
}

fn strip_owner_refs(obj: &mut Value, uids: &[String]) {
    if let Some(refs) = obj["metadata"]["ownerReferences"].as_array_mut() {
        refs.retain(|r| !uids.iter().any(|u| r["uid"] == u.as_str()));
        if refs.is_empty()
            && let Some(m) = obj["metadata"].as_object_mut()
        {
            m.remove("ownerReferences");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machinery::clock::Clock;
    use crate::storage::store::StoreConfig;
    use serde_json::json;
    use std::time::Duration;

    fn cm(name: &str, owner: Option<&StoredObject>) -> Value {
        let mut v = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}});
        if let Some(o) = owner {
            v["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": o.name(), "uid": o.uid.to_string(), "blockOwnerDeletion": true}]);
        }
        v
    }

    #[test]
    fn strip_removes_only_the_named_owners() {
        let mut v = json!({"metadata": {"ownerReferences": [{"uid": "a"}, {"uid": "b"}]}});
        strip_owner_refs(&mut v, &["a".to_string()]);
        assert_eq!(v["metadata"]["ownerReferences"], json!([{"uid": "b"}]));
        strip_owner_refs(&mut v, &["b".to_string()]);
        assert!(v["metadata"].get("ownerReferences").is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn caught_up_waits_for_due_collections_but_not_delayed_ones_and_pending_counts_them() {
        let store = Arc::new(Store::new(
            StoreConfig::default(),
            Clock::new(),
            Arc::new(crate::storage::strategy::KindRules),
        ));
        let registry = Arc::new(Registry::with_builtins());
        let faults = Faults::new(0);
        let info = registry.get("", "v1", "configmaps").unwrap();
        let key = info.storage_key();
        let gc = GarbageCollector::new(store.clone(), registry.clone(), faults.clone());
        let mut seen = gc.caught_up();
        let mut pending = gc.pending();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(gc.run(stopped));
        let none = DeleteSpec::default();
        let owner = store.create(&info, cm("owner", None)).unwrap();
        store.create(&info, cm("dep", Some(&owner))).unwrap();
        store.delete(&info, "default", "owner", &none).unwrap();
        let target = store.current_rv();
        seen.wait_for(|rv| *rv >= target).await.unwrap();
        assert!(
            store.get(&key, "default", "dep").is_none(),
            "the collection due at once ran before the collector caught up"
        );
        faults.set_gc_delay(crate::faults::Delay::fixed(Duration::from_secs(3)));
        let owner = store.create(&info, cm("owner2", None)).unwrap();
        store.create(&info, cm("dep2", Some(&owner))).unwrap();
        store.delete(&info, "default", "owner2", &none).unwrap();
        let (t0, target) = (Instant::now(), store.current_rv());
        seen.wait_for(|rv| *rv >= target).await.unwrap();
        assert_eq!(
            t0.elapsed(),
            Duration::ZERO,
            "a delayed collection is not waited for"
        );
        assert!(store.get(&key, "default", "dep2").is_some());
        // `pending` counts the delayed collection until it is done.
        assert_eq!(*pending.borrow(), 1);
        pending.wait_for(|n| *n == 0).await.unwrap();
        // (The owner's work, then the dependent's: each waits the delay.)
        assert_eq!(t0.elapsed(), Duration::from_secs(6));
        assert!(store.get(&key, "default", "dep2").is_none());
        stop.send(true).unwrap();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn collects_by_uid_after_the_delay() {
        let store = Arc::new(Store::new(
            StoreConfig::default(),
            Clock::new(),
            Arc::new(crate::storage::strategy::KindRules),
        ));
        let registry = Arc::new(Registry::with_builtins());
        let faults = Faults::new(0);
        faults.set_gc_delay(crate::faults::Delay::fixed(Duration::from_secs(3)));
        let info = registry.get("", "v1", "configmaps").unwrap();
        let owner = store.create(&info, cm("owner", None)).unwrap();
        let dep = store.create(&info, cm("dep", Some(&owner))).unwrap();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let gc = GarbageCollector::new(store.clone(), registry.clone(), faults);
        let task = tokio::spawn(gc.run(stopped));
        let (_, mut rx) = store
            .watch_from(&info.storage_key(), store.current_rv())
            .unwrap();
        let t0 = Instant::now();
        store
            .delete(&info, "default", "owner", &DeleteSpec::default())
            .unwrap();
        // A new owner under the same name does not save the old dependent.
        store.create(&info, cm("owner", None)).unwrap();
        loop {
            let e = rx.recv().await.unwrap();
            if e.kind == EventType::Deleted && e.object.uid == dep.uid {
                break;
            }
        }
        assert_eq!(t0.elapsed(), Duration::from_secs(3));
        assert!(store.get(&info.storage_key(), "default", "owner").is_some());
        stop.send(true).unwrap();
        task.await.unwrap();
    }
}
