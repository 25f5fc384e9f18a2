//! What two API servers may answer differently and still mean the same:
//! the values each makes up (uids, resourceVersions, times, generated
//! names, list and bookmark versions, continue tokens) become tokens
//! numbered by order of appearance within a case, so that one server's
//! answers compare field by field with the other's.

use std::collections::HashMap;

use serde_json::{Map, Value};

/// The times an object carries (metadata, managedFields, conditions,
/// Events, Leases): any value, the same token.
const TIMES: &[&str] = &[
    "creationTimestamp",
    "deletionTimestamp",
    "time",
    "lastTransitionTime",
    "lastUpdateTime",
    "lastProbeTime",
    "renewTime",
    "acquireTime",
    "eventTime",
    "firstTimestamp",
    "lastTimestamp",
    "startTime",
];

/// A Table's age cells (its `Age` column, or any of type `date`): the
/// seconds between a create and a read are the clock's, not the server's.
/// Applied again to what was recorded before this rule (idempotent).
pub fn table_ages(map: &mut Map<String, Value>) {
    let ages: Vec<usize> = map
        .get("columnDefinitions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .filter(|(_, c)| c["name"] == "Age" || c["type"] == "date")
        .map(|(i, _)| i)
        .collect();
    if let Some(Value::Array(rows)) = map.get_mut("rows") {
        for row in rows {
            for &i in &ages {
                if let Some(cell) = row.pointer_mut(&format!("/cells/{i}"))
                    && cell.is_string()
                {
                    *cell = "<age>".into();
                }
            }
        }
    }
}

/// One case's tokens: a value seen again gets the token it got first.
#[derive(Default)]
pub struct Normaliser {
    uids: HashMap<String, String>,
    versions: HashMap<String, String>,
}

impl Normaliser {
    /// `v` with every made-up value replaced by its token.
    pub fn value(&mut self, mut v: Value) -> Value {
        self.walk(&mut v, "");
        self.messages(&mut v);
        v
    }

    fn walk(&mut self, v: &mut Value, key: &str) {
        match v {
            Value::Object(map) => {
                table_ages(map);
                list_version(map);
                generated_name(map);
                for (k, child) in map.iter_mut() {
                    self.walk(child, k);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| self.walk(i, key)),
            Value::String(s) if !s.is_empty() => {
                let token = match key {
                    "uid" => Some(token(&mut self.uids, s, "uid")),
                    "resourceVersion" if !s.starts_with('<') => {
                        Some(token(&mut self.versions, s, "rv"))
                    }
                    "continue" => Some("<continue>".into()),
                    // Where the server listens: another port each run.
                    "serverAddress" => Some("<address>".into()),
                    k if TIMES.contains(&k) => Some("<time>".into()),
                    _ => None,
                };
                if let Some(t) = token {
                    *s = t;
                }
            }
            _ => {}
        }
    }

    /// The uids any string names and the resourceVersions a `message`
    /// names (a precondition's, an owner's), as the tokens they got where
    /// they were a field; a version only as a whole number.
    fn messages(&self, v: &mut Value) {
        match v {
            Value::Object(map) => {
                for (k, c) in map.iter_mut() {
                    match c {
                        Value::String(s) if k == "message" => *s = self.numbers(s),
                        _ => {}
                    }
                    self.messages(c);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|c| self.messages(c)),
            Value::String(s) => {
                for (uid, t) in &self.uids {
                    if s.contains(uid.as_str()) {
                        *s = s.replace(uid.as_str(), t);
                    }
                }
            }
            _ => {}
        }
    }

    /// `s` with each whole number that is a resourceVersion seen as its token.
    fn numbers(&self, s: &str) -> String {
        let mut out = String::with_capacity(s.len());
        let mut digits = String::new();
        for c in s.chars().chain(std::iter::once(' ')) {
            if c.is_ascii_digit() {
                digits.push(c);
                continue;
            }
            if !digits.is_empty() {
                out.push_str(self.versions.get(&digits).map_or(&digits, |t| t));
                digits.clear();
            }
            out.push(c);
        }
        out.pop();
        out
    }
}

fn token(seen: &mut HashMap<String, String>, value: &str, kind: &str) -> String {
    let n = seen.len() + 1;
    seen.entry(value.to_string())
        .or_insert_with(|| format!("<{kind}#{n}>"))
        .clone()
}

/// A list's resourceVersion is the store's at the time of the list: the
/// real server's moves with writes no case makes (its own Leases), so only
/// its presence compares.
fn list_version(map: &mut Map<String, Value>) {
    if !map.get("items").is_some_and(Value::is_array) {
        return;
    }
    if let Some(Value::Object(meta)) = map.get_mut("metadata")
        && let Some(Value::String(rv)) = meta.get_mut("resourceVersion")
        && !rv.is_empty()
    {
        *rv = "<list>".into();
    }
}

/// `metadata.name` made from `generateName`: the prefix and a token.
fn generated_name(map: &mut Map<String, Value>) {
    let Some(prefix) = map.get("generateName").and_then(Value::as_str) else {
        return;
    };
    let prefix = prefix.to_string();
    if let Some(Value::String(name)) = map.get_mut("name")
        && name.starts_with(&prefix)
    {
        *name = format!("{prefix}<generated>");
    }
}

/// A watch event's object, normalised; a bookmark's resourceVersion is the
/// store's at that moment, so only its presence compares.
pub fn event(n: &mut Normaliser, mut e: Value) -> Value {
    if e["type"] == "BOOKMARK"
        && let Some(Value::String(rv)) = e.pointer_mut("/object/metadata/resourceVersion")
    {
        *rv = "<bookmark>".into();
    }
    n.value(e)
}

/// The path of the first field where `a` and `b` differ (`/body/items/0`),
/// None when they are equal.
pub fn first_difference(a: &Value, b: &Value, path: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|k| match (x.get(k), y.get(k)) {
                (Some(p), Some(q)) => first_difference(p, q, &format!("{path}/{k}")),
                _ => Some(format!("{path}/{k}")),
            })
        }
        (Value::Array(x), Value::Array(y)) => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| first_difference(p, q, &format!("{path}/{i}")))
            .or_else(|| (x.len() != y.len()).then(|| format!("{path}/{}", x.len().min(y.len())))),
        _ => (a != b).then(|| path.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn made_up_values_become_tokens_by_order_of_appearance() {
        let mut n = Normaliser::default();
        let a = n.value(json!({"metadata": {"uid": "u-1", "resourceVersion": "17",
            "creationTimestamp": "2026-01-01T00:00:00Z", "generateName": "x-", "name": "x-abcde"}}));
        let b = n.value(
            json!({"items": [{"metadata": {"uid": "u-1", "resourceVersion": "19"}}],
            "metadata": {"resourceVersion": "23", "continue": "eyJ"},
            "message": "UID in object meta: u-1, version 19 (not 1)"}),
        );
        assert_eq!(
            a,
            json!({"metadata": {"uid": "<uid#1>", "resourceVersion": "<rv#1>",
                "creationTimestamp": "<time>", "generateName": "x-", "name": "x-<generated>"}})
        );
        assert_eq!(
            b,
            json!({"items": [{"metadata": {"uid": "<uid#1>", "resourceVersion": "<rv#2>"}}],
                "metadata": {"resourceVersion": "<list>", "continue": "<continue>"},
                "message": "UID in object meta: <uid#1>, version <rv#2> (not 1)"})
        );
    }

    #[test]
    fn the_first_difference_is_named_by_its_path() {
        let a = json!({"a": 1, "b": [1, 2], "c": {"d": "x"}});
        assert_eq!(first_difference(&a, &a, ""), None);
        let b = json!({"a": 1, "b": [1, 2, 3], "c": {"d": "x"}});
        assert_eq!(first_difference(&a, &b, "").as_deref(), Some("/b/2"));
        let c = json!({"a": 1, "b": [1, 2], "c": {"d": "y"}});
        assert_eq!(first_difference(&a, &c, "").as_deref(), Some("/c/d"));
        let d = json!({"a": 1, "b": [1, 2]});
        assert_eq!(first_difference(&a, &d, "").as_deref(), Some("/c"));
    }
}
