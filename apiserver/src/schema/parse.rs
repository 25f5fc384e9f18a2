//! From a CRD version's `openAPIV3Schema` to a [`Schema`], checking on the
//! way what apiextensions checks at CRD create and update: the schema is
//! structural (every field it specifies has a `type`, value validations
//! under `allOf`/`anyOf`/`oneOf`/`not` only restrict what is specified
//! outside them, `metadata` restricts at most `name` and `generateName`),
//! its extensions are consistent, its patterns compile, and its defaults
//! are pruned and valid.

use serde_json::{Map, Value};

use super::error::{FieldError, Path};
use super::node::{ListType, Schema, Type};
use super::structural::{
    Level, Nest, complete, int_or_string_any_of, nested_restrictions, structural,
};

/// Parse the root of a version's schema at `path`.
pub(super) fn parse_root(raw: &Value, path: &Path) -> Result<Schema, Vec<FieldError>> {
    let mut errs = Vec::new();
    let Some(obj) = raw.as_object() else {
        return Err(vec![FieldError::invalid(
            path,
            raw.clone(),
            "must be an object",
        )]);
    };
    if obj.get("nullable") == Some(&Value::Bool(true)) {
        errs.push(FieldError::forbidden(
            &path.child("nullable"),
            "nullable cannot be true at the root",
        ));
    }
    let schema = parse(obj, path, Level::Root, Nest::No, &mut errs);
    if errs.is_empty() {
        check_defaults(&schema, path, &mut errs);
    }
    if errs.is_empty() {
        Ok(schema)
    } else {
        // apiextensions sorts its structural errors by their text.
        errs.sort_by_key(ToString::to_string);
        errs.dedup();
        Err(errs)
    }
}

fn parse(
    obj: &Map<String, Value>,
    path: &Path,
    lvl: Level,
    nested: Nest,
    errs: &mut Vec<FieldError>,
) -> Schema {
    parse_at(obj, path, lvl, nested, 1, errs)
}

