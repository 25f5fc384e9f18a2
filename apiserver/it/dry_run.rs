//! `dryRun=All` (kubectl `--dry-run=server`): every write verb decides,
//! validates and answers what it would store — and stores nothing: the
//! store's objects and resourceVersion are byte-for-byte unchanged, and no
//! watch event is sent. What a real write would refuse, a dry run refuses
//! with the same status.

use std::time::Duration;

use crate::common::*;
use futures::StreamExt;
use http::StatusCode;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::{Value, json};
use ward_apiserver::ApiServer;

const NSS: &str = "/api/v1/namespaces";

fn body(r: &Reply) -> Value {
    serde_json::from_slice(&r.body).unwrap()
}

/// `method uri?dryRun=All` answers `code` and leaves the store unchanged;
/// returns the answer's body.
async fn dry(
    s: &ApiServer,
    method: &str,
    uri: &str,
    ct: &str,
    b: impl IntoBody,
    code: StatusCode,
) -> Value {
    let sep = if uri.contains('?') { '&' } else { '?' };
    let uri = format!("{uri}{sep}dryRun=All");
    let what = format!("{method} {uri}");
    let r = unchanged(s, &what, send(s, method, &uri, ct, b)).await;
    assert_eq!(r.code, code, "{what}: {}", String::from_utf8_lossy(&r.body));
    body(&r)
}

#[tokio::test]
async fn create_answers_the_object_it_would_store() {
    let s = server().await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"generateName": "dry-"}, "data": {"a": "b"}});
    let got = dry(&s, "POST", CMS, JSON, &cm, StatusCode::CREATED).await;
    let name = got["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("dry-") && name.len() > 4, "{got}");
    assert_eq!(got["data"]["a"], "b");
    assert!(
        got["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| !u.is_empty())
    );
    assert!(got["metadata"]["creationTimestamp"].is_string());
    // Never stored, so it has no resourceVersion (as kube-apiserver answers).
    assert!(got["metadata"].get("resourceVersion").is_none(), "{got}");
    assert_eq!(
        send(&s, "GET", &format!("{CMS}/{name}"), "", "").await.code,
        404
    );

    // What a real create refuses, a dry run refuses the same way.
    let taken = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}});
    let st = dry(&s, "POST", CMS, JSON, &taken, StatusCode::CONFLICT).await;
    assert_eq!(st["reason"], "AlreadyExists");
    let nowhere = "/api/v1/namespaces/nowhere/configmaps";
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
    let st = dry(&s, "POST", nowhere, JSON, &cm, StatusCode::NOT_FOUND).await;
    assert_eq!(st["reason"], "NotFound");
    let nameless = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}});
    let st = dry(
        &s,
        "POST",
        CMS,
        JSON,
        &nameless,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(st["reason"], "Invalid");
}

#[tokio::test]
async fn update_patch_and_apply_answer_the_new_object_at_the_old_version() {
    let s = server().await;
    let old: Value = body(&send(&s, "GET", CM, "", "").await);
    let rv = old["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();

    let mut put = old.clone();
    put["data"]["k"] = "put".into();
    let got = dry(&s, "PUT", CM, JSON, &put, StatusCode::OK).await;
    assert_eq!(got["data"]["k"], "put");
    assert_eq!(got["metadata"]["resourceVersion"], rv.as_str());

    let got = dry(
        &s,
        "PATCH",
        CM,
        MERGE,
        &json!({"data": {"k": "merged"}}),
        StatusCode::OK,
    )
    .await;
    assert_eq!(got["data"]["k"], "merged");
    let ops = json!([{"op": "replace", "path": "/data/k", "value": "json"}]);
    let got = dry(&s, "PATCH", CM, JSON_PATCH, &ops, StatusCode::OK).await;
    assert_eq!(got["data"]["k"], "json");
    let got = dry(
        &s,
        "PATCH",
        CM,
        STRATEGIC,
        &json!({"data": {"x": "y"}}),
        StatusCode::OK,
    )
    .await;
    assert_eq!(got["data"]["x"], "y");

    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cm"}, "data": {"k": "applied"}});
    let got = dry(
        &s,
        "PATCH",
        &format!("{CM}?fieldManager=me&force=true"),
        APPLY,
        &applied,
        StatusCode::OK,
    )
    .await;
    assert_eq!(got["data"]["k"], "applied");
    // Apply of an object that does not exist: the create it would be.
    let fresh = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "fresh"}, "data": {"k": "new"}});
    let got = dry(
        &s,
        "PATCH",
        &format!("{CMS}/fresh?fieldManager=me"),
        APPLY,
        &fresh,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(got["data"]["k"], "new");
    assert_eq!(
        send(&s, "GET", &format!("{CMS}/fresh"), "", "").await.code,
        404
    );

    // Preconditions still decide: a stale resourceVersion is a conflict.
    let mut stale = put.clone();
    stale["metadata"]["resourceVersion"] = "1".into();
    let st = dry(&s, "PUT", CM, JSON, &stale, StatusCode::CONFLICT).await;
    assert_eq!(st["reason"], "Conflict");
    let after: Value = body(&send(&s, "GET", CM, "", "").await);
    assert_eq!(after, old);
}

