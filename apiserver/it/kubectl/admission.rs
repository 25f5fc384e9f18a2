//! kubectl 1.33 against the two webhooks of `admission.rs` (written on
//! kube's admission types): what it creates comes back labelled by the
//! mutating one; a label the validating one refuses fails `kubectl label`
//! and `kubectl apply` with the denial as kube-apiserver words it.

use serde_json::Value;
use ward_apiserver::{ApiServer, ServerConfig};

use super::Ctl;
use super::auth::kubectl_1_33;
use super::says;
use crate::admission::{WebhookServer, labeller, refuser};
use crate::policies::{binding, replicas_policy};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_writes_go_through_the_webhooks() {
    let Some(bin) = kubectl_1_33() else {
        return;
    };
    let config = ServerConfig::default().listen("127.0.0.1:0".parse().unwrap());
    let server = ApiServer::start(config).await.unwrap();
    let mutating = WebhookServer::start(labeller()).await;
    let validating = WebhookServer::start(refuser()).await;
    for (kind, name, hook) in [
        (
            "MutatingWebhookConfiguration",
            "label.example.com",
            &mutating,
        ),
        (
            "ValidatingWebhookConfiguration",
            "refuse.example.com",
            &validating,
        ),
    ] {
        hook.register(&server, kind, name, "/", serde_json::json!({}))
            .await;
    }
    let k = Ctl::of(bin, &server);
    let made: Value = serde_json::from_str(
        &k.ok(&[
            "create",
            "configmap",
            "a",
            "--from-literal=k=v",
            "-o",
            "json",
        ])
        .await,
    )
    .unwrap();
    assert_eq!(made["metadata"]["labels"]["admitted"], "yes", "{made}");
    let err = k.fails(&["label", "configmap", "a", "forbidden=1"]).await;
    says(
        &err,
        "admission webhook \"refuse.example.com\" denied the request: the label \"forbidden\" is not allowed",
    );
    let path = k.dir.path().join("b.yaml");
    let yaml =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  labels:\n    forbidden: \"1\"\n";
    std::fs::write(&path, yaml).unwrap();
    let err = k.fails(&["apply", "-f", path.to_str().unwrap()]).await;
    says(&err, "denied the request");
    k.gone("configmap/b").await;
}

/// The docs' replicas <= 5 policy: kubectl prints kube-apiserver's
/// denial as it prints it from a cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_meets_a_validating_admission_policy() {
    let Some(bin) = kubectl_1_33() else {
        return;
    };
    let config = ServerConfig::default().listen("127.0.0.1:0".parse().unwrap());
    let server = ApiServer::start(config).await.unwrap();
    let k = Ctl::of(bin, &server);
    let policy = replicas_policy("demo-policy.example.com", serde_json::json!({}));
    let bound = binding(
        "demo-binding-test.example.com",
        "demo-policy.example.com",
        &["Deny"],
        serde_json::json!({}),
    );
    for (file, obj) in [("policy.json", &policy), ("binding.json", &bound)] {
        k.with_file(&["create"], file, &obj.to_string()).await;
    }
    let err = k
        .fails(&[
            "create",
            "deployment",
            "nginx",
            "--image=nginx",
            "--replicas=6",
        ])
        .await;
    says(
        &err,
        "deployments.apps \"nginx\" is forbidden: ValidatingAdmissionPolicy 'demo-policy.example.com' with binding 'demo-binding-test.example.com' denied request: failed expression: object.spec.replicas <= 5",
    );
    k.ok(&[
        "create",
        "deployment",
        "small",
        "--image=nginx",
        "--replicas=5",
    ])
    .await;
}
