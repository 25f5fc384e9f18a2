//! Defaulting, as apiextensions does it on decode: a `null` the schema
//! does not allow and has no default for is dropped; then a property that
//! is missing (or a `null` that is not allowed) takes its schema's
//! `default`, in every object that exists (a default never creates its
//! parent), every list item and every map value, and the defaulted value
//! is walked in turn, so defaults nest.

use serde_json::Value;

use super::node::Schema;

/// Default `x` by `s`; what equals `old` (stored, and defaulted then by
/// the same schema) is left as it is.
pub(super) fn apply(s: &Schema, x: &mut Value, old: Option<&Value>) {
    apply_at(s, x, old, true);
}

fn apply_at(s: &Schema, x: &mut Value, old: Option<&Value>, root: bool) {
    // The root is not compared as a whole (an update's object differs, and
    // comparing would walk its metadata); its fields are.
    if (!s.has_defaults && !has_non_nullable(s)) || (!root && old.is_some_and(|o| o == x)) {
        return;
    }
    match x {
        Value::Object(m) => {
            m.retain(|k, v| {
                !(v.is_null()
                    && s.property(k)
                        .is_some_and(|p| !p.nullable && p.default.is_none()))
            });
            for (k, p) in &s.properties {
                if let Some(d) = &p.default {
                    let missing = m.get(k).is_none_or(|v| v.is_null() && !p.nullable);
                    if missing {
                        m.insert(k.clone(), d.clone());
                    }
                }
            }
            for (k, v) in m.iter_mut() {
                if let Some(p) = s.property(k) {
                    if v.is_null()
                        && !p.nullable
                        && let Some(d) = &p.default
                    {
                        *v = d.clone();
                    }
                    apply_at(p, v, old.and_then(|o| o.get(k)), false);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = s.items.as_deref() {
                for v in items.iter_mut() {
                    if v.is_null()
                        && !item.nullable
                        && let Some(d) = &item.default
                    {
                        *v = d.clone();
                    }
                    apply_at(item, v, None, false);
                }
            }
        }
        _ => {}
    }
}

/// Whether anything directly below `s` could hold a `null` to drop.
fn has_non_nullable(s: &Schema) -> bool {
    !s.properties.is_empty() || s.additional.is_some()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::schema::{Path, compile};

    #[test]
    fn defaults_fill_what_is_missing_inside_what_exists() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer", "default": 1},
                "mode": {"type": "string", "default": "fast"},
                "opt": {"type": "object", "properties": {"x": {"type": "integer", "default": 7}}},
                "withDefault": {"type": "object", "default": {}, "properties": {"y": {"type": "integer", "default": 9}}},
                "ports": {"type": "array", "items": {"type": "object", "properties": {
                    "protocol": {"type": "string", "default": "TCP"}, "port": {"type": "integer"}}}},
                "nullable": {"type": "string", "nullable": true, "default": "d"},
                "plain": {"type": "string"},
            }},
        }});
        let s = compile(&schema, &Path::new("s")).unwrap();
        let mut obj = json!({"spec": {"mode": "slow", "ports": [{"port": 80}, {"port": 81, "protocol": "UDP"}],
            "nullable": null, "plain": null}});
        s.default_changed(&mut obj, None);
        assert_eq!(
            obj,
            json!({"spec": {"replicas": 1, "mode": "slow", "withDefault": {"y": 9},
                "ports": [{"port": 80, "protocol": "TCP"}, {"port": 81, "protocol": "UDP"}],
                "nullable": null}})
        );
        // No spec: nothing is created under it.
        let mut empty = json!({"metadata": {"name": "x"}});
        s.default_changed(&mut empty, None);
        assert_eq!(empty, json!({"metadata": {"name": "x"}}));
    }
}
