//! Validation of a value by its structural schema, worded as kube-openapi's
//! validator words it and apiextensions turns it into field errors
//! (`spec.replicas: Invalid value: -1: spec.replicas in body should be
//! greater than or equal to 0`), then `x-kubernetes-list-type` uniqueness.
//!
//! A value of the wrong type reports that and nothing else below it, as
//! kube-openapi does. Approximate: a failed `anyOf`/`oneOf`/`not` is one
//! Invalid error at the node, without the branches' own errors.

use std::collections::HashSet;

use base64::Engine as _;
use serde_json::Value;

use super::error::{FieldError, FieldErrorKind, Path};
use super::node::{ListType, Schema, Type};

/// Validate a whole object; `between` are errors of checks kube-apiserver
/// runs after the schema's and before the rules (a `/scale`'s paths).
pub(super) fn validate_root(
    s: &Schema,
    obj: &Value,
    old: Option<&Value>,
    mut between: Vec<FieldError>,
) -> Vec<FieldError> {
    let mut v = Validator::new(Path::default());
    v.node(s, obj, old, &Path::default(), true);
    v.errs.append(&mut between);
    // As kube-apiserver's custom resource validation: after a schema error
    // a rule might stumble on (a type, a required field, an enum, a size),
    // the rules are not run, and one error says so.
    let blocking = v.type_invalid
        || v.errs.iter().any(|e| {
            matches!(
                e.kind,
                FieldErrorKind::Required
                    | FieldErrorKind::NotSupported
                    | FieldErrorKind::TooLong
                    | FieldErrorKind::TooMany
            )
        });
    // (kube has no rule validator for a schema without rules: nothing said.)
    if blocking && s.has_rules() {
        v.rule_errs = vec![FieldError {
            kind: FieldErrorKind::Invalid,
            path: "<nil>".into(),
            value: Some(Value::Null),
            detail: "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".into(),
        }];
    }
    v.finish()
}

/// Validate a value reported under `prefix` (a schema's `default`).
pub(super) fn validate_value(
    s: &Schema,
    value: &Value,
    old: Option<&Value>,
    prefix: &Path,
) -> Vec<FieldError> {
    let mut v = Validator::new(prefix.clone());
    v.node(s, value, old, &Path::default(), false);
    v.finish()
}

struct Validator {
    /// Where reported paths start (empty for an object's own fields).
    prefix: Path,
    errs: Vec<FieldError>,
    /// The rules' failures, reported after the schema's as kube-apiserver
    /// runs its CEL validator after the OpenAPI one.
    rule_errs: Vec<FieldError>,
    /// The request's CEL cost budget.
    budget: crate::schema::cel::Budget,
    /// Set once a rule ran out of budget: no rule runs after it.
    stopped: bool,
    /// Whether a value had the wrong type or format (kube's TypeInvalid).
    type_invalid: bool,
}

