//! Custom resources behave by their CRD's structural schema, as on a
//! cluster: unknown fields pruned, defaults filled, values validated
//! (OpenAPI and `x-kubernetes-validations` CEL rules) on every write path;
//! a CRD whose schema is not structural, or whose defaults or rules are
//! bad, is refused at creation. And the classic bug this catches: a
//! controller writing a status field its CRD does not declare loops hot.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, CustomResource, CustomResourceExt, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::common::*;

fn body(r: &Reply) -> Value {
    serde_json::from_slice(&r.body).unwrap()
}

fn text(r: &Reply) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

const GADGETS: &str = "/apis/example.ward.dev/v1/namespaces/default/gadgets";
const GADGET: &str = "/apis/example.ward.dev/v1/namespaces/default/gadgets/g";

fn gadget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.ward.dev"},
        "spec": {"group": "example.ward.dev", "scope": "Namespaced",
            "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object",
                        "x-kubernetes-validations": [
                            {"rule": "self.size <= self.limit", "message": "size must not exceed limit"},
                            {"rule": "self.owner == oldSelf.owner", "message": "owner is immutable"}],
                        "properties": {
                            "size": {"type": "integer", "minimum": 0, "default": 1},
                            "limit": {"type": "integer", "default": 10},
                            "owner": {"type": "string", "default": "nobody"},
                            "color": {"type": "string", "enum": ["red", "blue"]},
                            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                                "x-kubernetes-list-map-keys": ["name"],
                                "items": {"type": "object", "required": ["name"], "properties": {
                                    "name": {"type": "string"},
                                    "protocol": {"type": "string", "default": "TCP"}}}}}},
                    "status": {"type": "object", "properties": {"observed": {"type": "integer"}}}}}}}]}})
}

async fn gadgets() -> ward_apiserver::ApiServer {
    let s = server().await;
    created(&s, CRDS, &gadget_crd()).await;
    s
}

fn gadget(spec: Value) -> Value {
    json!({"apiVersion": "example.ward.dev/v1", "kind": "Gadget",
        "metadata": {"name": "g"}, "spec": spec})
}

#[tokio::test]
async fn a_create_is_pruned_defaulted_and_stored_as_the_schema_says() {
    let s = gadgets().await;
    let r = send(
        &s,
        "POST",
        GADGETS,
        JSON,
        &gadget(json!({"size": 2, "typo": true, "ports": [{"name": "http", "extra": 1}]})),
    )
    .await;
    assert_eq!(r.code.as_u16(), 201, "{}", text(&r));
    let g = body(&r);
    assert_eq!(
        g["spec"],
        json!({"size": 2, "limit": 10, "owner": "nobody",
            "ports": [{"name": "http", "protocol": "TCP"}]})
    );
    // What is stored is what was answered.
    assert_eq!(
        body(&send(&s, "GET", GADGET, JSON, "").await)["spec"],
        g["spec"]
    );
}

#[tokio::test]
async fn invalid_objects_are_refused_with_kube_apiservers_messages() {
    let s = gadgets().await;
    let r = rejected(&s, "POST", GADGETS, JSON, &gadget(json!({"size": -1})), 422).await;
    assert_eq!(
        r,
        "Gadget.example.ward.dev \"g\" is invalid: spec.size: Invalid value: -1: spec.size in body should be greater than or equal to 0"
    );
    let st = assert_status(
        &send(&s, "POST", GADGETS, JSON, &gadget(json!({"size": -1}))).await,
        Some(422),
        "size -1",
    );
    assert_eq!(st["details"]["causes"][0]["field"], "spec.size");
    assert_eq!(st["details"]["causes"][0]["reason"], "FieldValueInvalid");
    let r = rejected(
        &s,
        "POST",
        GADGETS,
        JSON,
        &gadget(json!({"color": "green", "ports": [{"name": "a"}, {"name": "a"}]})),
        422,
    )
    .await;
    assert_eq!(
        r,
        "Gadget.example.ward.dev \"g\" is invalid: [spec.color: Unsupported value: \"green\": supported values: \"red\", \"blue\", spec.ports[1]: Duplicate value: {\"name\":\"a\"}, <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]"
    );
    // A CEL rule, after the defaults are filled (limit 10).
    let r = rejected(&s, "POST", GADGETS, JSON, &gadget(json!({"size": 11})), 422).await;
    assert_eq!(
        r,
        "Gadget.example.ward.dev \"g\" is invalid: spec: Invalid value: size must not exceed limit"
    );
}

