//! Patch application: RFC 6902 JSON patch, RFC 7386 merge patch, Kubernetes
//! strategic merge patch and (approximate) server-side apply with
//! `metadata.managedFields` bookkeeping.
//!
//! Every entry point works on `serde_json::Value` trees and never panics on
//! malformed input: failures are reported through [`PatchError`], whose
//! variants map one-to-one onto the HTTP status the API server answers with.

mod apply;
mod strategic;

pub use apply::{record_update, server_side_apply};
pub use strategic::apply_strategic_merge_patch;

use serde_json::Value;

/// Largest number of operations accepted in one JSON patch (the same limit
/// kube-apiserver enforces).
const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// Deepest nesting a JSON or merge patch may produce (the strategic merge and
/// server-side apply code refuses to walk deeper, see `strategic::MAX_DEPTH`).
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
    /// Server-side apply conflict with another field manager: the server answers 409.
    #[error("{0}")]
    Conflict(String),
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
    pub fn content_type(self) -> &'static str {
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
    match json_patch::patch_unsafe(&mut work, &patch.0) {
        Ok(()) => {
            check_depth(&work)?;
            *target = work;
            Ok(())
        }
        Err(e) => Err(json_patch_error(&patch, &e)),
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
    let patch: Value = serde_json::from_slice(body)
        .map_err(|e| PatchError::Malformed(format!("invalid JSON merge patch: {e}")))?;
    if !patch.is_object() {
        return Err(PatchError::Malformed(
            "merge patch body must be a JSON object".to_string(),
        ));
    }
    let mut work = target.clone();
    json_patch::merge(&mut work, &patch);
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
