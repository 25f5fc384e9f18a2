//! The three moves every kind's defaulting is made of, as kube-apiserver's
//! `SetDefaults_*` functions make them: set a field if absent, descend
//! into an object (made if absent), visit each element of a list.

use serde_json::{Value, json};

/// Set `obj[key]` to `value` if absent (or null). Does nothing when `obj`
/// is not an object.
pub fn or(obj: &mut Value, key: &str, value: Value) {
    if let Some(m) = obj.as_object_mut() {
        let slot = m.entry(key).or_insert(Value::Null);
        if slot.is_null() {
            *slot = value;
        }
    }
}

/// `obj[key]`, created as `{}` if absent; `None` if `obj` is not an object
/// or `obj[key]` is something else.
pub fn child<'a>(obj: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    or(obj, key, json!({}));
    obj.get_mut(key).filter(|v| v.is_object())
}

/// Each element of the array `obj[key]`.
pub fn each<'a>(obj: &'a mut Value, key: &str) -> impl Iterator<Item = &'a mut Value> {
    obj.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
}

/// Apply `spec_of` to `obj.spec` (made if absent): where every workload's
/// defaults live.
pub fn spec(obj: &mut Value, spec_of: fn(&mut Value)) {
    if let Some(spec) = child(obj, "spec") {
        spec_of(spec);
    }
}
