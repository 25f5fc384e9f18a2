//! Which objects a list or watch returns: namespace, label selector, field
//! selector, shard selector.

use serde_json::Value;

use crate::machinery::selector::{FieldSelector, LabelSelector};
use crate::machinery::shard::{ShardField, ShardSelector};
use crate::machinery::status::ApiError;
use crate::registry::resources::ResourceInfo;
use crate::storage::store::StoredObject;

/// A list/watch filter.
#[derive(Debug, Clone, Default)]
pub struct ObjectFilter {
    /// Only this namespace (None = all namespaces).
    pub namespace: Option<String>,
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `shardSelector` (KEP-5866), when the server serves it.
    pub shard: Option<ShardSelector>,
    /// The custom resource's selectable fields `fields` names: read from
    /// each object's JSON (built-in kinds' are indexed as stored).
    pub custom_fields: Vec<String>,
    /// A built-in kind served from another group's storage: `fields`
    /// names its fields, the stored objects are indexed by that group's
    /// (`regarding.name` is `involvedObject.name`).
    pub stored_in: Option<crate::conversion::Builtin>,
}

impl ObjectFilter {
    /// Build from query parameters, rejecting selectors that do not parse
    /// and field selectors on fields this kind does not support (400).
    pub fn new(
        info: &ResourceInfo,
        namespace: Option<String>,
        label_selector: Option<&str>,
        field_selector: Option<&str>,
    ) -> Result<Self, ApiError> {
        let labels = LabelSelector::parse(label_selector.unwrap_or(""))
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        let fields = FieldSelector::parse(field_selector.unwrap_or(""))
            .map_err(|e| ApiError::bad_request(format!("invalid field selector: {e}")))?;
        let extra = info.strategy.selectable_fields();
        let mut custom_fields = Vec::new();
        for f in fields.fields() {
            if info.selectable_fields.iter().any(|c| c == f) {
                if !custom_fields.iter().any(|c| c == f) {
                    custom_fields.push(f.to_string());
                }
                continue;
            }
            let ok = matches!(f, "metadata.name" | "metadata.namespace") || extra.contains(&f);
            if !ok {
                return Err(ApiError::bad_request(unsupported_field(info, f)));
            }
        }
        Ok(ObjectFilter {
            namespace,
            labels,
            fields,
            shard: None,
            custom_fields,
            stored_in: info.conversion.as_ref().and_then(|c| c.builtin),
        })
    }

    /// Whether `o` passes.
    #[must_use]
    pub fn matches(&self, o: &StoredObject) -> bool {
        if let Some(ns) = &self.namespace
            && ns != o.namespace()
        {
            return false;
        }
        // A custom resource's fields, read once per object (as
        // kube-apiserver formats them: strings as they are, integers in
        // decimal, booleans `true`/`false`, absent ones "").
        let custom: Vec<(&str, String)> = if self.custom_fields.is_empty() {
            Vec::new()
        } else {
            let v = o.value();
            let text = |label: &str| match label.split('.').fold(&v, |at, name| &at[name]) {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => String::new(),
            };
            (self.custom_fields.iter())
                .map(|f| (f.as_str(), text(f)))
                .collect()
        };
        let custom_field = |f: &str| {
            custom
                .iter()
                .find(|(k, _)| *k == f)
                .map(|(_, v)| v.as_str())
        };
        self.labels.matches(|k| o.label(k))
            && self.fields.matches(|f| match self.stored_in {
                Some(b) => o.field(b.stored_field_label(f)),
                None => custom_field(f).or_else(|| o.field(f)),
            })
            && self.shard.as_ref().is_none_or(|s| match s.field() {
                ShardField::Uid => s.matches_hash(crate::machinery::shard::hash_display(o.uid)),
                ShardField::Namespace => s.matches_value(o.namespace()),
            })
    }
}

/// kube-apiserver's words for a field selector on a field the kind does
/// not select on: a built-in kind with selectable fields of its own has a
/// field label conversion that says `field label not supported`; the
/// others fall back to the default one, which names the two every kind has.
fn unsupported_field(info: &ResourceInfo, f: &str) -> String {
    if info.builtin && info.strategy.selectable_fields().is_empty() {
        format!(
            "{f:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        )
    } else {
        format!("field label not supported: {f}")
    }
}
