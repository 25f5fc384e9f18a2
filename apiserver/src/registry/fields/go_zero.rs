//! The zero values Go's JSON always writes: a built-in object as
//! kube-apiserver stores and answers it has each plain (non-pointer)
//! struct field of its Go type, `{}` when empty (omitempty never leaves a
//! struct out): a Deployment's `status`, a container's `resources`; each
//! plain scalar without omitempty, at its zero (`""`, `0`, `false`: an
//! Event's `reportingComponent`, a DaemonSet's `status.numberReady`); and
//! each Time without omitempty, `null` (an Event's `eventTime`). Which
//! fields those are comes from the generated protobuf table
//! (`Field::plain_struct`, `Field::always`); the other types Go writes on
//! their own (Quantity, IntOrString…) are left as they are.

use serde_json::{Map, Value};

use super::shape::object_message;
use crate::machinery::proto::{Message, Ty, message_of_kind};

/// Give `obj` (of `kind` in `api_version`) every plain struct its Go type
/// has, at every depth: `{}` where absent. Nothing for a kind the table
/// does not have (a custom resource).
pub(crate) fn write_plain_structs(api_version: &str, kind: &str, obj: &mut Value) {
    if let (Some(msg), Some(m)) = (message_of_kind(api_version, kind), obj.as_object_mut()) {
        fill(msg, m);
    }
}

fn fill(msg: &'static Message, obj: &mut Map<String, Value>) {
    for f in msg.fields {
        if let Some(zero) = f.written_zero() {
            obj.entry(f.json).or_insert(zero);
            continue;
        }
        let (Ty::Message(name) | Ty::MapMessage(name)) = f.ty else {
            continue;
        };
        let Some(inner) = object_message(name) else {
            continue;
        };
        if f.json.is_empty() {
            // An embedded struct: its fields are the parent's in JSON.
            fill(inner, obj);
            continue;
        }
        if f.plain_struct && !obj.contains_key(f.json) {
            obj.insert(f.json.to_string(), Value::Object(Map::new()));
        }
        let Some(v) = obj.get_mut(f.json) else {
            continue;
        };
        match (f.ty, v) {
            (Ty::MapMessage(_), Value::Object(entries)) => {
                for e in entries.values_mut().filter_map(Value::as_object_mut) {
                    fill(inner, e);
                }
            }
            (_, Value::Array(items)) if f.repeated => {
                for i in items.iter_mut().filter_map(Value::as_object_mut) {
                    fill(inner, i);
                }
            }
            (_, Value::Object(m)) => fill(inner, m),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn plain_structs_are_written_empty_pointers_and_opaque_types_are_not() {
        let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d"},
            "spec": {"template": {"spec": {"containers": [{"name": "a"}]}}}});
        write_plain_structs("apps/v1", "Deployment", &mut d);
        // status and strategy are plain structs, selector a pointer; the
        // template's metadata is a plain ObjectMeta, its creationTimestamp
        // a Time (written on its own); a container's resources plain.
        assert_eq!(
            d,
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "d"}, "status": {},
                "spec": {"strategy": {}, "template": {"metadata": {},
                    "spec": {"containers": [{"name": "a", "resources": {}}]}}}})
        );
        let mut widget = json!({"apiVersion": "example.com/v1", "kind": "Widget"});
        write_plain_structs("example.com/v1", "Widget", &mut widget);
        assert_eq!(
            widget,
            json!({"apiVersion": "example.com/v1", "kind": "Widget"})
        );
    }
}
