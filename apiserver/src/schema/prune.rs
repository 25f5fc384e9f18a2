//! Pruning: what a structural schema does not declare is dropped, as
//! apiextensions' pruning algorithm drops it. An object's `apiVersion`,
//! `kind` and `metadata` stay at the root and in every embedded resource;
//! under `x-kubernetes-preserve-unknown-fields` unknown fields stay (and
//! are not walked), declared ones are still pruned inside; a value with
//! no schema at all (an array without `items`) loses every field.

use serde_json::Value;

use super::error::Path;
use super::node::Schema;

const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Prune a whole object: its root is a resource.
/// What equals `old` (the stored value at the same place, pruned when it
/// was written) is not walked again.
pub(super) fn prune_root(
    s: &Schema,
    obj: &mut Value,
    old: Option<&Value>,
    pruned: &mut Vec<String>,
) {
    // Not compared as a whole: an update's object always differs (and
    // comparing would walk its metadata); its fields are.
    match (obj, old) {
        (Value::Object(m), Some(o)) if !s.keeps_unknown() => {
            m.retain(|k, v| {
                if META_FIELDS.contains(&k.as_str()) {
                    return true;
                }
                match s.property(k) {
                    Some(p) => {
                        walk(Some(p), v, o.get(k), &Path::new(k), false, pruned);
                        true
                    }
                    None => {
                        pruned.push(k.clone());
                        false
                    }
                }
            });
        }
        (obj, _) => walk(Some(s), obj, None, &Path::default(), true, pruned),
    }
    pruned.sort();
}

/// Prune a whole object a JSON merge patch `patch` was applied to: only
/// what the patch wrote is walked.
pub(super) fn prune_merge_patched_root(
    s: &Schema,
    obj: &mut Value,
    patch: &Value,
    pruned: &mut Vec<String>,
) {
    merge_patched(s, obj, patch, &Path::default(), true, pruned);
    pruned.sort();
}

fn merge_patched(
    s: &Schema,
    x: &mut Value,
    patch: &Value,
    path: &Path,
    resource: bool,
    pruned: &mut Vec<String>,
) {
    let resource = resource || s.embedded;
    let (Value::Object(m), Value::Object(written)) = (&mut *x, patch) else {
        return walk(Some(s), x, None, path, resource, pruned);
    };
    for (k, p) in written {
        if resource && META_FIELDS.contains(&k.as_str()) {
            continue;
        }
        let Some(child) = m.get_mut(k) else { continue };
        match s.property(k) {
            Some(ps) => merge_patched(ps, child, p, &path.child(k), false, pruned),
            None if s.keeps_unknown() => {}
            None => {
                pruned.push(path.child(k).to_string());
                m.remove(k);
            }
        }
    }
}

/// Prune a value below the root (a default), recording what it dropped.
pub(super) fn prune(s: &Schema, v: &mut Value, path: &Path, pruned: &mut Vec<String>) {
    walk(Some(s), v, None, path, false, pruned);
}

fn walk(
    s: Option<&Schema>,
    x: &mut Value,
    old: Option<&Value>,
    path: &Path,
    resource: bool,
    pruned: &mut Vec<String>,
) {
    if old.is_some_and(|o| o == x) {
        return;
    }
    let resource = resource || s.is_some_and(|s| s.embedded);
    if let Some(s) = s
        && s.keeps_unknown()
    {
        return keep_unknown(s, x, old, path, resource, pruned);
    }
    match x {
        Value::Object(m) => {
            let Some(s) = s else {
                pruned.extend(m.keys().map(|k| path.child(k).to_string()));
                m.clear();
                return;
            };
            m.retain(|k, v| {
                if resource && META_FIELDS.contains(&k.as_str()) {
                    return true;
                }
                match s.property(k) {
                    Some(p) => {
                        let o = old.and_then(|o| o.get(k));
                        walk(Some(p), v, o, &path.child(k), false, pruned);
                        true
                    }
                    None => {
                        pruned.push(path.child(k).to_string());
                        false
                    }
                }
            });
        }
        Value::Array(items) => {
            let item = s.and_then(|s| s.items.as_deref());
            for (i, v) in items.iter_mut().enumerate() {
                let o = old.and_then(|o| o.get(i));
                walk(item, v, o, &path.index(i), false, pruned);
            }
        }
        _ => {}
    }
}