#[tokio::test]
async fn every_write_path_is_checked_and_a_refused_write_changes_nothing() {
    let s = gadgets().await;
    created(&s, GADGETS, &gadget(json!({"size": 1, "owner": "ann"}))).await;
    // Merge patch, JSON patch and apply: refused by the schema or a rule.
    rejected(
        &s,
        "PATCH",
        GADGET,
        MERGE,
        &json!({"spec": {"size": -5}}),
        422,
    )
    .await;
    rejected(
        &s,
        "PATCH",
        GADGET,
        JSON_PATCH,
        &json!([{"op": "replace", "path": "/spec/size", "value": 50}]),
        422,
    )
    .await;
    let apply = "apiVersion: example.ward.dev/v1\nkind: Gadget\nmetadata: {name: g}\nspec: {size: 1, owner: bob}\n";
    let r = rejected(
        &s,
        "PATCH",
        &format!("{GADGET}?fieldManager=t&force=true"),
        APPLY,
        apply,
        422,
    )
    .await;
    assert_eq!(
        r,
        "Gadget.example.ward.dev \"g\" is invalid: spec: Invalid value: owner is immutable"
    );
    // An update through PUT prunes too.
    let mut g = body(&send(&s, "GET", GADGET, JSON, "").await);
    g["spec"]["size"] = json!(3);
    g["spec"]["bogus"] = json!("x");
    let r = send(&s, "PUT", GADGET, JSON, &g).await;
    assert_eq!(r.code.as_u16(), 200, "{}", text(&r));
    assert_eq!(body(&r)["spec"]["size"], 3);
    assert!(body(&r)["spec"].get("bogus").is_none());
    // The status subresource: what the schema does not declare is pruned.
    let r = send(
        &s,
        "PATCH",
        &format!("{GADGET}/status"),
        MERGE,
        &json!({"status": {"observed": 3, "phase": "Ready"}}),
    )
    .await;
    assert_eq!(r.code.as_u16(), 200, "{}", text(&r));
    assert_eq!(body(&r)["status"], json!({"observed": 3}));
}

#[tokio::test]
async fn a_crd_that_is_not_structural_or_has_bad_defaults_or_rules_is_refused() {
    let s = server().await;
    let with_schema = |schema: Value| {
        let mut crd = gadget_crd();
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = schema;
        crd
    };
    let cases = [
        (
            with_schema(
                json!({"type": "object", "properties": {"spec": {"properties": {"a": {"type": "string"}}}}}),
            ),
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields",
        ),
        (
            with_schema(
                json!({"type": "object", "properties": {"spec": {"type": "object",
                "properties": {"n": {"type": "integer", "minimum": 1, "default": 0}}}}}),
            ),
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[n].default: Invalid value: 0: in body should be greater than or equal to 1",
        ),
        (
            with_schema(
                json!({"type": "object", "properties": {"spec": {"type": "object",
                "x-kubernetes-validations": [{"rule": "self.frobnicate()"}]}}}),
            ),
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value:",
        ),
        (
            with_schema(
                json!({"type": "object", "properties": {"s": {"type": "string", "pattern": "a("}}}),
            ),
            "spec.versions[0].schema.openAPIV3Schema.properties[s].pattern: Invalid value: \"a(\": must be a valid regular expression",
        ),
    ];
    for (crd, message) in cases {
        let r = unchanged(
            &s,
            "a refused CRD",
            rejected(&s, "POST", CRDS, JSON, &crd, 422),
        )
        .await;
        let got = r.as_str();
        assert!(got.contains(message), "{got}\nlacks\n{message}");
        assert!(got.starts_with("CustomResourceDefinition.apiextensions.k8s.io \"gadgets.example.ward.dev\" is invalid: "), "{got}");
    }
    let mut no_schema = gadget_crd();
    no_schema["spec"]["versions"][0]
        .as_object_mut()
        .unwrap()
        .remove("schema");
    let r = rejected(&s, "POST", CRDS, JSON, &no_schema, 422).await;
    assert!(r.ends_with("spec.versions[0].schema.openAPIV3Schema: Required value"));
}

#[tokio::test]
async fn the_examples_crds_are_structural() {
    let s = server().await;
    for yaml in [
        include_str!("../../examples/lws/deploy/crd.yaml"),
        include_str!("../../examples/cns/deploy/crd.yaml"),
        include_str!("../../examples/whereabouts/deploy/crd.yaml"),
    ] {
        let crd: Value = serde_saphyr::from_str(yaml).unwrap();
        created(&s, CRDS, &crd).await;
    }
}

// The hot loop: a controller reconciles a Thing by writing `status.seen`
// (the size it saw) and `status.writes` (how many status writes it made)
// until `status.seen` equals `spec.size`. When the CRD declares `seen`,
// one write settles it; when it does not, the server prunes `seen`, every
// write still changes `writes`, and each write's watch event brings the
// next reconcile: a loop that never settles.

#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "example.ward.dev",
    version = "v1",
    kind = "Thing",
    namespaced,
    status = "ThingStatus"
)]
struct ThingSpec {
    size: i32,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
struct ThingStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    seen: Option<i32>,
    #[serde(default)]
    writes: i32,
}

struct Ctx {
    client: Client,
    writes: AtomicUsize,
    reconciles: AtomicUsize,
}

