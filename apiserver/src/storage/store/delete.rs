//! Deletion: preconditions, finalizers, grace periods, namespaces emptied
//! of their objects, and whole collections (a CRD removed). Every change
//! goes through [`Store::write`]; the per-kind rules come from [`Rules`].

use serde_json::Value;

use super::write::{Change, Written, finalizers};
use super::*;

impl Store {
    /// Delete one object: check preconditions; an object with finalizers (its
    /// own, ones the propagation policy adds, or its kind's) or a grace
    /// period is marked terminating and stays; any other is removed and a
    /// DELETED event is emitted. Deleting a namespace deletes everything in
    /// it; the namespace goes once it is empty.
    pub fn delete(
        &self,
        info: &ResourceInfo,
        ns: &str,
        name: &str,
        spec: &DeleteSpec,
    ) -> Result<Deleted, ApiError> {
        let key = info.storage_key();
        let ns = if info.namespaced { ns } else { "" };
        let deleted = self.delete_at(&key, ns, name, spec)?;
        if key == namespaces_key() && spec.commit == Commit::Store {
            return Ok(self.empty_namespace(name, deleted));
        }
        Ok(deleted)
    }

    fn delete_at(
        &self,
        key: &StorageKey,
        ns: &str,
        name: &str,
        spec: &DeleteSpec,
    ) -> Result<Deleted, ApiError> {
        let mut then_remove = false;
        let written = self.write(key, ns, name, spec.commit, |old| {
            then_remove = false;
            let old = old.ok_or_else(|| ApiError::not_found(&key.group, &key.plural, name))?;
            // Worded as kube-apiserver's storage words a failed precondition,
            // its details naming the object's kind (not its resource).
            let failed = |what: &str, asked: &str, stored: String, why: &str| {
                let kind = old.value()["kind"].as_str().unwrap_or_default().to_string();
                let mut e = ApiError::conflict(format!(
                    "Operation cannot be fulfilled on {kind} \"{name}\": the {what} in the \
                     precondition ({asked}) does not match the {what} in record ({stored}). \
                     The object might have been {why}"
                ));
                e.details = Some(serde_json::json!({"kind": kind, "name": name}));
                e
            };
            if let Some(uid) = &spec.uid
                && !old.uid.is(uid)
            {
                let why = "deleted and then recreated";
                return Err(failed("UID", uid, old.uid.to_string(), why));
            }
            if let Some(rv) = &spec.resource_version
                && *rv != old.rv.to_string()
            {
                return Err(failed(
                    "ResourceVersion",
                    rv,
                    old.rv.to_string(),
                    "modified",
                ));
            }
            let v = old.value();
            let mut fin: Vec<String> = old.finalizers().map(String::from).collect();
            let kind = self.rules.strategy(key);
            let graceful = kind.grace(&v, spec.grace_period_seconds);
            let grace = graceful.unwrap_or(0);
            if old.terminating {
                // A later delete may shorten a grace period, never lengthen it.
                let current = v["metadata"]["deletionGracePeriodSeconds"]
                    .as_i64()
                    .unwrap_or(0);
                if grace >= current {
                    return Ok(Change::Keep(old.clone()));
                }
            } else {
                for f in &spec.add_finalizers {
                    if !fin.contains(f) {
                        fin.push(f.clone());
                    }
                }
            }
            let change = self.mark_or_remove(key, v, fin, grace, graceful.is_some());
            Ok(first_of_two(
                change,
                graceful.is_some(),
                spec.commit,
                &mut then_remove,
            ))
        })?;
        if then_remove {
            return Ok(self.remove_marked(key, ns, name, written.object));
        }
        Ok(deleted(written))
    }

    /// The second write of a graceful kind's removal: `marked` (grace 0, no
    /// finalizers) goes. Removed meanwhile, it is reported removed; a
    /// successor of the same name is left alone.
    fn remove_marked(
        &self,
        key: &StorageKey,
        ns: &str,
        name: &str,
        marked: Arc<StoredObject>,
    ) -> Deleted {
        let written = self.write(key, ns, name, Commit::Store, |old| match old {
            Some(o) if o.uid == marked.uid && o.finalizers().next().is_none() => {
                Ok(Change::Remove(o.value()))
            }
            _ => Err(ApiError::not_found(&key.group, &key.plural, name)),
        });
        match written {
            Ok(w) => deleted(w),
            Err(_) => Deleted::Removed(marked),
        }
    }

