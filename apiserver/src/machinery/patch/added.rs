//! What an `Update` changed, as Kubernetes' field manager sees it.
//!
//! kube-apiserver compares the old and the new object as Go's JSON writes
//! their types (a create, against the kind's empty Go object). Go always
//! writes a plain struct (`spec`, a pod template, a container's
//! `resources`: `{}` when empty; omitempty never leaves one out) and a
//! field without omitempty (a pod's `containers`: `null` when nil). So:
//!
//! - a node the old object lacked is itself added, and the writer's
//!   `fieldsV1` owns it with a `.` entry beside its children
//!   (`"f:labels": {".": {}, "f:app": {}}`), unless Go wrote it in the old
//!   object anyway (a plain struct, a field without omitempty of an object
//!   that was there); inside a node that was not there, every node is added;
//! - an empty plain struct the old object's JSON lacked (a Deployment's
//!   `status: {}` on create) was in its Go form already: not a change.
//!
//! Which fields are which comes from the generated protobuf table
//! (`Field::always`, `Field::plain_struct`, read from the Go types by
//! `apiserver/proto/generate.py`). A custom resource has no Go type: every
//! node its old object lacked was added.

use serde_json::Value;

use super::fieldset::{FieldSet, child};
use crate::machinery::proto::{Field, Message, Ty, message, message_of_kind};