async fn reconcile(thing: Arc<Thing>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
    ctx.reconciles.fetch_add(1, Ordering::SeqCst);
    let status = thing.status.clone().unwrap_or_default();
    if status.seen == Some(thing.spec.size) {
        return Ok(Action::await_change());
    }
    let api: Api<Thing> = Api::namespaced(ctx.client.clone(), "default");
    let patch = json!({"status": {"seen": thing.spec.size, "writes": status.writes + 1}});
    api.patch_status(
        &thing.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    ctx.writes.fetch_add(1, Ordering::SeqCst);
    Ok(Action::await_change())
}

/// Run the controller against a Thing CRD whose status declares `seen` or
/// not, until `done(writes, reconciles)` holds; the writes made.
async fn run_controller(declare_seen: bool, done: impl Fn(usize, usize) -> bool) -> usize {
    let server = server().await;
    let client = server.client();
    let mut crd = Thing::crd();
    if !declare_seen {
        let status = &mut crd.spec.versions[0]
            .schema
            .as_mut()
            .unwrap()
            .open_api_v3_schema;
        let props = status.as_mut().unwrap().properties.as_mut().unwrap();
        let st = props
            .get_mut("status")
            .unwrap()
            .properties
            .as_mut()
            .unwrap();
        assert!(st.remove("seen").is_some());
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let established = await_condition(
        crds,
        "things.example.ward.dev",
        conditions::is_crd_established(),
    );
    tokio::time::timeout(Duration::from_secs(20), established)
        .await
        .unwrap()
        .unwrap();
    let api: Api<Thing> = Api::namespaced(client.clone(), "default");
    api.create(
        &PostParams::default(),
        &Thing::new("t", ThingSpec { size: 3 }),
    )
    .await
    .unwrap();
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        writes: AtomicUsize::new(0),
        reconciles: AtomicUsize::new(0),
    });
    let controller = Controller::new(api, Default::default())
        .run(reconcile, |_, _, _| Action::await_change(), ctx.clone())
        .take_while(|_| {
            let (w, r) = (
                ctx.writes.load(Ordering::SeqCst),
                ctx.reconciles.load(Ordering::SeqCst),
            );
            std::future::ready(!done(w, r))
        })
        .for_each(|_| std::future::ready(()));
    tokio::time::timeout(Duration::from_secs(60), controller)
        .await
        .expect("the controller reached its condition");
    ctx.writes.load(Ordering::SeqCst)
}

#[tokio::test]
async fn a_status_field_the_crd_does_not_declare_is_pruned_and_the_controller_loops_hot() {
    // Undeclared: 50 writes and still not settled (each reconcile writes).
    let writes = run_controller(false, |w, _| w >= 50).await;
    assert!(writes >= 50);
    // Declared: one write settles it — the reconcile its own write's event
    // brings sees `seen` and writes nothing more.
    let writes = run_controller(true, |_, r| r >= 2).await;
    assert_eq!(writes, 1);
}

#[tokio::test]
async fn objects_stored_before_a_new_default_are_read_with_it() {
    let s = gadgets().await;
    created(&s, GADGETS, &gadget(json!({"size": 1}))).await;
    let before = body(&send(&s, "GET", GADGET, JSON, "").await);
    // The CRD gains a field with a default.
    let mut crd = body(
        &send(
            &s,
            "GET",
            &format!("{CRDS}/gadgets.example.ward.dev"),
            JSON,
            "",
        )
        .await,
    );
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["tier"] =
        json!({"type": "string", "default": "bronze"});
    let r = send(
        &s,
        "PUT",
        &format!("{CRDS}/gadgets.example.ward.dev"),
        JSON,
        &crd,
    )
    .await;
    assert_eq!(r.code.as_u16(), 200, "{}", text(&r));
    // GET and LIST show the default; the object itself was not rewritten.
    let after = body(&send(&s, "GET", GADGET, JSON, "").await);
    assert_eq!(after["spec"]["tier"], "bronze");
    assert_eq!(
        after["metadata"]["resourceVersion"],
        before["metadata"]["resourceVersion"]
    );
    let list = body(&send(&s, "GET", GADGETS, JSON, "").await);
    assert_eq!(list["items"][0]["spec"]["tier"], "bronze");
    // A new object is defaulted on write.
    let mut h = gadget(json!({}));
    h["metadata"]["name"] = json!("h");
    created(&s, GADGETS, &h).await;
    let h = body(&send(&s, "GET", &format!("{GADGETS}/h"), JSON, "").await);
    assert_eq!(h["spec"]["tier"], "bronze");
}

#[tokio::test]
async fn field_validation_names_what_the_schema_prunes() {
    let s = gadgets().await;
    let typo = gadget(json!({"size": 1, "sise": 2}));
    let r = rejected(
        &s,
        "POST",
        &format!("{GADGETS}?fieldValidation=Strict"),
        JSON,
        &typo,
        400,
    )
    .await;
    assert!(
        r.ends_with("strict decoding error: unknown field \"spec.sise\""),
        "{r}"
    );
    let r = send(
        &s,
        "POST",
        &format!("{GADGETS}?fieldValidation=Warn"),
        JSON,
        &typo,
    )
    .await;
    assert_eq!(r.code.as_u16(), 201, "{}", text(&r));
    let warnings: Vec<_> = r
        .headers
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    assert_eq!(warnings, ["299 - \"unknown field \\\"spec.sise\\\"\""]);
    assert!(body(&r)["spec"].get("sise").is_none());
}
