//! The strict decoding errors of a JSON body, found in one pass over its
//! bytes (serde_json keeps the last of duplicate keys silently, so the
//! decoded value cannot tell): `unknown field "spec.foo"` and
//! `duplicate field "spec.foo"`, in the order sigs.k8s.io/json's
//! `UnmarshalStrict` meets them (the document's order), each once, at
//! most 100. An unknown field's value is skipped (nothing inside it is
//! reported), as is the inside of a type with its own JSON decoding.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::shape::{Keys, Shape};

/// At most this many errors, as sigs.k8s.io/json keeps.
const MAX_ERRORS: usize = 100;

/// The errors found so far, and the path being read.
struct State {
    path: String,
    errs: Vec<String>,
    seen: HashSet<String>,
}

impl State {
    fn report(&mut self, what: &str, key: &str) {
        if self.errs.len() >= MAX_ERRORS {
            return;
        }
        let path = if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        };
        // Go quotes with strconv.Quote; JSON's escaping agrees for the
        // printable keys of real objects.
        let msg = format!("{what} {}", serde_json::Value::String(path));
        if self.seen.insert(msg.clone()) {
            self.errs.push(msg);
        }
    }
}

/// The strict errors of `body` read at `shape` (`Shape::Any` for a patch:
/// duplicates only). A body that is not valid JSON has none here (its
/// decoding fails elsewhere).
pub(crate) fn strict_errors(shape: Shape, body: &[u8]) -> Vec<String> {
    walk(shape, body).unwrap_or_default()
}

/// The strict errors of `body` at `shape`; `None` when it is not one valid
/// JSON value.
fn walk(shape: Shape, body: &[u8]) -> Option<Vec<String>> {
    let mut state = State {
        path: String::new(),
        errs: Vec::new(),
        seen: HashSet::new(),
    };
    let mut de = serde_json::Deserializer::from_slice(body);
    (Walk {
        shape,
        state: &mut state,
    })
    .deserialize(&mut de)
    .and_then(|()| de.end())
    .ok()?;
    Some(state.errs)
}

/// Reads one value at a shape.
struct Walk<'a> {
    shape: Shape,
    state: &'a mut State,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let item = self.shape.item();
        if item.keys().is_none() {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(());
        }
        let len = self.state.path.len();
        let mut i = 0usize;
        loop {
            self.state.path.push('[');
            self.state.path.push_str(&i.to_string());
            self.state.path.push(']');
            let more = seq
                .next_element_seed(Walk {
                    shape: item,
                    state: self.state,
                })?
                .is_some();
            self.state.path.truncate(len);
            if !more {
                return Ok(());
            }
            i += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some(keys) = self.shape.keys() else {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            return Ok(());
        };
        // Real objects have few keys: a list is cheaper than a set, and
        // keys without escapes are borrowed from the body.
        let mut seen: Vec<Cow<'de, str>> = Vec::new();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            match keys.get(&key) {
                Some(shape) => {
                    // Go checks duplicates of known fields and map keys (an
                    // unknown one is reported once, as unknown).
                    if seen.contains(&key) {
                        self.state.report("duplicate field", &key);
                    } else {
                        seen.push(key.clone());
                    }
                    let len = self.state.path.len();
                    if len > 0 {
                        self.state.path.push('.');
                    }
                    self.state.path.push_str(&key);
                    map.next_value_seed(Walk {
                        shape,
                        state: self.state,
                    })?;
                    self.state.path.truncate(len);
                }
                None => {
                    if !matches!(keys, Keys::Map(_)) {
                        self.state.report("unknown field", &key);
                    }
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// A map key, borrowed from the body when it has no escapes.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_string()))
    }
}

