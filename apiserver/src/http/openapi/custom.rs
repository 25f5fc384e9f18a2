//! A custom resource's definitions, as kube-apiserver's CRD OpenAPI
//! builder makes them: the CRD version's `openAPIV3Schema` as written,
//! with `apiVersion` and `kind` strings and `metadata` a `$ref` to
//! ObjectMeta put in, and `x-kubernetes-group-version-kind`; beside it
//! the list kind (`WidgetList`: `items` of the kind, ListMeta). Both are
//! named by the reversed group (`dev.ward.example.v1.Widget`).
//!
//! For Swagger 2.0 ([`definitions_v2`]) the kind's schema is made as
//! kube-apiserver's `BuildOpenAPIV2` makes it (`ToStructuralOpenAPIV2`,
//! then `PruneDefaults`): the junctors (`allOf`, `oneOf`, `anyOf`,
//! `not`) and defaults dropped; a `nullable` node loses its type, items
//! and properties, a node keeping unknown fields its items and
//! properties (and the type `object`), an array left without items its
//! type; a kind without a schema, or keeping unknown fields at its root,
//! is only `type: object`. Every embedded resource gets `apiVersion`,
//! `kind` and `metadata`, and requires the first two. Value constraints
//! (`enum`, `pattern`, `minimum`…) stay, as there.

use serde_json::{Map, Value, json};

use super::builtin::{LIST_META, OBJECT_META, described, reference};
use crate::registry::resources::ResourceInfo;

/// The definition name of a custom resource's kind (or of `kind`):
/// the reversed group, the version, the kind.
#[must_use]
pub(crate) fn name(r: &ResourceInfo, kind: &str) -> String {
    let group: Vec<&str> = r.group.split('.').rev().collect();
    format!("{}.{}.{kind}", group.join("."), r.version)
}

/// The kind's definition and its list's, by name.
#[must_use]
pub(crate) fn definitions(r: &ResourceInfo) -> [(String, Value); 2] {
    let gvk = |kind: &str| json!([{"group": r.group, "version": r.version, "kind": kind}]);
    let mut schema = match &r.schema {
        Some(s) if s.raw.is_object() => s.raw.clone(),
        _ => json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    };
    let props = schema
        .as_object_mut()
        .map(|o| o.entry("properties").or_insert_with(|| json!({})));
    if let Some(Value::Object(props)) = props {
        type_meta(props);
        props.insert(
            "metadata".into(),
            described(reference(OBJECT_META), Some(&object_meta_doc())),
        );
    }
    schema["x-kubernetes-group-version-kind"] = gvk(&r.kind);
    let mut list = Map::new();
    type_meta(&mut list);
    list.insert(
        "items".into(),
        json!({"type": "array", "items": reference(&name(r, &r.kind)),
            "description": format!("List of {}. {CONVENTIONS}", r.plural)}),
    );
    list.insert("metadata".into(), reference(LIST_META));
    let list = json!({
        "type": "object",
        "description": format!("{} is a list of {}", r.list_kind, r.kind),
        "required": ["items"],
        "properties": list,
        "x-kubernetes-group-version-kind": gvk(&r.list_kind),
    });
    [(name(r, &r.kind), schema), (name(r, &r.list_kind), list)]
}

/// The kind's and its list's definitions in Swagger 2.0's form (see the
/// module's docs), their `$ref`s still to `#/components/schemas/`.
#[must_use]
pub(crate) fn definitions_v2(r: &ResourceInfo) -> [(String, Value); 2] {
    let [(kind, _), (list_name, list)] = definitions(r);
    let raw = r.schema.as_ref().map(|s| &s.raw).filter(|s| s.is_object());
    let mut schema = match raw {
        Some(s) if s["x-kubernetes-preserve-unknown-fields"] != true => {
            let mut s = v2_node(s);
            if let Some(props) = s
                .as_object_mut()
                .map(|o| o.entry("properties").or_insert_with(|| json!({})))
                && let Value::Object(props) = props
            {
                type_meta(props);
                props.insert("metadata".into(), object_meta_v2());
            }
            embedded_meta(&mut s);
            s
        }
        _ => json!({"type": "object"}),
    };
    schema["x-kubernetes-group-version-kind"] =
        json!([{"group": r.group, "version": r.version, "kind": r.kind}]);
    [(kind, schema), (list_name, list)]
}

