//! JSON values as CEL values, typed by the OpenAPI v3 schema node they sit
//! on, as apiextensions-apiserver's `UnstructuredToVal` types them:
//!
//! | schema | CEL |
//! | --- | --- |
//! | `type: object` with `properties` | a map keyed by the [escaped](escape) property names (so `self.x`, `has(self.x)` work); properties the schema does not declare are dropped |
//! | `type: object` with `additionalProperties` | a map keyed by the raw keys |
//! | `x-kubernetes-embedded-resource` | as an object, plus `apiVersion`, `kind`, `metadata.name` and `metadata.generateName` |
//! | `type: array` (any `x-kubernetes-list-type`) | a list |
//! | `integer` / `number` / `boolean` | `int` / `double` / `bool` |
//! | `string` | `string`; `format: byte` → `bytes`, `duration` → `duration`, `date` / `date-time` → `timestamp` |
//! | `x-kubernetes-int-or-string`, `x-kubernetes-preserve-unknown-fields` without properties, no `type` | dynamic: the JSON as it is (numbers that fit `int` are ints) |
//!
//! A value that does not match its schema (the OpenAPI validation reports
//! that, not this module) is converted dynamically, never rejected.

use std::collections::HashMap;
use std::sync::Arc;

use ::cel::Value;
use ::cel::objects::Key;
use base64::Engine as _;
use serde_json::Value as Json;

/// The CEL reserved words that a property name must not collide with:
/// escaped to `__{word}__`.
const RESERVED: [&str; 21] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// The CEL identifier for property `name`, as Kubernetes escapes it: a
/// reserved word becomes `__{word}__`; `__` becomes `__underscores__`, `.`
/// `__dot__`, `-` `__dash__`, `/` `__slash__`. `None` for a name that can't
/// be an identifier (empty, starting with a digit, or with other
/// characters): such a property is not accessible from CEL.
#[must_use]
pub fn escape(name: &str) -> Option<String> {
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

/// The parts of a schema node this module reads.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Node<'a>(pub &'a Json);

impl<'a> Node<'a> {
    fn str_of(self, key: &str) -> Option<&'a str> {
        self.0.get(key).and_then(Json::as_str)
    }

    fn flag(self, key: &str) -> bool {
        self.0.get(key).and_then(Json::as_bool).unwrap_or(false)
    }

    /// The node's `type` (empty when unset).
    pub fn ty(self) -> &'a str {
        self.str_of("type").unwrap_or("")
    }

    /// The node's `format` (empty when unset).
    pub fn format(self) -> &'a str {
        self.str_of("format").unwrap_or("")
    }

    /// An unsigned bound such as `maxItems`.
    pub fn bound(self, key: &str) -> Option<u64> {
        self.0.get(key).and_then(Json::as_u64)
    }

    /// The declared `properties`, if any.
    pub fn properties(self) -> Option<&'a serde_json::Map<String, Json>> {
        self.0.get("properties").and_then(Json::as_object)
    }

    /// `items`, when it is a schema.
    pub fn items(self) -> Option<Node<'a>> {
        self.0.get("items").filter(|i| i.is_object()).map(Node)
    }

    /// `additionalProperties` as a schema (`true` is the empty schema).
    pub fn additional(self) -> Option<Node<'a>> {
        static EMPTY: Json = Json::Null;
        match self.0.get("additionalProperties") {
            Some(Json::Bool(true)) => Some(Node(&EMPTY)),
            Some(s @ Json::Object(_)) => Some(Node(s)),
            _ => None,
        }
    }

    /// `x-kubernetes-embedded-resource`.
    pub fn embedded(self) -> bool {
        self.flag("x-kubernetes-embedded-resource")
    }

    /// Whether values here are dynamic (`dyn`): int-or-string, or no type,
    /// or unknown fields preserved with no properties declared.
    pub fn is_dyn(self) -> bool {
        if self.flag("x-kubernetes-int-or-string") {
            return true;
        }
        let no_fields = self.properties().is_none_or(|p| p.is_empty())
            && self.additional().is_none()
            && !self.embedded();
        match self.ty() {
            "" => no_fields || self.flag("x-kubernetes-preserve-unknown-fields"),
            "object" => no_fields && self.flag("x-kubernetes-preserve-unknown-fields"),
            _ => false,
        }
    }
}

fn string(s: &str) -> Value {
    Value::String(Arc::new(s.to_owned()))
}

fn map(entries: HashMap<Key, Value>) -> Value {
    Value::Map(::cel::objects::Map {
        map: Arc::new(entries),
    })
}

/// `v` as a CEL value typed by schema node `node` (see the module docs).
pub(crate) fn to_cel(v: &Json, node: Node<'_>) -> Value {
    if v.is_null() {
        return Value::Null;
    }
    if node.is_dyn() {
        return untyped(v);
    }
    match (node.ty(), v) {
        ("object", Json::Object(obj)) | ("", Json::Object(obj)) => object(obj, node),
        ("array", Json::Array(items)) => {
            let item = node.items();
            Value::List(Arc::new(
                items
                    .iter()
                    .map(|i| item.map_or_else(|| untyped(i), |n| to_cel(i, n)))
                    .collect(),
            ))
        }
        ("integer", Json::Number(n)) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => untyped(v),
        },
        ("number", Json::Number(n)) => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        ("boolean", Json::Bool(b)) => Value::Bool(*b),
        ("string", Json::String(s)) => formatted(s, node.format()),
        _ => untyped(v),
    }
}

