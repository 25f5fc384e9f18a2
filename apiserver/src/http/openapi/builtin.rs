//! The built-in kinds' schemas, generated from the protobuf field table
//! (`proto/schema.rs`): one definition per message, named as kube names
//! it (`api.apps.v1.DeploymentSpec` is
//! `io.k8s.api.apps.v1.DeploymentSpec`), with its fields' JSON names,
//! types (`format` `int32`, `int64`, `double`, `byte` where the wire type
//! says), arrays, maps (`additionalProperties`) and `$ref`s to the
//! messages they hold; Go's embedded structs inlined.
//!
//! The types with their own JSON form get kube's definitions: Time and
//! MicroTime are `date-time` strings, Duration and Quantity strings,
//! IntOrString `int-or-string` (with `x-kubernetes-int-or-string`),
//! RawExtension, FieldsV1 and apiextensions' JSON free objects.
//!
//! Each definition and field carries kube's description
//! (`apiserver/proto/go_docs.txt`, the Go types' swagger docs at the
//! served release); a described `$ref` is `allOf` that one `$ref`, as
//! kube-openapi's v3 builder wraps it (v2 keeps the `$ref` beside the
//! description).
//!
//! Approximate: the table has no `required` lists and no defaults; list fields carry kube's
//! `x-kubernetes-patch-strategy`/`x-kubernetes-patch-merge-key` only as
//! this server's strategic merge applies them (its merge-key table, see
//! [`crate::machinery::patch`]), so a kubectl computing a patch from the schema and
//! this server agree; and a message whose Go name has an acronym keeps
//! k8s-pb's spelling (`io.k8s.api.core.v1.HttpGetAction` where kube has
//! `HTTPGetAction`): only the name `kubectl explain` prints differs.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde_json::{Map, Value, json};

use crate::machinery::patch::ListStrategy;
use crate::machinery::proto::{Field, Message, Ty, doc, message};

/// Where the v3 documents' `$ref`s point (v2's are rebased, see
/// [`super::rebase`]).
pub(crate) const REFS: &str = "#/components/schemas/";

/// ObjectMeta's definition name.
pub(crate) const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
/// ListMeta's definition name.
pub(crate) const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";

const META: &str = "apimachinery.pkg.apis.meta.v1";
const JSON_SCHEMA: &str = "apiextensions_apiserver.pkg.apis.apiextensions.v1";

/// kube's definition name of the message `name` (`module.Message`):
/// `io.k8s.` and the module with Go's dashes (`apiextensions-apiserver`,
/// `kube-aggregator`).
#[must_use]
pub(crate) fn definition_name(name: &str) -> String {
    let (module, short) = name.rsplit_once('.').unwrap_or(("", name));
    let short = match (module, short) {
        (JSON_SCHEMA, s) if s.starts_with("Json") => format!("JSON{}", &s[4..]),
        _ => short.to_string(),
    };
    format!("io.k8s.{}.{short}", module.replace('_', "-"))
}

/// A `$ref` to the definition of the message `name`.
pub(crate) fn reference(definition: &str) -> Value {
    json!({"$ref": format!("{REFS}{definition}")})
}

/// `schema` with `description` (when there is one): a `$ref` wrapped in
/// `allOf`, as OpenAPI v3 ignores a `$ref`'s siblings.
pub(crate) fn described(schema: Value, description: Option<&str>) -> Value {
    let Some(d) = description else { return schema };
    let mut out = if schema.get("$ref").is_some() {
        json!({"allOf": [schema]})
    } else {
        schema
    };
    out["description"] = d.into();
    out
}

/// Every message's definition, by definition name: built once.
pub(crate) static DEFINITIONS: LazyLock<BTreeMap<String, Value>> = LazyLock::new(|| {
    crate::machinery::proto::all_messages()
        .iter()
        .map(|m| {
            let schema = own_json(m.name).unwrap_or_else(|| object(m));
            (definition_name(m.name), schema)
        })
        .collect()
});

/// The schema of the types Go decodes with their own `UnmarshalJSON`, as
/// kube-openapi publishes them; None for a message that is an object of
/// its fields.
fn own_json(name: &str) -> Option<Value> {
    let (module, short) = name.rsplit_once('.').unwrap_or(("", name));
    Some(match (module, short) {
        (META, "Time" | "MicroTime" | "Timestamp") => {
            json!({"type": "string", "format": "date-time"})
        }
        (META, "Duration") | ("apimachinery.pkg.api.resource", "Quantity" | "QuantityValue") => {
            json!({"type": "string"})
        }
        ("apimachinery.pkg.util.intstr", "IntOrString") => json!({
            "type": "string", "format": "int-or-string", "x-kubernetes-int-or-string": true,
        }),
        (META, "FieldsV1") | ("apimachinery.pkg.runtime", "RawExtension" | "Unknown") => {
            json!({"type": "object"})
        }
        (
            JSON_SCHEMA,
            "Json"
            | "JsonSchemaPropsOrArray"
            | "JsonSchemaPropsOrBool"
            | "JsonSchemaPropsOrStringArray",
        ) => json!({"x-kubernetes-preserve-unknown-fields": true}),
        (META, "Verbs") | (_, "ExtraValue") => strings(),
        _ => return None,
    })
}