/// Parse a node that occurs at most `cardinality` times in an object
/// (the product of the bounds of the lists and maps above it), which
/// multiplies the estimated cost of its rules.
fn parse_at(
    obj: &Map<String, Value>,
    path: &Path,
    lvl: Level,
    nested: Nest,
    cardinality: u64,
    errs: &mut Vec<FieldError>,
) -> Schema {
    let mut s = Schema::default();
    unsupported(obj, path, errs);
    s.ty = match obj.get("type") {
        None => None,
        Some(Value::String(t)) => match t.as_str() {
            "" => None,
            "object" => Some(Type::Object),
            "array" => Some(Type::Array),
            "string" => Some(Type::String),
            "integer" => Some(Type::Integer),
            "number" => Some(Type::Number),
            "boolean" => Some(Type::Boolean),
            _ => {
                errs.push(FieldError::not_supported(
                    &path.child("type"),
                    Value::String(t.clone()),
                    &strings(&["array", "boolean", "integer", "number", "object", "string"]),
                ));
                None
            }
        },
        Some(other) => {
            errs.push(FieldError::invalid(
                &path.child("type"),
                other.clone(),
                "must be a string",
            ));
            None
        }
    };
    s.format = obj.get("format").and_then(Value::as_str).map(String::from);
    s.nullable = flag(obj, "nullable");
    s.default = obj.get("default").cloned();
    s.enumeration = obj
        .get("enum")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    s.required = obj
        .get("required")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|r| r.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    if let Some(p) = obj.get("pattern").and_then(Value::as_str) {
        match regex::Regex::new(p) {
            Ok(re) => s.pattern = Some((p.to_string(), re)),
            Err(e) => errs.push(FieldError::invalid(
                &path.child("pattern"),
                Value::String(p.into()),
                format!("must be a valid regular expression, but isn't: {e}"),
            )),
        }
    }
    let num = |k: &str| obj.get(k).and_then(Value::as_f64);
    let count = |k: &str| obj.get(k).and_then(Value::as_u64);
    s.minimum = num("minimum").map(|m| (m, flag(obj, "exclusiveMinimum")));
    s.maximum = num("maximum").map(|m| (m, flag(obj, "exclusiveMaximum")));
    s.multiple_of = num("multipleOf");
    s.min_length = count("minLength");
    s.max_length = count("maxLength");
    s.min_items = count("minItems");
    s.max_items = count("maxItems");
    s.min_properties = count("minProperties");
    s.max_properties = count("maxProperties");
    s.preserve_unknown = flag(obj, "x-kubernetes-preserve-unknown-fields");
    s.embedded = flag(obj, "x-kubernetes-embedded-resource");
    s.int_or_string = flag(obj, "x-kubernetes-int-or-string");
    if obj.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        errs.push(FieldError::invalid(
            &path.child("x-kubernetes-preserve-unknown-fields"),
            Value::Bool(false),
            "must be true or undefined",
        ));
    }

    let below = if nested == Nest::No {
        Nest::No
    } else {
        Nest::Yes
    };
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            let p = path.child("properties").key(k);
            match v.as_object() {
                Some(o) => {
                    let child = parse_at(o, &p, Level::Field, below, cardinality, errs);
                    s.properties.insert(k.clone(), child);
                }
                None => errs.push(FieldError::invalid(&p, v.clone(), "must be an object")),
            }
        }
    }
    match obj.get("items") {
        None => {}
        Some(Value::Object(o)) => {
            let n = bound(obj.get("maxItems"));
            s.items = Some(Box::new(parse_at(
                o,
                &path.child("items"),
                Level::Item,
                below,
                cardinality.saturating_mul(n),
                errs,
            )));
        }
        Some(other) => errs.push(FieldError::invalid(
            &path.child("items"),
            other.clone(),
            "must only have a single schema",
        )),
    }
    match obj.get("additionalProperties") {
        None => {}
        Some(Value::Bool(true)) => {
            s.additional = Some(Box::new(Schema {
                preserve_unknown: true,
                ..Schema::default()
            }));
        }
        Some(Value::Bool(false)) => errs.push(FieldError::forbidden(
            &path.child("additionalProperties"),
            "must not be false",
        )),
        Some(Value::Object(o)) => {
            let n = bound(obj.get("maxProperties"));
            s.additional = Some(Box::new(parse_at(
                o,
                &path.child("additionalProperties"),
                Level::Field,
                below,
                cardinality.saturating_mul(n),
                errs,
            )));
        }
        Some(other) => errs.push(FieldError::invalid(
            &path.child("additionalProperties"),
            other.clone(),
            "must be a boolean or an object",
        )),
    }
    if s.additional.is_some() && !s.properties.is_empty() {
        errs.push(FieldError::forbidden(
            &path.child("additionalProperties"),
            "additionalProperties and properties are mutual exclusive",
        ));
    }
    // The one exception to "no type in a value validation": the
    // int-or-string pattern `anyOf: [{type: integer}, {type: string}]`.
    let int_or_string_pattern = s.int_or_string
        && obj.get("anyOf") == Some(&serde_json::json!([{"type": "integer"}, {"type": "string"}]));
    for (key, list) in [
        ("allOf", &mut s.all_of),
        ("anyOf", &mut s.any_of),
        ("oneOf", &mut s.one_of),
    ] {
        let nest = if key == "anyOf" && int_or_string_pattern {
            Nest::TypeAllowed
        } else {
            Nest::Yes
        };
        for (i, v) in obj
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let p = path.child(key).index(i);
            if let Some(o) = v.as_object() {
                list.push(parse(o, &p, lvl, nest, errs));
            }
        }
    }
    if let Some(o) = obj.get("not").and_then(Value::as_object) {
        s.not = Some(Box::new(parse(o, &path.child("not"), lvl, Nest::Yes, errs)));
    }
    s.list_type = list_type(obj, &s, path, errs);
    if let Some(mt) = obj.get("x-kubernetes-map-type") {
        if s.ty != Some(Type::Object) {
            errs.push(type_must_be(&s, path, "object", "x-kubernetes-map-type"));
        }
        if !matches!(mt.as_str(), Some("atomic" | "granular")) {
            errs.push(FieldError::not_supported(
                &path.child("x-kubernetes-map-type"),
                mt.clone(),
                &strings(&["atomic", "granular"]),
            ));
        }
    }
    if nested != Nest::No {
        nested_restrictions(obj, &s, path, nested, errs);
    } else {
        structural(obj, &s, path, lvl, errs);
        for (key, list) in [
            ("allOf", &s.all_of),
            ("anyOf", &s.any_of),
            ("oneOf", &s.one_of),
        ] {
            let skip_int_or_string =
                s.int_or_string && key == "anyOf" && int_or_string_any_of(list);
            if skip_int_or_string {
                continue;
            }
            for (i, v) in list.iter().enumerate() {
                complete(&s, v, path, &path.child(key).index(i), errs);
            }
        }
        if let Some(n) = &s.not {
            complete(&s, n, path, &path.child("not"), errs);
        }
    }
    if nested == Nest::No {
        s.rules = rules(obj, path, cardinality, errs);
    }
    s.has_defaults = s.default.is_some()
        || s.properties.values().any(|p| p.has_defaults)
        || s.items.as_ref().is_some_and(|i| i.has_defaults)
        || s.additional.as_ref().is_some_and(|a| a.has_defaults);
    s
}