    /// Remove the object when nothing holds it (no finalizers, no grace
    /// period left), else mark it terminating: deletionTimestamp = now +
    /// grace, deletionGracePeriodSeconds = grace, finalizers `fin`. An
    /// object of a `graceful` kind is removed marked (grace 0), as
    /// kube-apiserver's graceful deletion leaves it.
    fn mark_or_remove(
        &self,
        key: &StorageKey,
        mut v: Value,
        fin: Vec<String>,
        grace: i64,
        graceful: bool,
    ) -> Change {
        let remove = fin.is_empty() && grace == 0 && !self.rules.strategy(key).held(&v);
        if remove && !graceful {
            return Change::Remove(v);
        }
        let at = self
            .clock
            .now()
            .saturating_add(jiff::SignedDuration::from_secs(grace))
            .unwrap_or_else(|_| self.clock.now());
        let m = v["metadata"]
            .as_object_mut()
            .expect("stored objects have metadata");
        // As kube-apiserver's graceful deletion (and `markAsDeleting` for a
        // finalizer): the first deletionTimestamp bumps a tracked
        // generation, so a controller filtering on generation sees it.
        let generation = m.get("generation").and_then(Value::as_i64).unwrap_or(0);
        if m.get("deletionTimestamp").is_none_or(Value::is_null) && generation > 0 {
            m.insert("generation".into(), (generation + 1).into());
        }
        m.insert(
            "deletionTimestamp".into(),
            crate::machinery::clock::format_time(at).into(),
        );
        m.insert("deletionGracePeriodSeconds".into(), grace.into());
        if remove {
            return Change::Remove(v);
        }
        if fin.is_empty() {
            m.remove("finalizers");
        } else {
            m.insert("finalizers".into(), fin.into());
        }
        self.rules.strategy(key).mark_terminating(&mut v);
        Change::Put(v)
    }

    /// A terminating object's grace period has ended (what kubelet's final
    /// delete does for a pod): it is removed unless finalizers still hold it.
    pub fn finish_grace(
        &self,
        info: &ResourceInfo,
        ns: &str,
        name: &str,
        uid: &str,
    ) -> Result<Deleted, ApiError> {
        let key = info.storage_key();
        let mut then_remove = false;
        let written = self.write(&key, ns, name, Commit::Store, |old| {
            then_remove = false;
            let old = old
                .filter(|o| o.uid.is(uid) && o.terminating)
                .ok_or_else(|| ApiError::not_found(&info.group, &info.plural, name))?;
            let fin = old.finalizers().map(String::from).collect();
            let change = self.mark_or_remove(&key, old.value(), fin, 0, true);
            Ok(first_of_two(change, true, Commit::Store, &mut then_remove))
        })?;
        if then_remove {
            return Ok(self.remove_marked(&key, ns, name, written.object));
        }
        Ok(deleted(written))
    }

    /// Namespace `name` was just deleted (`deleted`): delete every object in
    /// it (objects with finalizers linger, terminating), then finish the
    /// namespace if it is empty — or when its last lingering object goes.
    /// Answers the namespace terminating, even when it is already gone.
    /// Creates in it are refused from the moment it is terminating, so the
    /// walk cannot miss a newcomer.
    fn empty_namespace(&self, name: &str, deleted: Deleted) -> Deleted {
        let Deleted::Terminating(ns_obj) = deleted else {
            return deleted;
        };
        let contents: Vec<(Arc<StorageKey>, String)> = {
            let inner = self.lock();
            inner
                .collections
                .iter()
                .filter(|(k, _)| ***k != namespaces_key())
                .flat_map(|(k, c)| {
                    c.iter()
                        .filter(|o| o.0.namespace() == name)
                        .map(|o| (k.clone(), o.0.name().to_string()))
                })
                .collect()
        };
        for (key, n) in contents {
            // Gone meanwhile (404) or held: either way not ours to report.
            let _ = self.delete_at(&key, name, &n, &DeleteSpec::default());
        }
        self.finish_namespace_if_empty(name);
        // Terminating, gone or not: on a cluster the namespace controller
        // finishes it after the DELETE has answered the marked namespace.
        Deleted::Terminating(self.get(&namespaces_key(), "", name).unwrap_or(ns_obj))
    }

