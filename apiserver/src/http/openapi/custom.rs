//! A custom resource's definitions, as kube-apiserver's CRD OpenAPI
//! builder makes them: the CRD version's `openAPIV3Schema` as written,
//! with `apiVersion` and `kind` strings and `metadata` a `$ref` to
//! ObjectMeta put in, and `x-kubernetes-group-version-kind`; beside it
//! the list kind (`WidgetList`: `items` of the kind, ListMeta). Both are
//! named by the reversed group (`dev.ward.example.v1.Widget`).
//!
//! For Swagger 2.0 ([`to_v2`]) the schema keeps what OpenAPI v2 can say
//! and this server encodes as gnostic protobuf — types, formats,
//! properties, items, additionalProperties, required, descriptions and
//! vendor extensions — as kube-apiserver drops v3-only keywords
//! (`nullable`, `oneOf`, `anyOf`, `not`…) from its v2 form; value
//! constraints (`enum`, `minimum`, `pattern`, defaults…) are dropped too
//! (kube keeps them), since no v2 client here reads them.

use serde_json::{Map, Value, json};

use super::builtin::{LIST_META, OBJECT_META, reference};
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
        props.insert("metadata".into(), reference(OBJECT_META));
    }
    schema["x-kubernetes-group-version-kind"] = gvk(&r.kind);
    let mut list = Map::new();
    type_meta(&mut list);
    list.insert(
        "items".into(),
        json!({"type": "array", "items": reference(&name(r, &r.kind))}),
    );
    list.insert("metadata".into(), reference(LIST_META));
    let list = json!({
        "type": "object",
        "required": ["items"],
        "properties": list,
        "x-kubernetes-group-version-kind": gvk(&r.list_kind),
    });
    [(name(r, &r.kind), schema), (name(r, &r.list_kind), list)]
}

fn type_meta(props: &mut Map<String, Value>) {
    props.insert("apiVersion".into(), json!({"type": "string"}));
    props.insert("kind".into(), json!({"type": "string"}));
}

/// The Swagger 2.0 form of a schema: only the keywords kept (see the
/// module's docs), recursively.
#[must_use]
pub(crate) fn to_v2(schema: &Value) -> Value {
    let Some(o) = schema.as_object() else {
        return schema.clone();
    };
    let mut out = Map::new();
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
            s["properties"]["metadata"]["$ref"],
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
        let v2 = to_v2(&s);
        let size = &v2["properties"]["spec"]["properties"]["size"];
        assert_eq!(size, &json!({"type": "integer"}));
        assert!(v2.get("x-kubernetes-group-version-kind").is_some());
    }

    #[test]
    fn without_a_schema_the_kind_keeps_unknown_fields() {
        let [(_, s), _] = definitions(&widgets(None));
        assert_eq!(s["x-kubernetes-preserve-unknown-fields"], true);
        assert!(s["properties"].get("metadata").is_some());
    }
}