/// How many items a list or entries a map may hold: its bound, else as
/// many as the largest request could carry (kube-apiserver's estimate,
/// at the smallest item, `0,`).
fn bound(max: Option<&Value>) -> u64 {
    max.and_then(Value::as_u64)
        .unwrap_or(crate::schema::cel::cost::MAX_REQUEST_SIZE_BYTES / 2)
}

/// Compile a node's `x-kubernetes-validations`.
fn rules(
    obj: &Map<String, Value>,
    path: &Path,
    cardinality: u64,
    errs: &mut Vec<FieldError>,
) -> Vec<std::sync::Arc<crate::schema::cel::Rule>> {
    let Some(list) = obj.get("x-kubernetes-validations") else {
        return Vec::new();
    };
    let node = Value::Object(obj.clone());
    let mut out = Vec::new();
    for (j, entry) in list.as_array().into_iter().flatten().enumerate() {
        match crate::schema::cel::Rule::compile_with_cardinality(entry, &node, cardinality) {
            Ok(r) => out.push(std::sync::Arc::new(r)),
            Err(e) => {
                let at = path
                    .child("x-kubernetes-validations")
                    .index(j)
                    .child(e.field());
                errs.push(match e.reason() {
                    "FieldValueRequired" => FieldError::required(&at, e.to_string()),
                    "FieldValueForbidden" => FieldError::forbidden(&at, e.to_string()),
                    "FieldValueNotSupported" => FieldError::not_supported(
                        &at,
                        entry["reason"].clone(),
                        &crate::schema::cel::compile::SUPPORTED_REASONS.map(String::from),
                    ),
                    _ => FieldError::invalid(&at, entry.clone(), e.to_string()),
                });
            }
        }
    }
    out
}

fn flag(obj: &Map<String, Value>, key: &str) -> bool {
    obj.get(key) == Some(&Value::Bool(true))
}

fn strings(s: &[&str]) -> Vec<String> {
    s.iter().map(|s| (*s).to_string()).collect()
}

