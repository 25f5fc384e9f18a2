//! Admission webhooks against webhook servers written on kube's own
//! admission types (`kube::core::admission`, as its docs show them), over
//! HTTPS with a certificate the test's CA signs: a mutating one that labels
//! ConfigMaps, a validating one that refuses a label; their effects through
//! kube-rs (and kubectl, in `kubectl/admission.rs`); each failurePolicy on
//! a webhook that is down or slow; answers a webhook must not give; and
//! the webhook faults.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use serde_json::{Value, json};
use tokio_rustls::rustls;
use ward_apiserver::ApiServer;
use ward_apiserver::faults::{Trigger, WebhookAction, WebhookFault};

/// What a webhook server answers a review with.
pub type Answer = Arc<dyn Fn(&Value) -> (u16, Vec<u8>) + Send + Sync>;

/// A webhook server on loopback: HTTPS with a certificate for 127.0.0.1
/// and `hook.d.svc`, signed by its own CA; every review it got is kept.
pub struct WebhookServer {
    pub addr: SocketAddr,
    pub ca_pem: String,
    pub reviews: Arc<Mutex<Vec<Value>>>,
    _task: tokio::task::JoinHandle<()>,
}

impl WebhookServer {
    pub async fn start(answer: Answer) -> WebhookServer {
        Self::start_slow(answer, Duration::ZERO).await
    }

    /// Answers after `delay`.
    pub async fn start_slow(answer: Answer, delay: Duration) -> WebhookServer {
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let issuer = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let serving =
            CertificateParams::new(vec!["127.0.0.1".to_string(), "hook.d.svc".to_string()])
                .unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = serving.signed_by(&key, &issuer).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let reviews = Arc::new(Mutex::new(Vec::new()));
        let seen = reviews.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (acceptor, answer, seen) = (acceptor.clone(), answer.clone(), seen.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(
                        move |req: hyper::Request<hyper::body::Incoming>| {
                            let (answer, seen) = (answer.clone(), seen.clone());
                            async move {
                                let body = req.into_body().collect().await?.to_bytes();
                                let review: Value =
                                    serde_json::from_slice(&body).unwrap_or(Value::Null);
                                seen.lock().unwrap().push(review.clone());
                                tokio::time::sleep(delay).await;
                                let (code, out) = answer(&review);
                                Ok::<_, hyper::Error>(
                                    hyper::Response::builder()
                                        .status(code)
                                        .header("content-type", "application/json")
                                        .body(Full::new(Bytes::from(out)))
                                        .unwrap(),
                                )
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        WebhookServer {
            addr,
            ca_pem: issuer.pem(),
            reviews,
            _task: task,
        }
    }

    /// Registers it by URL (`path` on it) as the one webhook of a
    /// configuration `kind` named `name`, with `extra` fields.
    pub async fn register(
        &self,
        server: &ApiServer,
        kind: &str,
        name: &str,
        path: &str,
        extra: Value,
    ) {
        let client = json!({"url": self.url(path), "caBundle": self.ca_bundle()});
        register(server, &configuration(kind, name, client, extra)).await;
    }

    /// `caBundle` for it.
    pub fn ca_bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.addr.port())
    }

    pub fn reviews(&self) -> Vec<Value> {
        self.reviews.lock().unwrap().clone()
    }
}

/// A webhook written from kube's docs: decode an `AdmissionReview`, answer
/// with `AdmissionResponse`.
fn kube_typed(decide: fn(&AdmissionRequest<DynamicObject>) -> AdmissionResponse) -> Answer {
    Arc::new(move |review: &Value| {
        let review: AdmissionReview<DynamicObject> =
            serde_json::from_value(review.clone()).unwrap();
        let req: AdmissionRequest<DynamicObject> = review.try_into().unwrap();
        let resp = decide(&req).into_review();
        (200, serde_json::to_vec(&resp).unwrap())
    })
}

/// Mutating: label every object `admitted=yes`.
pub fn labeller() -> Answer {
    kube_typed(|req| {
        let resp = AdmissionResponse::from(req);
        let Some(obj) = &req.object else {
            return resp;
        };
        let op = if obj.metadata.labels.is_none() {
            json_patch::PatchOperation::Add(json_patch::AddOperation {
                path: "/metadata/labels".parse().unwrap(),
                value: json!({"admitted": "yes"}),
            })
        } else {
            json_patch::PatchOperation::Add(json_patch::AddOperation {
                path: "/metadata/labels/admitted".parse().unwrap(),
                value: json!("yes"),
            })
        };
        resp.with_patch(json_patch::Patch(vec![op])).unwrap()
    })
}

/// Validating: refuse objects labelled `forbidden`.
pub fn refuser() -> Answer {
    kube_typed(|req| {
        let resp = AdmissionResponse::from(req);
        let forbidden = req
            .object
            .as_ref()
            .and_then(|o| o.metadata.labels.as_ref())
            .is_some_and(|l| l.contains_key("forbidden"));
        if forbidden {
            resp.deny("the label \"forbidden\" is not allowed")
        } else {
            resp
        }
    })
}

/// A configuration of one webhook on ConfigMaps.
pub fn configuration(kind: &str, name: &str, client_config: Value, extra: Value) -> Value {
    let mut hook = json!({
        "name": name,
        "clientConfig": client_config,
        "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    });
    for (k, v) in extra.as_object().into_iter().flatten() {
        hook[k] = v.clone();
    }
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [hook],
    })
}

/// Stores a webhook configuration (`configuration`'s JSON), through
/// k8s-openapi's typed kinds.
pub async fn register(server: &ApiServer, config: &Value) {
    async fn create<K>(server: &ApiServer, config: &Value)
    where
        K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope, DynamicType = ()>
            + Clone
            + std::fmt::Debug
            + serde::Serialize
            + serde::de::DeserializeOwned,
    {
        let obj: K = serde_json::from_value(config.clone()).unwrap();
        let api: Api<K> = Api::all(server.client());
        api.create(&PostParams::default(), &obj).await.unwrap();
    }
    match config["kind"].as_str() {
        Some("MutatingWebhookConfiguration") => {
            create::<MutatingWebhookConfiguration>(server, config).await;
        }
        _ => create::<ValidatingWebhookConfiguration>(server, config).await,
    }
}

fn cm(name: &str, labels: Value) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}),
    )
    .unwrap()
}

