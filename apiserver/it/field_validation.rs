//! `fieldValidation` on every write of a built-in kind: unknown fields are
//! never stored; Strict refuses them (and duplicate fields) with
//! kube-apiserver's messages, Warn (the default) answers `Warning`
//! headers, Ignore drops them silently. And no field of a real kind is
//! ever taken for unknown (every served built-in kind round-trips).

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use tower::ServiceExt;
use ward_apiserver::ApiServer;
use ward_apiserver::internals::BUILTINS;

use crate::common::*;

const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";

/// One answer with its warnings (the `Warning` headers' values).
struct Answer {
    code: u16,
    body: Value,
    warnings: Vec<String>,
}

async fn ask(s: &ApiServer, method: &str, uri: &str, ct: &str, body: &str) -> Answer {
    let mut req = Request::builder().method(method).uri(uri);
    if !ct.is_empty() {
        req = req.header("content-type", ct);
    }
    let req = req.body(Full::new(Bytes::from(body.to_string()))).unwrap();
    let (parts, b) = s.service().oneshot(req).await.unwrap().into_parts();
    let bytes = b.collect().await.unwrap().to_bytes();
    Answer {
        code: parts.status.as_u16(),
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        warnings: parts
            .headers
            .get_all("warning")
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect(),
    }
}

fn deploy(extra_spec: &str) -> String {
    format!(
        r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"web"}},
        "spec":{{"replicas":1,{extra_spec}"selector":{{"matchLabels":{{"app":"web"}}}},
        "template":{{"metadata":{{"labels":{{"app":"web"}}}},"spec":{{"containers":[{{"name":"c","image":"nginx","imagePullPolcy":"Always"}}]}}}}}}}}"#
    )
}

const UNKNOWN_CONTAINER: &str =
    r#"unknown field "spec.template.spec.containers[0].imagePullPolcy""#;

async fn stored(s: &ApiServer, uri: &str) -> Value {
    ask(s, "GET", uri, "", "").await.body
}