fn strings() -> Value {
    json!({"type": "array", "items": {"type": "string"}})
}

/// A message as an object of its fields; `apiVersion` and `kind` for the
/// Go types that embed TypeMeta.
fn object(m: &Message) -> Value {
    let mut props = Map::new();
    if crate::registry::fields::has_type_meta(m) {
        for f in ["apiVersion", "kind"] {
            let d = doc(&format!("{META}.TypeMeta"), f);
            props.insert(f.into(), described(json!({"type": "string"}), d));
        }
    }
    fields(m, m, &mut props);
    described(
        json!({"type": "object", "properties": props}),
        doc(m.name, ""),
    )
}

/// The fields of `m` (of `owner`, which inlines it when Go embeds it).
fn fields(owner: &Message, m: &Message, props: &mut Map<String, Value>) {
    for f in m.fields {
        if f.json.is_empty() {
            if let Ty::Message(inner) = f.ty
                && let Some(inner) = message(inner)
            {
                fields(owner, inner, props);
            }
            continue;
        }
        props.insert(
            f.json.to_string(),
            described(field(owner, f), doc(m.name, f.json)),
        );
    }
}

fn field(owner: &Message, f: &Field) -> Value {
    let one = value(f.ty);
    if !f.repeated {
        return one;
    }
    let mut s = json!({"type": "array", "items": one});
    if let Some((strategy, key)) = patch_strategy(owner.name, f.json) {
        s["x-kubernetes-patch-strategy"] = json!(strategy);
        if let Some(key) = key {
            s["x-kubernetes-patch-merge-key"] = json!(key);
        }
    }
    s
}

/// The schema of one value of type `ty`.
fn value(ty: Ty) -> Value {
    match ty {
        Ty::String => json!({"type": "string"}),
        Ty::Bool => json!({"type": "boolean"}),
        Ty::Int32 => json!({"type": "integer", "format": "int32"}),
        Ty::Int64 => json!({"type": "integer", "format": "int64"}),
        Ty::Double => json!({"type": "number", "format": "double"}),
        Ty::Bytes => json!({"type": "string", "format": "byte"}),
        Ty::MapString => json!({"type": "object", "additionalProperties": {"type": "string"}}),
        Ty::MapBytes => json!({"type": "object",
                               "additionalProperties": {"type": "string", "format": "byte"}}),
        Ty::MapMessage(name) => {
            json!({"type": "object", "additionalProperties": message_value(name)})
        }
        Ty::Message(name) => message_value(name),
    }
}

/// A message-typed value: a `$ref`, except for Go's named string slices,
/// which kube inlines.
fn message_value(name: &str) -> Value {
    match name.rsplit_once('.') {
        Some((META, "Verbs") | (_, "ExtraValue")) => strings(),
        _ => reference(&definition_name(name)),
    }
}

