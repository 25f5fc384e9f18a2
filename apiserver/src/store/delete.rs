//! Deletion: preconditions, finalizers, grace periods, namespaces, and
//! whole collections (a CRD removed).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::*;

/// The grace period a delete gives: only pods that are scheduled and not
/// finished have one (the request's, else the pod's
/// `terminationGracePeriodSeconds`, else 30 s); everything else is 0.
fn effective_grace(key: &StorageKey, v: &Value, requested: Option<i64>) -> i64 {
    if !(key.group.is_empty() && key.plural == "pods") {
        return 0;
    }
    let scheduled = v["spec"]["nodeName"]
        .as_str()
        .is_some_and(|n| !n.is_empty());
    let finished = matches!(v["status"]["phase"].as_str(), Some("Succeeded" | "Failed"));
    if !scheduled || finished {
        return 0;
    }
    requested
        .or_else(|| v["spec"]["terminationGracePeriodSeconds"].as_i64())
        .unwrap_or(30)
        .max(0)
}

impl Store {
    /// Delete one object: check preconditions; an object with finalizers (its
    /// own, or ones the propagation policy adds) is marked terminating and
    /// stays; any other is removed and a DELETED event is emitted.
    pub fn delete(
        &self,
        info: &ResourceInfo,
        ns: &str,
        name: &str,
        spec: &DeleteSpec,
    ) -> Result<Deleted, ApiError> {
        let key = info.storage_key();
        let mut inner = self.lock();
        let ns = if info.namespaced { ns } else { "" };
        self.delete_locked(&mut inner, info, &key, ns, name, spec)
    }