/// Under `x-kubernetes-preserve-unknown-fields`: declared fields are
/// pruned inside, the rest kept as they are.
fn keep_unknown(
    s: &Schema,
    x: &mut Value,
    old: Option<&Value>,
    path: &Path,
    resource: bool,
    pruned: &mut Vec<String>,
) {
    match x {
        Value::Object(m) => {
            for (k, v) in m.iter_mut() {
                if resource && META_FIELDS.contains(&k.as_str()) {
                    continue;
                }
                if let Some(p) = s.property(k) {
                    let o = old.and_then(|o| o.get(k));
                    walk(Some(p), v, o, &path.child(k), false, pruned);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = s.items.as_deref() {
                for (i, v) in items.iter_mut().enumerate() {
                    let o = old.and_then(|o| o.get(i));
                    keep_unknown(item, v, o, &path.index(i), false, pruned);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::schema::compile;

    fn prune_obj(schema: Value, mut obj: Value) -> (Value, Vec<String>) {
        let s = compile(&schema, &Path::new("s")).unwrap();
        let pruned = s.prune(&mut obj);
        s.default_changed(&mut obj, None);
        (obj, pruned)
    }

    #[test]
    fn unknown_fields_are_dropped_and_named() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "a": {"type": "string"},
                "l": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "string"}}}},
                "m": {"type": "object", "additionalProperties": {"type": "object", "properties": {"x": {"type": "integer"}}}},
            }},
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
        }});
        let obj = json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "w"},
            "spec": {"a": "1", "b": 2, "l": [{"n": "x", "z": 1}], "m": {"k": {"x": 1, "y": 2}}},
            "status": {"ready": true, "observedGenerationTypo": 3},
            "extra": {}});
        let (obj, pruned) = prune_obj(schema, obj);
        assert_eq!(
            obj,
            json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "w"},
                "spec": {"a": "1", "l": [{"n": "x"}], "m": {"k": {"x": 1}}},
                "status": {"ready": true}})
        );
        assert_eq!(
            pruned,
            [
                "extra",
                "spec.b",
                "spec.l[0].z",
                "spec.m.k.y",
                "status.observedGenerationTypo"
            ]
        );
    }

    #[test]
    fn preserved_and_embedded_fields_stay() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                     "properties": {"known": {"type": "object", "properties": {"a": {"type": "string"}}}}},
            "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                         "properties": {"spec": {"type": "object", "properties": {"x": {"type": "string"}}}}},
        }});
        let obj = json!({"spec": {"free": {"any": [1]}, "known": {"a": "x", "b": "y"}},
            "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                         "spec": {"x": "1", "y": "2"}}});
        let (obj, pruned) = prune_obj(schema, obj);
        assert_eq!(
            obj,
            json!({"spec": {"free": {"any": [1]}, "known": {"a": "x"}},
                "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                             "spec": {"x": "1"}}})
        );
        assert_eq!(pruned, ["spec.known.b", "template.spec.y"]);
    }

    #[test]
    fn walking_only_what_changed_finds_the_same_unknown_fields() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "a": {"type": "string"},
                "o": {"type": "object", "properties": {"x": {"type": "integer"}}}}}}});
        let s = compile(&schema, &Path::new("s")).unwrap();
        let old = json!({"metadata": {"name": "w", "resourceVersion": "5"},
            "spec": {"a": "1", "o": {"x": 1}}});
        // A merge patch adding a known and an unknown field, deep and shallow.
        let patch = json!({"spec": {"o": {"x": 2, "y": 3}, "b": true}});
        let mut patched = old.clone();
        json_patch::merge(&mut patched, &patch);
        let (mut full, mut guided, mut changed) =
            (patched.clone(), patched.clone(), patched.clone());
        let all = s.prune(&mut full);
        assert_eq!(all, ["spec.b", "spec.o.y"]);
        assert_eq!(s.prune_merge_patched(&mut guided, &patch), all);
        assert_eq!(s.prune_changed(&mut changed, &old), all);
        assert_eq!(guided, full);
        assert_eq!(changed, full);
    }
}