/// One node of a structural schema as `ToStructuralOpenAPIV2` and
/// `PruneDefaults` leave it, its children first.
fn v2_node(s: &Value) -> Value {
    let Some(o) = s.as_object() else {
        return s.clone();
    };
    let mut out = Map::new();
    for (k, v) in o {
        let kept = match k.as_str() {
            "allOf" | "oneOf" | "anyOf" | "not" | "nullable" | "default" => None,
            "properties" => v
                .as_object()
                .map(|p| Value::Object(p.iter().map(|(k, s)| (k.clone(), v2_node(s))).collect())),
            "items" | "additionalProperties" if v.is_object() => Some(v2_node(v)),
            _ => Some(v.clone()),
        };
        if let Some(v) = kept {
            out.insert(k.clone(), v);
        }
    }
    let is = |v: &Value, k: &str| v.get(k) == Some(&Value::Bool(true));
    let preserve = is(s, "x-kubernetes-preserve-unknown-fields");
    if is(s, "nullable") || preserve {
        if is(s, "nullable") {
            out.remove("type");
        }
        out.remove("items");
        out.remove("properties");
    }
    if (!out.contains_key("items") && out.get("type") == Some(&json!("array")))
        || (preserve && out.get("type") == Some(&json!("object")))
    {
        out.remove("type");
    }
    // A nullable property is not required; nor is anything of a map
    // whose values are nullable.
    let nullable_values = o
        .get("additionalProperties")
        .is_some_and(|a| is(a, "nullable"));
    if let Some(Value::Array(required)) = out.get_mut("required") {
        let props = out_props(o);
        required.retain(|f| {
            f.as_str()
                .and_then(|f| props.and_then(|p| p.get(f)))
                .is_none_or(|p| !is(p, "nullable"))
        });
    }
    if nullable_values {
        out.remove("required");
    }
    Value::Object(out)
}

/// The properties of a node as written (before its own transformation).
fn out_props(o: &Map<String, Value>) -> Option<&Map<String, Value>> {
    if o.get("nullable") == Some(&Value::Bool(true))
        || o.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
    {
        return None;
    }
    o.get("properties").and_then(Value::as_object)
}

/// `addEmbeddedProperties`: every embedded resource (one that does not
/// keep unknown fields) gets `apiVersion`, `kind` and `metadata`, and
/// requires `kind` and `apiVersion`.
fn embedded_meta(s: &mut Value) {
    let Some(o) = s.as_object_mut() else { return };
    if let Some(Value::Object(props)) = o.get_mut("properties") {
        props.values_mut().for_each(embedded_meta);
    }
    for k in ["items", "additionalProperties"] {
        if let Some(v) = o.get_mut(k) {
            embedded_meta(v);
        }
    }
    let is = |k: &str| o.get(k) == Some(&Value::Bool(true));
    if is("x-kubernetes-preserve-unknown-fields") || !is("x-kubernetes-embedded-resource") {
        return;
    }
    if let Value::Object(props) = o.entry("properties").or_insert_with(|| json!({})) {
        props.insert(
            "apiVersion".into(),
            json!({"type": "string", "description": format!("apiVersion defines the versioned schema of this representation of an object. {CONVENTIONS}#resources")}),
        );
        props.insert(
            "kind".into(),
            json!({"type": "string", "description": format!("kind is a string value representing the type of this object. In CamelCase. {CONVENTIONS}#types-kinds")}),
        );
        props.insert("metadata".into(), object_meta_v2());
    }
    if let Value::Array(required) = o.entry("required").or_insert_with(|| json!([])) {
        for f in ["kind", "apiVersion"] {
            if !required.iter().any(|r| r == f) {
                required.push(f.into());
            }
        }
    }
}

/// Where the API conventions explain a field (kube's descriptions end so).
const CONVENTIONS: &str = "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md";

/// A kind's `apiVersion` and `kind`, described as TypeMeta's.
fn type_meta(props: &mut Map<String, Value>) {
    props.insert(
        "apiVersion".into(),
        json!({"type": "string", "description": format!("APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. {CONVENTIONS}#resources")}),
    );
    props.insert(
        "kind".into(),
        json!({"type": "string", "description": format!("Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. {CONVENTIONS}#types-kinds")}),
    );
}

/// How kube-apiserver describes a custom resource's `metadata`.
fn object_meta_doc() -> String {
    format!("Standard object's metadata. {CONVENTIONS}#metadata")
}

/// A kind's `metadata` in Swagger 2.0: the ObjectMeta `$ref`, described.
fn object_meta_v2() -> Value {
    let mut m = reference(OBJECT_META);
    m["description"] = object_meta_doc().into();
    m
}

/// The Swagger 2.0 form of a built-in definition: types, formats,
/// properties, items, additionalProperties, required, descriptions and
/// vendor extensions, recursively; a described `$ref` (`allOf` one
/// `$ref`) is the `$ref` beside its description.
#[must_use]
pub(crate) fn to_v2(schema: &Value) -> Value {
    let Some(o) = schema.as_object() else {
        return schema.clone();
    };
    let mut out = Map::new();
    if let Some([one]) = o.get("allOf").and_then(Value::as_array).map(Vec::as_slice)
        && let Some(r) = one.get("$ref")
    {
        out.insert("$ref".into(), r.clone());
    }
    for (k, v) in o {
        let kept = match k.as_str() {
            "type" | "format" | "title" | "description" | "$ref" => {
                v.is_string().then(|| v.clone())
            }
            "required" => v
                .as_array()
                .is_some_and(|a| a.iter().all(Value::is_string))
                .then(|| v.clone()),
            "properties" => v
                .as_object()
                .map(|p| Value::Object(p.iter().map(|(k, s)| (k.clone(), to_v2(s))).collect())),
            "items" if v.is_object() => Some(to_v2(v)),
            "additionalProperties" if v.is_object() => Some(to_v2(v)),
            "additionalProperties" if v.is_boolean() => Some(v.clone()),
            _ if k.starts_with("x-") => Some(v.clone()),
            _ => None,
        };
        if let Some(v) = kept {
            out.insert(k.clone(), v);
        }
    }
    Value::Object(out)
}