/// A typed object: declared properties (escaped), additional properties
/// (raw keys), and an embedded resource's type and name fields.
fn object(obj: &serde_json::Map<String, Json>, node: Node<'_>) -> Value {
    let mut out = HashMap::new();
    if let Some(add) = node.additional() {
        for (k, v) in obj {
            out.insert(Key::String(Arc::new(k.clone())), to_cel(v, add));
        }
        return map(out);
    }
    if node.embedded() {
        for key in ["apiVersion", "kind"] {
            if let Some(Json::String(s)) = obj.get(key) {
                out.insert(Key::String(Arc::new(key.to_owned())), string(s));
            }
        }
        if let Some(Json::Object(meta)) = obj.get("metadata") {
            let mut m = HashMap::new();
            for key in ["name", "generateName"] {
                if let Some(Json::String(s)) = meta.get(key) {
                    m.insert(Key::String(Arc::new(key.to_owned())), string(s));
                }
            }
            out.insert(Key::String(Arc::new("metadata".to_owned())), map(m));
        }
    }
    if let Some(props) = node.properties() {
        for (k, schema) in props {
            let (Some(v), Some(name)) = (obj.get(k), escape(k)) else {
                continue;
            };
            if node.embedded() && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            out.insert(Key::String(Arc::new(name)), to_cel(v, Node(schema)));
        }
    }
    map(out)
}

/// A string by its `format`: bytes, duration and timestamps parsed, a
/// string that does not parse left a string.
fn formatted(s: &str, format: &str) -> Value {
    match format {
        "byte" => match base64::engine::general_purpose::STANDARD.decode(s) {
            Ok(b) => Value::Bytes(Arc::new(b)),
            Err(_) => string(s),
        },
        "duration" => match parse_duration(s) {
            Some(d) => Value::Duration(d),
            None => string(s),
        },
        "date" => match chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d") {
            Ok(d) => Value::Timestamp(
                d.and_hms_opt(0, 0, 0)
                    .unwrap_or_default()
                    .and_utc()
                    .fixed_offset(),
            ),
            Err(_) => string(s),
        },
        "date-time" => match chrono::DateTime::parse_from_rfc3339(s) {
            Ok(t) => Value::Timestamp(t),
            Err(_) => string(s),
        },
        _ => string(s),
    }
}

/// A Go duration (`1h30m`, `-1.5s`, `300ms`, `0`), as `format: duration`
/// strings are written.
pub(crate) fn parse_duration(s: &str) -> Option<chrono::Duration> {
    crate::machinery::validation::go_duration_nanos(s).map(chrono::Duration::nanoseconds)
}

/// `v` with no schema: objects are maps with their raw keys, integral
/// numbers that fit are ints, other numbers doubles.
pub(crate) fn untyped(v: &Json) -> Value {
    match v {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => string(s),
        Json::Array(items) => Value::List(Arc::new(items.iter().map(untyped).collect())),
        Json::Object(obj) => map(obj
            .iter()
            .map(|(k, v)| (Key::String(Arc::new(k.clone())), untyped(v)))
            .collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn escaping_follows_kubernetes() {
        assert_eq!(escape("foo").as_deref(), Some("foo"));
        assert_eq!(escape("a-b").as_deref(), Some("a__dash__b"));
        assert_eq!(escape("a.b/c").as_deref(), Some("a__dot__b__slash__c"));
        assert_eq!(escape("a__b").as_deref(), Some("a__underscores__b"));
        assert_eq!(escape("namespace").as_deref(), Some("__namespace__"));
        assert_eq!(escape("if").as_deref(), Some("__if__"));
        assert_eq!(escape("1a"), None);
        assert_eq!(escape("a b"), None);
        assert_eq!(escape(""), None);
    }

    #[test]
    fn typed_conversion() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "number"}, "i": {"type": "integer"},
            "d": {"type": "string", "format": "duration"},
            "t": {"type": "string", "format": "date-time"},
            "b": {"type": "string", "format": "byte"},
            "x-y": {"type": "string"}
        }});
        let v = to_cel(
            &json!({"n": 1, "i": 2, "d": "1h30m", "t": "2024-01-02T03:04:05Z",
                    "b": "aGk=", "x-y": "s", "undeclared": 1}),
            Node(&schema),
        );
        let Value::Map(m) = v else {
            panic!("not a map")
        };
        let get = |k: &str| m.map.get(&Key::String(Arc::new(k.to_owned()))).cloned();
        assert_eq!(get("n"), Some(Value::Float(1.0)));
        assert_eq!(get("i"), Some(Value::Int(2)));
        assert_eq!(
            get("d"),
            Some(Value::Duration(chrono::Duration::minutes(90)))
        );
        assert!(matches!(get("t"), Some(Value::Timestamp(_))));
        assert_eq!(get("b"), Some(Value::Bytes(Arc::new(b"hi".to_vec()))));
        assert_eq!(get("x__dash__y"), Some(string("s")));
        assert_eq!(get("undeclared"), None);
    }

    #[test]
    fn durations_parse_as_go_does() {
        assert_eq!(
            parse_duration("300ms"),
            Some(chrono::Duration::milliseconds(300))
        );
        assert_eq!(
            parse_duration("-1.5s"),
            Some(chrono::Duration::milliseconds(-1500))
        );
        assert_eq!(parse_duration("0"), Some(chrono::Duration::zero()));
        assert_eq!(parse_duration("1x"), None);
        assert_eq!(parse_duration(""), None);
    }

    #[test]
    fn dynamic_nodes_keep_the_json() {
        let ios = json!({"x-kubernetes-int-or-string": true});
        assert_eq!(to_cel(&json!(3), Node(&ios)), Value::Int(3));
        assert_eq!(to_cel(&json!("3%"), Node(&ios)), string("3%"));
        let pres = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        assert!(matches!(
            to_cel(&json!({"a-b": 1}), Node(&pres)),
            Value::Map(_)
        ));
    }
}
