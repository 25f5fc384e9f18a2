//! `application/vnd.kubernetes.protobuf`: the codec against k8s-pb's prost
//! messages (the reference encoding of the built-in kinds), both ways; and
//! the server taking protobuf bodies and answering in protobuf to clients
//! that prefer it, as kubectl 1.32+'s typed clients do.

use std::collections::BTreeMap;

use crate::common::*;
use http::StatusCode;
use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::coordination::v1 as coordination;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::{Value, json};
use ward_apiserver::internals::proto::{self, ProtoError};

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// `msg` in the envelope Kubernetes sends: `k8s\0` + runtime.Unknown.
fn envelope(api_version: &str, kind: &str, msg: &impl Message) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(msg.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    [b"k8s\0".as_slice(), &unknown.encode_to_vec()].concat()
}

/// The kind's message out of a protobuf body, with the envelope's type.
fn open<M: Message + Default>(body: &[u8]) -> (String, String, M) {
    let unknown = Unknown::decode(body.strip_prefix(b"k8s\0").expect("the magic")).unwrap();
    let tm = unknown.type_meta.unwrap();
    let msg = M::decode(unknown.raw.unwrap_or_default().as_slice()).unwrap();
    (tm.api_version.unwrap(), tm.kind.unwrap(), msg)
}

fn s(v: &str) -> Option<String> {
    Some(v.to_string())
}

fn meta_named(name: &str) -> Option<meta::ObjectMeta> {
    Some(meta::ObjectMeta {
        name: s(name),
        // What Go marshals for an unset plain field: present and empty.
        namespace: s(""),
        uid: s(""),
        resource_version: s(""),
        generation: Some(0),
        creation_timestamp: Some(meta::Time::default()),
        labels: BTreeMap::from([("app".into(), "web".into())]),
        ..Default::default()
    })
}

/// A Deployment as a Go client marshals it: plain fields present even when
/// zero, pointers only when set.
fn go_deployment() -> apps::Deployment {
    let container = core::Container {
        name: s("web"),
        image: s("nginx"),
        working_dir: s(""),
        ports: vec![core::ContainerPort {
            container_port: Some(80),
            host_port: Some(0),
            protocol: s("TCP"),
            ..Default::default()
        }],
        resources: Some(core::ResourceRequirements {
            limits: BTreeMap::from([("cpu".into(), Quantity { string: s("500m") })]),
            ..Default::default()
        }),
        stdin: Some(false),
        ..Default::default()
    };
    apps::Deployment {
        metadata: meta_named("web"),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(0),
            min_ready_seconds: Some(0),
            paused: Some(false),
            strategy: Some(apps::DeploymentStrategy {
                r#type: s("RollingUpdate"),
                rolling_update: Some(apps::RollingUpdateDeployment {
                    max_surge: Some(IntOrString {
                        r#type: Some(1),
                        int_val: Some(0),
                        str_val: s("25%"),
                    }),
                    max_unavailable: Some(IntOrString {
                        r#type: Some(0),
                        int_val: Some(1),
                        str_val: s(""),
                    }),
                }),
            }),
            template: Some(core::PodTemplateSpec {
                metadata: meta_named(""),
                spec: Some(core::PodSpec {
                    containers: vec![container],
                    host_network: Some(false),
                    node_name: s(""),
                    termination_grace_period_seconds: Some(0),
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }),
        status: Some(apps::DeploymentStatus::default()),
    }
}

#[test]
fn a_go_clients_deployment_decodes_to_the_json_a_json_client_sends() {
    let body = envelope("apps/v1", "Deployment", &go_deployment());
    let got = proto::decode_object(&body).unwrap();
    let want = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            // A pointer set to zero stays; plain zeros are Go's omitted empties.
            "replicas": 0,
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1},
            },
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [{
                        "name": "web",
                        "image": "nginx",
                        "ports": [{"containerPort": 80, "protocol": "TCP"}],
                        "resources": {"limits": {"cpu": "500m"}},
                    }],
                    "terminationGracePeriodSeconds": 0,
                },
            },
        },
        "status": {},
    });
    assert_eq!(got, want);
}

