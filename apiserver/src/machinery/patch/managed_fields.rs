//! `managedFields` bookkeeping of `Update` operations (create, PUT and every
//! PATCH but server-side apply).
//!
//! The general path parses every entry into a field set, moves the changed
//! fields to the writer's entry, prunes paths that no longer exist and
//! re-serializes the list. Most writes are a manager rewriting fields it
//! already owns alone (a controller bumping a counter, a status writer), and
//! for those that path would reproduce the list with only the writer's
//! `apiVersion` and `time` changed: [`unchanged_entries`] recognises that case
//! by walking the entries' `fieldsV1` against the object, and the entry is
//! then touched in place.

use serde_json::{Map, Value};

use super::added::as_go_compares;
use super::fieldset::{
    Entry, FieldSet, changed_fields, excluded, list_fields, parse_entries, sort_entries,
    write_entries,
};
use super::strategic::{self, Path};

/// Records an `Update` operation by `manager` on the fields that differ
/// between `old` and `new` (PUT/PATCH/create with `?fieldManager=` or a
/// default manager), updating `new`'s `metadata.managedFields` in place.
///
/// Approximate: the changed fields (new or different values; `old == None`
/// means every field) are added to the (manager, `Update`, subresource) entry
/// and taken away from every other manager; paths that no longer exist are
/// dropped from all entries, and entries left empty are removed. If `new`
/// carries a `managedFields` list different from `old`'s, the client's list
/// is used as the starting point (as Kubernetes allows). Unlike Kubernetes,
/// one entry per manager is kept regardless of `apiVersion` (it is updated to
/// `api_version`). Does nothing when `new` is not an object. See
/// [`tracks_update`] for when kube-apiserver records one at all.
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    now: &str,
    api_version: &str,
    subresource: Option<&str>,
) {
    let Value::Object(new_map) = &*new else {
        return;
    };
    let mut changed = changed_fields(old.and_then(Value::as_object), new_map, &Path::ROOT);
    as_go_compares(&mut changed, old, new, api_version);
    let writer = Writer {
        manager,
        now,
        api_version,
        subresource,
    };
    if !writer.in_place(new, &changed) {
        writer.general(old, new, &changed);
    }
}

/// The entries of `obj` for `subresource` without their `time`, the list
/// sorted again: kube-apiserver's ScaleHandler copies a Scale's entries
/// back onto the object without it.
pub fn untimed(obj: &mut Value, subresource: &str) {
    let Some(list) = obj
        .pointer_mut("/metadata/managedFields")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for e in list.iter_mut().filter(|e| e["subresource"] == subresource) {
        if let Some(e) = e.as_object_mut() {
            e.remove("time");
        }
    }
    sort_entries(list);
}

/// Whether kube-apiserver records an update of `old` to `new` in
/// `managedFields` (its `skipNonAppliedManager`): not when the object
/// tracks none (created with nothing to own) and the client sent none.
#[must_use]
pub fn tracks_update(old: &Value, new: &Value) -> bool {
    let none = |v: &Value| {
        v.pointer("/metadata/managedFields")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
    };
    !(none(old) && none(new))
}

/// Who records an update, and when.
struct Writer<'a> {
    manager: &'a str,
    now: &'a str,
    api_version: &'a str,
    subresource: Option<&'a str>,
}

