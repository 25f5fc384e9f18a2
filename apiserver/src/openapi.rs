//! The OpenAPI documents kubectl's default validation needs: `/openapi/v3`
//! (kubectl 1.29+), an index of group-versions and per group-version a
//! document; and `/openapi/v2` (kubectl 1.27 and 1.28, which fetch it as
//! gnostic protobuf, see [`crate::proto::openapi_v2`]), one Swagger 2.0
//! document for every kind. Both carry per kind a PATCH operation with
//! `x-kubernetes-group-version-kind` and the `fieldValidation` query
//! parameter, which tells kubectl the server validates fields itself.
//! Schemas are permissive objects: this server does not validate fields
//! against a schema (see docs/apiserver.md).

use serde_json::{Map, Value, json};

use crate::resources::{Registry, ResourceInfo};

/// The `paths` key of a group-version: `api/v1` or `apis/{group}/{version}`.
fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: the index of group-version documents.
#[must_use]
pub fn index(registry: &Registry) -> Value {
    let mut paths = Map::new();
    for r in registry.all() {
        let p = gv_path(&r.group, &r.version);
        let hash = doc_hash(registry, &r.group, &r.version);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={hash:016X}")}),
        );
    }
    json!({"paths": paths})
}

fn doc_hash(registry: &Registry, group: &str, version: &str) -> u64 {
    // FNV-1a over the document: changes when the CRDs served change.
    let doc = document(registry, group, version)
        .map(|d| d.to_string())
        .unwrap_or_default();
    ward_base::fnv1a(doc.as_bytes())
}

fn schema_name(r: &ResourceInfo) -> String {
    let g = if r.group.is_empty() { "core" } else { &r.group };
    format!("{g}.{}.{}", r.version, r.kind)
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
    // Strategic merge is served for built-ins but not advertised here: the
    // schemas are permissive, so kubectl could not compute a strategic patch
    // from them; without the advertisement it uses its compiled-in types.
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

/// `/openapi/v3/api/v1` or `/openapi/v3/apis/{group}/{version}`.
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
    let mut schemas = Map::new();
    for r in &rs {
        paths.insert(item_path(r), operations(r));
        schemas.insert(
            schema_name(r),
            json!({
                "type": "object",
                "description": format!("{} (ward-apiserver serves a permissive schema)", r.kind),
                "x-kubernetes-preserve-unknown-fields": true,
                "x-kubernetes-group-version-kind": [{"group": r.group, "version": r.version, "kind": r.kind}],
            }),
        );
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": format!("v1.{}.0", crate::discovery::KUBE_MINOR)},
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
/// `parameters` lists, in Swagger 2.0's form) and a permissive
/// definition. As in the v3 documents, PATCH does not advertise strategic
/// merge: kubectl 1.27/1.28 then compute apply's patch from their
/// compiled-in types, as against a real cluster.
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
    let mut definitions = Map::new();
    for r in registry.all() {
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
            item_path(&r),
            json!({"get": op("get", "read"), "put": put, "patch": patch,
                   "delete": op("delete", "delete")}),
        );
        definitions.insert(
            schema_name(&r),
            json!({
                "type": "object",
                "description": format!("{} (ward-apiserver serves a permissive schema)", r.kind),
                "x-kubernetes-group-version-kind": [gvk],
            }),
        );
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": format!("v1.{}.0", crate::discovery::KUBE_MINOR)},
        "paths": paths,
        "definitions": definitions,
    })
}