/// What apiextensions refuses in any schema. As there, a zero value is
/// not set: an empty `id`, an empty `patternProperties`, `definitions` or
/// `dependencies`, a null `additionalItems` or `$ref` (Go's zero values,
/// which a protobuf body carries).
fn unsupported(obj: &Map<String, Value>, path: &Path, errs: &mut Vec<FieldError>) {
    for key in [
        "id",
        "additionalItems",
        "patternProperties",
        "definitions",
        "dependencies",
        "$ref",
    ] {
        let set = match obj.get(key) {
            None | Some(Value::Null) => false,
            Some(Value::String(s)) if key == "id" => !s.is_empty(),
            Some(Value::Object(m)) if key != "additionalItems" => !m.is_empty(),
            Some(_) => true,
        };
        if set {
            errs.push(FieldError::forbidden(
                &path.child(key),
                format!("{key} is not supported"),
            ));
        }
    }
    if flag(obj, "uniqueItems") {
        errs.push(FieldError::forbidden(
            &path.child("uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
}

fn type_must_be(s: &Schema, path: &Path, ty: &str, because: &str) -> FieldError {
    let detail = format!("must be {ty} if {because} is specified");
    match s.ty {
        None => FieldError::required(&path.child("type"), detail),
        Some(t) => FieldError::invalid(&path.child("type"), Value::from(t.name()), detail),
    }
}

fn list_type(
    obj: &Map<String, Value>,
    s: &Schema,
    path: &Path,
    errs: &mut Vec<FieldError>,
) -> ListType {
    let keys: Vec<String> = obj
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|k| k.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let lt = match obj.get("x-kubernetes-list-type") {
        None => {
            if !keys.is_empty() {
                errs.push(FieldError::required(
                    &path.child("x-kubernetes-list-type"),
                    "must be map if x-kubernetes-list-map-keys is non-empty",
                ));
            }
            return ListType::Atomic;
        }
        Some(v) => v,
    };
    if s.ty != Some(Type::Array) {
        errs.push(type_must_be(s, path, "array", "x-kubernetes-list-type"));
    }
    let lpath = path.child("x-kubernetes-list-type");
    match lt.as_str() {
        Some("atomic") => ListType::Atomic,
        Some("set") => {
            if let Some(items) = &s.items
                && matches!(items.ty, Some(Type::Object | Type::Array))
            {
                errs.push(FieldError::invalid(
                    &path.child("items").child("x-kubernetes-list-type"),
                    lt.clone(),
                    "must be atomic as item of a list with x-kubernetes-list-type=set",
                ));
            }
            ListType::Set
        }
        Some("map") => {
            if keys.is_empty() {
                errs.push(FieldError::required(
                    &path.child("x-kubernetes-list-map-keys"),
                    "must not be empty if x-kubernetes-list-type is map",
                ));
            }
            match &s.items {
                None => errs.push(FieldError::required(
                    &path.child("items"),
                    "must have a schema if x-kubernetes-list-type is map",
                )),
                Some(items) => {
                    if items.ty != Some(Type::Object) {
                        errs.push(FieldError::invalid(
                            &path.child("items").child("type"),
                            Value::from(items.ty.map_or("", Type::name)),
                            "must be object if parent array's x-kubernetes-list-type is map",
                        ));
                    }
                    for k in &keys {
                        let Some(p) = items.properties.get(k) else {
                            continue;
                        };
                        if matches!(p.ty, Some(Type::Object | Type::Array) | None) {
                            errs.push(FieldError::invalid(
                                &path.child("items").child("properties").key(k).child("type"),
                                Value::from(p.ty.map_or("", Type::name)),
                                "must be a scalar type if parent array's x-kubernetes-list-type is map",
                            ));
                        }
                        if p.default.is_none() && !items.required.contains(k) {
                            errs.push(FieldError::required(
                                &path.child("items").child("properties").key(k).child("default"),
                                "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                            ));
                        }
                        if p.nullable {
                            errs.push(FieldError::forbidden(
                                &path.child("items").child("properties").key(k).child("nullable"),
                                "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                            ));
                        }
                    }
                    let mut seen = std::collections::BTreeSet::new();
                    if keys.iter().any(|k| !seen.insert(k)) {
                        errs.push(FieldError::invalid(
                            &path.child("x-kubernetes-list-map-keys"),
                            Value::from(keys.clone()),
                            "must not contain duplicate entries",
                        ));
                    }
                }
            }
            ListType::Map(keys)
        }
        _ => {
            errs.push(FieldError::not_supported(
                &lpath,
                lt.clone(),
                &strings(&["atomic", "set", "map"]),
            ));
            ListType::Atomic
        }
    }
}

/// Every `default` is pruned (no unknown fields) and valid against its own
/// node's schema.
fn check_defaults(s: &Schema, path: &Path, errs: &mut Vec<FieldError>) {
    if let Some(d) = &s.default {
        let dpath = path.child("default");
        let mut pruned = d.clone();
        let mut dropped = Vec::new();
        super::prune::prune(s, &mut pruned, &Path::default(), &mut dropped);
        if !dropped.is_empty() {
            errs.push(FieldError::invalid(
                &dpath,
                d.clone(),
                "must not have unknown fields",
            ));
        } else {
            errs.extend(super::validate::validate_value(s, d, None, &dpath));
        }
    }
    for (k, p) in &s.properties {
        check_defaults(p, &path.child("properties").key(k), errs);
    }
    if let Some(i) = &s.items {
        check_defaults(i, &path.child("items"), errs);
    }
    if let Some(a) = &s.additional {
        check_defaults(a, &path.child("additionalProperties"), errs);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn errors(schema: Value) -> Vec<String> {
        let path = Path::new("spec")
            .child("versions")
            .index(0)
            .child("schema")
            .child("openAPIV3Schema");
        match parse_root(&schema, &path) {
            Ok(_) => vec![],
            Err(e) => e
                .iter()
                .map(|e| {
                    e.to_string()
                        .trim_start_matches("spec.versions[0].schema.openAPIV3Schema")
                        .to_string()
                })
                .collect(),
        }
    }

    #[test]
    fn a_structural_schema_parses() {
        let s = json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["replicas"], "properties": {
                "replicas": {"type": "integer", "minimum": 0, "default": 1},
                "port": {"x-kubernetes-int-or-string": true,
                         "anyOf": [{"type": "integer"}, {"type": "string"}]},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                          "x-kubernetes-list-map-keys": ["name"],
                          "items": {"type": "object", "required": ["name"],
                                    "properties": {"name": {"type": "string"}}}},
                "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                             "x-kubernetes-preserve-unknown-fields": true},
                "oneOfThese": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                               "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
            }},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}}},
        }});
        assert_eq!(errors(s), Vec::<String>::new());
    }

    #[test]
    fn non_structural_schemas_fail_with_apiextensions_messages() {
        assert_eq!(
            errors(json!({"type": "object", "properties": {"spec": {"properties": {}}}})),
            [
                ".properties[spec].type: Required value: must not be empty for specified object fields"
            ]
        );
        assert_eq!(
            errors(json!({"properties": {}})),
            [".type: Required value: must not be empty at the root"]
        );
        assert_eq!(
            errors(json!({"type": "object", "properties": {"l": {"type": "array"}}})),
            [".properties[l].items: Required value: must be specified"]
        );
        assert_eq!(
            errors(json!({"type": "object", "properties": {
                "s": {"type": "object", "anyOf": [{"properties": {"x": {"type": "string"}}}]}}})),
            [
                ".properties[s].anyOf[0].properties[x].type: Forbidden: must be empty to be structural",
                ".properties[s].properties[x]: Required value: because it is defined in spec.versions[0].schema.openAPIV3Schema.properties[s].anyOf[0].properties[x]",
            ]
        );
        assert_eq!(
            errors(json!({"type": "object", "properties": {
                "metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}})),
            [
                ".properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"
            ]
        );
        assert_eq!(
            errors(json!({"type": "string"})),
            [".type: Invalid value: \"string\": must be object at the root"]
        );
        assert_eq!(
            errors(json!({"type": "object", "additionalProperties": {"type": "string"}})),
            [".additionalProperties: Forbidden: must not be used at the root"]
        );
    }

    #[test]
    fn bad_input_in_a_schema_is_named() {
        assert_eq!(
            errors(
                json!({"type": "object", "properties": {"n": {"type": "string", "pattern": "(a"}}})
            )
            .len(),
            1
        );
        assert!(
            errors(json!({"type": "object", "properties": {"n": {"type": "string", "pattern": "(a"}}}))[0]
                .starts_with(".properties[n].pattern: Invalid value: \"(a\": must be a valid regular expression, but isn't:")
        );
        assert_eq!(
            errors(json!({"type": "object", "properties": {"n": {"type": "strin"}}})),
            [
                ".properties[n].type: Unsupported value: \"strin\": supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\""
            ]
        );
        // Go's zero values (a protobuf body carries them) are not set.
        assert!(
            errors(json!({"type": "object", "id": "", "patternProperties": {},
                "definitions": {}, "dependencies": {}, "additionalItems": null}))
            .is_empty()
        );
        assert_eq!(
            errors(json!({"type": "object", "id": "x", "patternProperties": {"^a": {}}})),
            [
                ".id: Forbidden: id is not supported",
                ".patternProperties: Forbidden: patternProperties is not supported",
            ]
        );
        assert_eq!(
            errors(json!({"type": "object", "properties": {"n": {"$ref": "#/x"}}})),
            [
                ".properties[n].$ref: Forbidden: $ref is not supported",
                ".properties[n].type: Required value: must not be empty for specified object fields",
            ]
        );
        assert_eq!(
            errors(
                json!({"type": "object", "properties": {"l": {"type": "array", "x-kubernetes-list-type": "map",
                "items": {"type": "object", "properties": {"k": {"type": "string"}}}}}})
            ),
            [
                ".properties[l].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map"
            ]
        );
        assert_eq!(
            errors(
                json!({"type": "object", "properties": {"l": {"type": "array", "x-kubernetes-list-type": "bag",
                "items": {"type": "string"}}}})
            ),
            [
                ".properties[l].x-kubernetes-list-type: Unsupported value: \"bag\": supported values: \"atomic\", \"set\", \"map\""
            ]
        );
    }

    #[test]
    fn a_default_must_fit_its_own_schema() {
        assert_eq!(
            errors(
                json!({"type": "object", "properties": {"r": {"type": "integer", "minimum": 0, "default": -1}}})
            ),
            [
                ".properties[r].default: Invalid value: -1: in body should be greater than or equal to 0"
            ]
        );
        assert_eq!(
            errors(
                json!({"type": "object", "properties": {"o": {"type": "object",
                "properties": {"a": {"type": "string"}}, "default": {"a": "x", "b": 1}}}})
            ),
            [
                ".properties[o].default: Invalid value: {\"a\":\"x\",\"b\":1}: must not have unknown fields"
            ]
        );
        assert_eq!(
            errors(
                json!({"type": "object", "properties": {"s": {"type": "string", "default": 3}}})
            ),
            [
                ".properties[s].default: Invalid value: \"integer\": in body must be of type string: \"integer\""
            ]
        );
    }
}