impl Writer<'_> {
    /// The fast path: when [`unchanged_entries`] says the general path would
    /// only touch the writer's entry, sets its `apiVersion` and `time` (if
    /// anything changed) in `new`'s list and returns true; else leaves `new`
    /// alone and returns false.
    fn in_place(&self, new: &mut Value, changed: &FieldSet) -> bool {
        // The general path starts from `new`'s list when it has one (its own
        // or, unchanged, the old object's), so that is the list to check.
        let (Some(Value::Array(list)), Value::Object(obj)) =
            (new.pointer("/metadata/managedFields"), &*new)
        else {
            return false;
        };
        let Some(me) = unchanged_entries(list, obj, changed, self) else {
            return false;
        };
        if let (false, Some(i)) = (changed.is_empty(), me)
            && let Some(Value::Object(e)) = new
                .pointer_mut("/metadata/managedFields")
                .and_then(|l| l.get_mut(i))
        {
            e.insert("apiVersion".to_string(), self.api_version.into());
            e.insert("time".to_string(), self.now.into());
            // A later time may move the entry among the others.
            if let Some(Value::Array(list)) = new.pointer_mut("/metadata/managedFields") {
                sort_entries(list);
            }
        }
        true
    }

    /// The general path: parses every entry, moves the changed fields to the
    /// writer's entry and writes the pruned list back.
    fn general(&self, old: Option<&Value>, new: &mut Value, changed: &FieldSet) {
        let old_managed = old.and_then(|o| o.pointer("/metadata/managedFields"));
        let new_managed = new.pointer("/metadata/managedFields");
        let mut entries = match new_managed {
            Some(m) if Some(m) != old_managed => parse_entries(Some(m)),
            _ => parse_entries(old_managed),
        };
        // An entry of another group (a core Event's, written through
        // events.k8s.io) names fields this group's form does not have:
        // kube-apiserver cannot convert it, and drops it.
        let group = group_of(self.api_version);
        entries.retain(|e| e.api_version().is_none_or(|av| group_of(av) == group));
        let (manager, sub) = (self.manager, self.subresource);
        let me = entries.iter().position(|e| e.is(manager, "Update", sub));
        for (i, e) in entries.iter_mut().enumerate() {
            if let (Some(set), false) = (&mut e.set, Some(i) == me) {
                set.subtract(changed);
            }
        }
        if !changed.is_empty() {
            let idx = match me {
                Some(i) => i,
                None => {
                    let (now, av) = (self.now, self.api_version);
                    entries.push(Entry::new(manager, "Update", av, now, sub));
                    entries.len() - 1
                }
            };
            if let Some(e) = entries.get_mut(idx) {
                e.touch(self.api_version, self.now);
                if let Some(set) = &mut e.set {
                    set.union_with(changed);
                }
            }
        }
        write_entries(new, entries);
    }
}

/// The API group of an apiVersion (`""` for the core `v1`).
fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// Whether the general path would leave the `managedFields` `list` of `obj`
/// as it is, apart from the writer's `apiVersion` and `time`: every entry
/// is already in the form `write_entries` gives it and owns only fields that
/// exist, the writer's (manager, `Update`, subresource) entry already owns
/// every `changed` field and no other entry owns any of them. Gives the
/// index of the writer's entry (`None` when it has none, which is only
/// acceptable when nothing changed); `None` when the general path is needed.
fn unchanged_entries(
    list: &[Value],
    obj: &Map<String, Value>,
    changed: &FieldSet,
    writer: &Writer<'_>,
) -> Option<Option<usize>> {
    let mut me = None;
    for (i, raw) in list.iter().enumerate() {
        let text = |f: &str| raw.get(f).and_then(Value::as_str);
        // Entries without a manager are kept verbatim by the general path.
        let Some(name) = text("manager") else {
            continue;
        };
        if text("apiVersion").is_some_and(|av| group_of(av) != group_of(writer.api_version)) {
            return None;
        }
        let fields = raw.get("fieldsV1").and_then(Value::as_object)?;
        if fields.is_empty()
            || text("fieldsType") != Some("FieldsV1")
            || !owns_existing(fields, obj, &Path::ROOT, 0)
        {
            return None;
        }
        let mine = me.is_none()
            && name == writer.manager
            && text("operation") == Some("Update")
            && text("subresource").unwrap_or("") == writer.subresource.unwrap_or("");
        if mine {
            if !contains(fields, changed) {
                return None;
            }
            me = Some(i);
        } else if !disjoint(fields, changed) {
            return None;
        }
    }
    // An empty list, or a change nobody owned yet, needs the general path.
    if list.is_empty() || (me.is_none() && !changed.is_empty()) {
        return None;
    }
    Some(me)
}

