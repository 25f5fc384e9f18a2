//! The OpenAPI documents: `/openapi/v3` (kubectl 1.29+ validate with it,
//! kubectl 1.27+ explain with it), an index of group-versions and per
//! group-version a document; and `/openapi/v2` (kubectl 1.27 and 1.28,
//! which fetch it as gnostic protobuf, see [`crate::machinery::proto::openapi_v2`];
//! every kubectl's `apply` computes its patches from it), one Swagger 2.0
//! document for every kind. Both carry per kind a PATCH operation with
//! `x-kubernetes-group-version-kind` and the `fieldValidation` query
//! parameter, which tells kubectl the server validates fields itself.
//!
//! Schemas are real: a built-in kind's fields from the protobuf field
//! table (`builtin`), a custom resource's from its CRD (`custom`),
//! each document holding the definitions its kinds refer to, named as
//! kube names them. What is approximate (no descriptions, no `required`,
//! acronyms in some names) is in `builtin`'s docs. The documents are
//! built once per change of the served resources ([`Cache`]).

mod builtin;
mod cache;
mod custom;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use crate::registry::resources::{Registry, ResourceInfo};

pub use cache::Cache;

/// The `paths` key of a group-version: `api/v1` or `apis/{group}/{version}`.
fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: the index of group-version documents, each URL with
/// the hash of its document (kubectl caches a document by its URL).
/// Builds every document: serve [`Cache::index`] instead.
#[cfg(test)]
#[must_use]
pub(crate) fn index(registry: &Registry) -> Value {
    let docs = group_versions(registry)
        .into_iter()
        .filter_map(|(g, v)| document(registry, &g, &v).map(|d| ((g, v), d)))
        .map(|(gv, d)| (gv, ward_base::fnv1a(d.to_string().as_bytes())));
    index_of(docs)
}

/// The index of documents with these hashes.
fn index_of(hashes: impl IntoIterator<Item = ((String, String), u64)>) -> Value {
    let paths: Map<String, Value> = hashes
        .into_iter()
        .map(|((g, v), hash)| {
            let p = gv_path(&g, &v);
            let url = format!("/openapi/v3/{p}?hash={hash:016X}");
            (p, json!({"serverRelativeURL": url}))
        })
        .collect();
    json!({"paths": paths})
}

/// Every served group-version.
fn group_versions(registry: &Registry) -> BTreeSet<(String, String)> {
    registry
        .all()
        .iter()
        .map(|r| (r.group.clone(), r.version.clone()))
        .collect()
}

/// The definition name of a kind's schema: kube's for a built-in
/// (`io.k8s.api.apps.v1.Deployment`), the reversed group for a custom
/// resource (`dev.ward.example.v1.Widget`).
fn schema_name(r: &ResourceInfo) -> String {
    kind_name(r, &r.kind)
}

/// [`schema_name`] of `kind` (the resource's kind or list kind).
fn kind_name(r: &ResourceInfo, kind: &str) -> String {
    if r.builtin
        && let Some(m) = crate::machinery::proto::message_of_kind(&r.api_version(), kind)
    {
        return builtin::definition_name(m.name);
    }
    custom::name(r, kind)
}

/// The definitions a kind brings into a document: its own and its list's
/// (a custom resource's from its CRD, see [`custom`]).
fn kind_definitions(r: &ResourceInfo) -> Vec<(String, Value)> {
    if !r.builtin {
        return custom::definitions(r).into();
    }
    [&r.kind, &r.list_kind]
        .into_iter()
        .filter_map(|k| {
            let name = kind_name(r, k);
            builtin::DEFINITIONS.get(&name).map(|d| (name, d.clone()))
        })
        .collect()
}

/// The definitions of `rs` and every built-in definition they refer to,
/// transitively; each served built-in kind (and list) among them with its
/// `x-kubernetes-group-version-kind`, as kube-apiserver's.
fn definitions(registry: &Registry, rs: &[std::sync::Arc<ResourceInfo>]) -> Map<String, Value> {
    let mut out: BTreeMap<String, Value> = BTreeMap::new();
    let mut todo: Vec<String> = Vec::new();
    for r in rs {
        for (name, d) in kind_definitions(r) {
            refs(&d, &mut todo);
            out.insert(name, d);
        }
    }
    while let Some(name) = todo.pop() {
        if out.contains_key(&name) {
            continue;
        }
        if let Some(d) = builtin::DEFINITIONS.get(&name) {
            refs(d, &mut todo);
            out.insert(name, d.clone());
        }
    }
    for r in registry.all().iter().filter(|r| r.builtin) {
        for kind in [&r.kind, &r.list_kind] {
            if let Some(Value::Object(d)) = out.get_mut(&kind_name(r, kind)) {
                d.insert(
                    "x-kubernetes-group-version-kind".into(),
                    json!([{"group": r.group, "version": r.version, "kind": kind}]),
                );
            }
        }
    }
    out.into_iter().collect()
}

