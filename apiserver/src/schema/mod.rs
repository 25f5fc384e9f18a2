//! Structural schemas of custom resources, as kube-apiserver's
//! apiextensions serves them: a CRD version's `openAPIV3Schema` is parsed
//! once, when the CRD is written ([`compile`], which rejects a schema
//! that is not structural with apiextensions' messages), and every write to
//! one of its objects is then
//!
//! 1. **pruned** ([`VersionSchema::prune`]): fields the schema does not declare are
//!    dropped (kept under `x-kubernetes-preserve-unknown-fields`; an
//!    `x-kubernetes-embedded-resource` keeps its `apiVersion`, `kind` and
//!    `metadata`), and their paths reported for `fieldValidation`;
//! 2. **defaulted** ([`VersionSchema::default_changed`]): a property the object lacks gets
//!    its schema `default`, inside objects that exist, in list items and
//!    map values; a `null` where the schema has a default or is not
//!    nullable is dropped first, as kube-apiserver does;
//! 3. **validated** ([`VersionSchema::validate`]): types and formats, `enum`,
//!    `pattern`, numeric and length bounds, `required`, `nullable`,
//!    `x-kubernetes-list-type` set/map uniqueness, `allOf`/`anyOf`/`oneOf`/
//!    `not`, each failure a [`FieldError`] worded as kube-apiserver words it
//!    (`spec.replicas: Invalid value: -1: spec.replicas in body should be
//!    greater than or equal to 0`); then the `x-kubernetes-validations` CEL
//!    rules ([`crate::schema::cel`], compiled with the schema; transition rules see
//!    the stored object's value as `oldSelf`), within one cost budget per
//!    request.
//!
//! The order is kube-apiserver's: pruning and defaulting happen as the
//! request body is decoded, validation after the registry's preparation.
//!
//! What is approximate (docs/apiserver.md says so too): `metadata` of the
//! object itself is not pruned here (its fields are ObjectMeta's, checked by
//! field validation); the formats checked are the common ones (`int32`,
//! `int64`, `float`, `double`, `byte`, `date`, `date-time`, `duration`,
//! `uuid`, `ipv4`, `ipv6`, `cidr`, `hostname`, `email`, `uri`), others
//! pass; `pattern` is compiled by the `regex` crate, whose syntax is RE2's
//! (Go's) but for a few Perl classes.

mod default;
mod error;
mod node;
mod parse;
mod prune;
mod structural;
mod validate;

pub mod cel;

use serde_json::Value;

pub use error::{FieldError, FieldErrorKind, Path, to_api_error};
pub use node::Schema;

/// The compiled schemas of one CRD version, shared by its served resource.
#[derive(Debug, Clone, Default)]
pub struct VersionSchema {
    /// The `openAPIV3Schema` as written in the CRD (served in /openapi).
    pub raw: Value,
    /// Its compiled root.
    pub root: Schema,
    /// The resourceVersion of the CRD that installed this schema: objects
    /// stored before it were not defaulted by it, and are on read
    /// ([`VersionSchema::defaults_on_read`]).
    pub since: u64,
}

impl PartialEq for VersionSchema {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
    }
}

impl Eq for VersionSchema {}