fn api_error(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("not an API error: {other}"),
    }
}

/// The two webhooks of the issue, one by URL and one by Service (its
/// EndpointSlice pointing at the server on loopback), through kube-rs:
/// a created ConfigMap comes back labelled, one labelled `forbidden` is
/// refused with kube's denial, and so is an update that adds the label;
/// what the webhooks were sent is what kube-apiserver sends.
#[tokio::test]
async fn a_mutating_and_a_validating_webhook_act_on_writes() {
    let server = ApiServer::start_in_process().await;
    let mutating = WebhookServer::start(labeller()).await;
    let validating = WebhookServer::start(refuser()).await;
    mutating
        .register(
            &server,
            "MutatingWebhookConfiguration",
            "label.example.com",
            "/mutate",
            json!({}),
        )
        .await;
    // The validating webhook is a Service in namespace d.
    let client = server.client();
    let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    ns.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "d"}})).unwrap(),
    )
    .await
    .unwrap();
    let svcs: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(client.clone(), "d");
    svcs.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "hook"}, "spec": {"ports": [{"name": "https", "port": 443, "targetPort": validating.addr.port()}]}})).unwrap(),
    )
    .await
    .unwrap();
    let slices: Api<k8s_openapi::api::discovery::v1::EndpointSlice> =
        Api::namespaced(client.clone(), "d");
    slices
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "hook-1", "labels": {"kubernetes.io/service-name": "hook"}},
                "addressType": "IPv4",
                "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}],
                "ports": [{"name": "https", "port": validating.addr.port(), "protocol": "TCP"}],
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    register(
        &server,
        &configuration(
            "ValidatingWebhookConfiguration",
            "refuse.example.com",
            json!({"service": {"namespace": "d", "name": "hook", "path": "/validate"}, "caBundle": validating.ca_bundle()}),
            json!({}),
        ),
    )
    .await;

    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let made = cms
        .create(&PostParams::default(), &cm("a", json!({"app": "x"})))
        .await
        .unwrap();
    let labels = made.metadata.labels.clone().unwrap();
    assert_eq!(
        labels.get("admitted").map(String::as_str),
        Some("yes"),
        "{labels:?}"
    );
    assert_eq!(
        cms.get("a").await.unwrap().metadata.labels,
        made.metadata.labels
    );

    let refused = api_error(
        cms.create(&PostParams::default(), &cm("b", json!({"forbidden": "1"})))
            .await
            .unwrap_err(),
    );
    assert_eq!(refused.code, 400);
    assert_eq!(
        refused.message,
        "admission webhook \"refuse.example.com\" denied the request: the label \"forbidden\" is not allowed"
    );
    assert!(
        cms.get_opt("b").await.unwrap().is_none(),
        "a refused create stored nothing"
    );

    let patch = Patch::Merge(json!({"metadata": {"labels": {"forbidden": "1"}}}));
    let refused = api_error(
        cms.patch("a", &PatchParams::default(), &patch)
            .await
            .unwrap_err(),
    );
    assert!(
        refused.message.contains("denied the request"),
        "{}",
        refused.message
    );
    let now = cms.get("a").await.unwrap();
    assert_eq!(
        now.metadata.resource_version, made.metadata.resource_version,
        "nothing written"
    );

    // What kube-apiserver sends: the mutating webhook saw the object as
    // sent, the validating one the labelled object, with its old version
    // on the update; the user, the operation, the options.
    let sent = mutating.reviews();
    let first = &sent[0]["request"];
    assert_eq!(first["operation"], "CREATE");
    assert_eq!(
        first["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(
        first["resource"],
        json!({"group": "", "version": "v1", "resource": "configmaps"})
    );
    assert_eq!(
        (first["name"].as_str(), first["namespace"].as_str()),
        (Some("a"), Some("default"))
    );
    assert_eq!(first["oldObject"], Value::Null);
    assert_eq!(first["dryRun"], false);
    assert_eq!(first["options"]["kind"], "CreateOptions");
    assert!(
        first["userInfo"]["username"]
            .as_str()
            .is_some_and(|u| !u.is_empty())
    );
    assert!(
        first["object"]["metadata"]["labels"]
            .get("admitted")
            .is_none()
    );
    let checked = validating.reviews();
    assert_eq!(
        checked[0]["request"]["object"]["metadata"]["labels"]["admitted"],
        "yes"
    );
    let update = checked
        .iter()
        .map(|r| &r["request"])
        .find(|r| r["operation"] == "UPDATE")
        .expect("the patch was sent to the validating webhook");
    assert_eq!(
        update["oldObject"]["metadata"]["resourceVersion"],
        json!(made.metadata.resource_version)
    );
    assert_eq!(update["options"]["kind"], "UpdateOptions");

    // A dry run is sent (sideEffects None) and marked so; nothing stored.
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    cms.create(&dry, &cm("c", json!({}))).await.unwrap();
    assert!(cms.get_opt("c").await.unwrap().is_none());
    assert_eq!(
        mutating.reviews().last().unwrap()["request"]["dryRun"],
        true
    );

    // generateName: the mutating webhook sees no name, the validating one
    // the name stored.
    let mut generated = cm("", json!({}));
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("gen-".into());
    let made = cms
        .create(&PostParams::default(), &generated)
        .await
        .unwrap();
    let name = made.metadata.name.unwrap();
    assert_eq!(mutating.reviews().last().unwrap()["request"]["name"], "");
    assert_eq!(
        validating.reviews().last().unwrap()["request"]["name"],
        json!(name)
    );
    cms.delete(&name, &DeleteParams::default()).await.unwrap();
}

