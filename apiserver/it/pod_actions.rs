//! The subresources that act: `pods/eviction` (honouring
//! PodDisruptionBudgets), `pods/binding` and `serviceaccounts/token`; and
//! those that write one field of the object: `pods/ephemeralcontainers`
//! and `certificatesigningrequests/approval` — by raw requests and through
//! kube-rs's own calls.

use crate::common::*;
use http::StatusCode;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, EvictParams, Patch, PatchParams};
use serde_json::{Value, json};
use ward_apiserver::ApiServer;

const PODS: &str = "/api/v1/namespaces/default/pods";
const PDBS: &str = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";

fn body(r: &Reply) -> Value {
    serde_json::from_slice(&r.body).unwrap()
}

async fn pod(s: &ApiServer, name: &str, app: &str) {
    let p = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    created(s, PODS, &p).await;
}

fn eviction(name: &str) -> Value {
    json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name},
        "deleteOptions": {"gracePeriodSeconds": 0}})
}

async fn exists(s: &ApiServer, uri: &str) -> bool {
    send(s, "GET", uri, "", "").await.code == StatusCode::OK
}

#[tokio::test]
async fn eviction_deletes_unless_a_disruption_budget_forbids_it() {
    let s = server().await;
    pod(&s, "free", "free").await;
    pod(&s, "guarded", "db").await;
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "db"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}});
    created(&s, PDBS, &pdb).await;

    // No budget selects it: evicted (201 Status Success), gone.
    let r = send(
        &s,
        "POST",
        &format!("{PODS}/free/eviction"),
        JSON,
        &eviction("free"),
    )
    .await;
    assert_eq!(r.code, StatusCode::CREATED, "{:?}", r.body);
    assert_eq!(body(&r)["status"], "Success");
    assert!(!exists(&s, &format!("{PODS}/free")).await);

    // The budget allows no disruption (its status says so, or is unset).
    let uri = format!("{PODS}/guarded/eviction");
    let st = rejected(&s, "POST", &uri, JSON, &eviction("guarded"), 429).await;
    assert!(st.contains("disruption budget db"), "{st}");
    // Once it allows one: evicted, and the budget records it.
    let allow =
        json!({"status": {"disruptionsAllowed": 1, "currentHealthy": 1, "desiredHealthy": 1}});
    let r = send(&s, "PATCH", &format!("{PDBS}/db/status"), MERGE, &allow).await;
    assert_eq!(r.code, StatusCode::OK);
    let r = send(&s, "POST", &uri, JSON, &eviction("guarded")).await;
    assert_eq!(r.code, StatusCode::CREATED, "{:?}", r.body);
    assert!(!exists(&s, &format!("{PODS}/guarded")).await);
    let pdb = body(&send(&s, "GET", &format!("{PDBS}/db"), "", "").await);
    assert_eq!(pdb["status"]["disruptionsAllowed"], 0);
    assert!(
        pdb["status"]["disruptedPods"]["guarded"].is_string(),
        "{pdb}"
    );

    // Bad evictions change nothing.
    pod(&s, "other", "free").await;
    let other = format!("{PODS}/other/eviction");
    rejected(&s, "POST", &other, JSON, &eviction("not-other"), 400).await;
    rejected(&s, "GET", &other, "", "", 405).await;
    rejected(
        &s,
        "POST",
        &format!("{PODS}/none/eviction"),
        JSON,
        &eviction("none"),
        404,
    )
    .await;
    let dry = format!("{other}?dryRun=All");
    let r = unchanged(
        &s,
        "dry-run eviction",
        send(&s, "POST", &dry, JSON, &eviction("other")),
    )
    .await;
    assert_eq!(r.code, StatusCode::CREATED);
}