#[tokio::test]
async fn create_strict_refuses_with_kube_apiservers_message_and_stores_nothing() {
    let s = server().await;
    let a = ask(
        &s,
        "POST",
        &format!("{DEPLOYS}?fieldValidation=Strict"),
        JSON,
        &deploy(r#""replica":2,"replicas":3,"#),
    )
    .await;
    assert_eq!(a.code, 400, "{}", a.body);
    assert_eq!(a.body["reason"], "BadRequest");
    assert_eq!(
        a.body["message"],
        format!(
            r#"Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: unknown field "spec.replica", duplicate field "spec.replicas", {UNKNOWN_CONTAINER}"#
        )
    );
    assert_eq!(stored(&s, &format!("{DEPLOYS}/web")).await["code"], 404);
}

#[tokio::test]
async fn create_warns_by_default_and_with_warn_and_never_stores_unknown_fields() {
    let s = server().await;
    for (q, name) in [("", "a"), ("?fieldValidation=Warn", "b")] {
        let body =
            deploy(r#""replica":2,"#).replace(r#""name":"web""#, &format!(r#""name":"{name}""#));
        let a = ask(&s, "POST", &format!("{DEPLOYS}{q}"), JSON, &body).await;
        assert_eq!(a.code, 201, "{}", a.body);
        assert_eq!(
            a.warnings,
            [
                r#"299 - "unknown field \"spec.replica\"""#.to_string(),
                format!(r#"299 - "{}""#, UNKNOWN_CONTAINER.replace('"', "\\\"")),
            ]
        );
        for obj in [a.body, stored(&s, &format!("{DEPLOYS}/{name}")).await] {
            assert!(obj["spec"].get("replica").is_none(), "{obj}");
            let c = &obj["spec"]["template"]["spec"]["containers"][0];
            assert!(c.get("imagePullPolcy").is_none(), "{c}");
            assert_eq!(c["image"], "nginx");
        }
    }
}

#[tokio::test]
async fn create_ignore_drops_silently_and_skips_duplicates() {
    let s = server().await;
    let a = ask(
        &s,
        "POST",
        &format!("{CMS}?fieldValidation=Ignore"),
        JSON,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":"1","a":"2"},"bogus":true}"#,
    )
    .await;
    assert_eq!(a.code, 201, "{}", a.body);
    assert!(a.warnings.is_empty(), "{:?}", a.warnings);
    assert!(a.body.get("bogus").is_none());
    assert_eq!(a.body["data"], json!({"a": "2"}));
}

#[tokio::test]
async fn duplicate_keys_of_maps_and_metadata_count() {
    let s = server().await;
    let a = ask(
        &s,
        "POST",
        &format!("{CMS}?fieldValidation=Strict"),
        JSON,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","labels":{"l":"1","l":"2"}},"data":{"a":"1","a":"2"}}"#,
    )
    .await;
    assert_eq!(a.code, 400, "{}", a.body);
    assert_eq!(
        a.body["message"],
        r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: duplicate field "metadata.labels.l", duplicate field "data.a""#
    );
}

#[tokio::test]
async fn update_and_status_update_follow_the_directive() {
    let s = server().await;
    let cm = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"},"data":{"k":"v2"},"extra":1}"#;
    let a = ask(&s, "PUT", &format!("{CM}?fieldValidation=Strict"), JSON, cm).await;
    assert_eq!(a.code, 400, "{}", a.body);
    assert_eq!(
        a.body["message"],
        r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "extra""#
    );
    let a = ask(&s, "PUT", CM, JSON, cm).await;
    assert_eq!(a.code, 200, "{}", a.body);
    assert_eq!(a.warnings, [r#"299 - "unknown field \"extra\"""#]);
    assert!(stored(&s, CM).await.get("extra").is_none());

    let d = ask(&s, "POST", DEPLOYS, JSON, &deploy("")).await;
    assert_eq!(d.code, 201);
    let mut obj = d.body;
    obj["status"] = json!({"replicas": 1, "readyReplica": 1});
    let a = ask(
        &s,
        "PUT",
        &format!("{DEPLOYS}/web/status?fieldValidation=Strict"),
        JSON,
        &obj.to_string(),
    )
    .await;
    assert_eq!(a.code, 400, "{}", a.body);
    assert!(
        a.body["message"]
            .as_str()
            .unwrap()
            .ends_with(r#"strict decoding error: unknown field "status.readyReplica""#),
        "{}",
        a.body
    );
    let a = ask(
        &s,
        "PUT",
        &format!("{DEPLOYS}/web/status"),
        JSON,
        &obj.to_string(),
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.body);
    assert_eq!(
        a.warnings,
        [r#"299 - "unknown field \"status.readyReplica\"""#]
    );
    assert!(
        stored(&s, &format!("{DEPLOYS}/web")).await["status"]
            .get("readyReplica")
            .is_none()
    );
}

#[tokio::test]
async fn merge_json_and_strategic_patches_check_the_patched_object() {
    let s = server().await;
    for (ct, patch) in [
        (MERGE, r#"{"data":{"k":"x"},"spec":{"x":1}}"#),
        (STRATEGIC, r#"{"data":{"k":"x"},"spec":{"x":1}}"#),
        (
            JSON_PATCH,
            r#"[{"op":"add","path":"/spec","value":{"x":1}}]"#,
        ),
    ] {
        let a = ask(
            &s,
            "PATCH",
            &format!("{CM}?fieldValidation=Strict"),
            ct,
            patch,
        )
        .await;
        assert_eq!(a.code, 422, "{ct}: {}", a.body);
        assert_eq!(a.body["reason"], "Invalid");
        let msg = a.body["message"].as_str().unwrap();
        assert!(
            msg.starts_with(r#" "" is invalid: patch: Invalid value: "#),
            "{msg}"
        );
        assert!(
            msg.ends_with(r#": strict decoding error: unknown field "spec""#),
            "{msg}"
        );
        let a = ask(&s, "PATCH", CM, ct, patch).await;
        assert_eq!(a.code, 200, "{ct}: {}", a.body);
        assert_eq!(a.warnings, [r#"299 - "unknown field \"spec\"""#], "{ct}");
        let a = ask(
            &s,
            "PATCH",
            &format!("{CM}?fieldValidation=Ignore"),
            ct,
            patch,
        )
        .await;
        assert_eq!(a.code, 200, "{ct}: {}", a.body);
        assert!(a.warnings.is_empty(), "{ct}");
        assert!(stored(&s, CM).await.get("spec").is_none(), "{ct}");
    }
    // A merge patch's own duplicates come first, then the patched object's unknown fields.
    let a = ask(
        &s,
        "PATCH",
        &format!("{CM}?fieldValidation=Warn"),
        MERGE,
        r#"{"data":{"k":"1","k":"2"},"bogus":1}"#,
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.body);
    assert_eq!(
        a.warnings,
        [
            r#"299 - "duplicate field \"data.k\"""#,
            r#"299 - "unknown field \"bogus\"""#
        ]
    );
}

#[tokio::test]
async fn apply_refuses_unknown_fields_always_and_checks_duplicates_per_directive() {
    let s = server().await;
    let uri = format!("{CMS}/ap?fieldManager=t");
    let bad = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ap"},"dta":{"a":"b"}}"#;
    for q in ["&fieldValidation=Ignore", ""] {
        let a = ask(&s, "PATCH", &format!("{uri}{q}"), APPLY, bad).await;
        assert_eq!(a.code, 500, "{}", a.body);
        assert_eq!(a.body["reason"], Value::Null, "{}", a.body);
        assert_eq!(
            a.body["message"],
            "failed to create typed patch object (default/ap; /v1, Kind=ConfigMap): .dta: field not declared in schema"
        );
    }
    let dup = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ap\ndata:\n  a: one\n  a: two\n";
    let a = ask(
        &s,
        "PATCH",
        &format!("{uri}&fieldValidation=Strict"),
        APPLY,
        dup,
    )
    .await;
    assert_eq!(a.code, 400, "{}", a.body);
    assert_eq!(
        a.body["message"],
        "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  line 7: key \"a\" already set in map"
    );
    let a = ask(&s, "PATCH", &uri, APPLY, dup).await;
    assert_eq!(a.code, 201, "{}", a.body);
    assert_eq!(
        a.warnings,
        [r#"299 - "line 7: key \"a\" already set in map""#]
    );
    assert_eq!(a.body["data"], json!({"a": "two"}));
    let a = ask(
        &s,
        "PATCH",
        &format!("{uri}&fieldValidation=Ignore"),
        APPLY,
        dup,
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.body);
    assert!(a.warnings.is_empty());
}

#[tokio::test]
async fn scale_writes_check_the_scale() {
    let s = server().await;
    assert_eq!(ask(&s, "POST", DEPLOYS, JSON, &deploy("")).await.code, 201);
    let scale = format!("{DEPLOYS}/web/scale");
    let a = ask(
        &s,
        "PATCH",
        &format!("{scale}?fieldValidation=Strict"),
        MERGE,
        r#"{"spec":{"replicas":2,"replica":3}}"#,
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.body);
    let a = ask(
        &s,
        "PATCH",
        &scale,
        MERGE,
        r#"{"spec":{"replicas":2,"replica":3}}"#,
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.body);
    assert_eq!(a.warnings, [r#"299 - "unknown field \"spec.replica\"""#]);
    let a = ask(
        &s,
        "PUT",
        &format!("{scale}?fieldValidation=Strict"),
        JSON,
        r#"{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"web"},"spec":{"replicas":2},"x":1}"#,
    )
    .await;
    assert_eq!(a.code, 400, "{}", a.body);
    assert_eq!(
        a.body["message"],
        r#"Scale in version "v1" cannot be handled as a Scale: strict decoding error: unknown field "x""#
    );
}

#[tokio::test]
async fn custom_resources_keep_their_fields_and_report_duplicates() {
    let s = server_with_widgets().await;
    let a = ask(
        &s,
        "POST",
        &format!("{WIDGETS}?fieldValidation=Strict"),
        JSON,
        r#"{"apiVersion":"example.ward.dev/v1","kind":"Widget","metadata":{"name":"w2"},"spec":{"anything":1}}"#,
    )
    .await;
    assert_eq!(a.code, 201, "{}", a.body);
    assert_eq!(a.body["spec"]["anything"], 1);
    let a = ask(
        &s,
        "POST",
        &format!("{WIDGETS}?fieldValidation=Strict"),
        JSON,
        r#"{"apiVersion":"example.ward.dev/v1","kind":"Widget","metadata":{"name":"w3"},"spec":{"a":1,"a":2}}"#,
    )
    .await;
    assert_eq!(a.code, 400, "{}", a.body);
    assert!(
        a.body["message"]
            .as_str()
            .unwrap()
            .ends_with(r#"strict decoding error: duplicate field "spec.a""#),
        "{}",
        a.body
    );
}

/// Where one field of a sample came from: its JSON pointer in the sample,
/// and the k8s-openapi definition and property it samples.
struct Origin {
    pointer: String,
    def: String,
    prop: String,
}

/// A sample of every field a JSON schema (k8s-openapi's, from schemars)
/// describes: objects with all their properties, one item per array, one
/// entry (`key`) per map; a recursive definition (a CRD's JSON schema) is
/// sampled once inside itself, then null. Each property sampled is
/// recorded by its path as the pruning reports it
/// (`spec.containers[0].ports[0].protocol`).
struct Sampler<'a> {
    defs: &'a serde_json::Map<String, Value>,
    fields: BTreeMap<String, Origin>,
    path: String,
    pointer: String,
    /// The definitions being sampled, outermost first.
    within: Vec<String>,
}

impl Sampler<'_> {
    fn sample(&mut self, schema: &Value, def: &str) -> Value {
        if let Some(r) = schema["$ref"].as_str() {
            let name = r.rsplit('/').next().unwrap_or_default();
            if self.within.iter().filter(|d| *d == name).count() >= 2 {
                return Value::Null;
            }
            self.within.push(name.to_string());
            let defs = self.defs;
            let v = self.sample(&defs[name], name);
            self.within.pop();
            return v;
        }
        match schema["type"].as_str() {
            Some("object") => match schema["properties"].as_object() {
                Some(props) => props
                    .iter()
                    .map(|(k, s)| {
                        let path = self.key_path(k);
                        let origin = Origin {
                            pointer: format!("{}/{k}", self.pointer),
                            def: def.to_string(),
                            prop: k.clone(),
                        };
                        self.fields.insert(path.clone(), origin);
                        let v = self.descend(path, &format!("/{k}"), |this| this.sample(s, def));
                        (k.clone(), v)
                    })
                    .collect::<serde_json::Map<_, _>>()
                    .into(),
                // A map: its entry is no field of the definition.
                None if schema["additionalProperties"].is_object() => {
                    let path = self.key_path("key");
                    let v = self.descend(path, "/key", |this| {
                        this.sample(&schema["additionalProperties"], def)
                    });
                    json!({ "key": v })
                }
                // An empty Go struct (a CRD's `subresources.status`) or free JSON.
                None => json!({}),
            },
            Some("array") => {
                let path = format!("{}[0]", self.path);
                json!([self.descend(path, "/0", |this| this.sample(&schema["items"], def))])
            }
            Some("string") if schema["format"] == "date-time" => json!("2025-01-01T00:00:00Z"),
            Some("string") => json!("x"),
            Some("integer" | "number") => json!(1),
            Some("boolean") => json!(true),
            _ => json!("1"),
        }
    }

    /// The path of object key `key` here, as the pruning reports it.
    fn key_path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// What `f` samples at `path` (`pointer` below here).
    fn descend(
        &mut self,
        path: String,
        pointer: &str,
        f: impl FnOnce(&mut Self) -> Value,
    ) -> Value {
        let saved = std::mem::replace(&mut self.path, path);
        let len = self.pointer.len();
        self.pointer.push_str(pointer);
        let v = f(self);
        self.path = saved;
        self.pointer.truncate(len);
        v
    }
}

/// What pruning a sample of every field of `T` (k8s-openapi's latest
/// type) dropped: each field as (definition, property), all expected to
/// be in [`NEWER`]; anything else is an error (a real field taken for
/// unknown, or a field dropped without being reported). The sample must
/// lose exactly the reported fields and nothing else, at any depth.
fn dropped_fields<T: k8s_openapi::Resource + schemars::JsonSchema>(
    errors: &mut Vec<String>,
) -> BTreeSet<(String, String)> {
    let what = format!("{} {}", T::API_VERSION, T::KIND);
    let root = schemars::SchemaGenerator::default().into_root_schema_for::<T>();
    let root = serde_json::to_value(root).unwrap();
    let defs = root["$defs"].as_object().cloned().unwrap_or_default();
    let mut sampler = Sampler {
        defs: &defs,
        fields: BTreeMap::new(),
        path: String::new(),
        pointer: String::new(),
        within: vec![T::schema_name().into_owned()],
    };
    let mut obj = sampler.sample(&root, &T::schema_name());
    obj["apiVersion"] = T::API_VERSION.into();
    obj["kind"] = T::KIND.into();
    let mut expected = obj.clone();
    let mut out = BTreeSet::new();
    for path in ward_apiserver::internals::prune_kind(T::API_VERSION, T::KIND, &mut obj) {
        let Some(o) = sampler.fields.get(&path) else {
            errors.push(format!(
                "{what}: {path} dropped, but it is no sampled field"
            ));
            continue;
        };
        let (parent, key) = o.pointer.rsplit_once('/').unwrap();
        expected
            .pointer_mut(parent)
            .and_then(Value::as_object_mut)
            .and_then(|m| m.remove(key));
        if !NEWER.contains(&(o.def.as_str(), o.prop.as_str())) {
            errors.push(format!("{what}: {path} ({} {}) dropped", o.def, o.prop));
        }
        out.insert((o.def.clone(), o.prop.clone()));
    }
    if obj != expected {
        errors.push(format!(
            "{what}: the pruned sample lost more than its reported fields"
        ));
    }
    // The table has the kind: an unknown field at its top is dropped.
    let mut bogus = json!({"apiVersion": T::API_VERSION, "kind": T::KIND, "bogus": 1});
    if ward_apiserver::internals::prune_kind(T::API_VERSION, T::KIND, &mut bogus) != ["bogus"] {
        errors.push(format!("{what}: not in the field table"));
    }
    out
}

/// The fields k8s-openapi's latest types (Kubernetes 1.37) have that the
/// field table (Kubernetes 1.35's protos) does not, as (k8s-openapi
/// definition, property): a 1.33 cluster (and a 1.35 one) drops them too.
/// Exactly those: each is in k8s-openapi's schema (it was sampled from
/// it) and absent from the table (pruning dropped it), and the test fails
/// on an entry no sample drops (the table gained it, or k8s-openapi lost
/// it) as on a dropped field not listed.
const NEWER: &[(&str, &str)] = &[
    // Kubernetes 1.36.
    ("io.k8s.api.core.v1.PodSpec", "schedulingGroup"),
    (
        "io.k8s.api.core.v1.PodStatus",
        "nodeAllocatableResourceClaimStatuses",
    ),
    ("io.k8s.api.core.v1.ResourceHealth", "message"),
    ("io.k8s.api.core.v1.VolumeMountStatus", "volumeStatus"),
    (
        "io.k8s.api.storage.v1.CSIDriverSpec",
        "preventPodSchedulingIfMissing",
    ),
    // Kubernetes 1.37.
    (
        "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerCondition",
        "observedGeneration",
    ),
    ("io.k8s.api.batch.v1.JobSpec", "scheduling"),
    ("io.k8s.api.core.v1.ClusterTrustBundleProjection", "user"),
    ("io.k8s.api.core.v1.ConfigMapVolumeSource", "defaultUser"),
    ("io.k8s.api.core.v1.DownwardAPIVolumeFile", "user"),
    ("io.k8s.api.core.v1.DownwardAPIVolumeSource", "defaultUser"),
    ("io.k8s.api.core.v1.EmptyDirVolumeSource", "mode"),
    ("io.k8s.api.core.v1.GRPCAction", "mode"),
    ("io.k8s.api.core.v1.HTTPGetAction", "protocol"),
    ("io.k8s.api.core.v1.KeyToPath", "user"),
    ("io.k8s.api.core.v1.NodeSpec", "podPreemptionPolicy"),
    (
        "io.k8s.api.core.v1.NodeSystemInfo",
        "runningInUserNamespace",
    ),
    (
        "io.k8s.api.core.v1.PersistentVolumeClaimStatus",
        "healthStatus",
    ),
    ("io.k8s.api.core.v1.PodCertificateProjection", "user"),
    ("io.k8s.api.core.v1.PodSpec", "evictionResponders"),
    ("io.k8s.api.core.v1.PodStatus", "volumeHealth"),
    ("io.k8s.api.core.v1.ProjectedVolumeSource", "defaultUser"),
    ("io.k8s.api.core.v1.SecretVolumeSource", "defaultUser"),
    ("io.k8s.api.core.v1.ServiceAccountTokenProjection", "user"),
    ("io.k8s.api.core.v1.VolumeMount", "bindMountOptions"),
    ("io.k8s.api.storage.v1.CSINode", "status"),
];

/// The kinds checked, and the fields dropped from their samples.
#[derive(Default)]
struct Run {
    kinds: BTreeSet<(&'static str, &'static str)>,
    dropped: BTreeSet<(String, String)>,
    errors: Vec<String>,
}

impl Run {
    fn check<T: k8s_openapi::Resource + schemars::JsonSchema>(&mut self) {
        self.kinds.insert((T::API_VERSION, T::KIND));
        let dropped = dropped_fields::<T>(&mut self.errors);
        self.dropped.extend(dropped);
    }
}

macro_rules! check_all {
    ($run:ident, $($t:ty,)*) => { $($run.check::<$t>();)* };
}

#[test]
fn every_field_of_every_built_in_kind_is_known() {
    let mut run = Run::default();
    check_all!(
        run,
        k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration,
        k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy,
        k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
        k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService,
        k8s_openapi::api::apps::v1::ControllerRevision,
        k8s_openapi::api::apps::v1::DaemonSet,
        k8s_openapi::api::apps::v1::Deployment,
        k8s_openapi::api::apps::v1::ReplicaSet,
        k8s_openapi::api::apps::v1::StatefulSet,
        k8s_openapi::api::autoscaling::v1::HorizontalPodAutoscaler,
        k8s_openapi::api::autoscaling::v1::Scale,
        k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler,
        k8s_openapi::api::batch::v1::CronJob,
        k8s_openapi::api::batch::v1::Job,
        k8s_openapi::api::certificates::v1::CertificateSigningRequest,
        k8s_openapi::api::coordination::v1::Lease,
        k8s_openapi::api::discovery::v1::EndpointSlice,
        k8s_openapi::api::events::v1::Event,
        k8s_openapi::api::flowcontrol::v1::FlowSchema,
        k8s_openapi::api::flowcontrol::v1::PriorityLevelConfiguration,
        k8s_openapi::api::networking::v1::IPAddress,
        k8s_openapi::api::networking::v1::Ingress,
        k8s_openapi::api::networking::v1::IngressClass,
        k8s_openapi::api::networking::v1::NetworkPolicy,
        k8s_openapi::api::networking::v1::ServiceCIDR,
        k8s_openapi::api::node::v1::RuntimeClass,
        k8s_openapi::api::policy::v1::PodDisruptionBudget,
        k8s_openapi::api::rbac::v1::ClusterRole,
        k8s_openapi::api::rbac::v1::ClusterRoleBinding,
        k8s_openapi::api::rbac::v1::Role,
        k8s_openapi::api::rbac::v1::RoleBinding,
        k8s_openapi::api::scheduling::v1::PriorityClass,
        k8s_openapi::api::storage::v1::CSIDriver,
        k8s_openapi::api::storage::v1::CSINode,
        k8s_openapi::api::storage::v1::CSIStorageCapacity,
        k8s_openapi::api::storage::v1::StorageClass,
        k8s_openapi::api::storage::v1::VolumeAttachment,
        k8s_openapi::api::core::v1::ComponentStatus,
        k8s_openapi::api::core::v1::ConfigMap,
        k8s_openapi::api::core::v1::Endpoints,
        k8s_openapi::api::core::v1::Event,
        k8s_openapi::api::core::v1::LimitRange,
        k8s_openapi::api::core::v1::Namespace,
        k8s_openapi::api::core::v1::Node,
        k8s_openapi::api::core::v1::PersistentVolume,
        k8s_openapi::api::core::v1::PersistentVolumeClaim,
        k8s_openapi::api::core::v1::Pod,
        k8s_openapi::api::core::v1::PodTemplate,
        k8s_openapi::api::core::v1::ReplicationController,
        k8s_openapi::api::core::v1::ResourceQuota,
        k8s_openapi::api::core::v1::Secret,
        k8s_openapi::api::core::v1::Service,
        k8s_openapi::api::core::v1::ServiceAccount,
    );
    // Every served kind, and the Scale subresource's body: no more.
    let served: BTreeSet<_> = BUILTINS
        .iter()
        .map(|b| (b.0, b.1))
        .chain([("autoscaling/v1", "Scale")])
        .collect();
    assert_eq!(run.kinds, served);
    let newer: BTreeSet<_> = NEWER
        .iter()
        .map(|(d, p)| (d.to_string(), p.to_string()))
        .collect();
    assert_eq!(newer.len(), NEWER.len(), "NEWER lists a field twice");
    for (def, prop) in newer.difference(&run.dropped) {
        run.errors.push(format!(
            "NEWER lists {def} {prop}, which no sample drops (in the table now, or not in k8s-openapi)"
        ));
    }
    assert!(run.errors.is_empty(), "{:#?}", run.errors);
}

/// Prunes `obj`, asserting nothing is dropped; then adds `typo` under the
/// object at `pointer` and asserts exactly it is dropped, at `path`: the
/// walk does reach that depth.
fn keeps_all_and_drops_only(obj: &Value, pointer: &str, typo: &str, path: &str) {
    let (api_version, kind) = (
        obj["apiVersion"].as_str().unwrap(),
        obj["kind"].as_str().unwrap(),
    );
    let mut pruned = obj.clone();
    let dropped = ward_apiserver::internals::prune_kind(api_version, kind, &mut pruned);
    assert!(dropped.is_empty(), "{kind}: {dropped:?}");
    assert_eq!(&pruned, obj, "{kind}");
    let mut bad = obj.clone();
    bad.pointer_mut(pointer)
        .and_then(Value::as_object_mut)
        .unwrap_or_else(|| panic!("{kind}: no object at {pointer}"))
        .insert(typo.to_string(), json!({"x": 1}));
    let dropped = ward_apiserver::internals::prune_kind(api_version, kind, &mut bad);
    assert_eq!(dropped, [path], "{kind}");
    assert_eq!(&bad, obj, "{kind}");
}

#[test]
fn real_fields_nested_in_lists_maps_and_free_json_are_never_dropped() {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "p", "labels": {"app": "web", "spec": "not a field"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": true}],
            "managedFields": [{
                "manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
                "time": "2025-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}, "f:spec": {"k:{\"name\":\"c\"}": {".": {}}}},
                "subresource": ""
            }]
        },
        "spec": {
            "containers": [{
                "name": "c", "image": "nginx",
                "ports": [{"name": "http", "containerPort": 80, "hostPort": 8080, "hostIP": "0.0.0.0", "protocol": "TCP"}],
                "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k", "optional": true}}}],
                "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "100m"}, "claims": [{"name": "gpu", "request": "r"}]},
                "readinessProbe": {"httpGet": {"path": "/", "port": "http", "httpHeaders": [{"name": "h", "value": "v"}]}, "periodSeconds": 5},
                "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}, "seccompProfile": {"type": "RuntimeDefault"}},
                "volumeMounts": [{"name": "v", "mountPath": "/v", "recursiveReadOnly": "Disabled"}]
            }],
            "volumes": [{"name": "v", "projected": {"sources": [{"configMap": {"name": "cm", "items": [{"key": "k", "path": "p", "mode": 420}]}}]}}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
            ]}}},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["pod-template-hash"]}]
        },
        "status": {"phase": "Running", "containerStatuses": [{"name": "c", "ready": true, "restartCount": 0, "image": "nginx", "imageID": "",
            "state": {"running": {"startedAt": "2025-01-01T00:00:00Z"}}, "allocatedResources": {"cpu": "1"}}]}
    });
    keeps_all_and_drops_only(
        &pod,
        "/spec/containers/0/ports/0",
        "containerPortt",
        "spec.containers[0].ports[0].containerPortt",
    );
    keeps_all_and_drops_only(
        &pod,
        "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchExpressions/0",
        "value",
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].value",
    );
    keeps_all_and_drops_only(
        &pod,
        "/metadata/managedFields/0",
        "fieldsV2",
        "metadata.managedFields[0].fieldsV2",
    );

    // A map's keys are data, even when they spell a field's name.
    let cm = json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"},
        "data": {"game.properties": "a=1", "spec": "x", "metadata": "y", "kind": "z"},
        "binaryData": {"b": "AAEC"}, "immutable": false
    });
    keeps_all_and_drops_only(&cm, "", "datta", "datta");

    // A CRD's schema: JSONSchemaProps field by field, down its maps of
    // properties; its free JSON (defaults, enums, examples) untouched.
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.ward.dev"},
        "spec": {
            "group": "example.ward.dev", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"], "categories": ["all"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {
                            "type": "object", "required": ["size"],
                            "x-kubernetes-validations": [{"rule": "self.size > 0", "message": "m", "messageExpression": "'m'", "reason": "FieldValueInvalid", "fieldPath": ".size", "optionalOldSelf": true}],
                            "properties": {
                                "size": {"type": "integer", "minimum": 1, "maximum": 9, "default": 3, "format": "int32"},
                                "mode": {"type": "string", "enum": ["a", "b"], "default": "a", "pattern": "^[ab]$", "maxLength": 1},
                                "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "default": {"anything": {"nested": [1, {"deep": true}]}}, "example": {"x": 1}},
                                "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set", "maxItems": 4},
                                "byName": {"type": "object", "additionalProperties": {"type": "object", "properties": {"v": {"type": "string"}}}},
                                "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                                "meta": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}
                            }
                        },
                        "status": {"type": "object", "properties": {"ready": {"type": "boolean", "nullable": true}}}
                    }
                }},
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.size", "statusReplicasPath": ".status.replicas"}},
                "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
                "selectableFields": [{"jsonPath": ".spec.mode"}]
            }],
            "conversion": {"strategy": "None"}
        }
    });
    keeps_all_and_drops_only(
        &crd,
        "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/size",
        "minimun",
        "spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.size.minimun",
    );
    keeps_all_and_drops_only(
        &crd,
        "/spec/versions/0/schema/openAPIV3Schema/properties/spec/x-kubernetes-validations/0",
        "messageExpresion",
        "spec.versions[0].schema.openAPIV3Schema.properties.spec.x-kubernetes-validations[0].messageExpresion",
    );

    // A StatefulSet's volumeClaimTemplates are whole PVCs (TypeMeta and all).
    let sts = json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {
            "serviceName": "db", "replicas": 1,
            "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c", "image": "pg"}]}},
            "volumeClaimTemplates": [{
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": "data", "labels": {"app": "db"}},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast", "resources": {"requests": {"storage": "1Gi"}}},
                "status": {"phase": "Pending"}
            }],
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Delete"},
            "ordinals": {"start": 0}
        }
    });
    keeps_all_and_drops_only(
        &sts,
        "/spec/volumeClaimTemplates/0/spec",
        "accessMode",
        "spec.volumeClaimTemplates[0].spec.accessMode",
    );
}
