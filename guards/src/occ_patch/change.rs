//! Building the patch of one decision: the changes, the `test` ops that
//! pin what the decision saw, and the checks on them.

use json_patch::PatchOperation;
use serde_json::{Value, json};

use super::error::OccError;

/// A change's operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Add (a map key, or an array element; replaces an existing key).
    /// Missing parent maps are created.
    Add,
    /// Replace an existing value.
    Replace,
    /// Remove an existing value.
    Remove,
}

/// One change: an operation at a JSON pointer, with the new value.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The operation.
    pub op: Op,
    /// Where (a JSON pointer, e.g. `/data/47`; see [`json_pointer`]).
    pub path: String,
    /// The new value (ignored for [`Op::Remove`]).
    pub value: Value,
}

impl Change {
    fn new(op: Op, path: impl Into<String>, value: Value) -> Self {
        let path = path.into();
        Change { op, path, value }
    }

    /// Add `value` at `path`, creating the parent maps that are missing
    /// (or `null`) in the fresh object: the first entry of a map a type
    /// skips when empty (`skip_serializing_if = "BTreeMap::is_empty"`) is
    /// an ordinary add. A parent that exists but is not a map (or an array,
    /// for the last step) is [`OccError::Invalid`].
    #[must_use]
    pub fn add(path: impl Into<String>, value: Value) -> Self {
        Change::new(Op::Add, path, value)
    }

    /// Replace the value at `path` with `value`.
    #[must_use]
    pub fn replace(path: impl Into<String>, value: Value) -> Self {
        Change::new(Op::Replace, path, value)
    }

    /// Remove the value at `path`.
    #[must_use]
    pub fn remove(path: impl Into<String>) -> Self {
        Change::new(Op::Remove, path, Value::Null)
    }
}

/// A JSON pointer from unescaped tokens: `["metadata", "annotations",
/// "a/b"]` gives `/metadata/annotations/a~1b`.
#[must_use]
pub fn json_pointer<'a>(tokens: impl IntoIterator<Item = &'a str>) -> String {
    tokens
        .into_iter()
        .map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// What the patch tests besides the changed values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pins {
    /// Test `/metadata/resourceVersion`: any concurrent write conflicts.
    pub resource_version: bool,
    /// Test `/metadata/uid`: a same-named successor conflicts.
    pub uid: bool,
}

impl Default for Pins {
    fn default() -> Self {
        Pins {
            resource_version: true,
            uid: true,
        }
    }
}

/// Build the JSON patch for `changes` to `current` (the object as the
/// server returned it): `test` ops first — resourceVersion and uid per
/// `pins`, then the current value at each changed path (for an add to an
/// absent path: nothing when the rv is pinned, else the value of its
/// nearest existing ancestor) — then the changes, each add preceded by
/// `add {}` for the parent maps it needs that do not exist yet.
pub fn build_patch(
    current: &Value,
    changes: &[Change],
    pins: Pins,
) -> Result<json_patch::Patch, OccError> {
    let mut tests: Vec<Value> = Vec::new();
    let mut test = |path: &str, value: &Value| {
        if !tests.iter().any(|t| t["path"] == path) {
            tests.push(json!({"op": "test", "path": path, "value": value}));
        }
    };
    let meta = [
        (pins.resource_version, "/metadata/resourceVersion"),
        (pins.uid, "/metadata/uid"),
    ];
    for (on, path) in meta {
        match current.pointer(path) {
            _ if !on => {}
            Some(v @ Value::String(s)) if !s.is_empty() => test(path, v),
            _ => return Err(OccError::Invalid(format!("the object has no {path}"))),
        }
    }
    // The object as the ops so far leave it: where parents exist.
    let mut working = current.clone();
    let mut ops = Vec::new();
    for Change { op, path, value } in changes {
        let first = ops.len();
        if !path.starts_with('/') {
            return Err(OccError::Invalid(format!(
                "{path:?}: not a path into the object"
            )));
        }
        match (current.pointer(path), op) {
            (Some(v), _) => test(path, v),
            (None, Op::Add) => {
                let ancestor = nearest_ancestor(current, path);
                if !pins.resource_version {
                    test(ancestor, current.pointer(ancestor).unwrap_or(&Value::Null));
                }
                for missing in missing_parents(&working, path)? {
                    ops.push(json!({"op": "add", "path": missing, "value": {}}));
                }
            }
            (None, _) if working.pointer(path).is_some() => {}
            (None, op) => {
                let m = format!("{op:?} {path}: no such path in the fresh object");
                return Err(OccError::Invalid(m));
            }
        }
        ops.push(match op {
            Op::Add => json!({"op": "add", "path": path, "value": value}),
            Op::Replace => json!({"op": "replace", "path": path, "value": value}),
            Op::Remove => json!({"op": "remove", "path": path}),
        });
        let these: json_patch::Patch = serde_json::from_value(Value::Array(ops[first..].to_vec()))
            .map_err(|e| OccError::Invalid(e.to_string()))?;
        json_patch::patch(&mut working, &these.0)
            .map_err(|e| OccError::Invalid(format!("{op:?} {path}: {e}")))?;
    }
    tests.extend(ops);
    serde_json::from_value(Value::Array(tests)).map_err(|e| OccError::Invalid(e.to_string()))
}

