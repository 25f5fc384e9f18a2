//! Unknown and duplicate fields in written objects, and what
//! `fieldValidation` makes of them.
//!
//! A real cluster decodes a built-in object into Go structs, so fields the
//! kind does not have are always dropped; `fieldValidation` only decides
//! what the client hears (kube-apiserver's `handlers/rest.go`):
//!
//! - `Strict`: the write fails — 400 BadRequest `strict decoding error:
//!   unknown field "spec.foo", duplicate field "..."` for a create or
//!   update body, 422 Invalid for a patch ([`FieldValidation`]);
//! - `Warn` (the default when the parameter is absent, as kube-apiserver
//!   since the feature went GA): the write succeeds and each problem comes
//!   back as a `Warning: 299 - "unknown field \"spec.foo\""` header;
//! - `Ignore`: silently dropped, and duplicates are not even looked for.
//!
//! Which fields a built-in kind has comes from the generated protobuf
//! field table (`proto/schema.rs`), walked by `shape`: the JSON names of
//! every message's fields, Go's embedded structs inlined, and the types
//! Go decodes on their own (Time, Quantity, IntOrString, RawExtension,
//! FieldsV1…) left unchecked inside, as kube-apiserver leaves them.
//! Custom resources: see [`prune_unknown`].

mod go_zero;
mod prune;
mod shape;
mod strict;
mod types;

use serde_json::Value;

use crate::registry::resources::ResourceInfo;
use shape::Shape;
pub(crate) use shape::has_type_meta;

/// Give a built-in object every plain struct its Go type has, `{}` where
/// absent, as kube-apiserver stores and answers it (a Deployment's
/// `status`, a container's `resources`); nothing for a custom resource.
pub fn write_plain_structs(info: &ResourceInfo, obj: &mut Value) {
    go_zero::write_plain_structs(&info.api_version(), &info.kind, obj);
}

/// The first field of a built-in object (`kind` in `api_version`) whose
/// JSON type its Go type cannot take, in Go's words (`json: cannot
/// unmarshal number into Go struct field ConfigMap.data of type string`);
/// None for a custom resource, or when every field fits.
#[must_use]
pub fn type_error(
    info: &ResourceInfo,
    api_version: &str,
    kind: &str,
    obj: &Value,
) -> Option<String> {
    if !info.builtin && kind == info.kind {
        return None;
    }
    types::type_error(Shape::of_kind(api_version, kind)?, obj)
}

/// What a write does with unknown and duplicate fields: the
/// `fieldValidation` query parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Drop them silently (duplicates are not looked for).
    Ignore,
    /// Drop them and answer a warning for each (the default).
    #[default]
    Warn,
    /// Refuse the write.
    Strict,
}

impl FieldValidation {
    /// The directive of a `fieldValidation` value: absent or empty is
    /// `Warn`; None for a value kube-apiserver refuses.
    #[must_use]
    pub fn parse(v: Option<&str>) -> Option<Self> {
        match v {
            None | Some("" | "Warn") => Some(FieldValidation::Warn),
            Some("Ignore") => Some(FieldValidation::Ignore),
            Some("Strict") => Some(FieldValidation::Strict),
            Some(_) => None,
        }
    }

    /// Whether problems are looked for (Strict and Warn; Ignore costs
    /// nothing).
    #[must_use]
    pub fn checks(self) -> bool {
        self != FieldValidation::Ignore
    }
}

/// Drop from `obj` every field `info`'s kind does not have, and return
/// their paths as kube reports them (`spec.template.spec.containers[0].imagePullPolcy`).
#[must_use]
pub fn prune_unknown(info: &ResourceInfo, obj: &mut Value) -> Vec<String> {
    if !info.builtin {
        // A custom resource: pruned by its CRD's structural schema.
        return info
            .schema
            .as_ref()
            .map(|s| s.prune(obj))
            .unwrap_or_default();
    }
    prune_kind(&info.api_version(), &info.kind, obj)
}

/// [`prune_unknown`] for a patched object `obj` whose stored version is
/// `old`: what is unchanged from `old` (which was pruned when it was
/// written) is not walked again, so a small patch of a large object costs
/// what the patch changed. The result is the same as `prune_unknown`'s
/// for any `old` stored by this server under the same schema.
#[must_use]
pub fn prune_changed(info: &ResourceInfo, obj: &mut Value, old: &Value) -> Vec<String> {
    if !info.builtin {
        return info
            .schema
            .as_ref()
            .map(|s| s.prune_changed(obj, old))
            .unwrap_or_default();
    }
    let mut out = Vec::new();
    if let Some(shape) = Shape::of_kind(&info.api_version(), &info.kind) {
        prune::prune_changed(shape, obj, Some(old), &mut String::new(), &mut out);
    }
    out
}

/// `prune_unknown` for an object a JSON merge patch `patch` was applied
/// to: only what the patch wrote is walked (the rest is the stored
/// object, pruned when it was written), so a small patch of a large
/// object costs the patch's size.
#[must_use]
pub fn prune_merge_patched(info: &ResourceInfo, obj: &mut Value, patch: &Value) -> Vec<String> {
    if !info.builtin {
        return info
            .schema
            .as_ref()
            .map(|s| s.prune_merge_patched(obj, patch))
            .unwrap_or_default();
    }
    let mut out = Vec::new();
    if let Some(shape) = Shape::of_kind(&info.api_version(), &info.kind) {
        prune::prune_merge_patched(shape, obj, patch, &mut String::new(), &mut out);
    }
    out
}