#[test]
fn json_encodes_to_what_k8s_pb_reads() {
    let svc = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "svc", "namespace": "default",
            "creationTimestamp": "2026-11-25T10:00:00Z",
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o",
                "uid": "u-1", "controller": true}]},
        "spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443, "targetPort": "https"}],
            "selector": {"app": "web"}, "type": "ClusterIP"},
    });
    let (av, kind, got): (_, _, core::Service) = open(&proto::encode_object(&svc).unwrap());
    assert_eq!((av.as_str(), kind.as_str()), ("v1", "Service"));
    let m = got.metadata.unwrap();
    assert_eq!(m.name.as_deref(), Some("svc"));
    let created = m.creation_timestamp.unwrap();
    assert_eq!(created.seconds, Some(1_795_600_800));
    assert_eq!(m.owner_references[0].controller, Some(true));
    let spec = got.spec.unwrap();
    assert_eq!(spec.selector.get("app").map(String::as_str), Some("web"));
    let target = |i: usize| spec.ports[i].target_port.clone().unwrap();
    assert_eq!((target(0).r#type, target(0).int_val), (Some(0), Some(8080)));
    assert_eq!((target(1).r#type, target(1).str_val), (Some(1), s("https")));
    assert_eq!(spec.r#type.as_deref(), Some("ClusterIP"));
}

#[test]
fn bytes_maps_and_micro_times_round_trip() {
    let secret = core::Secret {
        metadata: meta_named("s"),
        data: BTreeMap::from([("k".into(), b"\x00\xffv".to_vec())]),
        r#type: s("Opaque"),
        ..Default::default()
    };
    let got = proto::decode_object(&envelope("v1", "Secret", &secret)).unwrap();
    assert_eq!(got["data"], json!({"k": "AP92"}));
    assert_eq!(got["type"], "Opaque");
    let lease = coordination::Lease {
        metadata: meta_named("l"),
        spec: Some(coordination::LeaseSpec {
            holder_identity: s("a"),
            lease_duration_seconds: Some(0),
            renew_time: Some(meta::MicroTime {
                seconds: Some(1_795_600_800),
                nanos: Some(123_456_000),
            }),
            ..Default::default()
        }),
    };
    let got = proto::decode_object(&envelope("coordination.k8s.io/v1", "Lease", &lease)).unwrap();
    assert_eq!(
        got["spec"],
        json!({"holderIdentity": "a", "leaseDurationSeconds": 0,
            "renewTime": "2026-11-25T10:00:00.123456Z"})
    );
    // And back: k8s-pb reads what the codec writes.
    let (_, _, back): (_, _, coordination::Lease) = open(&proto::encode_object(&got).unwrap());
    assert_eq!(back.spec, lease.spec);
}

/// Objects the server stores, through protobuf and back, unchanged.
#[test]
fn stored_json_round_trips_through_protobuf() {
    let objects = [
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "d", "uid": "u", "resourceVersion": "7",
                "creationTimestamp": "2026-11-25T10:00:00Z",
                "managedFields": [{"manager": "m", "operation": "Apply", "apiVersion": "v1",
                    "time": "2026-11-25T10:00:00Z", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:data": {"f:a": {}}}}]},
            "data": {"a": "b", "empty": ""}, "binaryData": {"bin": "AQI="}}),
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "d", "deletionTimestamp": "2026-11-25T10:00:30Z",
                "deletionGracePeriodSeconds": 0, "finalizers": ["x/y"]},
            "spec": {"containers": [{"name": "c", "image": "i",
                "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "a"}}}],
                "livenessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 5}}],
                "volumes": [{"name": "v", "configMap": {"name": "cm"}}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}]}}),
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "ws.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "ws", "kind": "W"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "properties": {
                            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                            "tags": {"type": "array", "items": {"type": "string"}},
                            "m": {"type": "object", "additionalProperties": {"type": "integer"}},
                            "open": {"type": "object", "additionalProperties": false},
                            "d": {"type": "string", "default": "x", "enum": ["x", "y"]},
                        },
                        "required": ["spec"]}}}]}}),
        json!({"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": 404,
            "reason": "NotFound", "message": "m", "metadata": {},
            "details": {"name": "cm", "kind": "configmaps"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMapList",
            "metadata": {"resourceVersion": "9", "continue": "c"},
            "items": [{"metadata": {"name": "a"}, "data": {"k": "v"}}]}),
    ];
    for obj in objects {
        let pb = proto::encode_object(&obj).unwrap_or_else(|e| panic!("{e}: {obj}"));
        assert_eq!(proto::decode_object(&pb).unwrap(), obj);
    }
}