/// The nearest proper ancestor of `path` that exists in `obj` (the root
/// `""` at worst).
fn nearest_ancestor<'p>(obj: &Value, path: &'p str) -> &'p str {
    let mut at = path;
    while let Some((parent, _)) = at.rsplit_once('/') {
        if obj.pointer(parent).is_some_and(|v| !v.is_null()) {
            return parent;
        }
        at = parent;
    }
    ""
}

/// The parent maps `path` needs that `obj` lacks (or holds as `null`),
/// shallowest first. An existing parent that is neither a map nor an array
/// (or an array above the last step) cannot be filled in: refused.
fn missing_parents(obj: &Value, path: &str) -> Result<Vec<String>, OccError> {
    let parent = path.rsplit_once('/').map_or("", |(p, _)| p);
    let mut missing = Vec::new();
    let mut at = parent;
    loop {
        match obj.pointer(at) {
            Some(Value::Object(_)) => break,
            Some(Value::Array(_)) if at == parent => break,
            None | Some(Value::Null) if !at.is_empty() => missing.push(at.to_string()),
            _ => {
                let m = format!("add {path}: {at:?} is not a map to add into");
                return Err(OccError::Invalid(m));
            }
        }
        at = at.rsplit_once('/').map_or("", |(p, _)| p);
    }
    missing.reverse();
    Ok(missing)
}

/// The paths a patch tests.
#[must_use]
pub fn tested_paths(patch: &json_patch::Patch) -> Vec<String> {
    patch
        .0
        .iter()
        .filter_map(|op| match op {
            PatchOperation::Test(t) => Some(t.path.as_str().to_string()),
            _ => None,
        })
        .collect()
}