/// The definition names `v`'s `$ref`s point to, pushed on `out`.
fn refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(r) = m
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix(builtin::REFS))
            {
                out.push(r.to_string());
            }
            m.values().for_each(|v| refs(v, out));
        }
        Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
        _ => {}
    }
}

/// [`definitions`] in Swagger 2.0's form: a custom resource's as
/// [`custom::definitions_v2`] makes them, a built-in's with what
/// [`custom::to_v2`] keeps; every `$ref` to `#/definitions/`.
fn definitions_v2(registry: &Registry, rs: &[std::sync::Arc<ResourceInfo>]) -> Map<String, Value> {
    let mut out: Map<String, Value> = definitions(registry, rs)
        .iter()
        .map(|(k, d)| (k.clone(), custom::to_v2(d)))
        .collect();
    for r in rs.iter().filter(|r| !r.builtin) {
        out.extend(custom::definitions_v2(r));
    }
    out.values_mut().for_each(rebase);
    out
}

/// `$ref`s to `#/components/schemas/` rebased to `#/definitions/`.
fn rebase(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get_mut("$ref")
                && let Some(name) = r.strip_prefix(builtin::REFS)
            {
                *r = format!("#/definitions/{name}");
            }
            m.values_mut().for_each(rebase);
        }
        Value::Array(a) => a.iter_mut().for_each(rebase),
        _ => {}
    }
}

fn parameters() -> Value {
    json!([
        {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "fieldValidation", "in": "query",
         "description": "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields.",
         "schema": {"type": "string", "uniqueItems": true}},
        {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}},
    ])
}

fn operations(r: &ResourceInfo) -> Value {
    let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
    let sref = json!({"$ref": format!("#/components/schemas/{}", schema_name(r))});
    let body = |types: &[&str]| {
        let content: Map<String, Value> = types
            .iter()
            .map(|t| (t.to_string(), json!({"schema": sref.clone()})))
            .collect();
        json!({"content": content, "required": true})
    };
    let ok = json!({"200": {"description": "OK", "content": {"application/json": {"schema": sref.clone()}}}});
    // Strategic merge is served for built-ins but not advertised here:
    // advertised, kubectl 1.29+ compute apply's patch from these v3
    // schemas, whose patch strategies are only this server's merge-key
    // table's (not verified with real kubectl); without the advertisement
    // they compute it as before.
    let patch_types = [
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/apply-patch+yaml",
    ];
    json!({
        "get": {"operationId": format!("read{}", r.kind), "responses": ok,
                "x-kubernetes-action": "get", "x-kubernetes-group-version-kind": gvk},
        "put": {"operationId": format!("replace{}", r.kind), "requestBody": body(&["*/*"]),
                "parameters": parameters(), "responses": ok,
                "x-kubernetes-action": "put", "x-kubernetes-group-version-kind": gvk},
        "patch": {"operationId": format!("patch{}", r.kind), "requestBody": body(&patch_types),
                  "parameters": parameters(), "responses": ok,
                  "x-kubernetes-action": "patch", "x-kubernetes-group-version-kind": gvk},
        "delete": {"operationId": format!("delete{}", r.kind), "responses": ok,
                   "x-kubernetes-action": "delete", "x-kubernetes-group-version-kind": gvk},
    })
}