#[test]
fn bad_bodies_are_typed_errors() {
    let cm = core::ConfigMap::default();
    assert!(matches!(
        proto::decode_object(b"{\"kind\":\"ConfigMap\"}"),
        Err(ProtoError::NoMagic)
    ));
    assert!(matches!(
        proto::decode_object(&envelope("example.com/v1", "Widget", &cm)),
        Err(ProtoError::UnknownKind { .. })
    ));
    let mut cut = envelope("v1", "ConfigMap", &go_deployment());
    cut.truncate(cut.len() - 3);
    assert!(proto::decode_object(&cut).is_err());
    let gz = Unknown {
        type_meta: Some(TypeMeta {
            api_version: s("v1"),
            kind: s("ConfigMap"),
        }),
        content_encoding: s("gzip"),
        ..Default::default()
    };
    let gz = [b"k8s\0".as_slice(), &gz.encode_to_vec()].concat();
    assert!(matches!(
        proto::decode_object(&gz),
        Err(ProtoError::Encoding(_))
    ));
    let bad = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": 1}});
    assert!(matches!(
        proto::encode_object(&bad),
        Err(ProtoError::Type(_))
    ));
}

#[test]
fn accept_headers_are_read_in_order() {
    use proto::Wants;
    let cases = [
        ("application/json", Wants::Json),
        ("*/*", Wants::Json),
        (
            "application/vnd.kubernetes.protobuf,application/json",
            Wants::Protobuf { or_json: true },
        ),
        (
            "application/vnd.kubernetes.protobuf, */*",
            Wants::Protobuf { or_json: true },
        ),
        (
            "application/vnd.kubernetes.protobuf",
            Wants::Protobuf { or_json: false },
        ),
        (
            "application/json,application/vnd.kubernetes.protobuf",
            Wants::Json,
        ),
        // Asking for a Table or a stream is not asking for the object.
        (
            "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json",
            Wants::Json,
        ),
    ];
    for (accept, want) in cases {
        assert_eq!(proto::wants(accept), want, "{accept}");
    }
}

async fn send_pb(
    s: &ward_apiserver::ApiServer,
    method: &str,
    uri: &str,
    accept: &str,
    body: Vec<u8>,
) -> Reply {
    let mut req = http::Request::builder().method(method).uri(uri);
    if !body.is_empty() {
        req = req.header("content-type", PROTOBUF);
    }
    if !accept.is_empty() {
        req = req.header("accept", accept);
    }
    call(s, req.body(http_body_util::Full::new(body.into())).unwrap()).await
}

const BOTH: &str = "application/vnd.kubernetes.protobuf,application/json";

#[tokio::test]
async fn the_server_takes_protobuf_and_answers_in_it() {
    let srv = ward_apiserver::ApiServer::start(Default::default())
        .await
        .unwrap();
    without_root_ca(&srv, "default").await;
    let cm = core::ConfigMap {
        metadata: meta_named("cm"),
        data: BTreeMap::from([("a".into(), "b".into())]),
        ..Default::default()
    };
    let r = send_pb(&srv, "POST", CMS, BOTH, envelope("v1", "ConfigMap", &cm)).await;
    assert_eq!(r.code, StatusCode::CREATED);
    assert_eq!(r.content_type, PROTOBUF);
    let (_, kind, created): (_, _, core::ConfigMap) = open(&r.body);
    assert_eq!(kind, "ConfigMap");
    let m = created.metadata.unwrap();
    assert!(m.uid.is_some_and(|u| !u.is_empty()));
    assert_eq!(created.data, cm.data);
    // JSON readers see the same object.
    let r = send(&srv, "GET", CM, "", "").await;
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["data"], json!({"a": "b"}));
    assert_eq!(v["metadata"]["labels"], json!({"app": "web"}));
    assert!(v["metadata"].get("generation").is_none(), "{v}");
    // A list, and an error, in protobuf.
    let r = send_pb(&srv, "GET", CMS, BOTH, vec![]).await;
    let (_, kind, list): (_, _, core::ConfigMapList) = open(&r.body);
    assert_eq!((kind.as_str(), list.items.len()), ("ConfigMapList", 1));
    let r = send_pb(&srv, "GET", &format!("{CMS}/nope"), BOTH, vec![]).await;
    assert_eq!(r.code, StatusCode::NOT_FOUND);
    let (_, kind, status): (_, _, meta::Status) = open(&r.body);
    assert_eq!((kind.as_str(), status.code), ("Status", Some(404)));
    // An update in protobuf, at the stored resourceVersion.
    let mut update = cm.clone();
    update.metadata = Some(meta::ObjectMeta {
        name: s("cm"),
        resource_version: m.resource_version.clone(),
        ..Default::default()
    });
    update.data.insert("c".into(), "d".into());
    let r = send_pb(&srv, "PUT", CM, "", envelope("v1", "ConfigMap", &update)).await;
    assert_eq!(r.code, StatusCode::OK, "{:?}", r.body);
    assert_eq!(r.content_type, "application/json");
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["data"], json!({"a": "b", "c": "d"}));
    // DeleteOptions in protobuf, with a stale uid precondition: refused.
    let opts = meta::DeleteOptions {
        preconditions: Some(meta::Preconditions {
            uid: s("not-the-uid"),
            resource_version: None,
        }),
        ..Default::default()
    };
    let r = send_pb(
        &srv,
        "DELETE",
        CM,
        "",
        envelope("v1", "DeleteOptions", &opts),
    )
    .await;
    assert_status(&r, Some(409), "stale uid precondition");
}