/// Whether every `test` of `patch` holds on `obj` (what the server would say).
#[must_use]
pub fn tests_hold(patch: &json_patch::Patch, obj: &Value) -> bool {
    patch.0.iter().all(|op| match op {
        PatchOperation::Test(t) => obj.pointer(t.path.as_str()) == Some(&t.value),
        _ => true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> Value {
        json!({
            "metadata": {"name": "pool", "uid": "p1", "resourceVersion": "41"},
            "data": {"47": "default/web-2", "a/b": "x"}
        })
    }

    fn ops(p: &json_patch::Patch) -> Value {
        serde_json::to_value(p).unwrap()
    }

    #[test]
    fn tests_come_first_with_exact_values() {
        let p = build_patch(
            &pool(),
            &[
                Change::remove("/data/47"),
                Change::replace(json_pointer(["data", "a/b"]), json!("y")),
                Change::add("/data/48", json!("default/web-3")),
            ],
            Pins::default(),
        )
        .unwrap();
        assert_eq!(
            ops(&p),
            json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": "41"},
                {"op": "test", "path": "/metadata/uid", "value": "p1"},
                {"op": "test", "path": "/data/47", "value": "default/web-2"},
                {"op": "test", "path": "/data/a~1b", "value": "x"},
                {"op": "remove", "path": "/data/47"},
                {"op": "replace", "path": "/data/a~1b", "value": "y"},
                {"op": "add", "path": "/data/48", "value": "default/web-3"},
            ])
        );
        let mut applied = pool();
        json_patch::patch(&mut applied, &p.0).unwrap();
        assert_eq!(applied["data"], json!({"a/b": "y", "48": "default/web-3"}));
        assert!(tests_hold(&p, &pool()));
    }

    #[test]
    fn pins_are_optional() {
        let paths = |ch: Change, resource_version, uid| {
            let pins = Pins {
                resource_version,
                uid,
            };
            tested_paths(&build_patch(&pool(), &[ch], pins).unwrap())
        };
        let rm = || Change::remove("/data/47");
        assert_eq!(
            paths(rm(), true, false),
            ["/metadata/resourceVersion", "/data/47"]
        );
        assert_eq!(paths(rm(), false, false), ["/data/47"]);
        // Without the rv pin, an add to an absent key tests its parent...
        let add = |k| Change::add(format!("/data/{k}"), json!("z"));
        assert_eq!(paths(add("48"), false, true), ["/metadata/uid", "/data"]);
        assert_eq!(
            paths(add("48"), true, true),
            ["/metadata/resourceVersion", "/metadata/uid"]
        );
        // ...and an add over an existing key tests the old value.
        assert_eq!(paths(add("47"), false, false), ["/data/47"]);
    }

    #[test]
    fn impossible_changes_are_refused() {
        let bad = |ch: Change, pins| {
            matches!(build_patch(&pool(), &[ch], pins), Err(OccError::Invalid(_)))
        };
        let d = Pins::default();
        assert!(bad(Change::remove("/data/46"), d));
        assert!(bad(Change::replace("/data/46", json!(1)), d));
        assert!(bad(Change::add("/data/47/x", json!(1)), d), "into a string");
        assert!(bad(Change::add("/metadata/name/a/b", json!(1)), d));
        assert!(bad(Change::add("data/48", json!(1)), d));
        assert!(bad(Change::replace("", json!({})), d));
        let mut no_rv = pool();
        no_rv["metadata"]["resourceVersion"] = json!("");
        let res = build_patch(&no_rv, &[Change::remove("/data/47")], d);
        assert!(matches!(res, Err(OccError::Invalid(_))));
    }

    #[test]
    fn adds_create_missing_parent_maps() {
        let mut obj = pool();
        obj["spec"] = json!({"allocations": null});
        let changes = [
            Change::add("/spec/allocations/47", json!("default/web-2")),
            Change::add("/spec/allocations/48", json!("default/web-3")),
            Change::add("/status/ports/a/8080", json!(true)),
        ];
        let p = build_patch(&obj, &changes, Pins::default()).unwrap();
        assert_eq!(
            ops(&p),
            json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": "41"},
                {"op": "test", "path": "/metadata/uid", "value": "p1"},
                {"op": "add", "path": "/spec/allocations", "value": {}},
                {"op": "add", "path": "/spec/allocations/47", "value": "default/web-2"},
                {"op": "add", "path": "/spec/allocations/48", "value": "default/web-3"},
                {"op": "add", "path": "/status", "value": {}},
                {"op": "add", "path": "/status/ports", "value": {}},
                {"op": "add", "path": "/status/ports/a", "value": {}},
                {"op": "add", "path": "/status/ports/a/8080", "value": true},
            ])
        );
        let mut applied = obj.clone();
        json_patch::patch(&mut applied, &p.0).unwrap();
        assert_eq!(applied["spec"]["allocations"]["48"], "default/web-3");
        assert_eq!(applied["status"], json!({"ports": {"a": {"8080": true}}}));
        // Without the rv pin the nearest existing ancestor is tested.
        let pins = Pins {
            resource_version: false,
            uid: false,
        };
        let p = build_patch(&obj, &changes[..1], pins).unwrap();
        assert_eq!(tested_paths(&p), ["/spec"]);
        let p = build_patch(&obj, &changes[2..], pins).unwrap();
        assert_eq!(tested_paths(&p), [""]);
        // A later change may touch what an earlier one added.
        let p = build_patch(
            &obj,
            &[
                Change::add("/spec/allocations/47", json!("x")),
                Change::replace("/spec/allocations/47", json!("y")),
            ],
            Pins::default(),
        )
        .unwrap();
        let mut applied = obj.clone();
        json_patch::patch(&mut applied, &p.0).unwrap();
        assert_eq!(applied["spec"]["allocations"], json!({"47": "y"}));
    }

    #[test]
    fn a_changed_object_fails_the_tests() {
        let p = build_patch(&pool(), &[Change::remove("/data/47")], Pins::default()).unwrap();
        let mut moved = pool();
        moved["data"]["47"] = json!("default/web-9");
        moved["metadata"]["resourceVersion"] = json!("42");
        assert!(!tests_hold(&p, &moved));
        let mut target = moved.clone();
        assert!(json_patch::patch(&mut target, &p.0).is_err());
        assert_eq!(target, moved);
    }

    #[test]
    fn pointers_escape() {
        let annotation = [
            "metadata",
            "annotations",
            "k8s.v1.cni.cncf.io/network-status",
        ];
        let want = "/metadata/annotations/k8s.v1.cni.cncf.io~1network-status";
        assert_eq!(json_pointer(annotation), want);
        assert_eq!(json_pointer(["data", "47"]), "/data/47");
        assert_eq!(json_pointer(["a~b"]), "/a~0b");
        assert_eq!(json_pointer([]), "");
    }
}