    fn delete_locked(
        &self,
        inner: &mut Inner,
        info: &ResourceInfo,
        key: &StorageKey,
        ns: &str,
        name: &str,
        spec: &DeleteSpec,
    ) -> Result<Deleted, ApiError> {
        let old = inner
            .get(key, ns, name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&info.group, &info.plural, name))?;
        if let Some(uid) = &spec.uid
            && !old.uid.is(uid)
        {
            return Err(ApiError::conflict(format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                old.uid
            ))
            .with_details(&info.group, &info.plural, name));
        }
        if let Some(rv) = &spec.resource_version
            && *rv != old.rv.to_string()
        {
            return Err(ApiError::conflict(format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                old.rv
            ))
            .with_details(&info.group, &info.plural, name));
        }
        let v = old.value();
        let mut fin: Vec<String> = old.finalizers().map(String::from).collect();
        let grace = effective_grace(key, &v, spec.grace_period_seconds);
        if old.terminating {
            // A later delete may shorten a pod's grace period, never lengthen it.
            let current = v["metadata"]["deletionGracePeriodSeconds"]
                .as_i64()
                .unwrap_or(0);
            if grace >= current {
                return Ok(Deleted::Terminating(old));
            }
            return Ok(self.mark_or_remove(inner, key, ns, name, old, v, fin, grace));
        }
        for f in &spec.add_finalizers {
            if !fin.contains(f) {
                fin.push(f.clone());
            }
        }
        Ok(self.mark_or_remove(inner, key, ns, name, old, v, fin, grace))
    }

    /// Remove the object when nothing holds it (no finalizers, no grace
    /// period left), else mark it terminating: deletionTimestamp = now +
    /// grace, deletionGracePeriodSeconds = grace.
    #[allow(clippy::too_many_arguments)]
    fn mark_or_remove(
        &self,
        inner: &mut Inner,
        key: &StorageKey,
        ns: &str,
        name: &str,
        old: Arc<StoredObject>,
        mut v: Value,
        fin: Vec<String>,
        grace: i64,
    ) -> Deleted {
        let rv = inner.rv + 1;
        inner.rv = rv;
        v["metadata"]["resourceVersion"] = rv.to_string().into();
        if fin.is_empty() && grace == 0 {
            let stored = StoredObject::from_value(&v, rv);
            inner.take(key, ns, name);
            self.commit(inner, EventType::Deleted, key, stored.clone(), Some(old));
            self.after_remove(inner, key, ns);
            return Deleted::Removed(stored);
        }
        let at = self
            .clock
            .now()
            .saturating_add(jiff::SignedDuration::from_secs(grace))
            .unwrap_or_else(|_| self.clock.now());
        let m = v["metadata"]
            .as_object_mut()
            .expect("stored objects have metadata");
        if fin.is_empty() {
            m.remove("finalizers");
        } else {
            m.insert("finalizers".into(), fin.into());
        }
        m.insert(
            "deletionTimestamp".into(),
            crate::clock::format_time(at).into(),
        );
        m.insert("deletionGracePeriodSeconds".into(), grace.into());
        if key == &namespaces_key() {
            v["status"]["phase"] = "Terminating".into();
        }
        let stored = StoredObject::from_value(&v, rv);
        inner.put(key, stored.clone());
        self.commit(inner, EventType::Modified, key, stored.clone(), Some(old));
        Deleted::Terminating(stored)
    }

    /// A terminating pod's grace period has ended (what kubelet's final
    /// delete does): it is removed unless finalizers still hold it.
    pub fn finish_grace(
        &self,
        info: &ResourceInfo,
        ns: &str,
        name: &str,
        uid: &str,
    ) -> Result<Deleted, ApiError> {
        let key = info.storage_key();
        let mut inner = self.lock();
        let old = inner
            .get(&key, ns, name)
            .cloned()
            .filter(|o| o.uid.is(uid) && o.terminating)
            .ok_or_else(|| ApiError::not_found(&info.group, &info.plural, name))?;
        let v = old.value();
        let fin = old.finalizers().map(String::from).collect();
        Ok(self.mark_or_remove(&mut inner, &key, ns, name, old, v, fin, 0))
    }

    /// Delete a namespace: every object in it is deleted (objects with
    /// finalizers linger, terminating), and the namespace is removed once it
    /// is empty — at once, or when its last lingering object goes.
    pub fn delete_namespace(
        &self,
        registry: &crate::resources::Registry,
        name: &str,
        spec: &DeleteSpec,
    ) -> Result<Deleted, ApiError> {
        let ns_info = registry
            .get("", "v1", "namespaces")
            .expect("namespaces is built in");
        let mut inner = self.lock();
        // Check preconditions (and existence) before touching any content.
        let ns_obj = inner
            .get(&namespaces_key(), "", name)
            .cloned()
            .ok_or_else(|| ApiError::not_found("", "namespaces", name))?;
        if spec.uid.as_ref().is_some_and(|u| !ns_obj.uid.is(u))
            || spec
                .resource_version
                .as_ref()
                .is_some_and(|r| *r != ns_obj.rv.to_string())
        {
            return self.delete_locked(&mut inner, &ns_info, &namespaces_key(), "", name, spec);
        }
        // Mark the namespace terminating first so nothing new lands in it.
        let marked = DeleteSpec {
            add_finalizers: vec!["kubernetes".into()],
            ..DeleteSpec::default()
        };
        self.delete_locked(&mut inner, &ns_info, &namespaces_key(), "", name, &marked)?;
        let infos: BTreeMap<StorageKey, Arc<ResourceInfo>> = registry
            .all()
            .into_iter()
            .filter(|r| r.namespaced)
            .map(|r| (r.storage_key(), r))
            .collect();
        for (key, info) in &infos {
            let names: Vec<String> = inner
                .collections
                .get(key)
                .map(|c| {
                    c.iter()
                        .filter(|o| o.0.namespace() == name)
                        .map(|o| o.0.name().to_string())
                        .collect()
                })
                .unwrap_or_default();
            for n in names {
                self.delete_locked(&mut inner, info, key, name, &n, &DeleteSpec::default())?;
            }
        }
        self.finish_namespace_if_empty(&mut inner, name);
        let now = inner.get(&namespaces_key(), "", name).cloned();
        Ok(match now {
            Some(o) => Deleted::Terminating(o),
            None => Deleted::Removed(ns_obj),
        })
    }

    pub(super) fn after_remove(&self, inner: &mut Inner, key: &StorageKey, ns: &str) {
        if !ns.is_empty() && key != &namespaces_key() {
            self.finish_namespace_if_empty(inner, ns);
        }
    }

    fn finish_namespace_if_empty(&self, inner: &mut Inner, ns: &str) {
        let Some(ns_obj) = inner.get(&namespaces_key(), "", ns).cloned() else {
            return;
        };
        let v = ns_obj.value();
        if v["metadata"]["deletionTimestamp"].is_null() {
            return;
        }
        let empty = inner
            .collections
            .iter()
            .filter(|(k, _)| ***k != namespaces_key())
            .all(|(_, c)| !c.iter().any(|o| o.0.namespace() == ns));
        if !empty {
            return;
        }
        let mut v = v;
        let fin: Vec<String> = finalizers(&v)
            .into_iter()
            .filter(|f| f != "kubernetes")
            .collect();
        v["metadata"]["finalizers"] = fin.clone().into();
        let rv = inner.rv + 1;
        inner.rv = rv;
        v["metadata"]["resourceVersion"] = rv.to_string().into();
        let stored = StoredObject::from_value(&v, rv);
        let key = namespaces_key();
        if fin.is_empty() {
            inner.take(&key, "", ns);
            self.commit(inner, EventType::Deleted, &key, stored, Some(ns_obj));
        } else {
            inner.put(&key, stored.clone());
            self.commit(inner, EventType::Modified, &key, stored, Some(ns_obj));
        }
    }

    /// Remove every object of a collection (a CRD was deleted), emitting DELETED for each.
    pub fn drop_collection(&self, key: &StorageKey) {
        let mut inner = self.lock();
        let Some(coll) = inner.collections.remove(key) else {
            return;
        };
        for Slot(old) in coll {
            let mut v = old.value();
            let rv = inner.rv + 1;
            inner.rv = rv;
            v["metadata"]["resourceVersion"] = rv.to_string().into();
            let stored = StoredObject::from_value(&v, rv);
            self.commit(&mut inner, EventType::Deleted, key, stored, Some(old));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing::*;

    #[test]
    fn finalizers_hold_deletion_until_the_last_one_goes() {
        let s = store();
        let cms = info("configmaps");
        let mut obj = cm("f");
        obj["metadata"]["finalizers"] = json!(["a/x", "b/y"]);
        s.create(&cms, obj).unwrap();
        let (_, mut rx) = s.watch_from(&cms.storage_key(), s.current_rv()).unwrap();
        let d = s
            .delete(&cms, "default", "f", &DeleteSpec::default())
            .unwrap();
        let Deleted::Terminating(t) = d else {
            panic!("expected terminating")
        };
        assert!(!t.value()["metadata"]["deletionTimestamp"].is_null());
        // Deleting again changes nothing.
        let rv = s.current_rv();
        assert!(matches!(
            s.delete(&cms, "default", "f", &DeleteSpec::default())
                .unwrap(),
            Deleted::Terminating(_)
        ));
        assert_eq!(s.current_rv(), rv);
        // No new finalizers on a terminating object.
        let err = s
            .update(&cms, "default", "f", |old| {
                let mut n = old.clone();
                n["metadata"]["finalizers"] = json!(["a/x", "b/y", "c/z"]);
                Ok(n)
            })
            .unwrap_err();
        assert_eq!(err.code, 422);
        s.update(&cms, "default", "f", |old| {
            let mut n = old.clone();
            n["metadata"]["finalizers"] = json!(["b/y"]);
            Ok(n)
        })
        .unwrap();
        assert!(s.get(&cms.storage_key(), "default", "f").is_some());
        s.update(&cms, "default", "f", |old| {
            let mut n = old.clone();
            n["metadata"]["finalizers"] = json!([]);
            Ok(n)
        })
        .unwrap();
        assert!(s.get(&cms.storage_key(), "default", "f").is_none());
        let kinds: Vec<EventType> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|e| e.kind)
            .collect();
        assert_eq!(
            kinds,
            [EventType::Modified, EventType::Modified, EventType::Deleted]
        );
    }

    #[test]
    fn delete_preconditions_use_the_real_messages() {
        let s = store();
        let cms = info("configmaps");
        let a = s.create(&cms, cm("a")).unwrap();
        let spec = DeleteSpec {
            uid: Some("other".into()),
            ..DeleteSpec::default()
        };
        let err = s.delete(&cms, "default", "a", &spec).unwrap_err();
        assert_eq!(err.code, 409);
        assert_eq!(
            err.message,
            format!(
                "Precondition failed: UID in precondition: other, UID in object meta: {}",
                a.uid
            )
        );
        let spec = DeleteSpec {
            resource_version: Some("1".into()),
            ..DeleteSpec::default()
        };
        assert_eq!(s.delete(&cms, "default", "a", &spec).unwrap_err().code, 409);
        assert!(s.get(&cms.storage_key(), "default", "a").is_some());
    }

    #[test]
    fn namespaces_cascade_and_gate_creation() {
        let s = store();
        let reg = crate::resources::Registry::with_builtins();
        let nsi = info("namespaces");
        let cms = info("configmaps");
        s.create(
            &nsi,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}),
        )
        .unwrap();
        let mut held = cm("held");
        held["metadata"]["namespace"] = "team".into();
        held["metadata"]["finalizers"] = json!(["x/y"]);
        s.create(&cms, held).unwrap();
        let mut free = cm("free");
        free["metadata"]["namespace"] = "team".into();
        s.create(&cms, free).unwrap();
        let d = s
            .delete_namespace(&reg, "team", &DeleteSpec::default())
            .unwrap();
        assert!(matches!(d, Deleted::Terminating(_)));
        assert!(s.get(&cms.storage_key(), "team", "free").is_none());
        let mut late = cm("late");
        late["metadata"]["namespace"] = "team".into();
        assert_eq!(s.create(&cms, late).unwrap_err().code, 403);
        // The last lingering object going finishes the namespace.
        s.update(&cms, "team", "held", |old| {
            let mut n = old.clone();
            n["metadata"]["finalizers"] = json!([]);
            Ok(n)
        })
        .unwrap();
        assert!(s.get(&namespaces_key(), "", "team").is_none());
        let mut orphan = cm("o");
        orphan["metadata"]["namespace"] = "missing".into();
        assert_eq!(s.create(&cms, orphan).unwrap_err().code, 404);
    }
}
