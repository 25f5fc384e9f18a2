//! Patch application: RFC 6902 JSON patch, RFC 7386 merge patch, Kubernetes
//! strategic merge patch and (approximate) server-side apply with
//! `metadata.managedFields` bookkeeping.
//!
//! Every entry point works on `serde_json::Value` trees and never panics on
//! malformed input: failures are reported through [`PatchError`], whose
//! variants map one-to-one onto the HTTP status the API server answers with.
//!
//! (Over 800 lines only by its unit tests, which cover every patch type's
//! edge cases against the real server's answers; the code is 235 lines.)

mod added;
mod apply;
mod fieldset;
mod managed_fields;
mod path;
mod scale;
mod strategic;

pub use apply::{ApplyOptions, parse_applied, server_side_apply};
pub use managed_fields::{record_update, tracks_update, untimed};
pub use scale::apply_to_scale;
pub use strategic::apply_strategic_merge_patch;
pub(crate) use strategic::{ListStrategy, named_strategy};

use serde_json::Value;

/// Largest number of operations accepted in one JSON patch (the same limit
/// kube-apiserver enforces).
const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// Deepest nesting a JSON or merge patch may produce (the strategic merge and
/// server-side apply code refuses to walk deeper, see `path::MAX_DEPTH`).
const MAX_OBJECT_DEPTH: usize = 128;

/// Why a patch could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The body is not valid JSON / YAML for this patch type: the server answers 400.
    #[error("{0}")]
    Malformed(String),
    /// A JSON-patch `test` operation failed: the server answers 422.
    #[error("{0}")]
    TestFailed(String),
    /// The patch is well formed but cannot be applied (path missing for
    /// remove/replace, wrong type, bad `$patch` directive, …): the server answers 422.
    #[error("{0}")]
    Invalid(String),
    /// Server-side apply conflict with another field manager: the server
    /// answers 409, with a cause per conflicting field.
    #[error("{message}")]
    Conflict {
        /// `Apply failed with 1 conflict: conflict with "a": .spec.x`.
        message: String,
        /// Each field in conflict and whom with.
        causes: Vec<ConflictCause>,
    },
}

/// One field of a server-side apply conflict: kube-apiserver's
/// `FieldManagerConflict` cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConflictCause {
    /// The field (`.spec.replicas`).
    pub field: String,
    /// `conflict with "kubectl" using apps/v1`.
    pub message: String,
}

/// The patch flavour selected by the request's `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

impl PatchKind {
    /// Maps a request `Content-Type` to a patch kind, ignoring parameters such
    /// as `; charset=utf-8`, surrounding whitespace and letter case. Only the
    /// YAML flavour of apply is accepted (no `application/apply-patch+cbor`).
    pub fn from_content_type(ct: &str) -> Option<PatchKind> {
        let essence = ct.split(';').next().unwrap_or("").trim();
        match essence.to_ascii_lowercase().as_str() {
            "application/json-patch+json" => Some(PatchKind::Json),
            "application/merge-patch+json" => Some(PatchKind::Merge),
            "application/strategic-merge-patch+json" => Some(PatchKind::Strategic),
            "application/apply-patch+yaml" => Some(PatchKind::Apply),
            _ => None,
        }
    }

    /// The canonical media type of this patch kind.
    #[cfg(test)]
    pub(crate) fn content_type(self) -> &'static str {
        match self {
            PatchKind::Json => "application/json-patch+json",
            PatchKind::Merge => "application/merge-patch+json",
            PatchKind::Strategic => "application/strategic-merge-patch+json",
            PatchKind::Apply => "application/apply-patch+yaml",
        }
    }
}

/// Applies an RFC 6902 JSON patch (`body` must be a JSON array of operations)
/// to `target`.
///
/// Atomic: on error `target` is left unchanged. A failed `test` operation
/// gives [`PatchError::TestFailed`] (`testing value /metadata/resourceVersion
/// failed: test failed`), a missing path for `remove`/`replace`/`add`/`move`/
/// `copy` gives [`PatchError::Invalid`], an unparsable body
/// [`PatchError::Malformed`]. More than 10 000 operations, or a result
/// nested deeper than 128 levels, are refused as [`PatchError::Invalid`].
pub fn apply_json_patch(target: &mut Value, body: &[u8]) -> Result<(), PatchError> {
    let patch: json_patch::Patch = serde_json::from_slice(body)
        .map_err(|e| PatchError::Malformed(format!("invalid JSON patch: {e}")))?;
    if patch.0.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(PatchError::Invalid(format!(
            "the allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
            patch.0.len()
        )));
    }
    let mut work = target.clone();
    for (i, op) in patch.0.iter().enumerate() {
        if let json_patch::PatchOperation::Test(t) = op
            && t.value.is_null()
        {
            test_null(&work, t.path.as_str())?;
            continue;
        }
        json_patch::patch_unsafe(&mut work, std::slice::from_ref(op)).map_err(|mut e| {
            e.operation = i;
            json_patch_error(&patch, &e)
        })?;
    }
    check_depth(&work)?;
    *target = work;
    Ok(())
}

