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
                        prune(s, child, path, out);
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
                prune(item, child, path, out);
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
}