/// Whether `fields` (the `fieldsV1` of a map at `path`, `depth` levels into
/// the field set) is a fixed point of the field-set round trip and of
/// pruning against `m`: every node is an object (not cut off by the depth
/// limit) and names a field that exists in `m` as `fields_of` sees it.
fn owns_existing(
    fields: &Map<String, Value>,
    m: &Map<String, Value>,
    path: &Path,
    depth: usize,
) -> bool {
    fields.iter().all(|(k, c)| {
        let Value::Object(c) = c else {
            return false;
        };
        if !c.is_empty() && depth + 1 >= strategic::MAX_DEPTH {
            return false;
        }
        let Some(f) = k.strip_prefix("f:") else {
            // The node itself, owned by the update that added it.
            return k == "." && c.is_empty();
        };
        let Some(v) = m.get(f).filter(|v| !v.is_null() && !excluded(path, f)) else {
            return false;
        };
        let child = path.child(f);
        match v {
            Value::Object(cm) if !cm.is_empty() && !child.too_deep() => {
                if c.is_empty() {
                    has_fields(cm, &child)
                } else {
                    owns_existing(c, cm, &child, depth + 1)
                }
            }
            Value::Array(a) if !a.is_empty() && !child.too_deep() => {
                c.is_empty() || retained(c, &list_fields(a, None, path, f), depth + 1)
            }
            _ => c.is_empty(),
        }
    })
}

/// Whether `fields_of(m, path)` is not empty.
fn has_fields(m: &Map<String, Value>, path: &Path) -> bool {
    m.iter().any(|(k, v)| {
        if v.is_null() || excluded(path, k) {
            return false;
        }
        let child = path.child(k);
        match v {
            Value::Object(cm) if !cm.is_empty() && !child.too_deep() => has_fields(cm, &child),
            _ => true,
        }
    })
}

/// Whether the field set `fields` (JSON, `depth` levels deep) survives the
/// round trip and `retain_existing(existing)` unchanged.
fn retained(fields: &Map<String, Value>, existing: &FieldSet, depth: usize) -> bool {
    !existing.is_empty()
        && fields.iter().all(|(k, c)| {
            if k == "." {
                return c.as_object().is_some_and(Map::is_empty);
            }
            let (Value::Object(c), Some(e)) = (c, existing.0.get(k)) else {
                return false;
            };
            c.is_empty() || (depth + 1 < strategic::MAX_DEPTH && retained(c, e, depth + 1))
        })
}

/// Whether `fields` already has every path of `set` (a union adds nothing).
fn contains(fields: &Map<String, Value>, set: &FieldSet) -> bool {
    set.0.iter().all(|(k, s)| match fields.get(k) {
        Some(Value::Object(c)) => contains(c, s),
        _ => false,
    })
}

