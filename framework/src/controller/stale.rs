//! Owner triggers from children that name a replaced owner.
//!
//! kube-runtime maps a child's event to its owner by name, and Ward keeps
//! that meaning: a child whose owner reference carries the uid of a deleted
//! owner still wakes the live owner of that name (its reconcile is
//! idempotent, and the guards decide what it may write). Dropping that
//! trigger would lose a wake-up: when the GC deletes the old child, the new
//! owner must learn that the name is free. What Ward adds is that such a
//! trigger is *seen*: it is counted, logged, and the reconcile it leads to
//! says so in its span.

use std::collections::HashSet;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};

/// Owners triggered by a child whose owner reference names another uid,
/// not reconciled since.
pub(super) struct StaleTriggers<K: Resource + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    reader: Store<K>,
    dyntype: K::DynamicType,
    pending: Mutex<HashSet<ObjectRef<K>>>,
}

impl<K> StaleTriggers<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    pub(super) fn new(reader: Store<K>, dyntype: K::DynamicType) -> Arc<Self> {
        Arc::new(StaleTriggers {
            reader,
            dyntype,
            pending: Mutex::new(HashSet::new()),
        })
    }

    /// Look at a child's owner references as its event goes by (the trigger
    /// itself is kube-runtime's): note each reference to a cached `K` of
    /// that name whose uid is not the reference's.
    pub(super) fn observe(&self, child: &ObjectMeta) {
        let (kind, api_version) = (K::kind(&self.dyntype), K::api_version(&self.dyntype));
        for r in child.owner_references.iter().flatten() {
            if r.kind != kind || r.api_version != api_version {
                continue;
            }
            let oref = match &child.namespace {
                Some(ns) => ObjectRef::<K>::new_with(&r.name, self.dyntype.clone()).within(ns),
                None => ObjectRef::<K>::new_with(&r.name, self.dyntype.clone()),
            };
            let Some(live) = self.reader.get(&oref).and_then(|o| o.meta().uid.clone()) else {
                continue;
            };
            if live != r.uid {
                metrics::counter!("ward_stale_triggers_total", "source" => "owner").increment(1);
                tracing::debug!(owner = %oref, stale_uid = %r.uid, live_uid = %live,
                    "a child of a replaced owner triggers the live owner of its name");
                let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
                // Forget owners that left the cache (kube-runtime never
                // reconciles them, so `take` never will).
                pending.retain(|o| self.reader.get(o).is_some());
                pending.insert(oref);
            }
        }
    }

    /// Whether a trigger for `oref` since its last reconcile came from a
    /// child of a replaced owner (kube-runtime merges triggers, so the
    /// reconcile may have other causes too); forgets it.
    pub(super) fn take(&self, oref: &ObjectRef<K>) -> bool {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(oref)
    }
}