/// `/openapi/v3/api/v1` or `/openapi/v3/apis/{group}/{version}`: the
/// group-version's kinds' paths and the definitions they refer to. Builds
/// the document: serve [`Cache::document`] instead.
#[must_use]
pub fn document(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let rs: Vec<_> = registry
        .all()
        .into_iter()
        .filter(|r| r.group == group && r.version == version)
        .collect();
    if rs.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    for r in &rs {
        paths.insert(item_path(r), operations(r));
    }
    let schemas = definitions(registry, &rs);
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": format!("v1.{}.0", crate::http::discovery::KUBE_MINOR)},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// The item path of a kind: `/api/v1/namespaces/{namespace}/configmaps/{name}`.
fn item_path(r: &ResourceInfo) -> String {
    let prefix = format!("/{}", gv_path(&r.group, &r.version));
    if r.namespaced {
        format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", r.plural)
    } else {
        format!("{prefix}/{}/{{name}}", r.plural)
    }
}

/// `/openapi/v2`: one Swagger 2.0 document with every served kind — per
/// kind its item path's get, put, patch and delete (the query parameters
/// `parameters` lists, in Swagger 2.0's form) and its definitions (every
/// definition a served kind refers to, in v2's form). As in the v3
/// documents, PATCH does not advertise strategic merge. Builds the whole
/// document: serve [`Cache::v2`] instead.
#[must_use]
pub fn v2(registry: &Registry) -> Value {
    let params: Vec<Value> = parameters()
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let mut q = json!({"name": p["name"], "in": "query", "uniqueItems": true,
                               "type": p["schema"]["type"]});
            if let Some(d) = p.get("description") {
                q["description"] = d.clone();
            }
            q
        })
        .collect();
    let mut paths = Map::new();
    let rs = registry.all();
    for r in &rs {
        let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
        let op = |action: &str, verb: &str| {
            json!({"operationId": format!("{verb}{}", r.kind),
                   "responses": {"200": {"description": "OK"}},
                   "x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk})
        };
        let (mut put, mut patch) = (op("put", "replace"), op("patch", "patch"));
        put["parameters"] = json!(params);
        patch["parameters"] = json!(params);
        patch["consumes"] = json!([
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/apply-patch+yaml",
        ]);
        paths.insert(
            item_path(r),
            json!({"get": op("get", "read"), "put": put, "patch": patch,
                   "delete": op("delete", "delete")}),
        );
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": format!("v1.{}.0", crate::http::discovery::KUBE_MINOR)},
        "paths": paths,
        "definitions": definitions_v2(registry, &rs),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_group_version_document_holds_its_kinds_and_what_they_refer_to() {
        let reg = Registry::with_builtins();
        let doc = document(&reg, "apps", "v1").unwrap();
        let schemas = &doc["components"]["schemas"];
        let d = &schemas["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(
            d["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "version": "v1", "kind": "Deployment"}])
        );
        assert_eq!(
            schemas["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["replicas"]["format"],
            "int32"
        );
        // Referred to from apps/v1, defined in core/v1 and meta/v1.
        assert!(schemas.get("io.k8s.api.core.v1.Container").is_some());
        assert_eq!(
            schemas[builtin::OBJECT_META]["properties"]["labels"]["additionalProperties"],
            json!({"type": "string"})
        );
        let ios = &schemas["io.k8s.apimachinery.pkg.util.intstr.IntOrString"];
        assert_eq!(ios["x-kubernetes-int-or-string"], true);
        // A StatefulSet's claim templates are PersistentVolumeClaims, a
        // core kind: its definition says so.
        assert_eq!(
            schemas["io.k8s.api.core.v1.PersistentVolumeClaim"]["x-kubernetes-group-version-kind"]
                [0]["kind"],
            "PersistentVolumeClaim"
        );
        let patch =
            &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(
            patch["requestBody"]["content"]["application/merge-patch+json"]["schema"]["$ref"],
            "#/components/schemas/io.k8s.api.apps.v1.Deployment"
        );
    }

    #[test]
    fn v2_has_every_definition_in_its_form_and_encodes() {
        let reg = Registry::with_builtins();
        reg.insert(custom::tests::widgets(Some(json!({"type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "size": {"type": "integer", "minimum": 0, "default": 1},
                "color": {"type": "string", "nullable": true}}}}}))));
        let doc = v2(&reg);
        let defs = &doc["definitions"];
        assert_eq!(
            defs["io.k8s.api.apps.v1.Deployment"]["properties"]["spec"]["$ref"],
            "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
        );
        let w = &defs["dev.ward.example.v1.Widget"];
        assert_eq!(
            w["properties"]["spec"]["properties"]["size"],
            json!({"type": "integer", "minimum": 0}),
            "a constraint kept, a default dropped"
        );
        assert_eq!(w["properties"]["spec"]["properties"]["color"], json!({}));
        assert_eq!(
            w["properties"]["metadata"]["$ref"],
            format!("#/definitions/{}", builtin::OBJECT_META)
        );
        assert!(!doc.to_string().contains("#/components/"));
        crate::machinery::proto::openapi_v2::encode(&doc).expect("the v2 document encodes");
    }

    #[test]
    fn a_crd_schema_is_served_and_its_change_changes_the_index_hash() {
        let reg = Registry::with_builtins();
        let schema = |color: &str| {
            json!({"type": "object", "properties": {"spec": {"type": "object",
                "properties": {"size": {"type": "integer"}, color: {"type": "string"}}}}})
        };
        reg.insert(custom::tests::widgets(Some(schema("color"))));
        let doc = document(&reg, "example.ward.dev", "v1").unwrap();
        let w = &doc["components"]["schemas"]["dev.ward.example.v1.Widget"];
        assert_eq!(
            w["properties"]["spec"]["properties"]["color"]["type"],
            "string"
        );
        assert_eq!(w["x-kubernetes-group-version-kind"][0]["kind"], "Widget");
        // ObjectMeta comes with it.
        assert!(
            doc["components"]["schemas"]
                .get(builtin::OBJECT_META)
                .is_some()
        );
        let url = |i: &Value| i["paths"]["apis/example.ward.dev/v1"]["serverRelativeURL"].clone();
        let (before, core) = (index(&reg), index(&reg)["paths"]["api/v1"].clone());
        reg.insert(custom::tests::widgets(Some(schema("colour"))));
        let after = index(&reg);
        assert_ne!(url(&before), url(&after));
        assert_eq!(core, after["paths"]["api/v1"]);
    }
}