/// Whether taking `set` away from `fields` removes nothing.
fn disjoint(fields: &Map<String, Value>, set: &FieldSet) -> bool {
    set.0.iter().all(|(k, s)| match fields.get(k) {
        None => true,
        Some(Value::Object(c)) => !s.is_empty() && (c.is_empty() || disjoint(c, s)),
        Some(_) => false,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::machinery::patch::apply_tests::{entry, fields};

    const NOW: &str = "2024-01-01T00:00:00Z";
    const LATER: &str = "2024-01-02T00:00:00Z";

    /// Records `old` -> `new` by `manager` both through `record_update` and
    /// through the general path alone, asserts that they agree and that the
    /// fast path was taken exactly when `fast`; returns the result.
    fn both(old: &Value, new: &Value, manager: &str, sub: Option<&str>, fast: bool) -> Value {
        let writer = Writer {
            manager,
            now: LATER,
            api_version: "v1",
            subresource: sub,
        };
        let changed = changed_fields(old.as_object(), new.as_object().unwrap(), &Path::ROOT);
        let mut general = new.clone();
        writer.general(Some(old), &mut general, &changed);
        let mut quick = new.clone();
        assert_eq!(
            writer.in_place(&mut quick, &changed),
            fast,
            "fast path taken"
        );
        if fast {
            assert_eq!(quick, general);
        } else {
            assert_eq!(quick, *new, "a refused fast path changes nothing");
        }
        let mut via = new.clone();
        record_update(Some(old), &mut via, manager, LATER, "v1", sub);
        assert_eq!(via, general);
        general
    }

    /// A benchmark-like ConfigMap whose `data.stamp` was last written by `m`.
    fn configmap() -> Value {
        let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "d", "uid": "u", "resourceVersion": "7",
                "labels": {"app": "a"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n",
                    "uid": "o", "controller": true}]},
            "data": {"stamp": "0", "config": "x"}});
        let mut stamped = cm.clone();
        stamped["data"]["stamp"] = json!("1");
        record_update(Some(&cm), &mut stamped, "m", NOW, "v1", None);
        cm = stamped;
        cm
    }

    #[test]
    fn same_manager_rewriting_its_own_field_is_touched_in_place() {
        let old = configmap();
        let mut new = old.clone();
        new["data"]["stamp"] = json!("2");
        let out = both(&old, &new, "m", None, true);
        let entry = &out["metadata"]["managedFields"][0];
        assert_eq!(entry["time"], LATER);
        assert_eq!(entry["fieldsV1"], json!({"f:data": {"f:stamp": {}}}));
        // Nothing changed: nothing to record, not even the time.
        assert_eq!(both(&old, &old, "m", None, true), old);
        // A field nobody owns removed (by a merge patch's null) prunes nothing.
        new["data"].as_object_mut().unwrap().remove("config");
        both(&old, &new, "m", None, true);
        // Another manager writing nothing new leaves the list alone.
        assert_eq!(both(&old, &old, "other", None, true), old);
    }

    #[test]
    fn new_fields_other_managers_and_removals_take_the_general_path() {
        let old = configmap();
        // A new manager, or the same one with another operation.
        let mut new = old.clone();
        new["data"]["stamp"] = json!("2");
        let out = both(&old, &new, "other", None, false);
        assert_eq!(out["metadata"]["managedFields"][0]["manager"], "other");
        // The writer's entry does not own every changed field yet.
        new["data"]["extra"] = json!("e");
        both(&old, &new, "m", None, false);
        // A field the writer owns, removed: the entry is pruned (and dropped).
        let mut removed = old.clone();
        removed["data"].as_object_mut().unwrap().remove("stamp");
        let out = both(&old, &removed, "m", None, false);
        assert!(out["metadata"].get("managedFields").is_none());
        // A changed field another manager owns moves to the writer.
        let mut shared = old.clone();
        shared["data"]["config"] = json!("y");
        let two = both(&old, &shared, "other", None, false);
        let mut again = two.clone();
        again["data"]["config"] = json!("z");
        again["data"]["stamp"] = json!("3");
        both(&two, &again, "m", None, false);
        again["data"]["stamp"] = json!("1");
        both(&two, &again, "other", None, true);
    }

    #[test]
    fn status_subresource_entries_are_touched_in_place() {
        let mut old = configmap();
        old["status"] = json!({"phase": "A", "count": 1});
        let mut new = old.clone();
        new["status"]["phase"] = json!("B");
        let first = both(&old, &new, "m", Some("status"), false);
        let mut second = first.clone();
        second["status"]["phase"] = json!("C");
        let out = both(&first, &second, "m", Some("status"), true);
        let list = out["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[1]["subresource"], "status");
        assert_eq!(list[1]["time"], LATER);
        // The main-resource entry of the same manager is another entry.
        both(&first, &second, "m", None, false);
    }

    #[test]
    fn lists_the_general_path_would_rewrite_are_not_touched_in_place() {
        let old = configmap();
        let entry = old["metadata"]["managedFields"][0].clone();
        let with = |entries: Value| {
            let mut v = old.clone();
            v["metadata"]["managedFields"] = entries;
            v
        };
        let mut stale = entry.clone();
        stale["fieldsV1"]["f:data"]["f:gone"] = json!({});
        let mut untyped = entry.clone();
        untyped.as_object_mut().unwrap().remove("fieldsType");
        let mut leaf = entry.clone();
        leaf["fieldsV1"]["f:data"]["f:stamp"] = json!(true);
        let mut excluded = entry.clone();
        excluded["fieldsV1"]["f:metadata"] = json!({"f:uid": {}});
        let mut too_fine = entry.clone();
        too_fine["fieldsV1"]["f:data"]["f:stamp"] = json!({"f:x": {}});
        let mut empty = entry.clone();
        empty["fieldsV1"] = json!({});
        for list in [
            json!([]),
            json!([stale]),
            json!([untyped]),
            json!([leaf]),
            json!([excluded]),
            json!([too_fine]),
            json!([empty, entry]),
        ] {
            let v = with(list);
            let mut new = v.clone();
            new["data"]["stamp"] = json!("2");
            both(&v, &new, "m", None, false);
        }
        // Entries without a manager are kept as they are, by both paths.
        let v = with(json!([{"weird": 1}, entry]));
        let mut new = v.clone();
        new["data"]["stamp"] = json!("2");
        both(&v, &new, "m", None, true);
        // A client's own list is the starting point of both paths.
        let mut own = new.clone();
        own["metadata"]["managedFields"] = json!([entry]);
        both(&v, &own, "m", None, true);
    }

    #[test]
    fn keyed_and_set_lists_are_checked_item_by_item() {
        let base = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p",
                "finalizers": ["a", "b"]},
            "spec": {"containers": [{"name": "c", "image": "i:1"}, {"name": "d"}],
                "args": ["x"], "empty": {}, "nulls": {"n": null}}});
        let mut created = base.clone();
        record_update(None, &mut created, "m", NOW, "v1", None);
        let mut new = created.clone();
        new["spec"]["containers"][0]["image"] = json!("i:2");
        let edited = both(&created, &new, "m", None, true);
        let mut dropped = edited.clone();
        dropped["spec"]["containers"].as_array_mut().unwrap().pop();
        both(&edited, &dropped, "m", None, false);
        let mut fin = edited.clone();
        fin["metadata"]["finalizers"] = json!(["b"]);
        both(&edited, &fin, "m", None, false);
        fin["metadata"]["finalizers"] = json!(["a", "b", "c"]);
        both(&edited, &fin, "m", None, false);
        let mut atomic = edited.clone();
        atomic["spec"]["args"] = json!(["y"]);
        both(&edited, &atomic, "m", None, true);
        let mut emptied = edited.clone();
        emptied["spec"]["empty"] = json!({"now": 1});
        both(&edited, &emptied, "m", None, false);
    }

    #[test]
    fn record_update_tracks_changed_fields() {
        let mut created = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "uid": "u", "labels": {"a": "1"}}, "data": {"x": "1", "y": "2"}});
        record_update(None, &mut created, "creator", NOW, "v1", None);
        assert_eq!(entry(&created, "creator").unwrap()["operation"], "Update");
        // The maps it made are its own too (`.`), as kube-apiserver says.
        let want = json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}},
            "f:data": {".": {}, "f:x": {}, "f:y": {}}});
        assert_eq!(fields(&created, "creator"), want);
        let mut updated = created.clone();
        updated["data"] = json!({"x": "changed", "z": "3"});
        record_update(Some(&created), &mut updated, "editor", LATER, "v1", None);
        let want = json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}},
            "f:data": {".": {}}});
        assert_eq!(
            fields(&updated, "creator"),
            want,
            "changed field moved, removed one dropped, the map still its own"
        );
        assert_eq!(
            fields(&updated, "editor"),
            json!({"f:data": {"f:x": {}, "f:z": {}}})
        );
        assert_eq!(entry(&updated, "editor").unwrap()["time"], LATER);
        let mut same = updated.clone();
        record_update(Some(&updated), &mut same, "idle", LATER, "v1", None);
        assert_eq!(same, updated, "no change, no entry");
        let mut st = updated.clone();
        st["status"] = json!({"phase": "Ok"});
        record_update(
            Some(&updated),
            &mut st,
            "editor",
            LATER,
            "v1",
            Some("status"),
        );
        let list = st["metadata"]["managedFields"].as_array().unwrap();
        let status_entry = list.iter().find(|e| e["subresource"] == "status").unwrap();
        assert_eq!(status_entry["manager"], "editor");
        // A status the old object lacked (no Go type has it here: added).
        assert_eq!(
            status_entry["fieldsV1"],
            json!({"f:status": {".": {}, "f:phase": {}}})
        );
    }
}