/// Where a node sits in a built-in kind's Go types.
#[derive(Debug, Clone, Copy)]
enum Go {
    /// Not a known Go type: a custom resource, or a field the table lacks.
    Unknown,
    /// A struct.
    Struct(&'static Message),
    /// A slice of structs: its items are the struct.
    List(&'static Message),
    /// A map of structs: its values are the struct.
    Map(&'static Message),
}

impl Go {
    /// The field at segment `seg` (`f:name`) of this struct.
    fn field(self, seg: &str) -> Option<&'static Field> {
        match self {
            Go::Struct(m) => seg.strip_prefix("f:").and_then(|f| m.json_field(f)),
            _ => None,
        }
    }

    /// The node at segment `seg` (`f:name`, `k:{...}`) below this one.
    fn enter(self, seg: &str) -> Go {
        match self {
            Go::Struct(_) => {
                let Some(f) = self.field(seg) else {
                    return Go::Unknown;
                };
                match f.ty {
                    Ty::Message(n) => message(n).map_or(Go::Unknown, |m| {
                        if f.repeated {
                            Go::List(m)
                        } else {
                            Go::Struct(m)
                        }
                    }),
                    Ty::MapMessage(n) => message(n).map_or(Go::Unknown, Go::Map),
                    _ => Go::Unknown,
                }
            }
            Go::List(m) | Go::Map(m) => Go::Struct(m),
            Go::Unknown => Go::Unknown,
        }
    }
}

/// `changed` (what an `Update` of the object `new`, of `api_version`,
/// changed against `old`; `None`: a create) as the field manager sees it
/// (see the module doc). Items of keyed lists are already marked when new
/// (`list_fields`).
pub(super) fn as_go_compares(
    changed: &mut FieldSet,
    old: Option<&Value>,
    new: &Value,
    api_version: &str,
) {
    let kind = new.get("kind").and_then(Value::as_str).unwrap_or_default();
    let go = message_of_kind(api_version, kind).map_or(Go::Unknown, Go::Struct);
    let empty = Value::Object(serde_json::Map::new());
    // A create compares with the kind's empty object, which is there.
    mark(changed, Some(old.unwrap_or(&empty)), new, go, true, &empty);
}

/// Make `node`, the fields below `field`, a leaf when `field` holds an
/// atomic struct (in a list, each item a leaf): whether it did.
fn owned_whole(field: Option<&Field>, node: &mut FieldSet) -> bool {
    let Some(f) = field else { return false };
    let Ty::Message(n) = f.ty else { return false };
    if !crate::machinery::proto::atomic(n) {
        return false;
    }
    if f.repeated {
        node.0.values_mut().for_each(|item| item.0.clear());
    } else {
        node.0.clear();
    }
    true
}

/// `set` (the fields an object of `api_version`/`kind` sets) with every
/// atomic struct a leaf (`f:selector: {}`; in a list, each item), as the
/// field manager owns one whole: an applied configuration's set.
pub(super) fn atomic_leaves(set: &mut FieldSet, api_version: &str, kind: &str) {
    fn walk(set: &mut FieldSet, go: Go) {
        for (seg, node) in &mut set.0 {
            if !owned_whole(go.field(seg), node) {
                walk(node, go.enter(seg));
            }
        }
    }
    if let Some(m) = message_of_kind(api_version, kind) {
        walk(set, Go::Struct(m));
    }
}

/// `old`: the old object's node here, `None` when it was not there (so
/// neither is anything below it).
fn mark(set: &mut FieldSet, old: Option<&Value>, new: &Value, go: Go, top: bool, empty: &Value) {
    set.0.retain(|seg, node| {
        let Some(nv) = child(new, seg) else {
            return true;
        };
        let field = go.field(seg);
        let was = old.and_then(|o| child(o, seg));
        // Go wrote it in the old object, whatever its JSON says.
        let written = old.is_some() && field.is_some_and(|f| f.always);
        let plain = old.is_some() && field.is_some_and(|f| f.plain_struct);
        if node.is_empty() {
            // A leaf: an empty plain struct, or a zero Go writes, that Go
            // had already is no change.
            let empty_struct = plain && nv.as_object().is_some_and(|m| m.is_empty());
            let zero = old.is_some() && field.and_then(|f| f.written_zero()).as_ref() == Some(nv);
            return !(was.is_none() && (empty_struct || zero));
        }
        if owned_whole(field, node) {
            return true;
        }
        // Every object, a custom resource too, has its metadata.
        let metadata = top && seg == "f:metadata";
        if seg.starts_with("f:") && was.is_none() && !written && !metadata {
            node.0.insert(".".to_string(), FieldSet::default());
        }
        let was = was.or(plain.then_some(empty));
        mark(node, was, nv, go.enter(seg), false, empty);
        // Only empty plain structs changed inside: nothing did.
        !node.is_empty()
    });
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn marked(old: Option<Value>, new: Value, changed: Value) -> Value {
        let mut set = FieldSet::from_json(&changed, 0);
        let av = new["apiVersion"].as_str().unwrap().to_string();
        as_go_compares(&mut set, old.as_ref(), &new, &av);
        set.to_json()
    }

    #[test]
    fn an_atomic_struct_is_owned_whole() {
        let new = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"selector": {"matchLabels": {"a": "1"}}}});
        let changed = json!({"f:spec": {"f:selector": {"f:matchLabels": {"f:a": {}}}}});
        assert_eq!(
            marked(None, new, changed.clone()),
            json!({"f:spec": {"f:selector": {}}})
        );
        let mut set = FieldSet::from_json(&changed, 0);
        atomic_leaves(&mut set, "apps/v1", "Deployment");
        assert_eq!(set.to_json(), json!({"f:spec": {"f:selector": {}}}));
        // A list of atomic structs: each item whole.
        let binding = json!({"f:subjects": {"k:{\"name\":\"a\"}": {".": {}, "f:kind": {}}}});
        let mut set = FieldSet::from_json(&binding, 0);
        atomic_leaves(&mut set, "rbac.authorization.k8s.io/v1", "RoleBinding");
        assert_eq!(
            set.to_json(),
            json!({"f:subjects": {"k:{\"name\":\"a\"}": {}}})
        );
    }

    #[test]
    fn an_added_map_is_owned_itself_a_plain_struct_is_not() {
        let new = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "labels": {"a": "1"}},
            "spec": {"template": {"metadata": {"labels": {"a": "1"}}}}});
        let changed = json!({"f:metadata": {"f:labels": {"f:a": {}}},
            "f:spec": {"f:template": {"f:metadata": {"f:labels": {"f:a": {}}}}}});
        assert_eq!(
            marked(None, new.clone(), changed.clone()),
            json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}},
                "f:spec": {"f:template": {"f:metadata": {"f:labels": {".": {}, "f:a": {}}}}}})
        );
        // An empty plain struct is no change: the empty Deployment had it,
        // and a status of nothing but empty plain structs neither.
        let mut with_status = new.clone();
        with_status["status"] = json!({});
        with_status["spec"]["strategy"] = json!({});
        let mut status = changed.clone();
        status["f:status"] = json!({});
        status["f:spec"]["f:strategy"] = json!({});
        assert_eq!(
            marked(None, with_status.clone(), status.clone()),
            marked(None, new.clone(), changed.clone())
        );
        // Labels there before: a new one is a field of theirs, no more.
        let old = json!({"metadata": {"labels": {"b": "2"}},
            "spec": {"template": {"metadata": {"labels": {"b": "2"}}}}});
        assert_eq!(marked(Some(old), new, changed.clone()), changed);
    }

    #[test]
    fn a_pointer_struct_and_a_custom_resources_fields_are_added() {
        // A status of nothing but an empty plain struct is no change.
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "spec": {"names": {"kind": "W"}, "conversion": {"strategy": "None"}},
            "status": {"acceptedNames": {}}});
        let changed = json!({"f:spec": {"f:names": {"f:kind": {}},
            "f:conversion": {"f:strategy": {}}}, "f:status": {"f:acceptedNames": {}}});
        assert_eq!(
            marked(None, crd, changed),
            json!({"f:spec": {"f:names": {"f:kind": {}},
                "f:conversion": {".": {}, "f:strategy": {}}}})
        );
        let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"labels": {"a": "1"}}, "spec": {"color": "red"}});
        let changed = json!({"f:metadata": {"f:labels": {"f:a": {}}},
            "f:spec": {"f:color": {}}});
        assert_eq!(
            marked(None, widget, changed),
            json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}},
                "f:spec": {".": {}, "f:color": {}}})
        );
    }

    #[test]
    fn items_of_a_list_are_looked_up_in_their_struct() {
        // A pod's containers have no omitempty: the list was there (null).
        // Inside the new container every node is added, its plain struct
        // `resources` too.
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [
            {"name": "a", "securityContext": {"privileged": false},
             "resources": {"limits": {"cpu": "1"}}}]}});
        let changed = json!({"f:spec": {"f:containers": {"k:{\"name\":\"a\"}": {
            ".": {}, "f:name": {}, "f:securityContext": {"f:privileged": {}},
            "f:resources": {"f:limits": {"f:cpu": {}}}}}}});
        assert_eq!(
            marked(None, pod, changed),
            json!({"f:spec": {"f:containers": {"k:{\"name\":\"a\"}": {
                ".": {}, "f:name": {}, "f:securityContext": {".": {}, "f:privileged": {}},
                "f:resources": {".": {}, "f:limits": {".": {}, "f:cpu": {}}}}}}})
        );
    }
}