/// A `test` of `null`, as kube-apiserver's json-patch runs it: a path whose
/// parent exists compares equal to `null` when the key is missing or holds
/// `null` (kube-runtime's `finalizer()` tests `/metadata/finalizers` against
/// `null` before adding the first one); a missing parent fails the test.
fn test_null(doc: &Value, path: &str) -> Result<(), PatchError> {
    let failed = || PatchError::TestFailed(format!("testing value {path} failed: test failed"));
    match doc.pointer(path) {
        Some(Value::Null) => Ok(()),
        Some(_) => Err(failed()),
        None => {
            let parent = path.rsplit_once('/').map_or("", |(p, _)| p);
            match doc.pointer(parent) {
                Some(Value::Object(_)) => Ok(()),
                _ => Err(PatchError::TestFailed(format!(
                    "test operation does not apply: is missing path: {path}"
                ))),
            }
        }
    }
}

/// Refuses results nested deeper than [`MAX_OBJECT_DEPTH`].
fn check_depth(v: &Value) -> Result<(), PatchError> {
    fn exceeds(v: &Value, budget: usize) -> bool {
        let Some(budget) = budget.checked_sub(1) else {
            return true;
        };
        match v {
            Value::Object(m) => m.values().any(|c| exceeds(c, budget)),
            Value::Array(a) => a.iter().any(|c| exceeds(c, budget)),
            _ => false,
        }
    }
    if exceeds(v, MAX_OBJECT_DEPTH) {
        return Err(PatchError::Invalid(format!(
            "the patched object nests deeper than {MAX_OBJECT_DEPTH} levels"
        )));
    }
    Ok(())
}

/// Translates a `json_patch` error into messages close to the ones the Go
/// json-patch library used by kube-apiserver produces.
fn json_patch_error(patch: &json_patch::Patch, e: &json_patch::PatchError) -> PatchError {
    use json_patch::{PatchErrorKind as K, PatchOperation as Op};
    let path = e.path.to_string();
    match patch.0.get(e.operation) {
        Some(Op::Test(_)) => {
            PatchError::TestFailed(format!("testing value {path} failed: test failed"))
        }
        _ if matches!(e.kind, K::TestFailed) => {
            PatchError::TestFailed(format!("testing value {path} failed: test failed"))
        }
        Some(Op::Remove(_)) => PatchError::Invalid(format!(
            "unable to remove nonexistent key: {path}: missing value"
        )),
        Some(Op::Replace(_)) => PatchError::Invalid(format!(
            "replace operation does not apply: doc is missing key: {path}: missing value"
        )),
        Some(Op::Add(_)) => PatchError::Invalid(format!(
            "add operation does not apply: doc is missing path: \"{path}\": missing value"
        )),
        Some(Op::Move(op)) => from_path_error("move", &op.from.to_string(), &path, &e.kind),
        Some(Op::Copy(op)) => from_path_error("copy", &op.from.to_string(), &path, &e.kind),
        None => PatchError::Invalid(format!("JSON patch failed: {e}")),
    }
}

fn from_path_error(
    op: &str,
    from: &str,
    path: &str,
    kind: &json_patch::PatchErrorKind,
) -> PatchError {
    use json_patch::PatchErrorKind as K;
    match kind {
        K::InvalidFromPointer => PatchError::Invalid(format!(
            "{op} operation does not apply: doc is missing from path: {from}: missing value"
        )),
        K::CannotMoveInsideItself => PatchError::Invalid(format!(
            "{op} operation does not apply: cannot move {from} into its own child {path}"
        )),
        _ => PatchError::Invalid(format!(
            "{op} operation does not apply: doc is missing destination path: {path}: missing value"
        )),
    }
}