/// failurePolicy on a webhook that is down (connection refused) and one
/// that is slower than its timeoutSeconds: Fail refuses the write with
/// kube's message (500), Ignore lets it through.
#[tokio::test]
async fn each_failure_policy_on_a_webhook_that_is_down_or_slow() {
    let server = ApiServer::start_in_process().await;
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let slow = WebhookServer::start_slow(refuser(), Duration::from_secs(3)).await;
    let down_url = format!("https://127.0.0.1:{closed}/x");
    for (name, url, policy) in [
        ("down-ignore.example.com", down_url.clone(), "Ignore"),
        ("slow-ignore.example.com", slow.url("/v"), "Ignore"),
    ] {
        register(
            &server,
            &configuration(
                "ValidatingWebhookConfiguration",
                name,
                json!({"url": url, "caBundle": slow.ca_bundle()}),
                json!({"failurePolicy": policy, "timeoutSeconds": 1}),
            ),
        )
        .await;
    }
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    cms.create(&PostParams::default(), &cm("ignored", json!({})))
        .await
        .unwrap();

    register(
        &server,
        &configuration(
            "ValidatingWebhookConfiguration",
            "down-fail.example.com",
            json!({"url": down_url, "caBundle": slow.ca_bundle()}),
            json!({}),
        ),
    )
    .await;
    let e = api_error(
        cms.create(&PostParams::default(), &cm("down", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (500, "InternalError"));
    assert_eq!(
        e.message,
        format!(
            "Internal error occurred: failed calling webhook \"down-fail.example.com\": failed to call webhook: Post \"https://127.0.0.1:{closed}/x?timeout=10s\": dial tcp 127.0.0.1:{closed}: connect: connection refused"
        )
    );
    assert!(cms.get_opt("down").await.unwrap().is_none());
}

/// A slow webhook under Fail: `context deadline exceeded` after its
/// timeoutSeconds.
#[tokio::test]
async fn a_slow_webhook_under_fail_times_out() {
    let server = ApiServer::start_in_process().await;
    let slow = WebhookServer::start_slow(refuser(), Duration::from_secs(3)).await;
    slow.register(
        &server,
        "ValidatingWebhookConfiguration",
        "slow-fail.example.com",
        "/v",
        json!({"timeoutSeconds": 1}),
    )
    .await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let e = api_error(
        cms.create(&PostParams::default(), &cm("slow", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        e.message,
        format!(
            "Internal error occurred: failed calling webhook \"slow-fail.example.com\": failed to call webhook: Post \"{}\": context deadline exceeded",
            slow.url("/v?timeout=1s")
        )
    );
}

/// What a webhook must not answer, each refused with kube-apiserver's
/// message and nothing stored: garbage, another review's uid, a patch from
/// a validating webhook, a patch that does not apply, an error status.
#[tokio::test]
async fn answers_a_webhook_must_not_give() {
    let ok = |v: &Value, response: Value| {
        let mut response = response;
        response["uid"] = v["request"]["uid"].clone();
        serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})).unwrap()
    };
    let bad_patch = base64::engine::general_purpose::STANDARD
        .encode(br#"[{"op": "replace", "path": "/nope/deeper", "value": 1}]"#);
    let cases: Vec<(&str, bool, Answer, String)> = vec![
        (
            "garbage.example.com",
            false,
            Arc::new(|_: &Value| (200, b"not json".to_vec())),
            "failed to call webhook: couldn't get version/kind; json parse error".to_string(),
        ),
        (
            "uid.example.com",
            false,
            Arc::new(|_: &Value| {
                (200, serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": "other", "allowed": true}})).unwrap())
            }),
            "received invalid webhook response: expected response.uid=".to_string(),
        ),
        (
            "patching-validator.example.com",
            false,
            Arc::new(move |v: &Value| (200, ok(v, json!({"allowed": true, "patch": "W10=", "patchType": "JSONPatch"})))),
            "received invalid webhook response: validating webhook may not return response.patch".to_string(),
        ),
        (
            "bad-patch.example.com",
            true,
            Arc::new(move |v: &Value| (200, ok(v, json!({"allowed": true, "patch": bad_patch, "patchType": "JSONPatch"})))),
            "Internal error occurred: ".to_string(),
        ),
        (
            "error.example.com",
            false,
            Arc::new(|_: &Value| (500, b"boom".to_vec())),
            "failed to call webhook: an error on the server (\"boom\") has prevented the request from succeeding".to_string(),
        ),
    ];
    for (name, mutating, answer, want) in cases {
        let server = ApiServer::start_in_process().await;
        let hook = WebhookServer::start(answer).await;
        let kind = if mutating {
            "MutatingWebhookConfiguration"
        } else {
            "ValidatingWebhookConfiguration"
        };
        hook.register(&server, kind, name, "/", json!({})).await;
        let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
        let e = api_error(
            cms.create(&PostParams::default(), &cm("x", json!({})))
                .await
                .unwrap_err(),
        );
        assert_eq!(e.code, 500, "{name}: {}", e.message);
        assert!(e.message.contains(&want), "{name}: {}", e.message);
        assert!(
            cms.get_opt("x").await.unwrap().is_none(),
            "{name}: nothing stored"
        );
    }
}

/// A webhook whose certificate the caBundle does not vouch for fails as
/// Go's client fails; webhook faults (refused, timed out) fire as a real
/// failure would, and each failurePolicy decides.
#[tokio::test]
async fn an_untrusted_certificate_and_webhook_faults_follow_the_failure_policy() {
    let server = ApiServer::start_in_process().await;
    let hook = WebhookServer::start(labeller()).await;
    let stranger = WebhookServer::start(labeller()).await;
    register(
        &server,
        &configuration(
            "MutatingWebhookConfiguration",
            "label.example.com",
            json!({"url": hook.url("/"), "caBundle": stranger.ca_bundle()}),
            json!({}),
        ),
    )
    .await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let e = api_error(
        cms.create(&PostParams::default(), &cm("x", json!({})))
            .await
            .unwrap_err(),
    );
    assert!(
        e.message.ends_with(
            "tls: failed to verify certificate: x509: certificate signed by unknown authority"
        ),
        "{}",
        e.message
    );

    let server = ApiServer::start_in_process().await;
    hook.register(
        &server,
        "MutatingWebhookConfiguration",
        "label.example.com",
        "/",
        json!({"timeoutSeconds": 1}),
    )
    .await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    server
        .faults()
        .add_webhook_fault(WebhookFault {
            webhook: Some("label.example.com".into()),
            action: WebhookAction::Refuse,
            trigger: Trigger::Next(1),
        })
        .unwrap();
    let e = api_error(
        cms.create(&PostParams::default(), &cm("x", json!({})))
            .await
            .unwrap_err(),
    );
    assert!(
        e.message.ends_with("connect: connection refused"),
        "{}",
        e.message
    );
    server
        .faults()
        .add_webhook_fault(WebhookFault {
            webhook: None,
            action: WebhookAction::Timeout,
            trigger: Trigger::Next(1),
        })
        .unwrap();
    let e = api_error(
        cms.create(&PostParams::default(), &cm("x", json!({})))
            .await
            .unwrap_err(),
    );
    assert!(
        e.message.ends_with("context deadline exceeded"),
        "{}",
        e.message
    );
    // Spent: the next write is called and labelled.
    let made = cms
        .create(&PostParams::default(), &cm("x", json!({})))
        .await
        .unwrap();
    assert_eq!(made.metadata.labels.unwrap()["admitted"], "yes");
}

/// Registration refuses what kube-apiserver refuses (422, its words), and
/// a caBundle that is not base64 (400).
#[tokio::test]
async fn registration_refuses_bad_configurations() {
    let server = ApiServer::start_in_process().await;
    // Dynamic: a caBundle that is not base64 cannot be a typed ByteString.
    let ar = kube::api::ApiResource::erase::<ValidatingWebhookConfiguration>(&());
    let api: Api<DynamicObject> = Api::all_with(server.client(), &ar);
    let create = |c: Value| {
        let api = api.clone();
        async move {
            let obj: DynamicObject = serde_json::from_value(c).unwrap();
            api_error(api.create(&PostParams::default(), &obj).await.unwrap_err())
        }
    };
    let e = create(configuration(
        "ValidatingWebhookConfiguration",
        "short.name",
        json!({"url": "http://127.0.0.1/x"}),
        json!({"timeoutSeconds": 31}),
    ))
    .await;
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        e.message,
        "ValidatingWebhookConfiguration.admissionregistration.k8s.io \"short.name\" is invalid: [webhooks[0].name: Invalid value: \"short.name\": should be a domain with at least three segments separated by dots, webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds, webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]]"
    );
    let e = create(configuration(
        "ValidatingWebhookConfiguration",
        "a.b.c",
        json!({"url": "https://127.0.0.1/x", "caBundle": "%%%"}),
        json!({}),
    ))
    .await;
    assert_eq!(e.code, 400, "{}", e.message);
    let e = create(configuration(
        "ValidatingWebhookConfiguration",
        "a.b.c",
        json!({"url": "https://127.0.0.1/x"}),
        json!({"matchConditions": [{"name": "m", "expression": "object.metadata.name ==="}]}),
    ))
    .await;
    assert!(e.message.contains("compilation failed"), "{}", e.message);
    let list = api.list(&Default::default()).await.unwrap();
    assert!(list.items.is_empty(), "nothing registered");
}

/// A deletecollection sends one DELETE review per object (no name, the
/// object as `oldObject`), however many there are; a webhook that refuses
/// one stops the collection there.
#[tokio::test]
async fn a_collection_delete_is_reviewed_object_by_object() {
    let server = ApiServer::start_in_process().await;
    let hook = WebhookServer::start(kube_typed(|req| {
        let resp = AdmissionResponse::from(req);
        let keep = req
            .old_object
            .as_ref()
            .and_then(|o| o.metadata.labels.as_ref())
            .is_some_and(|l| l.contains_key("keep"));
        if keep { resp.deny("kept") } else { resp }
    }))
    .await;
    let mut config = configuration(
        "ValidatingWebhookConfiguration",
        "deletes.example.com",
        json!({"url": hook.url("/"), "caBundle": hook.ca_bundle()}),
        json!({}),
    );
    config["webhooks"][0]["rules"][0]["operations"] = json!(["DELETE"]);
    register(&server, &config).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    for i in 0..12 {
        cms.create(
            &PostParams::default(),
            &cm(&format!("c{i:02}"), json!({"batch": "1"})),
        )
        .await
        .unwrap();
    }
    let lp = kube::api::ListParams::default().labels("batch=1");
    cms.delete_collection(&DeleteParams::default(), &lp)
        .await
        .unwrap();
    assert!(cms.list(&lp).await.unwrap().items.is_empty());
    let deletes: Vec<Value> = hook
        .reviews()
        .into_iter()
        .map(|r| r["request"].clone())
        .collect();
    assert_eq!(deletes.len(), 12);
    assert!(
        deletes
            .iter()
            .all(|r| r["operation"] == "DELETE" && r["name"] == "" && r["object"].is_null())
    );
    assert_eq!(deletes[0]["oldObject"]["metadata"]["name"], "c00");
    assert_eq!(deletes[0]["options"]["kind"], "DeleteOptions");

    cms.create(
        &PostParams::default(),
        &cm("kept", json!({"batch": "2", "keep": "y"})),
    )
    .await
    .unwrap();
    let lp = kube::api::ListParams::default().labels("batch=2");
    let e = api_error(
        cms.delete_collection(&DeleteParams::default(), &lp)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        e.message,
        "admission webhook \"deletes.example.com\" denied the request: kept"
    );
    assert!(cms.get_opt("kept").await.unwrap().is_some());
}