#[tokio::test]
async fn binding_assigns_a_node_once() {
    let s = server().await;
    pod(&s, "p", "x").await;
    let bind = |node: &str| {
        json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "p"}, "target": {"kind": "Node", "name": node}})
    };
    let r = send(&s, "POST", &format!("{PODS}/p/binding"), JSON, &bind("n1")).await;
    assert_eq!(r.code, StatusCode::CREATED, "{:?}", r.body);
    let p = body(&send(&s, "GET", &format!("{PODS}/p"), "", "").await);
    assert_eq!(p["spec"]["nodeName"], "n1");
    let st = rejected(
        &s,
        "POST",
        &format!("{PODS}/p/binding"),
        JSON,
        &bind("n2"),
        409,
    )
    .await;
    assert!(st.contains("already assigned to node \"n1\""), "{st}");
    let nowhere = json!({"kind": "Binding", "target": {}});
    rejected(
        &s,
        "POST",
        &format!("{PODS}/p/binding"),
        JSON,
        &nowhere,
        422,
    )
    .await;
}

#[tokio::test]
async fn token_requests_answer_a_token_and_its_expiry() {
    let s = server().await;
    let sas = "/api/v1/namespaces/default/serviceaccounts";
    created(
        &s,
        sas,
        &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "bot"}}),
    )
    .await;
    let req = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"audiences": ["api"], "expirationSeconds": 1200}});
    let r = send(&s, "POST", &format!("{sas}/bot/token"), JSON, &req).await;
    assert_eq!(r.code, StatusCode::CREATED, "{:?}", r.body);
    let t = body(&r);
    assert_eq!(t["kind"], "TokenRequest");
    assert_eq!(t["spec"]["audiences"], json!(["api"]));
    // A JWT whose claims name the account and the audiences asked for.
    let token = t["status"]["token"].as_str().unwrap();
    let payload = token.split('.').nth(1).unwrap();
    use base64::Engine as _;
    let claims: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        claims["sub"], "system:serviceaccount:default:bot",
        "{claims}"
    );
    assert_eq!(claims["aud"], json!(["api"]));
    assert_eq!(
        claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
        1200
    );
    let at = |v: &Value| v.as_str().unwrap().parse::<jiff::Timestamp>().unwrap();
    let created_at = at(&t["metadata"]["creationTimestamp"]);
    let expiry = at(&t["status"]["expirationTimestamp"]);
    assert_eq!((expiry - created_at).get_seconds(), 1200);
    let short = json!({"spec": {"expirationSeconds": 60}});
    rejected(&s, "POST", &format!("{sas}/bot/token"), JSON, &short, 422).await;
    rejected(&s, "POST", &format!("{sas}/nobody/token"), JSON, &req, 404).await;
    // Discovery lists what acts, with the kind each takes.
    let core = body(&send(&s, "GET", "/api/v1", "", "").await);
    let find = |name: &str| {
        core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
    };
    assert_eq!(find("pods/eviction").unwrap()["group"], "policy");
    assert_eq!(
        find("serviceaccounts/token").unwrap()["kind"],
        "TokenRequest"
    );
    assert_eq!(find("pods/binding").unwrap()["verbs"], json!(["create"]));
}

/// kube-rs's own `Api::evict`.
#[tokio::test]
async fn kube_rs_evicts_a_pod() {
    let s = server().await;
    pod(&s, "p", "x").await;
    let api: Api<Pod> = Api::default_namespaced(s.client());
    let params = EvictParams {
        delete_options: Some(kube::api::DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        }),
        ..Default::default()
    };
    api.evict("p", &params).await.unwrap();
    assert!(api.get_opt("p").await.unwrap().is_none());
}

