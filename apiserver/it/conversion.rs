//! A CRD served in two versions whose conversion webhook is written on
//! kube's own conversion types (`kube::core::conversion`): v1 (storage)
//! has `spec.size`, v2 has `spec.replicas`. Objects written in either
//! version are stored in v1 and served in the version asked for — on get,
//! list, patch and watch —; a webhook that fails fails the read with
//! apiextensions-apiserver's message; `strategy: None` rewrites apiVersion
//! and stores the storage version.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use http::StatusCode;
use kube::api::{Api, ApiResource, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use kube::runtime::watcher;
use serde_json::{Value, json};
use ward_apiserver::ApiServer;

use crate::admission::{Answer, WebhookServer};
use crate::common::{CRDS, JSON, created, send};

const GROUP: &str = "conv.example.com";

fn crd(conversion: Value) -> Value {
    let schema = |field: &str| {
        json!({"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {field: {"type": "integer"}}}}}})
    };
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{GROUP}")},
        "spec": {"group": GROUP, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema("size")},
                {"name": "v2", "served": true, "storage": false, "schema": schema("replicas")},
            ],
            "conversion": conversion}
    })
}

/// `spec.conversion` calling `hook`.
fn by_webhook(hook: &WebhookServer) -> Value {
    json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
        "clientConfig": {"url": hook.url("/convert"), "caBundle": hook.ca_bundle()}}})
}

/// The next object the watch applies (`initial`: while it lists).
async fn next_applied(
    events: &mut (
             impl futures::Stream<Item = Result<watcher::Event<DynamicObject>, watcher::Error>> + Unpin
         ),
    initial: bool,
) -> DynamicObject {
    loop {
        let e = tokio::time::timeout(Duration::from_secs(10), events.next())
            .await
            .expect("a watch event")
            .unwrap()
            .unwrap();
        match e {
            watcher::Event::InitApply(o) if initial => return o,
            watcher::Event::Apply(o) if !initial => return o,
            _ => {}
        }
    }
}

/// v1 `spec.size` <-> v2 `spec.replicas`, as a webhook author writes it
/// from kube's docs.
fn converter() -> Answer {
    Arc::new(|review: &Value| {
        let review: ConversionReview = serde_json::from_value(review.clone()).unwrap();
        let req = ConversionRequest::from_review(review).unwrap();
        let desired = req.desired_api_version.clone();
        let converted: Vec<Value> = req
            .objects
            .iter()
            .map(|o| {
                let mut o = o.clone();
                let spec = o["spec"].as_object_mut().unwrap();
                if desired.ends_with("/v2") {
                    if let Some(v) = spec.remove("size") {
                        spec.insert("replicas".into(), v);
                    }
                } else if let Some(v) = spec.remove("replicas") {
                    spec.insert("size".into(), v);
                }
                o["apiVersion"] = desired.clone().into();
                o
            })
            .collect();
        let review = ConversionResponse::for_request(req)
            .success(converted)
            .into_review();
        (200, serde_json::to_vec(&review).unwrap())
    })
}

/// Widget `default/name` as the store holds it.
fn stored(server: &ApiServer, name: &str) -> Value {
    let widgets = ward_apiserver::store::StorageKey {
        group: GROUP.into(),
        plural: "widgets".into(),
    };
    server
        .store()
        .get(&widgets, "default", name)
        .unwrap()
        .value()
}

fn api(server: &ApiServer, version: &str) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: GROUP.into(),
        version: version.into(),
        api_version: format!("{GROUP}/{version}"),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    Api::default_namespaced_with(server.client(), &ar)
}

fn widget(version: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(
        json!({"apiVersion": format!("{GROUP}/{version}"), "kind": "Widget",
        "metadata": {"name": name}, "spec": spec}),
    )
    .unwrap()
}

#[tokio::test]
async fn a_conversion_webhook_serves_both_versions() {
    let server = ApiServer::start_in_process().await;
    let hook = WebhookServer::start(converter()).await;
    created(&server, CRDS, &crd(by_webhook(&hook))).await;
    let (v1, v2) = (api(&server, "v1"), api(&server, "v2"));
    let made = v2
        .create(
            &PostParams::default(),
            &widget("v2", "a", json!({"replicas": 3})),
        )
        .await
        .unwrap();
    assert_eq!(
        made.types.as_ref().unwrap().api_version,
        format!("{GROUP}/v2")
    );
    assert_eq!(made.data["spec"], json!({"replicas": 3}), "answered in v2");
    // Stored in v1: read there with no conversion at all.
    let stored = stored(&server, "a");
    assert_eq!(
        (stored["apiVersion"].clone(), stored["spec"].clone()),
        (json!(format!("{GROUP}/v1")), json!({"size": 3}))
    );
    assert_eq!(v1.get("a").await.unwrap().data["spec"], json!({"size": 3}));
    assert_eq!(
        v2.get("a").await.unwrap().data["spec"],
        json!({"replicas": 3})
    );
    // A stored version converted once is not sent again (every read and
    // every watch of v2 would call the webhook for it).
    let sent = hook.reviews().len();
    for _ in 0..3 {
        v2.get("a").await.unwrap();
    }
    assert_eq!(hook.reviews().len(), sent);

    v1.create(
        &PostParams::default(),
        &widget("v1", "b", json!({"size": 1})),
    )
    .await
    .unwrap();
    let listed: Vec<Value> = v2
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|o| o.data["spec"].clone())
        .collect();
    assert_eq!(listed, [json!({"replicas": 3}), json!({"replicas": 1})]);

    let patched = v2
        .patch(
            "b",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["spec"], json!({"replicas": 5}));
    assert_eq!(v1.get("b").await.unwrap().data["spec"], json!({"size": 5}));

    // A watch in v2 sees v2.
    let mut events = watcher(v2.clone(), watcher::Config::default()).boxed();
    let mut seen = Vec::new();
    for _ in 0..2 {
        seen.push(next_applied(&mut events, true).await.data["spec"].clone());
    }
    assert_eq!(seen, [json!({"replicas": 3}), json!({"replicas": 5})]);
    v1.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": 7}})),
    )
    .await
    .unwrap();
    let next = next_applied(&mut events, false).await;
    assert_eq!(next.data["spec"], json!({"replicas": 7}));
}