#[cfg(test)]
pub(super) mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::schema::{Path, compile};

    pub(crate) fn widgets(raw: Option<Value>) -> ResourceInfo {
        let mut r = crate::registry::resources::builtin_resources()
            .into_iter()
            .find(|r| r.kind == "ConfigMap")
            .unwrap();
        r.group = "example.ward.dev".into();
        r.kind = "Widget".into();
        r.list_kind = "WidgetList".into();
        r.plural = "widgets".into();
        r.builtin = false;
        r.schema = raw.map(|raw| Arc::new(compile(&raw, &Path::new("schema")).unwrap()));
        r
    }

    #[test]
    fn the_crd_schema_is_served_with_type_meta_and_object_meta() {
        let raw = json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"size": {"type": "integer", "minimum": 1}, "color": {"type": "string"}}}}});
        let r = widgets(Some(raw));
        let [(kind, s), (list, l)] = definitions(&r);
        assert_eq!(kind, "dev.ward.example.v1.Widget");
        assert_eq!(list, "dev.ward.example.v1.WidgetList");
        assert_eq!(s["properties"]["spec"]["properties"]["size"]["minimum"], 1);
        assert_eq!(s["properties"]["kind"]["type"], "string");
        assert_eq!(
            s["properties"]["metadata"]["allOf"][0]["$ref"],
            format!("#/components/schemas/{OBJECT_META}")
        );
        assert_eq!(
            s["x-kubernetes-group-version-kind"],
            json!([{"group": "example.ward.dev", "version": "v1", "kind": "Widget"}])
        );
        assert_eq!(
            l["properties"]["items"]["items"]["$ref"],
            "#/components/schemas/dev.ward.example.v1.Widget"
        );
        let [(_, v2), _] = definitions_v2(&r);
        let size = &v2["properties"]["spec"]["properties"]["size"];
        assert_eq!(size, &json!({"type": "integer", "minimum": 1}));
        assert!(v2.get("x-kubernetes-group-version-kind").is_some());
    }

    #[test]
    fn the_v2_schema_is_what_kube_apiserver_publishes() {
        let raw = json!({"type": "object", "description": "Foo", "properties": {
            "spec": {"type": "object", "required": ["a", "n"], "properties": {
                "a": {"type": "string", "enum": ["x", "y"], "default": "x", "pattern": "^[xy]$"},
                "n": {"type": "object", "nullable": true, "properties": {"b": {"type": "string"}}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                    "properties": {"c": {"type": "string"}}},
                "list": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                "one": {"type": "string", "anyOf": [{"pattern": "a"}, {"pattern": "b"}]},
                "tmpl": {"type": "object", "x-kubernetes-embedded-resource": true,
                    "properties": {"spec": {"type": "object"}}}}}}});
        let [(_, s), _] = definitions_v2(&widgets(Some(raw)));
        let spec = &s["properties"]["spec"];
        assert_eq!(s["description"], "Foo");
        assert_eq!(
            spec["required"],
            json!(["a"]),
            "a nullable property is not required"
        );
        let p = &spec["properties"];
        assert_eq!(
            p["a"],
            json!({"type": "string", "enum": ["x", "y"], "pattern": "^[xy]$"})
        );
        assert_eq!(p["n"], json!({}));
        assert_eq!(
            p["free"],
            json!({"x-kubernetes-preserve-unknown-fields": true})
        );
        assert_eq!(p["list"]["x-kubernetes-list-type"], "set");
        assert_eq!(p["one"], json!({"type": "string"}));
        assert_eq!(p["tmpl"]["required"], json!(["kind", "apiVersion"]));
        assert!(p["tmpl"]["properties"]["metadata"]["$ref"].is_string());
        assert_eq!(s["properties"]["kind"]["type"], "string");
        assert!(s["properties"]["metadata"]["description"].is_string());
        let free = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        for r in [widgets(None), widgets(Some(free))] {
            let [(_, s), _] = definitions_v2(&r);
            assert_eq!(
                s,
                json!({"type": "object", "x-kubernetes-group-version-kind":
                    [{"group": "example.ward.dev", "version": "v1", "kind": "Widget"}]})
            );
        }
    }

    #[test]
    fn without_a_schema_the_kind_keeps_unknown_fields() {
        let [(_, s), _] = definitions(&widgets(None));
        assert_eq!(s["x-kubernetes-preserve-unknown-fields"], true);
        assert!(s["properties"].get("metadata").is_some());
    }
}