    /// A terminating namespace that holds no objects drops its finalizer
    /// ([`Rules::namespace_emptied`]) and goes when no other holds it.
    pub(super) fn finish_namespace_if_empty(&self, ns: &str) {
        let key = namespaces_key();
        let empty = {
            let inner = self.lock();
            if !inner.get(&key, "", ns).is_some_and(|o| o.terminating) {
                return;
            }
            inner
                .collections
                .iter()
                .filter(|(k, _)| ***k != key)
                .all(|(_, c)| !c.iter().any(|o| o.0.namespace() == ns))
        };
        if !empty {
            return;
        }
        // Gone meanwhile: nothing to finish.
        let _ = self.write(&key, "", ns, Commit::Store, |old| {
            let Some(old) = old.filter(|o| o.terminating) else {
                return Err(ApiError::not_found("", "namespaces", ns));
            };
            let before = old.value();
            let mut v = before.clone();
            self.rules.namespace_emptied(&mut v);
            Ok(
                if finalizers(&v).is_empty() && !self.rules.strategy(&key).held(&v) {
                    Change::Remove(v)
                } else if v == before {
                    Change::Keep(old.clone())
                } else {
                    Change::Put(v)
                },
            )
        });
    }

    /// Remove every object of a collection (a CRD was deleted), emitting
    /// DELETED for each; finalizers do not hold them.
    pub fn drop_collection(&self, key: &StorageKey) {
        loop {
            let objects: Vec<Arc<StoredObject>> = {
                let mut inner = self.lock();
                match inner.collections.get(key) {
                    Some(c) if !c.is_empty() => c.iter().map(|o| o.0.clone()).collect(),
                    _ => {
                        inner.collections.remove(key);
                        return;
                    }
                }
            };
            for o in objects {
                // Gone meanwhile: nothing to drop.
                let _ = self.write(key, o.namespace(), o.name(), Commit::Store, |old| {
                    let old =
                        old.ok_or_else(|| ApiError::not_found(&key.group, &key.plural, ""))?;
                    Ok(Change::Remove(old.value()))
                });
            }
        }
    }
}

/// kube-apiserver removes an object of a `graceful` kind in two writes,
/// each with its own resourceVersion: marked with grace 0 (MODIFIED), then
/// removed (DELETED). So the removal `change` becomes the marking, and
/// `then_remove` asks for the second write. A dry run answers the marked
/// object at once.
fn first_of_two(change: Change, graceful: bool, commit: Commit, then_remove: &mut bool) -> Change {
    match change {
        Change::Remove(v) if graceful && commit == Commit::Store => {
            *then_remove = true;
            Change::Put(v)
        }
        change => change,
    }
}

fn deleted(w: Written) -> Deleted {
    if w.removed {
        Deleted::Removed(w.object)
    } else {
        Deleted::Terminating(w.object)
    }
}