/// The strategic merge strategy of list `field` of the message `owner`,
/// as this server's merge-key table ([`crate::machinery::patch`]) decides it:
/// `("merge", Some(key))` for a keyed list, `("merge", None)` for a set of
/// primitives, None for an atomic list.
fn patch_strategy(owner: &str, field: &str) -> Option<(&'static str, Option<&'static str>)> {
    let short = owner.rsplit('.').next().unwrap_or(owner);
    let key = match field {
        "ports" if short.starts_with("Container") || short.starts_with("EphemeralContainer") => {
            "containerPort"
        }
        "ports" if short == "ServiceSpec" => "port",
        _ => match crate::machinery::patch::named_strategy(field)? {
            ListStrategy::Keyed(key) => key,
            ListStrategy::Set => return Some(("merge", None)),
            ListStrategy::Atomic => return None,
        },
    };
    Some(("merge", Some(key)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(name: &str) -> &'static Value {
        DEFINITIONS.get(name).unwrap_or_else(|| panic!("no {name}"))
    }

    #[test]
    fn names_are_kubes() {
        assert_eq!(
            definition_name("api.apps.v1.DeploymentSpec"),
            "io.k8s.api.apps.v1.DeploymentSpec"
        );
        assert_eq!(
            definition_name("apimachinery.pkg.apis.meta.v1.ObjectMeta"),
            OBJECT_META
        );
        assert_eq!(
            definition_name("apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaProps"),
            "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps"
        );
        assert_eq!(
            definition_name("kube_aggregator.pkg.apis.apiregistration.v1.APIService"),
            "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIService"
        );
    }

    #[test]
    fn a_deployment_has_typed_fields_and_refs() {
        let d = def("io.k8s.api.apps.v1.Deployment");
        assert_eq!(d["properties"]["apiVersion"]["type"], "string");
        assert!(
            d["description"]
                .as_str()
                .unwrap()
                .starts_with("Deployment enables declarative updates")
        );
        // A described `$ref` is `allOf` that one `$ref`.
        assert_eq!(
            d["properties"]["metadata"]["allOf"][0]["$ref"],
            format!("{REFS}{OBJECT_META}")
        );
        assert!(
            d["properties"]["metadata"]["description"]
                .as_str()
                .unwrap()
                .starts_with("Standard object's metadata.")
        );
        assert_eq!(
            d["properties"]["spec"]["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"
        );
        let spec = &def("io.k8s.api.apps.v1.DeploymentSpec")["properties"];
        assert_eq!(
            spec["replicas"],
            json!({"type": "integer", "format": "int32", "description": "Number of desired pods. \
                This is a pointer to distinguish between explicit zero and not specified. Defaults to 1."})
        );
        for f in ["selector", "template", "strategy", "minReadySeconds"] {
            assert!(spec.get(f).is_some(), "{f}");
        }
        // A template has ObjectMeta, no TypeMeta.
        let template = &def("io.k8s.api.core.v1.PodTemplateSpec")["properties"];
        assert!(template.get("kind").is_none());
        let containers = &def("io.k8s.api.core.v1.PodSpec")["properties"]["containers"];
        assert_eq!(containers["type"], "array");
        assert_eq!(
            containers["items"]["$ref"],
            format!("{REFS}io.k8s.api.core.v1.Container")
        );
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        let c = &def("io.k8s.api.core.v1.Container")["properties"];
        assert_eq!(c["image"]["type"], "string");
        assert_eq!(c["ports"]["x-kubernetes-patch-merge-key"], "containerPort");
        assert!(c["args"].get("x-kubernetes-patch-strategy").is_none());
        // Probe inlines ProbeHandler (a Go embedded struct).
        assert!(
            def("io.k8s.api.core.v1.Probe")["properties"]
                .get("httpGet")
                .is_some()
        );
    }

    #[test]
    fn maps_and_types_with_their_own_json() {
        let meta = &def(OBJECT_META)["properties"];
        assert_eq!(
            meta["labels"]["additionalProperties"],
            json!({"type": "string"})
        );
        assert_eq!(meta["generation"]["format"], "int64");
        assert_eq!(meta["finalizers"]["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(
            meta["creationTimestamp"]["allOf"][0]["$ref"],
            format!("{REFS}io.k8s.apimachinery.pkg.apis.meta.v1.Time")
        );
        assert_eq!(
            def("io.k8s.apimachinery.pkg.apis.meta.v1.Time"),
            &json!({"type": "string", "format": "date-time"})
        );
        let port = &def("io.k8s.api.core.v1.ServicePort")["properties"]["targetPort"];
        assert_eq!(
            port["allOf"][0]["$ref"],
            format!("{REFS}io.k8s.apimachinery.pkg.util.intstr.IntOrString")
        );
        let ios = def("io.k8s.apimachinery.pkg.util.intstr.IntOrString");
        assert_eq!(ios["x-kubernetes-int-or-string"], true);
        let limits = &def("io.k8s.api.core.v1.ResourceRequirements")["properties"]["limits"];
        assert_eq!(
            limits["additionalProperties"]["$ref"],
            format!("{REFS}io.k8s.apimachinery.pkg.api.resource.Quantity")
        );
        assert_eq!(
            def("io.k8s.apimachinery.pkg.api.resource.Quantity")["type"],
            "string"
        );
        assert_eq!(
            def("io.k8s.api.core.v1.Secret")["properties"]["data"]["additionalProperties"]["format"],
            "byte"
        );
    }

    /// Every `$ref` of every definition names a definition.
    #[test]
    fn every_reference_resolves() {
        fn walk(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(m) => {
                    if let Some(Value::String(r)) = m.get("$ref") {
                        out.push(r.clone());
                    }
                    m.values().for_each(|v| walk(v, out));
                }
                Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
                _ => {}
            }
        }
        let mut refs = Vec::new();
        DEFINITIONS.values().for_each(|d| walk(d, &mut refs));
        for r in refs {
            let name = r.strip_prefix(REFS).unwrap();
            assert!(DEFINITIONS.contains_key(name), "{r}");
        }
    }
}