impl VersionSchema {
    /// Prune `obj` to the schema (a request body as it is decoded, for
    /// `fieldValidation`): the pruned paths, sorted.
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        let mut pruned = Vec::new();
        prune::prune_root(&self.root, obj, None, &mut pruned);
        pruned
    }

    /// Hand `f` the `metadata` of every embedded resource in `obj`
    /// (`x-kubernetes-embedded-resource`, where the schema places one),
    /// with its path (`spec.template.metadata`, `spec.list[0].metadata`).
    pub fn each_embedded_metadata(&self, obj: &mut Value, f: &mut dyn FnMut(&str, &mut Value)) {
        fn walk(s: &Schema, v: &mut Value, path: &str, f: &mut dyn FnMut(&str, &mut Value)) {
            let at = |k: &str| {
                if path.is_empty() {
                    k.to_string()
                } else {
                    format!("{path}.{k}")
                }
            };
            match v {
                Value::Object(m) => {
                    if s.embedded
                        && let Some(meta) = m.get_mut("metadata")
                    {
                        f(&at("metadata"), meta);
                    }
                    for (k, child) in m.iter_mut() {
                        if let Some(ps) = s.property(k) {
                            walk(ps, child, &at(k), f);
                        }
                    }
                }
                Value::Array(items) => {
                    if let Some(is) = &s.items {
                        for (i, item) in items.iter_mut().enumerate() {
                            walk(is, item, &format!("{path}[{i}]"), f);
                        }
                    }
                }
                _ => {}
            }
        }
        walk(&self.root, obj, "", f);
    }

    /// [`VersionSchema::prune`] of a patched object whose stored version
    /// is `old`, walking only what differs from it (when `old` was written
    /// under this schema, so pruned by it).
    pub fn prune_changed(&self, obj: &mut Value, old: &Value) -> Vec<String> {
        let mut pruned = Vec::new();
        let old = Some(old).filter(|o| self.wrote(o));
        prune::prune_root(&self.root, obj, old, &mut pruned);
        pruned
    }

    /// [`VersionSchema::prune`] of an object a JSON merge patch `patch`
    /// was applied to: only what the patch wrote is walked — unless the
    /// stored object predates this schema (the patched object keeps its
    /// resourceVersion), which is then pruned whole.
    pub fn prune_merge_patched(&self, obj: &mut Value, patch: &Value) -> Vec<String> {
        if !self.wrote(obj) {
            return self.prune(obj);
        }
        let mut pruned = Vec::new();
        prune::prune_merge_patched_root(&self.root, obj, patch, &mut pruned);
        pruned
    }

    /// Whether the stored object `old` was written under this schema
    /// (so it is pruned and defaulted by it).
    fn wrote(&self, old: &Value) -> bool {
        old["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|rv| rv.parse::<u64>().ok())
            .is_some_and(|rv| rv >= self.since)
    }

    /// Whether an object stored at resourceVersion `rv` must be defaulted
    /// when read: it was written before this schema (whose defaults it may
    /// lack), as kube-apiserver defaults what it reads from etcd. Objects
    /// written since were defaulted on write, so reading them costs
    /// nothing more.
    #[must_use]
    pub fn defaults_on_read(&self, rv: u64) -> bool {
        self.root.has_defaults && rv < self.since
    }

    /// Fill defaults of a written object whose stored version is `old` (an
    /// update): what is unchanged from `old`, stored under this schema, was
    /// defaulted then and is not walked again.
    pub fn default_changed(&self, obj: &mut Value, old: Option<&Value>) {
        // Also without defaults: a `null` that is not nullable is dropped.
        default::apply(&self.root, obj, old.filter(|o| self.wrote(o)));
    }

    /// Fill defaults only (what a read of a stored object does).
    pub fn default_only(&self, obj: &mut Value) {
        if self.root.has_defaults {
            default::apply(&self.root, obj, None);
        }
    }

    /// Validate `obj` (and, for an update, against the stored `old` one):
    /// every failure, in the schema's order. On an update a value equal
    /// to the stored one it corresponds to is not validated again
    /// (kube-apiserver's validation ratcheting, on by default since 1.30:
    /// an unchanged value passes even if a newer schema would refuse it),
    /// and transition rules see the stored value as `oldSelf`.
    #[must_use]
    pub fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        validate::validate_root(&self.root, obj, old, Vec::new())
    }

    /// [`VersionSchema::validate`], with `between`: the errors of checks
    /// kube-apiserver runs after the schema's and before the rules.
    #[must_use]
    pub(crate) fn validate_between(
        &self,
        obj: &Value,
        old: Option<&Value>,
        between: Vec<FieldError>,
    ) -> Vec<FieldError> {
        validate::validate_root(&self.root, obj, old, between)
    }
}

/// Parse a CRD version's `openAPIV3Schema` found at `path` (e.g.
/// `spec.versions[0].schema.openAPIV3Schema`): the compiled schema, or
/// every reason it is not a valid structural schema.
///
/// # Errors
/// The schema is not structural, uses what is not supported, or one of its
/// defaults, patterns or rules is invalid.
pub fn compile(raw: &Value, path: &Path) -> Result<VersionSchema, Vec<FieldError>> {
    let root = parse::parse_root(raw, path)?;
    Ok(VersionSchema {
        raw: raw.clone(),
        root,
        since: 0,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn embedded_resources_metadata_is_found_where_the_schema_puts_it() {
        let raw = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                "x-kubernetes-preserve-unknown-fields": true},
            "list": {"type": "array", "items": {"type": "object",
                "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}},
            "plain": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}});
        let schema = compile(&raw, &Path::new("schema")).unwrap();
        let mut obj = json!({"metadata": {"name": "root"}, "spec": {
            "template": {"metadata": {"name": "t"}},
            "list": [{"kind": "X"}, {"metadata": {"name": "l1"}}],
            "plain": {"metadata": {"name": "not a resource"}}}});
        let mut seen = Vec::new();
        schema.each_embedded_metadata(&mut obj, &mut |path, meta| {
            seen.push((path.to_string(), meta["name"].clone()));
        });
        assert_eq!(
            seen,
            [
                ("spec.list[1].metadata".to_string(), json!("l1")),
                ("spec.template.metadata".to_string(), json!("t")),
            ]
        );
    }
}
