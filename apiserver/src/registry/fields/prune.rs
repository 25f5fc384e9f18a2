//! Dropping the fields a built-in kind does not have from a decoded object,
//! as decoding into Go structs drops them, with their paths as
//! sigs.k8s.io/json reports them (`spec.template.spec.containers[0].imagePullPolcy`,
//! `metadata.labels` entries by key: `.key`).

use serde_json::Value;

use super::shape::Shape;

/// Drop from `v` (at `shape`) every key its schema does not have, and add
/// each dropped key's path to `out`, objects' keys in the map's order
/// (sorted, as Go marshals a map).
pub(crate) fn prune(shape: Shape, v: &mut Value, path: &mut String, out: &mut Vec<String>) {
    prune_changed(shape, v, None, path, out);
}

/// [`prune`] of an object a JSON merge patch `patch` was applied to (a
/// stored object, pruned when it was written): only what the patch wrote
/// is walked — its keys, and whole values where it replaced them.
pub(crate) fn prune_merge_patched(
    shape: Shape,
    v: &mut Value,
    patch: &Value,
    path: &mut String,
    out: &mut Vec<String>,
) {
    let (Value::Object(map), Value::Object(written)) = (&mut *v, patch) else {
        return prune(shape, v, path, out);
    };
    let Some(keys) = shape.keys() else { return };
    let len = path.len();
    for (k, p) in written {
        // Gone (a null in the patch) or never there.
        let Some(child) = map.get_mut(k) else {
            continue;
        };
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(k);
        match keys.get(k) {
            Some(s) => prune_merge_patched(s, child, p, path, out),
            None => {
                out.push(path.clone());
                map.remove(k);
            }
        }
        path.truncate(len);
    }
}

/// [`prune`], not walking what equals `old` (the stored value at the same
/// place, pruned when it was written).
pub(crate) fn prune_changed(
    shape: Shape,
    v: &mut Value,
    old: Option<&Value>,
    path: &mut String,
    out: &mut Vec<String>,
) {
    if old.is_some_and(|o| o == v) {
        return;
    }
    match v {
        Value::Object(map) => {
            let Some(keys) = shape.keys() else { return };
            let len = path.len();
            map.retain(|k, child| {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                let keep = match keys.get(k) {
                    Some(s) => {
                        prune_changed(s, child, old.and_then(|o| o.get(k)), path, out);
                        true
                    }
                    None => {
                        out.push(path.clone());
                        false
                    }
                };
                path.truncate(len);
                keep
            });
        }
        Value::Array(items) => {
            let item = shape.item();
            if item.keys().is_none() {
                return;
            }
            let len = path.len();
            for (i, child) in items.iter_mut().enumerate() {
                path.push('[');
                path.push_str(&i.to_string());
                path.push(']');
                prune_changed(item, child, old.and_then(|o| o.get(i)), path, out);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(api_version: &str, kind: &str, mut v: Value) -> (Value, Vec<String>) {
        let mut out = Vec::new();
        let shape = Shape::of_kind(api_version, kind).unwrap();
        prune(shape, &mut v, &mut String::new(), &mut out);
        (v, out)
    }

    #[test]
    fn unknown_fields_are_dropped_with_kube_paths() {
        let (v, out) = run(
            "apps/v1",
            "Deployment",
            json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "d", "labels": {"a": "b"}, "bogus": 1},
                "spec": {"replica": 2, "template": {"spec": {"containers": [
                    {"name": "c", "image": "i"},
                    {"name": "d", "imagePullPolcy": "Always", "resources": {"limits": {"cpu": "1"}}}
                ]}}}
            }),
        );
        assert_eq!(
            out,
            [
                "metadata.bogus",
                "spec.replica",
                "spec.template.spec.containers[1].imagePullPolcy"
            ]
        );
        assert_eq!(v["metadata"], json!({"name": "d", "labels": {"a": "b"}}));
        assert!(v["spec"].get("replica").is_none());
        assert_eq!(
            v["spec"]["template"]["spec"]["containers"][1]["resources"]["limits"]["cpu"],
            "1"
        );
    }

    #[test]
    fn map_values_of_messages_are_checked_raw_extensions_are_not() {
        let (_, out) = run(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"n": {"x-kubernetes-int-or-string": true, "default": {"any": 1}}},
                "additionalProperties": false
            }}}]}}),
        );
        assert!(out.is_empty(), "{out:?}");
        let (_, out) = run(
            "v1",
            "ConfigMap",
            json!({"data": {"k": "v"}, "binaryData": {"b": "AA=="}, "immutable": true, "x": null}),
        );
        assert_eq!(out, ["x"]);
    }

    #[test]
    fn walking_only_what_a_patch_wrote_finds_the_same_unknown_fields() {
        let shape = Shape::of_kind("v1", "ConfigMap").unwrap();
        let old = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": {"a": "b"}}, "data": {"k": "v"}});
        let patch = json!({"metadata": {"labels": {"c": "d"}, "lables": {"x": "y"}},
            "data": {"k": null, "j": "w"}, "dta": {}});
        let mut patched = old.clone();
        json_patch::merge(&mut patched, &patch);
        let (mut full, mut guided, mut changed) = (patched.clone(), patched.clone(), patched);
        let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
        prune(shape, &mut full, &mut String::new(), &mut a);
        prune_merge_patched(shape, &mut guided, &patch, &mut String::new(), &mut b);
        prune_changed(shape, &mut changed, Some(&old), &mut String::new(), &mut c);
        assert_eq!(a, ["dta", "metadata.lables"]);
        assert_eq!((&b, &c), (&a, &a));
        assert_eq!((&guided, &changed), (&full, &full));
    }
}