impl Store {
    /// Delete the namespace `name` and everything in it.
    ///
    /// # Errors
    /// As [`Store::delete`].
    #[deprecated(
        since = "0.2.0",
        note = "use `Store::delete` on the namespaces resource"
    )]
    pub fn delete_namespace(
        &self,
        registry: &crate::registry::resources::Registry,
        name: &str,
        spec: &DeleteSpec,
    ) -> Result<Deleted, ApiError> {
        let info = registry
            .get("", "v1", "namespaces")
            .ok_or_else(|| ApiError::not_found("", "namespaces", name))?;
        self.delete(&info, "", name, spec)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::storage::store::testing::*;

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
    fn a_pod_deleted_at_once_is_marked_then_removed_in_two_writes() {
        let s = store();
        let pods = info("pods");
        let pod = |name: &str| {
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": name, "namespace": "default"},
                   "spec": {"containers": [{"name": "a", "image": "busybox"}]}})
        };
        s.create(&pods, pod("unbound")).unwrap();
        let before = s.current_rv();
        let (_, mut rx) = s.watch_from(&pods.storage_key(), before).unwrap();
        let Deleted::Removed(gone) = s
            .delete(&pods, "default", "unbound", &DeleteSpec::default())
            .unwrap()
        else {
            panic!("an unscheduled pod goes at once")
        };
        let events: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        let seen: Vec<(EventType, u64, Value)> = events
            .iter()
            .map(|e| {
                let m = e.object.value()["metadata"].clone();
                (e.kind, e.object.rv, m["deletionGracePeriodSeconds"].clone())
            })
            .collect();
        assert_eq!(
            seen,
            [
                (EventType::Modified, before + 1, json!(0)),
                (EventType::Deleted, before + 2, json!(0)),
            ]
        );
        assert_eq!(gone.rv, before + 2);
        assert!(s.get(&pods.storage_key(), "default", "unbound").is_none());

        // A dry run writes nothing and answers the marked pod as removed.
        s.create(&pods, pod("dry")).unwrap();
        let rv = s.current_rv();
        let dry = DeleteSpec {
            commit: Commit::DryRun,
            ..DeleteSpec::default()
        };
        let Deleted::Removed(answer) = s.delete(&pods, "default", "dry", &dry).unwrap() else {
            panic!("a dry run answers the removal")
        };
        assert!(!answer.value()["metadata"]["deletionTimestamp"].is_null());
        assert_eq!(s.current_rv(), rv);
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
                "Operation cannot be fulfilled on ConfigMap \"a\": the UID in the precondition \
                 (other) does not match the UID in record ({}). The object might have been \
                 deleted and then recreated",
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
        let nsi = info("namespaces");
        let cms = info("configmaps");
        s.create(
            &nsi,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"},
                "spec": {"finalizers": ["kubernetes"]}}),
        )
        .unwrap();
        let mut held = cm("held");
        held["metadata"]["namespace"] = "team".into();
        held["metadata"]["finalizers"] = json!(["x/y"]);
        s.create(&cms, held).unwrap();
        let mut free = cm("free");
        free["metadata"]["namespace"] = "team".into();
        s.create(&cms, free).unwrap();
        let d = s.delete(&nsi, "", "team", &DeleteSpec::default()).unwrap();
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

    #[test]
    fn every_removal_path_finishes_an_emptied_namespace() {
        let s = store();
        let (nsi, cms) = (info("namespaces"), info("configmaps"));
        for ns in ["a", "b"] {
            s.create(
                &nsi,
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns},
                    "spec": {"finalizers": ["kubernetes", "x.io/held"]}}),
            )
            .unwrap();
            let mut held = cm("held");
            held["metadata"]["namespace"] = ns.into();
            held["metadata"]["finalizers"] = json!(["x/y"]);
            s.create(&cms, held).unwrap();
            s.delete(&nsi, "", ns, &DeleteSpec::default()).unwrap();
            let v = s.get(&namespaces_key(), "", ns).unwrap().value();
            assert_eq!(v["status"]["phase"], "Terminating");
            assert_eq!(v["metadata"]["finalizers"], Value::Null);
            assert_eq!(v["spec"]["finalizers"], json!(["kubernetes", "x.io/held"]));
        }
        // The last finalizer removed, and a dropped collection: each
        // namespace is emptied and drops `kubernetes`, held by the other.
        s.update(&cms, "a", "held", |old| {
            let mut n = old.clone();
            n["metadata"]["finalizers"] = json!([]);
            Ok(n)
        })
        .unwrap();
        s.drop_collection(&cms.storage_key());
        for ns in ["a", "b"] {
            let v = s.get(&namespaces_key(), "", ns).unwrap().value();
            assert_eq!(v["spec"]["finalizers"], json!(["x.io/held"]));
            // As `namespaces/finalize` lets its owner drop it: it goes.
            s.update(&nsi, "", ns, |old| {
                let mut n = old.clone();
                n["spec"] = json!({});
                Ok(n)
            })
            .unwrap();
            assert!(s.get(&namespaces_key(), "", ns).is_none());
        }
        assert!(s.get(&cms.storage_key(), "b", "held").is_none());
    }
}