#[tokio::test]
async fn what_has_no_protobuf_form_is_json_or_refused() {
    let srv = server_with_widgets().await;
    // A custom resource: JSON when JSON is acceptable, 406 when it is not.
    let r = send_pb(&srv, "GET", WIDGET, BOTH, vec![]).await;
    assert_eq!(
        (r.code, r.content_type.as_str()),
        (StatusCode::OK, "application/json")
    );
    let r = send_pb(&srv, "GET", WIDGET, PROTOBUF, vec![]).await;
    assert_eq!(r.code, StatusCode::NOT_ACCEPTABLE);
    assert_eq!(r.content_type, "application/json");
    // Refused before it acts: a create that could not be answered stores nothing.
    let before = snapshot(&srv);
    let w2 = serde_json::to_vec(
        &json!({"apiVersion": "example.ward.dev/v1", "kind": "Widget",
        "metadata": {"name": "w2"}}),
    )
    .unwrap();
    let req = http::Request::post(WIDGETS)
        .header("content-type", "application/json")
        .header("accept", PROTOBUF)
        .body(http_body_util::Full::new(w2.into()))
        .unwrap();
    let r = call(&srv, req).await;
    assert_status(&r, Some(406), "protobuf-only create of a custom resource");
    assert_eq!(snapshot(&srv), before);
    // A protobuf body for a custom resource: 415, as kube-apiserver answers.
    let cm = core::ConfigMap::default();
    let body = envelope("example.ward.dev/v1", "Widget", &cm);
    let r = send_pb(&srv, "POST", WIDGETS, "", body).await;
    assert_status(&r, Some(415), "protobuf custom resource");
    // Garbage: 400 with a Status, nothing stored.
    let before = snapshot(&srv);
    let r = send_pb(&srv, "POST", CMS, "", b"k8s\0\x0a\xff\xff".to_vec()).await;
    assert_status(&r, Some(400), "truncated protobuf");
    assert_eq!(snapshot(&srv), before);
}

#[tokio::test]
async fn openapi_v2_is_served_as_json_and_as_gnostic_protobuf() {
    let srv = server_with_widgets().await;
    let r = send(&srv, "GET", "/openapi/v2", "", "").await;
    assert_eq!(
        (r.code, r.content_type.as_str()),
        (StatusCode::OK, "application/json")
    );
    let doc: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(doc["swagger"], "2.0");
    // Every served kind, the custom resource included, has a PATCH that
    // names its kind and takes fieldValidation (what kubectl 1.27/1.28 look for).
    for (path, kind) in [
        (
            "/api/v1/namespaces/{namespace}/configmaps/{name}",
            "ConfigMap",
        ),
        (
            "/apis/apps/v1/namespaces/{namespace}/deployments/{name}",
            "Deployment",
        ),
        ("/api/v1/nodes/{name}", "Node"),
        (
            "/apis/example.ward.dev/v1/namespaces/{namespace}/widgets/{name}",
            "Widget",
        ),
    ] {
        let patch = &doc["paths"][path]["patch"];
        assert_eq!(
            patch["x-kubernetes-group-version-kind"]["kind"], kind,
            "{path}"
        );
        let names: Vec<_> = patch["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"fieldValidation"), "{path}: {names:?}");
    }
    let pb = proto::openapi_v2::MEDIA_TYPE;
    let r = send_pb(&srv, "GET", "/openapi/v2", pb, vec![]).await;
    assert_eq!(r.code, StatusCode::OK);
    assert_eq!(r.content_type, proto::openapi_v2::CONTENT_TYPE);
    // The body is the JSON document's encoding, nothing else.
    assert_eq!(r.body, proto::openapi_v2::encode(&doc).unwrap());
    let r = send(&srv, "POST", "/openapi/v2", "application/json", "{}").await;
    assert_status(&r, Some(405), "openapi/v2 is GET only");
}