#[tokio::test]
async fn a_failing_conversion_webhook_fails_the_read() {
    let server = ApiServer::start_in_process().await;
    let hook = WebhookServer::start(Arc::new(|review: &Value| {
        let review: ConversionReview = serde_json::from_value(review.clone()).unwrap();
        let req = ConversionRequest::from_review(review).unwrap();
        let status = kube::core::Status::failure("nope", "BadRequest");
        let review = ConversionResponse::for_request(req)
            .failure(status)
            .into_review();
        (200, serde_json::to_vec(&review).unwrap())
    }))
    .await;
    created(&server, CRDS, &crd(by_webhook(&hook))).await;
    let v1 = api(&server, "v1");
    v1.create(
        &PostParams::default(),
        &widget("v1", "a", json!({"size": 1})),
    )
    .await
    .unwrap();
    let r = send(
        &server,
        "GET",
        &format!("/apis/{GROUP}/v2/namespaces/default/widgets/a"),
        JSON,
        "",
    )
    .await;
    assert_eq!(r.code, StatusCode::INTERNAL_SERVER_ERROR);
    let body: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(
        body.get("reason"),
        None,
        "no reason, as kube-apiserver answers it"
    );
    assert_eq!(
        body["message"],
        format!("conversion webhook for {GROUP}/v1, Kind=Widget failed: nope")
    );
    // v1 needs no conversion.
    assert_eq!(v1.get("a").await.unwrap().data["spec"], json!({"size": 1}));
}

#[tokio::test]
async fn strategy_none_rewrites_the_api_version_and_stores_the_storage_version() {
    let server = ApiServer::start_in_process().await;
    let mut def = crd(json!({"strategy": "None"}));
    def["spec"]["versions"][1]["schema"] = def["spec"]["versions"][0]["schema"].clone();
    created(&server, CRDS, &def).await;
    let (v1, v2) = (api(&server, "v1"), api(&server, "v2"));
    v2.create(
        &PostParams::default(),
        &widget("v2", "a", json!({"size": 2})),
    )
    .await
    .unwrap();
    assert_eq!(stored(&server, "a")["apiVersion"], format!("{GROUP}/v1"));
    let got = v2.get("a").await.unwrap();
    assert_eq!(got.types.unwrap().api_version, format!("{GROUP}/v2"));
    // A patch in the other version than the stored one applies.
    let patched = v2
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 4}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["spec"], json!({"size": 4}));
    assert_eq!(v1.get("a").await.unwrap().data["spec"], json!({"size": 4}));
}

/// `spec.conversion` is checked as apiextensions-apiserver checks it (its
/// internal field names in the paths); a storage version stays in
/// `status.storedVersions` after another becomes the storage version.
#[tokio::test]
async fn conversion_settings_are_validated_and_stored_versions_accumulate() {
    let server = ApiServer::start_in_process().await;
    let cases = [
        (
            json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"]}}),
            "spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook",
        ),
        (
            json!({"strategy": "Webhook", "webhook": {"clientConfig": {"url": "http://127.0.0.1/x"}, "conversionReviewVersions": ["v1"]}}),
            "spec.conversion.webhookClientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
        ),
        (
            json!({"strategy": "Webhook", "webhook": {"clientConfig": {"url": "https://127.0.0.1/x"}}}),
            "spec.conversion.conversionReviewVersions: Required value",
        ),
        (
            json!({"strategy": "None", "webhook": {"conversionReviewVersions": ["v1"]}}),
            "spec.conversion.conversionReviewVersions: Forbidden: should not be set when strategy is not set to Webhook",
        ),
        (
            json!({"strategy": "Sometimes"}),
            "spec.conversion.strategy: Unsupported value: \"Sometimes\": supported values: \"None\", \"Webhook\"",
        ),
    ];
    for (conversion, want) in cases {
        let r = send(&server, "POST", CRDS, JSON, &crd(conversion.clone())).await;
        assert_eq!(r.code, StatusCode::UNPROCESSABLE_ENTITY, "{conversion}");
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(
            body["message"],
            format!(
                "CustomResourceDefinition.apiextensions.k8s.io \"widgets.{GROUP}\" is invalid: {want}"
            ),
        );
    }
    let def = crd(json!({"strategy": "None"}));
    created(&server, CRDS, &def).await;
    let mut moved = def.clone();
    moved["spec"]["versions"][0]["storage"] = false.into();
    moved["spec"]["versions"][1]["storage"] = true.into();
    let url = format!("{CRDS}/widgets.{GROUP}");
    let current: Value =
        serde_json::from_slice(&send(&server, "GET", &url, JSON, "").await.body).unwrap();
    moved["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
    let r = send(&server, "PUT", &url, JSON, &moved).await;
    assert_eq!(r.code, StatusCode::OK, "{:?}", r.body);
    let after: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(after["status"]["storedVersions"], json!(["v1", "v2"]));
    assert_eq!(after["spec"]["conversion"], json!({"strategy": "None"}));
}
