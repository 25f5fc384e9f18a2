//! A value of the wrong JSON type in a built-in object, as Go's decoding
//! refuses it: `json: cannot unmarshal number into Go struct field
//! ConfigMap.data of type string` (the innermost struct, then the field's
//! JSON path from the object, list indices left out). `null` is always
//! taken (Go leaves the zero value); the types Go decodes on their own
//! (Time, Quantity, IntOrString…) are not looked into.

use serde_json::Value;

use super::shape::{Keys, Shape, object_message};
use crate::machinery::proto::Ty;

/// The first field of `v` (at `shape`) whose JSON type its Go type cannot
/// take, in Go's words; None when every one can.
pub(crate) fn type_error(shape: Shape, v: &Value) -> Option<String> {
    let Shape::Object { msg, .. } = shape else {
        return None;
    };
    fields(shape, short(msg.name), v, "")
}

/// The fields of the object `v` (at `shape`, a struct named `owner`).
fn fields(shape: Shape, owner: &str, v: &Value, path: &str) -> Option<String> {
    let (Some(keys @ Keys::Fields(..)), Value::Object(m)) = (shape.keys(), v) else {
        return None;
    };
    m.iter().find_map(|(k, child)| {
        let at = if path.is_empty() {
            k.clone()
        } else {
            format!("{path}.{k}")
        };
        keys.get(k).and_then(|s| value(s, owner, child, &at))
    })
}

/// `v` at a field of shape `shape` (in the struct `owner`, at `path`).
fn value(shape: Shape, owner: &str, v: &Value, path: &str) -> Option<String> {
    let Shape::Field(ty, repeated) = shape else {
        return None;
    };
    if v.is_null() {
        return None;
    }
    let refused = |go: String| {
        Some(format!(
            "json: cannot unmarshal {} into Go struct field {owner}.{path} of type {go}",
            json_type(v)
        ))
    };
    if repeated {
        let Value::Array(items) = v else {
            return refused(format!("[]{}", go_type(ty)));
        };
        return items
            .iter()
            .find_map(|i| value(Shape::Field(ty, false), owner, i, path));
    }
    let ok = match ty {
        Ty::String | Ty::Bytes => v.is_string(),
        Ty::Bool => v.is_boolean(),
        Ty::Int32 | Ty::Int64 => v.is_i64() || v.is_u64(),
        Ty::Double => v.is_number(),
        Ty::MapString | Ty::MapBytes => {
            let Value::Object(m) = v else {
                return refused(go_type(ty));
            };
            let inner = if matches!(ty, Ty::MapString) {
                Ty::String
            } else {
                Ty::Bytes
            };
            return m
                .values()
                .find_map(|e| value(Shape::Field(inner, false), owner, e, path));
        }
        Ty::MapMessage(name) => {
            let Value::Object(m) = v else {
                return refused(go_type(ty));
            };
            return m
                .values()
                .find_map(|e| value(Shape::Field(Ty::Message(name), false), owner, e, path));
        }
        Ty::Message(name) => {
            // A type Go decodes on its own is not looked into.
            let msg = object_message(name)?;
            if !v.is_object() {
                return refused(go_type(ty));
            }
            return fields(shape, short(msg.name), v, path);
        }
    };
    if ok { None } else { refused(go_type(ty)) }
}

/// How Go's errors name a JSON value's type (a number with a fraction
/// where an integer is wanted: the number itself).
fn json_type(v: &Value) -> String {
    match v {
        Value::String(_) => "string".into(),
        Value::Number(n) if n.is_f64() => format!("number {n}"),
        Value::Number(_) => "number".into(),
        Value::Bool(_) => "bool".into(),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
        Value::Null => "null".into(),
    }
}

/// How Go names a field's type (`v1.ObjectMeta` for a struct).
fn go_type(ty: Ty) -> String {
    match ty {
        Ty::String => "string".into(),
        Ty::Bool => "bool".into(),
        Ty::Int32 => "int32".into(),
        Ty::Int64 => "int64".into(),
        Ty::Double => "float64".into(),
        Ty::Bytes => "[]uint8".into(),
        Ty::MapString => "map[string]string".into(),
        Ty::MapBytes => "map[string][]uint8".into(),
        Ty::MapMessage(n) => format!("map[string]{}", qualified(n)),
        Ty::Message(n) => qualified(n),
    }
}

/// A message's Go type as Go prints it: its package's last element and
/// its name (`v1.ObjectMeta`).
fn qualified(name: &str) -> String {
    let (module, short) = name.rsplit_once('.').unwrap_or(("", name));
    let package = module.rsplit('.').next().unwrap_or(module);
    format!("{package}.{short}")
}

/// A message's own name (`ObjectMeta`).
fn short(name: &str) -> &str {
    name.rsplit('.').next().unwrap_or(name)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn error(v: Value) -> Option<String> {
        type_error(
            Shape::of_kind("v1", v["kind"].as_str().unwrap()).unwrap(),
            &v,
        )
    }

    #[test]
    fn go_refuses_what_its_types_cannot_hold_in_its_words() {
        let cm =
            |data: Value| json!({"kind": "ConfigMap", "metadata": {"name": "a"}, "data": data});
        assert_eq!(error(cm(json!({"k": "v"}))), None);
        assert_eq!(error(cm(json!(null))), None);
        assert_eq!(
            error(cm(json!({"k": 1}))).unwrap(),
            "json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
        );
        assert_eq!(
            error(json!({"kind": "ConfigMap", "metadata": {"name": true}})).unwrap(),
            "json: cannot unmarshal bool into Go struct field ObjectMeta.metadata.name of type string"
        );
        let pod = |c: Value| json!({"kind": "Pod", "spec": {"containers": [c]}});
        assert_eq!(
            error(pod(json!({"name": "a", "ports": [{"containerPort": 80}]}))),
            None
        );
        assert_eq!(
            error(pod(json!({"name": "a", "ports": [{"containerPort": 1.5}]}))).unwrap(),
            "json: cannot unmarshal number 1.5 into Go struct field ContainerPort.spec.containers.ports.containerPort of type int32"
        );
        assert_eq!(
            error(json!({"kind": "Pod", "spec": {"containers": {}}})).unwrap(),
            "json: cannot unmarshal object into Go struct field PodSpec.spec.containers of type []v1.Container"
        );
        // Types Go decodes on their own are not looked into.
        assert_eq!(
            error(pod(
                json!({"name": "a", "resources": {"limits": {"cpu": 1}}})
            )),
            None
        );
    }
}