/// A duplicate key of a YAML (or JSON) apply body as go-yaml's strict
/// decoding reports it: `line 3: key "foo" already set in map`. Only the
/// first is found (go-yaml lists every one).
pub(crate) fn yaml_duplicate(body: &[u8]) -> Option<String> {
    // What clients send is JSON: valid JSON without a duplicate key at any
    // depth has none when read as YAML either (its keys are all quoted
    // strings, compared unescaped by both). Read here, it needs neither
    // the YAML parser nor its thread (a thread per apply was most of a
    // simulated run's system time). Anything else, and the duplicate's
    // line, is go-yaml's reading below.
    if body.trim_ascii_start().first() == Some(&b'{')
        && walk(Shape::Any, body).is_some_and(|errs| errs.is_empty())
    {
        return None;
    }
    let check = || {
        let e = serde_saphyr::from_slice::<serde_json::Value>(body).err()?;
        // serde-saphyr wraps its errors (a snippet of the source): the
        // duplicate is told by its message, `duplicate mapping key: KEY, set ...`.
        let msg = e.to_string();
        let (_, rest) = msg.split_once("duplicate mapping key: ")?;
        let key = rest
            .split_once(", set DuplicateKeyPolicy")
            .map_or(rest, |(k, _)| k);
        let line = e.location().map_or(1, |l| l.line());
        Some(format!(
            "line {line}: key {} already set in map",
            serde_json::Value::String(key.to_string())
        ))
    };
    // serde-saphyr needs a deep stack for deeply nested YAML (as the apply
    // parser does, see patch::apply): a helper thread with a large one.
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("yaml-duplicates".to_string())
            .stack_size(16 * 1024 * 1024)
            .spawn_scoped(scope, check)
            .ok()
            .and_then(|h| h.join().ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deploy(body: &str) -> Vec<String> {
        strict_errors(
            Shape::of_kind("apps/v1", "Deployment").unwrap(),
            body.as_bytes(),
        )
    }

    #[test]
    fn unknown_and_duplicate_fields_in_document_order() {
        let errs = deploy(
            r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"a","name":"b","labels":{"x":"1","x":"2"}},
               "spec":{"replica":1,"template":{"spec":{"containers":[{"name":"c"},{"name":"d","imagePullPolcy":"x","bad":{"bad":1,"bad":2}}]}}},
               "spec":{},"zzz":1,"zzz":2}"#,
        );
        assert_eq!(
            errs,
            [
                r#"duplicate field "metadata.name""#,
                r#"duplicate field "metadata.labels.x""#,
                r#"unknown field "spec.replica""#,
                r#"unknown field "spec.template.spec.containers[1].imagePullPolcy""#,
                r#"unknown field "spec.template.spec.containers[1].bad""#,
                r#"duplicate field "spec""#,
                r#"unknown field "zzz""#,
            ]
        );
    }

    #[test]
    fn patches_report_duplicates_at_any_depth_and_bad_json_nothing() {
        let errs = strict_errors(Shape::Any, br#"{"a":{"b":[{"c":1,"c":2}]},"a":1}"#);
        assert_eq!(
            errs,
            [r#"duplicate field "a.b[0].c""#, r#"duplicate field "a""#]
        );
        assert!(deploy("{not json").is_empty());
        assert!(deploy(r#"{"metadata": {"creationTimestamp": null}}"#).is_empty());
    }

    #[test]
    fn yaml_duplicates_name_their_line() {
        let yaml: &[u8] = b"apiVersion: v1\nkind: ConfigMap\ndata:\n  a: x\n  a: y\n";
        assert_eq!(
            yaml_duplicate(yaml).as_deref(),
            Some(r#"line 5: key "a" already set in map"#)
        );
        assert_eq!(yaml_duplicate(b"a: 1\nb: 2\n"), None);
        assert_eq!(
            yaml_duplicate(br#"{"a": 1, "a": 2}"#).as_deref(),
            Some(r#"line 1: key "a" already set in map"#)
        );
        // JSON read without the YAML parser: escapes compared unescaped,
        // duplicates found at any depth, and what is not valid JSON
        // (a trailing comma YAML accepts) read as YAML.
        assert_eq!(
            yaml_duplicate(b"{\n\"a\": 1,\n\"\\u0061\": 2}").as_deref(),
            Some(r#"line 3: key "a" already set in map"#)
        );
        assert_eq!(
            yaml_duplicate(br#"{"x": [{"b": {"c": 1, "c": 2}}]}"#).as_deref(),
            Some(r#"line 1: key "c" already set in map"#)
        );
        assert_eq!(
            yaml_duplicate(br#"{"a": 1, "a": 2,}"#).as_deref(),
            Some(r#"line 1: key "a" already set in map"#)
        );
        assert_eq!(yaml_duplicate(br#"{"a": {"a": 1}, "b": [1, 1]}"#), None);
    }
}