#[tokio::test]
async fn delete_answers_what_it_would_do_and_keeps_everything() {
    let s = server().await;
    // Removed at once: Status Success, as a real delete answers.
    let st = dry(&s, "DELETE", CM, "", "", StatusCode::OK).await;
    assert_eq!(st["status"], "Success", "{st}");
    // In the body, as kubectl sends it.
    let opts = json!({"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All"]});
    let r = unchanged(
        &s,
        "DELETE with a dry-run body",
        send(&s, "DELETE", CM, JSON, &opts),
    )
    .await;
    assert_eq!(r.code, StatusCode::OK);

    // Held by a finalizer: the object as it would be, terminating.
    let held = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "held", "finalizers": ["ward.dev/hold"]}});
    created(&s, CMS, &held).await;
    let got = dry(&s, "DELETE", &format!("{CMS}/held"), "", "", StatusCode::OK).await;
    assert!(got["metadata"]["deletionTimestamp"].is_string(), "{got}");
    let live = body(&send(&s, "GET", &format!("{CMS}/held"), "", "").await);
    assert!(
        live["metadata"].get("deletionTimestamp").is_none(),
        "{live}"
    );

    // A namespace: nothing in it is touched either.
    created(
        &s,
        NSS,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}),
    )
    .await;
    let in_ns = "/api/v1/namespaces/ns/configmaps";
    created(
        &s,
        in_ns,
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
    )
    .await;
    dry(&s, "DELETE", &format!("{NSS}/ns"), "", "", StatusCode::OK).await;
    dry(&s, "DELETE", CMS, "", "", StatusCode::OK).await;

    // Preconditions still decide.
    let pre = json!({"dryRun": ["All"], "preconditions": {"uid": "not-its-uid"}});
    let r = unchanged(
        &s,
        "DELETE precondition",
        send(&s, "DELETE", CM, JSON, &pre),
    )
    .await;
    assert_eq!(r.code, StatusCode::CONFLICT);
    let st = dry(
        &s,
        "DELETE",
        &format!("{CMS}/none"),
        "",
        "",
        StatusCode::NOT_FOUND,
    )
    .await;
    assert_eq!(st["reason"], "NotFound");
}

/// Through kube-rs's own parameters; a watcher sees only the real write
/// that follows the dry runs.
#[tokio::test]
async fn kube_rs_dry_runs_send_no_watch_event() {
    let s = server().await;
    let api: Api<ConfigMap> = Api::default_namespaced(s.client());
    let rv = api
        .get("cm")
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut events = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    let dry_post = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "k"}, "data": {"a": "1"}})).unwrap();
    let made = api.create(&dry_post, &cm).await.unwrap();
    assert_eq!(made.metadata.name.as_deref(), Some("k"));
    let patched = api
        .patch(
            "cm",
            &PatchParams::default().dry_run(),
            &Patch::Merge(json!({"data": {"k": "dry"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data.unwrap()["k"], "dry");
    let gone = api
        .delete("cm", &DeleteParams::default().dry_run())
        .await
        .unwrap();
    assert!(gone.is_right(), "a removal answers a Status");
    assert!(api.get_opt("k").await.unwrap().is_none());
    assert_eq!(api.get("cm").await.unwrap().data.unwrap()["k"], "v");

    api.patch(
        "cm",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "real"}})),
    )
    .await
    .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .expect("the real write's event")
        .unwrap()
        .unwrap();
    match first {
        WatchEvent::Modified(cm) => assert_eq!(cm.data.unwrap()["k"], "real"),
        other => panic!("the first event is the real write's, not {other:?}"),
    }
}