/// The JSON type of a value, as kube-openapi names it.
fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_integer(v: &Value) -> bool {
    match v {
        Value::Number(n) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

impl Validator {
    fn new(prefix: Path) -> Self {
        Validator {
            prefix,
            errs: Vec::new(),
            rule_errs: Vec::new(),
            budget: crate::schema::cel::Budget::new(),
            stopped: false,
            type_invalid: false,
        }
    }

    fn finish(mut self) -> Vec<FieldError> {
        self.errs.append(&mut self.rule_errs);
        self.errs
    }

    /// Evaluate the node's `x-kubernetes-validations` on `x` (`old`: the
    /// stored value it corresponds to, for transition rules).
    fn rules(&mut self, s: &Schema, x: &Value, old: Option<&Value>, name: &Path) {
        let ty = Value::from(s.ty.map_or("", Type::name));
        for rule in &s.rules {
            if self.stopped {
                return;
            }
            let at = self.at(name);
            match rule.eval(x, old, &mut self.budget) {
                Ok(None) => {}
                Ok(Some(v)) => {
                    let at = match &v.field_path {
                        Some(f) => at.child(f),
                        None => at,
                    };
                    // The value itself, but for an object or a list:
                    // omitted (kube's `field.OmitValueType`).
                    let value =
                        (!matches!(x, Value::Object(_) | Value::Array(_))).then(|| x.clone());
                    self.rule_errs.push(match v.reason {
                        crate::schema::cel::Reason::FieldValueForbidden => {
                            FieldError::forbidden(&at, v.message)
                        }
                        crate::schema::cel::Reason::FieldValueRequired => {
                            FieldError::required(&at, v.message)
                        }
                        crate::schema::cel::Reason::FieldValueDuplicate => FieldError {
                            value,
                            ..FieldError::duplicate(&at, Value::Null)
                        },
                        crate::schema::cel::Reason::FieldValueInvalid => FieldError {
                            value,
                            ..FieldError::invalid(&at, Value::Null, v.message)
                        },
                    });
                }
                Err(e) => {
                    self.stopped = e.stops_validation();
                    self.rule_errs
                        .push(FieldError::invalid(&at, ty.clone(), e.to_string()));
                }
            }
        }
    }

    /// The reported path of `name` (relative to the value validated).
    fn at(&self, name: &Path) -> Path {
        match (self.prefix.as_str(), name.as_str()) {
            ("", n) => Path::new(n),
            (p, "") => Path::new(p),
            (p, n) if n.starts_with('[') => Path::new(&format!("{p}{n}")),
            (p, n) => Path::new(&format!("{p}.{n}")),
        }
    }

    /// kube-openapi's message head: `spec.replicas in body`.
    fn subject(name: &Path) -> String {
        if name.as_str().is_empty() {
            "in body".into()
        } else {
            format!("{name} in body")
        }
    }

    fn invalid(&mut self, name: &Path, value: Value, detail: String) {
        let at = self.at(name);
        self.errs.push(FieldError::invalid(&at, value, detail));
    }

    fn type_error(&mut self, name: &Path, want: &str, got: &str) {
        let detail = format!("{} must be of type {want}: {got:?}", Self::subject(name));
        self.type_invalid = true;
        self.invalid(name, Value::from(got), detail);
    }

    fn node(&mut self, s: &Schema, x: &Value, old: Option<&Value>, name: &Path, root: bool) {
        // Ratcheting: a value unchanged from the stored one passes.
        if !root && old.is_some_and(|o| o == x) {
            return;
        }
        if x.is_null() {
            if !s.nullable && s.ty.is_some() {
                self.type_error(name, s.ty.map_or("", Type::name), "null");
            }
            return;
        }
        if !self.check_type(s, x, name) {
            return;
        }
        match x {
            // In kube-openapi's order: the counts, each property, then
            // the required ones.
            Value::Object(m) => {
                let n = m.len() as u64;
                if let Some(max) = s.max_properties
                    && n > max
                {
                    let at = self.at(name);
                    self.errs.push(FieldError::too_many(&at, m.len(), max));
                }
                if let Some(min) = s.min_properties
                    && n < min
                {
                    let detail = format!(
                        "{} should have at least {min} properties",
                        Self::subject(name)
                    );
                    self.invalid(name, Value::from(n), detail);
                }
                for (k, v) in m {
                    if root && k == "metadata" {
                        // Only what the schema may restrict of metadata:
                        // name and generateName.
                        if let Some(meta) = s.properties.get("metadata") {
                            for f in ["name", "generateName"] {
                                if let (Some(p), Some(x)) = (meta.properties.get(f), v.get(f)) {
                                    self.node(p, x, None, &name.child(k).child(f), false);
                                }
                            }
                        }
                        continue;
                    }
                    if let Some(p) = s.property(k) {
                        let o = old.and_then(|o| o.get(k));
                        // Ratcheting, before the path is built.
                        if o.is_some_and(|o| o == v) {
                            continue;
                        }
                        self.node(p, v, o, &name.child(k), false);
                    }
                }
                for r in &s.required {
                    if !m.contains_key(r) {
                        let at = self.at(&name.child(r));
                        self.errs.push(FieldError::required(&at, ""));
                    }
                }
            }
            Value::Array(items) => {
                let n = items.len() as u64;
                if let Some(max) = s.max_items
                    && n > max
                {
                    let at = self.at(name);
                    self.errs.push(FieldError::too_many(&at, items.len(), max));
                }
                if let Some(min) = s.min_items
                    && n < min
                {
                    let detail =
                        format!("{} should have at least {min} items", Self::subject(name));
                    self.invalid(name, Value::from(n), detail);
                }
                if let Some(item) = s.items.as_deref() {
                    let stored = Correlation::new(&s.list_type, old);
                    for (i, v) in items.iter().enumerate() {
                        let o = stored.of(v);
                        if o.is_some_and(|o| o == v) {
                            continue;
                        }
                        self.node(item, v, o, &name.index(i), false);
                    }
                }
                self.list_type(s, items, name);
            }
            Value::String(st) => self.string(s, st, name),
            Value::Number(_) => self.number(s, x, name),
            Value::Bool(_) => {}
            Value::Null => unreachable!("handled above"),
        }
        if !s.enumeration.is_empty() && !s.enumeration.contains(x) {
            let supported: Vec<String> = s
                .enumeration
                .iter()
                .map(|e| match e {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect();
            let at = self.at(name);
            self.errs
                .push(FieldError::not_supported(&at, x.clone(), &supported));
        }
        self.junctors(s, x, name);
        if !s.rules.is_empty() {
            self.rules(s, x, old, name);
        }
    }

    /// Whether `x` has the schema's type (an error recorded if not).
    fn check_type(&mut self, s: &Schema, x: &Value, name: &Path) -> bool {
        if s.int_or_string {
            if is_integer(x) || x.is_string() {
                return true;
            }
            self.type_error(name, "integer,string", type_of(x));
            return false;
        }
        let ok = match s.ty {
            None => true,
            Some(Type::Object) => x.is_object(),
            Some(Type::Array) => x.is_array(),
            Some(Type::String) => x.is_string(),
            Some(Type::Integer) => is_integer(x),
            Some(Type::Number) => x.is_number(),
            Some(Type::Boolean) => x.is_boolean(),
        };
        if !ok {
            self.type_error(name, s.ty.map_or("", Type::name), type_of(x));
        }
        ok
    }

    fn string(&mut self, s: &Schema, st: &str, name: &Path) {
        let len = st.chars().count() as u64;
        if let Some(max) = s.max_length
            && len > max
        {
            let at = self.at(name);
            self.errs.push(FieldError::too_long(&at, max));
        }
        if let Some(min) = s.min_length
            && len < min
        {
            let detail = format!(
                "{} should be at least {min} chars long",
                Self::subject(name)
            );
            self.invalid(name, Value::from(st), detail);
        }
        if let Some((p, re)) = &s.pattern
            && !re.is_match(st)
        {
            let detail = format!("{} should match '{p}'", Self::subject(name));
            self.invalid(name, Value::from(st), detail);
        }
        if let Some(f) = &s.format
            && !format_ok(f, st)
        {
            let detail = format!("{} must be of type {f}: {st:?}", Self::subject(name));
            self.type_invalid = true;
            self.invalid(name, Value::from(st), detail);
        }
    }

    fn number(&mut self, s: &Schema, x: &Value, name: &Path) {
        let Some(n) = x.as_f64() else { return };
        let subject = Self::subject(name);
        if let Some((min, exclusive)) = s.minimum {
            if exclusive && n <= min {
                self.invalid(
                    name,
                    x.clone(),
                    format!("{subject} should be greater than {min}"),
                );
            } else if !exclusive && n < min {
                self.invalid(
                    name,
                    x.clone(),
                    format!("{subject} should be greater than or equal to {min}"),
                );
            }
        }
        if let Some((max, exclusive)) = s.maximum {
            if exclusive && n >= max {
                self.invalid(
                    name,
                    x.clone(),
                    format!("{subject} should be less than {max}"),
                );
            } else if !exclusive && n > max {
                self.invalid(
                    name,
                    x.clone(),
                    format!("{subject} should be less than or equal to {max}"),
                );
            }
        }
        if let Some(m) = s.multiple_of
            && m > 0.0
            && (n / m).fract() != 0.0
        {
            self.invalid(
                name,
                x.clone(),
                format!("{subject} should be a multiple of {m}"),
            );
        }
    }

    /// `allOf`, `anyOf`, `oneOf`, `not`.
    fn junctors(&mut self, s: &Schema, x: &Value, name: &Path) {
        for a in &s.all_of {
            self.node(a, x, None, name, false);
        }
        let passes = |b: &Schema| {
            let mut v = Validator::new(Path::default());
            v.node(b, x, None, name, false);
            v.errs.is_empty()
        };
        let subject = Self::subject(name);
        if !s.any_of.is_empty() && !s.any_of.iter().any(passes) {
            self.invalid(
                name,
                Value::from(""),
                format!("{subject} must validate at least one schema (anyOf)"),
            );
        }
        if !s.one_of.is_empty() && s.one_of.iter().filter(|b| passes(b)).count() != 1 {
            self.invalid(
                name,
                Value::from(""),
                format!("{subject} must validate one and only one schema (oneOf)"),
            );
        }
        if let Some(n) = &s.not
            && passes(n)
        {
            self.invalid(
                name,
                Value::from(""),
                format!("{subject} must not validate the schema (not)"),
            );
        }
    }

    /// `x-kubernetes-list-type: set` items and `map` keys are unique.
    fn list_type(&mut self, s: &Schema, items: &[Value], name: &Path) {
        match &s.list_type {
            ListType::Atomic => {}
            ListType::Set => {
                let mut seen = HashSet::new();
                for (i, v) in items.iter().enumerate() {
                    if !seen.insert(v.to_string()) {
                        let at = self.at(&name.index(i));
                        self.errs.push(FieldError::duplicate(&at, v.clone()));
                    }
                }
            }
            ListType::Map(keys) => {
                let mut seen = HashSet::new();
                for (i, v) in items.iter().enumerate() {
                    let key = map_key(keys, v);
                    if !seen.insert(key.to_string()) {
                        let at = self.at(&name.index(i));
                        self.errs.push(FieldError::duplicate(&at, key));
                    }
                }
            }
        }
    }
}

/// The key fields of a map-list item, as an object (missing keys absent).
fn map_key(keys: &[String], item: &Value) -> Value {
    let mut m = serde_json::Map::new();
    for k in keys {
        if let Some(v) = item.get(k) {
            m.insert(k.clone(), v.clone());
        }
    }
    Value::Object(m)
}

/// The stored items of a list, indexed to find the one a new item
/// corresponds to: by key in a map list, by value in a set; none in an
/// atomic list (as kube-apiserver correlates). Built once per list, so a
/// list costs its length, not its length squared.
struct Correlation<'a> {
    keys: Option<&'a [String]>,
    by_key: std::collections::HashMap<String, &'a Value>,
}

impl<'a> Correlation<'a> {
    fn new(lt: &'a ListType, old: Option<&'a Value>) -> Self {
        let keys = match lt {
            ListType::Atomic => None,
            ListType::Set => Some(&[][..]),
            ListType::Map(keys) => Some(keys.as_slice()),
        };
        let items = old.and_then(Value::as_array).filter(|_| keys.is_some());
        let by_key = items
            .into_iter()
            .flatten()
            .map(|o| (Self::key(keys, o), o))
            .collect();
        Correlation { keys, by_key }
    }

    /// The identity of an item: its key fields in a map list, the item
    /// itself in a set.
    fn key(keys: Option<&[String]>, item: &Value) -> String {
        match keys {
            Some(k) if !k.is_empty() => map_key(k, item).to_string(),
            _ => item.to_string(),
        }
    }

    fn of(&self, item: &Value) -> Option<&'a Value> {
        self.keys?;
        self.by_key.get(&Self::key(self.keys, item)).copied()
    }
}

/// Whether `s` is a valid string of format `f` (unknown formats pass).
fn format_ok(f: &str, s: &str) -> bool {
    match f {
        "byte" => base64::engine::general_purpose::STANDARD.decode(s).is_ok(),
        "date" => s.parse::<jiff::civil::Date>().is_ok(),
        "date-time" | "datetime" => s.parse::<jiff::Timestamp>().is_ok(),
        "duration" => crate::machinery::validation::go_duration_nanos(s).is_some(),
        "uuid" => uuid(s),
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => s.split_once('/').is_some_and(|(ip, bits)| {
            let max = if ip.contains(':') { 128 } else { 32 };
            ip.parse::<std::net::IpAddr>().is_ok() && bits.parse::<u8>().is_ok_and(|b| b <= max)
        }),
        "hostname" => crate::machinery::validation::validate_dns1123_subdomain(s).is_ok(),
        "email" => s
            .split_once('@')
            .is_some_and(|(l, d)| !l.is_empty() && d.contains('.') && !d.starts_with('.')),
        "uri" => s.split_once(':').is_some_and(|(scheme, _)| {
            scheme
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        }),
        _ => true,
    }
}

fn uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && parts
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(p, n)| p.len() == n && p.chars().all(|c| c.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::schema::{Path, compile};

    fn errors(schema: serde_json::Value, obj: serde_json::Value) -> Vec<String> {
        let s = compile(&schema, &Path::new("s")).unwrap();
        s.validate(&obj, None)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn spec(props: serde_json::Value) -> serde_json::Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": props}}})
    }

    #[test]
    fn bounds_types_and_formats_are_worded_as_kube_apiserver_words_them() {
        let s = spec(json!({
            "replicas": {"type": "integer", "minimum": 0, "maximum": 10},
            "name": {"type": "string", "maxLength": 5, "minLength": 2, "pattern": "^[a-z]+$"},
            "mode": {"type": "string", "enum": ["a", "b"]},
            "when": {"type": "string", "format": "date-time"},
            "tags": {"type": "array", "maxItems": 1, "items": {"type": "string"}},
            "ratio": {"type": "number", "exclusiveMinimum": true, "minimum": 0},
        }));
        assert_eq!(
            errors(s.clone(), json!({"spec": {"replicas": -1}})),
            [
                "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0"
            ]
        );
        assert_eq!(
            errors(s.clone(), json!({"spec": {"replicas": 11}})),
            [
                "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10"
            ]
        );
        assert_eq!(
            errors(s.clone(), json!({"spec": {"replicas": "3"}})),
            [
                "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""
            ]
        );
        assert_eq!(
            errors(s.clone(), json!({"spec": {"name": "Abcdef"}})),
            [
                "spec.name: Too long: may not be more than 5 bytes",
                "spec.name: Invalid value: \"Abcdef\": spec.name in body should match '^[a-z]+$'",
            ]
        );
        assert_eq!(
            errors(s.clone(), json!({"spec": {"mode": "c"}})),
            ["spec.mode: Unsupported value: \"c\": supported values: \"a\", \"b\""]
        );
        assert_eq!(
            errors(s.clone(), json!({"spec": {"when": "yesterday"}})),
            [
                "spec.when: Invalid value: \"yesterday\": spec.when in body must be of type date-time: \"yesterday\""
            ]
        );
        assert_eq!(
            errors(s.clone(), json!({"spec": {"tags": ["a", "b"]}})),
            ["spec.tags: Too many: 2: must have at most 1 items"]
        );
        assert_eq!(
            errors(s.clone(), json!({"spec": {"ratio": 0}})),
            ["spec.ratio: Invalid value: 0: spec.ratio in body should be greater than 0"]
        );
        assert_eq!(
            errors(s.clone(), json!({"spec": {"name": null}})),
            [
                "spec.name: Invalid value: \"null\": spec.name in body must be of type string: \"null\""
            ]
        );
        assert!(
            errors(
                s,
                json!({"spec": {"replicas": 3, "name": "ab", "mode": "a",
            "when": "2026-11-27T06:00:00Z", "tags": ["x"], "ratio": 0.5}})
            )
            .is_empty()
        );
    }

    #[test]
    fn required_list_types_and_junctors() {
        let s = json!({"type": "object", "required": ["spec"], "properties": {"spec": {"type": "object",
        "required": ["a"],
        "properties": {
            "a": {"type": "string"},
            "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                      "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "p": {"type": "integer"}}}},
            "port": {"x-kubernetes-int-or-string": true},
            "either": {"type": "object", "properties": {"x": {"type": "string"}, "y": {"type": "string"}},
                       "oneOf": [{"required": ["x"]}, {"required": ["y"]}]},
        }}}});
        assert_eq!(errors(s.clone(), json!({})), ["spec: Required value"]);
        assert_eq!(
            errors(
                s.clone(),
                json!({"spec": {"a": "x", "set": ["a", "b", "a"],
                "ports": [{"name": "h", "p": 1}, {"name": "h", "p": 2}], "port": true}})
            ),
            [
                "spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"",
                "spec.ports[1]: Duplicate value: {\"name\":\"h\"}",
                "spec.set[2]: Duplicate value: \"a\"",
            ]
        );
        assert_eq!(
            errors(
                s.clone(),
                json!({"spec": {"a": "x", "either": {"x": "1", "y": "2"}}})
            ),
            [
                "spec.either: Invalid value: \"\": spec.either in body must validate one and only one schema (oneOf)"
            ]
        );
        assert!(
            errors(
                s,
                json!({"spec": {"a": "x", "port": "http", "either": {"y": "2"}}})
            )
            .is_empty()
        );
    }

    #[test]
    fn go_durations() {
        for ok in ["0", "1h", "1h30m", "250ms", "-1.5s", "2h45m0.5s"] {
            assert!(
                crate::machinery::validation::go_duration_nanos(ok).is_some(),
                "{ok}"
            );
        }
        for bad in ["", "1", "h", "1x", "1h-"] {
            assert!(
                crate::machinery::validation::go_duration_nanos(bad).is_none(),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_root_schema_may_restrict_the_name() {
        let s = json!({"type": "object", "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 3}}}}});
        assert_eq!(
            errors(
                s.clone(),
                json!({"metadata": {"name": "long", "labels": {"a": "b"}}})
            ),
            ["metadata.name: Too long: may not be more than 3 bytes"]
        );
        assert!(errors(s, json!({"metadata": {"name": "abc"}})).is_empty());
    }

    #[test]
    fn an_unchanged_value_passes_a_newer_stricter_schema_and_a_changed_one_does_not() {
        // Ratcheting: the stored object predates `maximum: 5`.
        let s = compile(
            &json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "required": ["name"], "properties": {
                        "name": {"type": "string"}, "n": {"type": "integer", "maximum": 5}}}},
                "size": {"type": "integer", "maximum": 5}}}}}),
            &Path::new("s"),
        )
        .unwrap();
        let old =
            json!({"spec": {"size": 9, "ports": [{"name": "a", "n": 7}, {"name": "b", "n": 1}]}});
        // Reordered, "a" unchanged, "b" changed but valid, size unchanged: passes.
        let new =
            json!({"spec": {"size": 9, "ports": [{"name": "b", "n": 2}, {"name": "a", "n": 7}]}});
        assert!(s.validate(&new, Some(&old)).is_empty());
        // Without the stored object (a create) both fail.
        assert_eq!(s.validate(&new, None).len(), 2);
        // "a" changed: it must now hold.
        let new = json!({"spec": {"size": 9, "ports": [{"name": "a", "n": 8}]}});
        let errs: Vec<String> = s
            .validate(&new, Some(&old))
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            [
                "spec.ports[0].n: Invalid value: 8: spec.ports[0].n in body should be less than or equal to 5"
            ]
        );
    }
}