/// `prune_unknown` for an object of a built-in `kind` in `api_version`
/// (a subresource's body: a Scale, an Eviction); nothing for a kind the
/// table does not have.
#[must_use]
pub fn prune_kind(api_version: &str, kind: &str, obj: &mut Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(shape) = Shape::of_kind(api_version, kind) {
        prune::prune(shape, obj, &mut String::new(), &mut out);
    }
    out
}

/// The strict decoding errors of a written object, after dropping its
/// unknown fields from `obj` (decoded from the body): for a JSON body
/// (`json`), unknown and duplicate fields in the document's order, as
/// sigs.k8s.io/json reports them; otherwise (YAML, protobuf) the dropped
/// fields. Empty, and only the drop, under `Ignore`.
#[must_use]
pub fn object_errors(
    info: &ResourceInfo,
    api_version: &str,
    kind: &str,
    json: Option<&[u8]>,
    obj: &mut Value,
    directive: FieldValidation,
) -> Vec<String> {
    // A custom resource's own object is the CRD's business; a built-in
    // kind's (a Scale of a custom resource too) is the table's.
    let table = info.builtin || kind != info.kind;
    let pruned = if table {
        prune_kind(api_version, kind, obj)
    } else {
        prune_unknown(info, obj)
    };
    if !directive.checks() {
        return Vec::new();
    }
    match (
        json,
        table.then(|| Shape::of_kind(api_version, kind)).flatten(),
    ) {
        (Some(body), Some(shape)) => strict::strict_errors(shape, body),
        (Some(body), None) => {
            let mut errs = strict::strict_errors(Shape::Any, body);
            errs.extend(unknown(&pruned));
            errs
        }
        (None, _) => unknown(&pruned),
    }
}

/// The fields of a `metadata` (at `path`) that Go's `ObjectMeta` does not
/// have, dropped from it: what server-side apply's typed conversion
/// refuses in a custom resource, whose schema leaves the `metadata` of
/// its root and of its embedded resources to ObjectMeta.
#[must_use]
pub fn prune_object_meta(meta: &mut Value, path: &str) -> Vec<String> {
    use crate::machinery::proto::Ty;
    let mut out = Vec::new();
    let shape = Shape::Field(
        Ty::Message("apimachinery.pkg.apis.meta.v1.ObjectMeta"),
        false,
    );
    prune::prune(shape, meta, &mut path.to_string(), &mut out);
    out
}

/// `unknown field "path"` for each path.
#[must_use]
pub fn unknown(paths: &[String]) -> Vec<String> {
    paths
        .iter()
        .map(|p| format!("unknown field {}", Value::String(p.clone())))
        .collect()
}

/// The duplicate fields of a JSON patch body decoded as free JSON (a
/// merge or strategic merge patch), at any depth.
#[must_use]
pub fn patch_duplicates(body: &[u8]) -> Vec<String> {
    strict::strict_errors(Shape::Any, body)
}

/// The first duplicate key of an apply body (YAML, or JSON read as YAML)
/// as go-yaml reports it: `line 3: key "foo" already set in map`.
#[must_use]
pub fn yaml_duplicate(body: &[u8]) -> Option<String> {
    strict::yaml_duplicate(body)
}

/// The message of strict decoding errors: `strict decoding error: unknown
/// field "spec.foo", duplicate field "spec.bar"`.
#[must_use]
pub fn strict_message(errs: &[String]) -> String {
    format!("strict decoding error: {}", errs.join(", "))
}

#[cfg(test)]
mod tests {
    #[test]
    fn object_meta_keeps_only_its_fields() {
        let mut obj = serde_json::json!({"metadata": {"name": "a", "unknownMeta": 1,
            "labels": {"x": "y"}, "ownerReferences": [{"name": "o", "bogus": true}]}});
        assert_eq!(
            super::prune_object_meta(&mut obj["metadata"], "metadata"),
            ["metadata.ownerReferences[0].bogus", "metadata.unknownMeta"]
        );
        assert_eq!(
            obj,
            serde_json::json!({"metadata": {"name": "a", "labels": {"x": "y"},
                "ownerReferences": [{"name": "o"}]}})
        );
    }

    use super::*;

    #[test]
    fn directives_parse_as_kube_apiserver_reads_them() {
        assert_eq!(FieldValidation::parse(None), Some(FieldValidation::Warn));
        assert_eq!(
            FieldValidation::parse(Some("")),
            Some(FieldValidation::Warn)
        );
        assert_eq!(
            FieldValidation::parse(Some("Strict")),
            Some(FieldValidation::Strict)
        );
        assert_eq!(
            FieldValidation::parse(Some("Ignore")),
            Some(FieldValidation::Ignore)
        );
        assert_eq!(FieldValidation::parse(Some("strict")), None);
        assert!(!FieldValidation::Ignore.checks());
    }

    #[test]
    fn the_strict_message_joins_errors_as_apimachinery_does() {
        let errs = [
            r#"unknown field "spec.foo""#.to_string(),
            r#"duplicate field "spec.bar""#.to_string(),
        ];
        assert_eq!(
            strict_message(&errs),
            r#"strict decoding error: unknown field "spec.foo", duplicate field "spec.bar""#
        );
    }
}
