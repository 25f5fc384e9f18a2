//! The write path's cost, counted in instructions (docs/benchmarks.md,
//! "Write path cost"): 100 objects created, then N merge patches through
//! the in-process Service, of ConfigMaps (`cm`), of a custom resource whose
//! CRD has a structural schema (`cr-schema`) or one that keeps anything
//! (`cr-free`); or ConfigMap patches on a server authorizing with RBAC, as
//! the admin (`cm-rbac-admin`) or as a ServiceAccount bound to `edit`, its
//! token on every request (`cm-rbac-account`: docs/benchmarks.md,
//! "Authorization cost"). Run it under callgrind with N and with 0; the difference
//! over N is one write's instructions, repeatable on a noisy machine:
//!
//! ```sh
//! cargo build --release -p ward-apiserver --example write_cost
//! for n in 0 2000; do valgrind --tool=callgrind target/release/examples/write_cost cm $n; done
//! ```
use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use serde_json::json;
use tower::ServiceExt;
use ward_apiserver::AuthorizationMode;

async fn send(
    s: &ward_apiserver::ApiServer,
    method: &str,
    uri: &str,
    ct: &str,
    body: String,
    token: Option<&str>,
) -> u16 {
    let mut req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", ct);
    if let Some(token) = token {
        req = req.header("authorization", format!("Bearer {token}"));
    }
    let req = req.body(Full::new(Bytes::from(body))).unwrap();
    let resp = s.service().oneshot(req).await.unwrap();
    let code = resp.status().as_u16();
    let _ = resp.into_body().collect().await.unwrap();
    code
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(what), Some(n)) = (
        args.get(1),
        args.get(2).and_then(|n| n.parse::<usize>().ok()),
    ) else {
        eprintln!("usage: write_cost cm|cr-schema|cr-free|cm-rbac-admin|cm-rbac-account N");
        std::process::exit(2);
    };
    let (what, mode) = match what.as_str() {
        "cm-rbac-admin" | "cm-rbac-account" => ("cm", AuthorizationMode::Rbac),
        what => (what, AuthorizationMode::AlwaysAllow),
    };
    let s = ward_apiserver::ApiServer::start(
        ward_apiserver::ServerConfig::default().authorization_mode(mode),
    )
    .await
    .unwrap();
    let token = match args[1].as_str() {
        "cm-rbac-account" => Some(account_token(&s).await),
        _ => None,
    };
    let (coll, ct) = match what {
        "cm" => (
            "/api/v1/namespaces/default/configmaps",
            "application/merge-patch+json",
        ),
        _ => (
            "/apis/example.ward.dev/v1/namespaces/default/widgets",
            "application/merge-patch+json",
        ),
    };
    if what != "cm" {
        let schema = if what == "cr-schema" {
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
                "size": {"type": "integer", "minimum": 0, "default": 1},
                "color": {"type": "string", "enum": ["red", "blue"]},
                "rev": {"type": "string"}, "stamp": {"type": "string"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
                "status": {"type": "object", "properties": {"observed": {"type": "integer"}}}}})
        } else {
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
        };
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.ward.dev"},
            "spec": {"group": "example.ward.dev", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": schema}}]}});
        assert_eq!(
            send(
                &s,
                "POST",
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                "application/json",
                crd.to_string(),
                None
            )
            .await,
            201
        );
    }
    for i in 0..100 {
        let obj = if what == "cm" {
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("o{i}"), "labels": {"app": "bench", "tier": "x"}},
                "data": {"rev": "0", "stamp": "0", "payload": "x".repeat(300)}})
        } else {
            json!({"apiVersion": "example.ward.dev/v1", "kind": "Widget", "metadata": {"name": format!("o{i}"), "labels": {"app": "bench"}},
                "spec": {"size": 3, "color": "red", "rev": "0", "stamp": "0", "labels": {"a": "b", "c": "d"}}})
        };
        assert_eq!(
            send(&s, "POST", coll, "application/json", obj.to_string(), None).await,
            201
        );
    }
    for i in 0..n {
        let patch = if what == "cm" {
            json!({"data": {"rev": i.to_string(), "stamp": (i * 7).to_string()}})
        } else {
            json!({"spec": {"rev": i.to_string(), "stamp": (i * 7).to_string()}})
        };
        let uri = format!("{coll}/o{}", i % 100);
        let body = patch.to_string();
        assert_eq!(
            send(&s, "PATCH", &uri, ct, body, token.as_deref()).await,
            200
        );
    }
    s.shutdown().await;
}

/// A ServiceAccount `writer` in `default`, bound to the ClusterRole `edit`
/// there: its token, from a TokenRequest.
async fn account_token(s: &ward_apiserver::ApiServer) -> String {
    let post = |uri: &str, body: serde_json::Value| {
        let req = Request::post(uri)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .unwrap();
        async move {
            let resp = s.service().oneshot(req).await.unwrap();
            assert!(resp.status().is_success(), "{}", resp.status());
            let body = resp.into_body().collect().await.unwrap().to_bytes();
            serde_json::from_slice::<serde_json::Value>(&body).unwrap()
        }
    };
    let sa = "/api/v1/namespaces/default/serviceaccounts";
    post(sa, json!({"metadata": {"name": "writer"}})).await;
    post(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        json!({"metadata": {"name": "writer-edits"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": [{"kind": "ServiceAccount", "name": "writer", "namespace": "default"}]}),
    )
    .await;
    let answer = post(&format!("{sa}/writer/token"), json!({"spec": {}})).await;
    answer["status"]["token"].as_str().unwrap().to_string()
}