/// Applies an RFC 7386 JSON merge patch. The body must be a JSON object
/// (as kube-apiserver requires), otherwise [`PatchError::Malformed`].
/// `null` values delete keys; arrays are replaced wholesale. Atomic; a result
/// nested deeper than 128 levels is refused as [`PatchError::Invalid`].
pub fn apply_merge_patch(target: &mut Value, body: &[u8]) -> Result<(), PatchError> {
    merge_parsed(target, &parse_merge_patch(body)?)
}

/// A JSON merge patch body, parsed: a JSON object, else
/// [`PatchError::Malformed`] as [`apply_merge_patch`] answers.
pub fn parse_merge_patch(body: &[u8]) -> Result<Value, PatchError> {
    let patch: Value = serde_json::from_slice(body)
        .map_err(|e| PatchError::Malformed(format!("invalid JSON merge patch: {e}")))?;
    if !patch.is_object() {
        return Err(PatchError::Malformed(
            "merge patch body must be a JSON object".to_string(),
        ));
    }
    Ok(patch)
}

/// [`apply_merge_patch`] of a patch [`parse_merge_patch`] parsed.
pub fn merge_parsed(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    // Every node of the result is a node of `target` or of `patch` at the
    // same path, so when neither is too deep the result is not either and
    // the patch can be merged in place.
    if check_depth(target).is_ok() && check_depth(patch).is_ok() {
        json_patch::merge(target, patch);
        return Ok(());
    }
    let mut work = target.clone();
    json_patch::merge(&mut work, patch);
    check_depth(&work)?;
    *target = work;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_types() {
        assert_eq!(
            PatchKind::from_content_type("application/json-patch+json"),
            Some(PatchKind::Json)
        );
        assert_eq!(
            PatchKind::from_content_type("application/merge-patch+json; charset=utf-8"),
            Some(PatchKind::Merge)
        );
        assert_eq!(
            PatchKind::from_content_type(" Application/Strategic-Merge-Patch+JSON "),
            Some(PatchKind::Strategic)
        );
        assert_eq!(
            PatchKind::from_content_type("application/apply-patch+yaml"),
            Some(PatchKind::Apply)
        );
        assert_eq!(
            PatchKind::from_content_type("application/apply-patch+cbor"),
            None
        );
        assert_eq!(PatchKind::from_content_type("application/json"), None);
        assert_eq!(PatchKind::from_content_type(""), None);
        for k in [
            PatchKind::Json,
            PatchKind::Merge,
            PatchKind::Strategic,
            PatchKind::Apply,
        ] {
            assert_eq!(PatchKind::from_content_type(k.content_type()), Some(k));
        }
    }

    #[test]
    fn json_patch_ops() {
        let mut v =
            json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"list": [1, 2]}});
        let body = br#"[
            {"op": "test", "path": "/metadata/name", "value": "a"},
            {"op": "add", "path": "/metadata/labels/y", "value": "2"},
            {"op": "replace", "path": "/metadata/labels/x", "value": "one"},
            {"op": "add", "path": "/spec/list/-", "value": 3},
            {"op": "remove", "path": "/spec/list/0"},
            {"op": "copy", "from": "/metadata/name", "path": "/spec/copied"},
            {"op": "move", "from": "/spec/copied", "path": "/spec/moved"}
        ]"#;
        apply_json_patch(&mut v, body).unwrap();
        assert_eq!(
            v,
            json!({"metadata": {"name": "a", "labels": {"x": "one", "y": "2"}},
                   "spec": {"list": [2, 3], "moved": "a"}})
        );
    }

    #[test]
    fn json_patch_test_of_null_is_kubernetes_test() {
        let cm =
            json!({"metadata": {"name": "a", "labels": null}, "data": {"k": "v"}, "list": [1]});
        // kube-runtime's finalizer(): the first finalizer of an object without any.
        let mut v = cm.clone();
        let first = br#"[{"op":"test","path":"/metadata/finalizers","value":null},
                         {"op":"add","path":"/metadata/finalizers","value":["x/y"]}]"#;
        apply_json_patch(&mut v, first).unwrap();
        assert_eq!(v["metadata"]["finalizers"], json!(["x/y"]));
        // Now it exists: the same test fails, nothing is written.
        let before = v.clone();
        let err = apply_json_patch(&mut v, first).unwrap_err();
        assert!(matches!(err, PatchError::TestFailed(_)), "{err:?}");
        assert_eq!(v, before);
        // A key holding null compares equal to null.
        let mut v = cm.clone();
        apply_json_patch(
            &mut v,
            br#"[{"op":"test","path":"/metadata/labels","value":null}]"#,
        )
        .unwrap();
        // A missing parent, or an index past an array's end, fails.
        for path in ["/spec/x", "/metadata/labels/x", "/list/3", "/data/k"] {
            let body = format!(r#"[{{"op":"test","path":"{path}","value":null}}]"#);
            let err = apply_json_patch(&mut v, body.as_bytes()).unwrap_err();
            assert!(matches!(err, PatchError::TestFailed(_)), "{path}: {err:?}");
        }
        // Earlier operations count: a test after the add sees the value.
        let mut v = cm.clone();
        let body = br#"[{"op":"add","path":"/metadata/finalizers","value":["x/y"]},
                        {"op":"test","path":"/metadata/finalizers","value":null}]"#;
        assert!(apply_json_patch(&mut v, body).is_err());
        assert_eq!(v, cm, "atomic");
    }

    #[test]
    fn json_patch_test_failure_is_atomic() {
        let orig = json!({"metadata": {"resourceVersion": "5"}, "a": 1});
        let mut v = orig.clone();
        let body = br#"[{"op":"replace","path":"/a","value":2},
                        {"op":"test","path":"/metadata/resourceVersion","value":"4"}]"#;
        let err = apply_json_patch(&mut v, body).unwrap_err();
        match err {
            PatchError::TestFailed(m) => {
                assert_eq!(
                    m,
                    "testing value /metadata/resourceVersion failed: test failed"
                )
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(v, orig);
    }

    #[test]
    fn json_patch_missing_paths_are_invalid() {
        let orig = json!({"a": {"b": 1}});
        for body in [
            &br#"[{"op":"remove","path":"/a/c"}]"#[..],
            br#"[{"op":"replace","path":"/x","value":1}]"#,
            br#"[{"op":"add","path":"/x/y","value":1}]"#,
            br#"[{"op":"move","from":"/nope","path":"/a/c"}]"#,
            br#"[{"op":"copy","from":"/nope","path":"/a/c"}]"#,
            br#"[{"op":"move","from":"/a","path":"/a/b/c"}]"#,
        ] {
            let mut v = orig.clone();
            let err = apply_json_patch(&mut v, body).unwrap_err();
            assert!(matches!(err, PatchError::Invalid(_)), "{err:?}");
            assert_eq!(v, orig);
        }
        let mut v = orig.clone();
        let err = apply_json_patch(&mut v, br#"[{"op":"remove","path":"/a/c"}]"#).unwrap_err();
        assert!(err.to_string().contains("/a/c"), "{err}");
    }

    #[test]
    fn json_patch_malformed() {
        let mut v = json!({});
        for body in [
            &b"{"[..],
            b"{}",
            b"[{\"op\":\"frobnicate\",\"path\":\"/a\"}]",
            b"[{\"op\":\"add\",\"path\":\"a\",\"value\":1}]",
            b"",
            b"null",
        ] {
            let err = apply_json_patch(&mut v, body).unwrap_err();
            assert!(matches!(err, PatchError::Malformed(_)), "{err:?}");
        }
        apply_json_patch(&mut v, b"[]").unwrap();
        assert_eq!(v, json!({}));
    }

    #[test]
    fn results_nested_too_deep_are_refused() {
        let mut v = json!({});
        let mut value = json!(1);
        for _ in 0..100 {
            value = json!([value]);
        }
        let add = json!([{"op": "add", "path": "/a", "value": value}]).to_string();
        apply_json_patch(&mut v, add.as_bytes()).unwrap();
        let mut path = String::from("/a");
        for _ in 0..99 {
            path.push_str("/0");
        }
        let add = json!([{"op": "add", "path": path, "value": value}]).to_string();
        let err = apply_json_patch(&mut v, add.as_bytes()).unwrap_err();
        assert!(matches!(err, PatchError::Invalid(_)), "{err:?}");
        let merge = json!({"b": {"c": value}}).to_string();
        apply_merge_patch(&mut v, merge.as_bytes()).unwrap();
        // A merge patch cannot deepen an object past the parser's limit, but
        // an already too deep target is refused rather than passed on.
        let mut too_deep = json!(1);
        for _ in 0..(MAX_OBJECT_DEPTH + 1) {
            too_deep = json!([too_deep]);
        }
        let mut t = json!({ "a": too_deep });
        let err = apply_merge_patch(&mut t, br#"{"b": 1}"#).unwrap_err();
        assert!(matches!(err, PatchError::Invalid(_)), "{err:?}");
        assert!(t.get("b").is_none());
        // ... unless the patch removes what is too deep.
        apply_merge_patch(&mut t, br#"{"a": null, "b": 1}"#).unwrap();
        assert_eq!(t, json!({"b": 1}));
    }

    #[test]
    fn merge_patch() {
        let mut v = json!({"a": {"b": 1, "c": 2}, "l": [1, 2], "d": "x"});
        apply_merge_patch(
            &mut v,
            br#"{"a": {"b": null, "e": 3}, "l": [3], "d": null}"#,
        )
        .unwrap();
        assert_eq!(v, json!({"a": {"c": 2, "e": 3}, "l": [3]}));
    }

    #[test]
    fn merge_patch_non_object_is_malformed() {
        let mut v = json!({"a": 1});
        for body in [&b"[1]"[..], b"\"x\"", b"null", b"3", b"{not json"] {
            let err = apply_merge_patch(&mut v, body).unwrap_err();
            assert!(matches!(err, PatchError::Malformed(_)), "{err:?}");
        }
        assert_eq!(v, json!({"a": 1}));
    }
}

#[cfg(test)]
mod apply_tests {
    //! End-to-end server-side apply and `record_update` scenarios through the
    //! public API (the field-set internals are unit-tested in apply.rs).
    use super::*;
    use serde_json::json;

    const NOW: &str = "2024-01-01T00:00:00Z";
    const LATER: &str = "2024-01-02T00:00:00Z";

    fn ssa(live: Option<&Value>, body: &str, mgr: &str, force: bool) -> Result<Value, PatchError> {
        let opts = ApplyOptions {
            name: "",
            manager: mgr,
            force,
            now: NOW,
            api_version: "apps/v1",
            kind: "Deployment",
            subresource: None,
        };
        server_side_apply(live, body.as_bytes(), &opts)
    }

    /// A Deployment named `web` with the given YAML `spec:` block (or other tail).
    fn deploy(tail: &str) -> String {
        format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\n{tail}")
    }

    /// `manager`'s managedFields entry of `obj`.
    pub(super) fn entry<'v>(obj: &'v Value, mgr: &str) -> Option<&'v Value> {
        let list = obj["metadata"]["managedFields"].as_array()?;
        list.iter().find(|e| e["manager"] == mgr)
    }

    /// `manager`'s fieldsV1 in `obj` (null when it has no entry).
    pub(super) fn fields(obj: &Value, mgr: &str) -> Value {
        entry(obj, mgr)
            .map(|e| e["fieldsV1"].clone())
            .unwrap_or_default()
    }

    fn conflict(res: Result<Value, PatchError>) -> String {
        match res {
            Err(PatchError::Conflict { message, .. }) => message,
            other => panic!("expected a conflict, got {other:?}"),
        }
    }

    const DEPLOY_V1: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web, tier: front}
  creationTimestamp: null
spec:
  replicas: 2
  template:
    spec:
      containers:
      - name: nginx
        image: nginx:1
        args: ["-g", "daemon off;"]
      - {name: sidecar, image: "side:1"}
"#;

    #[test]
    fn apply_create_from_yaml() {
        let obj = ssa(None, DEPLOY_V1, "kubectl", false).unwrap();
        assert_eq!(obj["metadata"]["name"], "web");
        assert!(
            obj["metadata"].get("creationTimestamp").is_none(),
            "null/server fields dropped"
        );
        assert_eq!(obj["spec"]["replicas"], 2);
        assert_eq!(
            obj["metadata"]["managedFields"].as_array().unwrap().len(),
            1
        );
        let e = entry(&obj, "kubectl").unwrap();
        assert_eq!(
            (&e["operation"], &e["apiVersion"], &e["time"]),
            (&json!("Apply"), &json!("apps/v1"), &json!(NOW))
        );
        assert_eq!(e["fieldsType"], "FieldsV1");
        assert!(e.get("subresource").is_none());
        let want = json!({"f:metadata": {"f:labels": {"f:app": {}, "f:tier": {}}},
            "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"nginx\"}": {".": {}, "f:name": {}, "f:image": {}, "f:args": {}},
                "k:{\"name\":\"sidecar\"}": {".": {}, "f:name": {}, "f:image": {}}}}}}});
        assert_eq!(e["fieldsV1"], want);
        // JSON is YAML too.
        let body =
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"k":"v"}}"#;
        let opts = ApplyOptions {
            name: "",
            manager: "m",
            force: false,
            now: NOW,
            api_version: "v1",
            kind: "ConfigMap",
            subresource: None,
        };
        let cm = server_side_apply(None, body.as_bytes(), &opts);
        assert_eq!(fields(&cm.unwrap(), "m"), json!({"f:data": {"f:k": {}}}));
    }

    #[test]
    fn apply_update_removes_fields_dropped_from_the_config() {
        let live = ssa(None, DEPLOY_V1, "kubectl", false).unwrap();
        let mut live2 = live.clone();
        live2["metadata"]["annotations"] = json!({"note": "x"});
        live2["status"] = json!({"replicas": 2});
        record_update(Some(&live), &mut live2, "controller", NOW, "apps/v1", None);
        let v2 = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, labels: {app: web}}\n\
            spec: {template: {spec: {containers: [{name: nginx, image: 'nginx:2'}]}}}\n";
        let obj = ssa(Some(&live2), v2, "kubectl", false).unwrap();
        assert_eq!(
            obj["metadata"]["labels"],
            json!({"app": "web"}),
            "tier dropped"
        );
        assert!(obj["spec"].get("replicas").is_none(), "replicas dropped");
        let containers = &obj["spec"]["template"]["spec"]["containers"];
        assert_eq!(
            containers,
            &json!([{"name": "nginx", "image": "nginx:2"}]),
            "sidecar, args"
        );
        assert_eq!(
            obj["metadata"]["annotations"],
            json!({"note": "x"}),
            "others' fields kept"
        );
        assert_eq!(obj["status"], json!({"replicas": 2}));
        let want = json!({"f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {"f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"nginx\"}": {".": {}, "f:name": {}, "f:image": {}}}}}}});
        assert_eq!(fields(&obj, "kubectl"), want);
        // The annotations it added are its own (`.`); status, a plain Go
        // struct, every Deployment has.
        let want = json!({"f:metadata": {"f:annotations": {".": {}, "f:note": {}}},
            "f:status": {"f:replicas": {}}});
        assert_eq!(fields(&obj, "controller"), want);
    }

    #[test]
    fn apply_keeps_dropped_fields_another_manager_owns() {
        let live = ssa(None, DEPLOY_V1, "a", false).unwrap();
        let live = ssa(Some(&live), &deploy("spec: {replicas: 2}"), "b", false).unwrap();
        let both = live["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(
            both.len(),
            2,
            "an equal value is shared ownership, not a conflict"
        );
        let obj = ssa(Some(&live), &deploy(""), "a", false).unwrap();
        assert_eq!(obj["spec"]["replicas"], 2, "still owned by b");
        assert!(obj["metadata"].get("labels").is_none());
        assert!(entry(&obj, "a").is_none(), "a owns nothing any more");
    }

    fn live_with_csa_owner() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "managedFields": [{
                "manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "v1",
                "time": NOW, "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:replicas": {}, "f:paused": {}}}}]},
            "spec": {"replicas": 1, "paused": false}})
    }

    #[test]
    fn apply_conflicts_without_force() {
        let live = live_with_csa_owner();
        let msg = conflict(ssa(
            Some(&live),
            &deploy("spec: {replicas: 3}"),
            "kubectl",
            false,
        ));
        let want = "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" \
            using v1: .spec.replicas";
        assert_eq!(msg, want);
        let body = deploy("spec: {replicas: 3, paused: true}");
        let msg = conflict(ssa(Some(&live), &body, "kubectl", false));
        let want = "Apply failed with 2 conflicts: conflicts with \"kubectl-client-side-apply\" \
            using v1:\n- .spec.paused\n- .spec.replicas";
        assert_eq!(msg, want);
        assert!(
            ssa(
                Some(&live),
                &deploy("spec: {replicas: 1}"),
                "kubectl",
                false
            )
            .is_ok()
        );
        // Inside a keyed list item, against an Apply manager.
        let live = ssa(None, DEPLOY_V1, "a", false).unwrap();
        let body = deploy("spec: {template: {spec: {containers: [{name: nginx, image: x}]}}}");
        let want = "Apply failed with 1 conflict: conflict with \"a\": \
            .spec.template.spec.containers[name=\"nginx\"].image";
        assert_eq!(conflict(ssa(Some(&live), &body, "b", false)), want);
    }

    #[test]
    fn apply_force_takes_ownership() {
        let live = live_with_csa_owner();
        let obj = ssa(Some(&live), &deploy("spec: {replicas: 3}"), "kubectl", true).unwrap();
        assert_eq!(obj["spec"]["replicas"], 3);
        let csa = "kubectl-client-side-apply";
        assert_eq!(fields(&obj, csa), json!({"f:spec": {"f:paused": {}}}));
        assert_eq!(
            fields(&obj, "kubectl"),
            json!({"f:spec": {"f:replicas": {}}})
        );
        let body = deploy("spec: {replicas: 4, paused: true}");
        let obj = ssa(Some(&obj), &body, "kubectl", true).unwrap();
        assert!(
            entry(&obj, csa).is_none(),
            "an entry left owning nothing is dropped"
        );
        assert_eq!(obj["spec"], json!({"replicas": 4, "paused": true}));
    }

    #[test]
    fn apply_to_status_subresource() {
        let live = ssa(None, DEPLOY_V1, "kubectl", false).unwrap();
        let body =
            deploy("spec: {replicas: 100}\nstatus: {conditions: [{type: Ready, status: 'True'}]}");
        let sub = Some("status");
        let opts = ApplyOptions {
            name: "",
            manager: "c",
            force: false,
            now: LATER,
            api_version: "apps/v1",
            kind: "Deployment",
            subresource: sub,
        };
        let res = server_side_apply(Some(&live), body.as_bytes(), &opts);
        let obj = res.unwrap();
        assert_eq!(obj["spec"]["replicas"], 2, "spec untouched through /status");
        assert_eq!(
            obj["status"]["conditions"],
            json!([{"type": "Ready", "status": "True"}])
        );
        let e = entry(&obj, "c").unwrap();
        assert_eq!(
            (&e["subresource"], &e["time"]),
            (&json!("status"), &json!(LATER))
        );
        let item = json!({".": {}, "f:type": {}, "f:status": {}});
        let want = json!({"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": item}}});
        assert_eq!(e["fieldsV1"], want);
        assert!(entry(&obj, "kubectl").unwrap().get("subresource").is_none());
    }

    #[test]
    fn apply_finalizers_and_custom_resource_lists() {
        let cm =
            |tail: &str| format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{tail}}}\n");
        let apply = |live: Option<&Value>, body: &str| {
            let opts = ApplyOptions {
                name: "",
                manager: "m",
                force: false,
                now: NOW,
                api_version: "v1",
                kind: "",
                subresource: None,
            };
            server_side_apply(live, body.as_bytes(), &opts).unwrap()
        };
        let obj = apply(None, &cm(", finalizers: [a, b]"));
        let want = json!({"f:metadata": {"f:finalizers": {"v:\"a\"": {}, "v:\"b\"": {}}}});
        assert_eq!(fields(&obj, "m"), want);
        let mut live = obj.clone();
        live["metadata"]["finalizers"] = json!(["a", "b", "other"]);
        let obj = apply(Some(&live), &cm(", finalizers: [a]"));
        assert_eq!(
            obj["metadata"]["finalizers"],
            json!(["a", "other"]),
            "unowned value kept"
        );
        // Lists whose items lack the table's key are atomic leaves.
        let w = "apiVersion: ex.com/v1\nkind: Widget\nmetadata: {name: w}\nspec:";
        let obj = apply(None, &format!("{w} {{env: [{{value: x}}], items: [1, 2]}}"));
        assert_eq!(
            fields(&obj, "m"),
            json!({"f:spec": {"f:env": {}, "f:items": {}}})
        );
        let obj = apply(Some(&obj), &format!("{w} {{env: [{{value: z}}]}}"));
        assert_eq!(obj["spec"], json!({"env": [{"value": "z"}]}));
    }

    #[test]
    fn apply_malformed_and_invalid_bodies() {
        for body in [
            "",
            "- a\n- b\n",
            "just a string",
            "kind: Deployment\nmetadata: {name: a}\n",
            "apiVersion: apps/v1\nmetadata: {name: a}\n",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {}\n",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: 5\n",
            "apiVersion: apps/v1\nkind: Pod\nmetadata: {name: a}\n",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a\n",
            "{\"apiVersion\": ",
        ] {
            let err = ssa(None, body, "m", false).unwrap_err();
            assert!(matches!(err, PatchError::Malformed(_)), "{body:?}: {err:?}");
        }
        let err = ssa(None, &deploy("spec: {$patch: replace}"), "m", false).unwrap_err();
        assert!(matches!(err, PatchError::Invalid(_)), "{err:?}");
        let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
        let err = ssa(None, &deploy(&format!("data: {deep}")), "m", false).unwrap_err();
        assert!(matches!(err, PatchError::Malformed(_)), "{err:?}");
    }

    #[test]
    fn odd_live_objects_do_not_panic() {
        let body = deploy("spec: {replicas: 3}");
        let garbage = json!({"metadata": {"managedFields": [1, {"manager": 5},
            {"manager": "x", "fieldsV1": [1]},
            {"manager": "y", "operation": "Update", "fieldsV1": {"f:spec": {"k:bad": {}, "f:replicas": {}}}}]},
            "spec": {"replicas": 1}});
        let odd = [
            json!(null),
            json!([1]),
            json!({"metadata": 5}),
            json!({"metadata": {"managedFields": "x"}}),
        ];
        for live in odd.into_iter().chain([garbage]) {
            assert_eq!(
                ssa(Some(&live), &body, "m", true).unwrap()["spec"]["replicas"],
                3
            );
            let mut new = live.clone();
            record_update(Some(&live), &mut new, "u", NOW, "v1", None);
            let mut scalar = json!(7);
            record_update(Some(&live), &mut scalar, "u", NOW, "v1", None);
            assert_eq!(scalar, json!(7));
        }
    }

    #[test]
    fn record_update_keyed_lists_then_apply_conflicts() {
        let live = ssa(None, DEPLOY_V1, "kubectl", false).unwrap();
        let mut edited = live.clone();
        let containers = &mut edited["spec"]["template"]["spec"]["containers"];
        containers[0]["image"] = json!("nginx:edited");
        containers
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "debug", "image": "busybox"}));
        record_update(
            Some(&live),
            &mut edited,
            "kubectl-edit",
            NOW,
            "apps/v1",
            None,
        );
        let want = json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {
            "k:{\"name\":\"nginx\"}": {"f:image": {}},
            "k:{\"name\":\"debug\"}": {".": {}, "f:name": {}, "f:image": {}}}}}}});
        assert_eq!(fields(&edited, "kubectl-edit"), want);
        let msg = conflict(ssa(Some(&edited), DEPLOY_V1, "kubectl", false));
        let want = "conflict with \"kubectl-edit\" using apps/v1: \
            .spec.template.spec.containers[name=\"nginx\"].image";
        assert!(msg.contains(want), "{msg}");
        // A client that clears managedFields starts a fresh list.
        let mut cleared = edited.clone();
        cleared["metadata"]["managedFields"] = json!([]);
        cleared["metadata"]["labels"]["new"] = json!("1");
        record_update(Some(&edited), &mut cleared, "me", NOW, "apps/v1", None);
        let list = cleared["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(
            list[0]["fieldsV1"],
            json!({"f:metadata": {"f:labels": {"f:new": {}}}})
        );
    }

    #[test]
    fn deep_objects_fit_a_small_stack() {
        // 147 levels (just under the walk limit) through every entry point on
        // a 512 KiB thread: far below tokio's 2 MiB, even in debug builds.
        let run = || {
            let mut live = json!(1);
            for _ in 0..49 {
                live = json!({ "containers": [{ "name": "n", "a": live }] });
            }
            live["metadata"] = json!({"name": "n"});
            let body = br#"{"apiVersion":"v1","kind":"X","metadata":{"name":"n"},
                "containers":[{"name":"n","x":1}]}"#;
            let opts = ApplyOptions {
                name: "",
                manager: "m",
                force: true,
                now: NOW,
                api_version: "v1",
                kind: "X",
                subresource: None,
            };
            let out = server_side_apply(Some(&live), body, &opts);
            let mut patched = live.clone();
            apply_strategic_merge_patch(&mut patched, body, "X").unwrap();
            let mut changed = live.clone();
            changed["containers"][0]["name"] = json!("z");
            record_update(Some(&live), &mut changed, "u", NOW, "v1", None);
            record_update(None, &mut live, "u", NOW, "v1", None);
            out.is_ok()
        };
        let thread = std::thread::Builder::new()
            .stack_size(512 * 1024)
            .spawn(run)
            .unwrap();
        assert!(thread.join().unwrap());
    }
}