#[tokio::test]
async fn ephemeral_containers_are_added_never_changed() {
    let s = server().await;
    pod(&s, "p", "x").await;
    let api: Api<Pod> = Api::default_namespaced(s.client());
    let debug = json!({"spec": {"ephemeralContainers": [
        {"name": "debugger", "image": "busybox", "stdin": true, "tty": true}]}});
    let p = api
        .patch_ephemeral_containers("p", &PatchParams::default(), &Patch::Strategic(debug))
        .await
        .unwrap();
    let eph = p.spec.unwrap().ephemeral_containers.unwrap();
    assert_eq!(eph[0].name, "debugger");
    let uri = format!("{PODS}/p/ephemeralcontainers");
    // Only that field: a label in the same patch is not written.
    let more = json!({"metadata": {"labels": {"x": "y"}}, "spec": {"ephemeralContainers": [
        {"name": "debugger", "image": "busybox", "stdin": true, "tty": true},
        {"name": "second", "image": "alpine"}]}});
    let r = send(&s, "PATCH", &uri, MERGE, &more).await;
    assert_eq!(r.code, StatusCode::OK, "{:?}", r.body);
    let p = body(&send(&s, "GET", &format!("{PODS}/p"), "", "").await);
    assert_eq!(
        p["spec"]["ephemeralContainers"].as_array().unwrap().len(),
        2
    );
    assert_eq!(p["metadata"]["labels"], json!({"app": "x"}));

    let changed = json!({"spec": {"ephemeralContainers": [
        {"name": "debugger", "image": "other"}, {"name": "second", "image": "alpine"}]}});
    let st = rejected(&s, "PATCH", &uri, MERGE, &changed, 422).await;
    assert!(st.contains("may not be changed"), "{st}");
    let removed = json!({"spec": {"ephemeralContainers": [{"name": "second", "image": "alpine"}]}});
    rejected(&s, "PATCH", &uri, MERGE, &removed, 422).await;
    let clash = json!([{"op": "add", "path": "/spec/ephemeralContainers/-", "value": {"name": "c", "image": "x"}}]);
    let st = rejected(&s, "PATCH", &uri, JSON_PATCH, &clash, 422).await;
    assert!(st.contains("Duplicate value"), "{st}");
}

#[tokio::test]
async fn a_csr_is_approved_through_its_approval() {
    let s = server().await;
    let csrs = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
    let csr = json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": "c"},
        "spec": {"request": "LS0t", "signerName": "example.com/signer", "usages": ["client auth"]}});
    created(&s, csrs, &csr).await;
    let uri = format!("{csrs}/c/approval");
    let mut c = body(&send(&s, "GET", &uri, "", "").await);
    c["status"] = json!({"conditions": [{"type": "Approved", "status": "True",
        "reason": "Test", "message": "approved by the test"}]});
    c["spec"]["signerName"] = "example.com/other".into();
    let r = send(&s, "PUT", &uri, JSON, &c).await;
    assert_eq!(r.code, StatusCode::OK, "{:?}", r.body);
    let got = body(&send(&s, "GET", &format!("{csrs}/c"), "", "").await);
    assert_eq!(got["status"]["conditions"][0]["type"], "Approved");
    assert_eq!(
        got["spec"]["signerName"], "example.com/signer",
        "approval writes conditions only"
    );
    assert!(
        got["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["subresource"] == "approval")
    );

    let both = json!({"status": {"conditions": [
        {"type": "Approved", "status": "True"}, {"type": "Denied", "status": "True"}]}});
    rejected(&s, "PATCH", &uri, MERGE, &both, 422).await;
    // As kube-apiserver validates them: the three it acts on are True,
    // each type once, and each has one; a signer's own type is accepted.
    let conditions = |c: Value| json!({"status": {"conditions": c}});
    let false_approval = conditions(json!([{"type": "Approved", "status": "False"}]));
    assert!(
        rejected(&s, "PATCH", &uri, MERGE, &false_approval, 422)
            .await
            .ends_with(
                "status.conditions[0].status: Unsupported value: \"False\": supported values: \"True\""
            )
    );
    let twice = conditions(json!([{"type": "Failed", "status": "True"},
        {"type": "Failed", "status": "True"}, {"type": "", "status": "Maybe"}]));
    let message = rejected(&s, "PATCH", &uri, MERGE, &twice, 422).await;
    assert!(
        message.ends_with(
            "[status.conditions[1].type: Duplicate value: \"Failed\", status.conditions[2].type: Required value, status.conditions[2].status: Unsupported value: \"Maybe\": supported values: \"True\", \"False\", \"Unknown\"]"
        ),
        "{message}"
    );
    let own = conditions(json!([{"type": "example.com/Verified", "status": "False"}]));
    let r = send(&s, "PATCH", &uri, MERGE, &own).await;
    assert_eq!(r.code, StatusCode::OK, "{:?}", r.body);
    let disc = body(&send(&s, "GET", "/apis/certificates.k8s.io/v1", "", "").await);
    let names: Vec<&str> = disc["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert!(
        names.contains(&"certificatesigningrequests/approval"),
        "{names:?}"
    );
}
