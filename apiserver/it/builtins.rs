//! The built-in table against k8s-openapi's own resource metadata: every
//! GA listable type of the k8s-openapi version the tests build with is
//! either served with its apiVersion, kind, plural and scope, or named
//! below as deliberately not served; and every served built-in is one of
//! them. Then a fresh server answers for a few of them, and holds the
//! objects a fresh cluster has.

use std::any::TypeId;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding};
use kube::api::{Api, PostParams};
use ward_apiserver::ApiServer;
use ward_apiserver::internals::BUILTINS;

/// apiVersion, kind, plural, namespaced — as k8s-openapi states them.
type Meta = (&'static str, &'static str, &'static str, bool);

fn meta<T: k8s_openapi::Resource + 'static>() -> Meta {
    let namespaced =
        TypeId::of::<T::Scope>() == TypeId::of::<k8s_openapi::NamespaceResourceScope>();
    (T::API_VERSION, T::KIND, T::URL_PATH_SEGMENT, namespaced)
}

macro_rules! metas {
    ($($t:ty,)*) => { vec![$(meta::<$t>(),)*] };
}

/// Every GA type implementing `ListableResource` in k8s-openapi's latest
/// version (alpha and beta ones are left out, as a real cluster leaves
/// them off by default).
fn ga_listable() -> Vec<Meta> {
    metas![
        k8s_openapi::api::admissionregistration::v1::MutatingAdmissionPolicy,
        k8s_openapi::api::admissionregistration::v1::MutatingAdmissionPolicyBinding,
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
        k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler,
        k8s_openapi::api::batch::v1::CronJob,
        k8s_openapi::api::batch::v1::Job,
        k8s_openapi::api::certificates::v1::CertificateSigningRequest,
        k8s_openapi::api::certificates::v1::ClusterTrustBundle,
        k8s_openapi::api::certificates::v1::PodCertificateRequest,
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
        k8s_openapi::api::resource::v1::DeviceClass,
        k8s_openapi::api::resource::v1::DeviceTaintRule,
        k8s_openapi::api::resource::v1::ResourceClaim,
        k8s_openapi::api::resource::v1::ResourceClaimTemplate,
        k8s_openapi::api::resource::v1::ResourceSlice,
        k8s_openapi::api::scheduling::v1::PriorityClass,
        k8s_openapi::api::storage::v1::CSIDriver,
        k8s_openapi::api::storage::v1::CSINode,
        k8s_openapi::api::storage::v1::CSIStorageCapacity,
        k8s_openapi::api::storage::v1::StorageClass,
        k8s_openapi::api::storage::v1::VolumeAttachment,
        k8s_openapi::api::storage::v1::VolumeAttributesClass,
        k8s_openapi::api::storagemigration::v1::StorageVersionMigration,
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
    ]
}

/// Not served, and why.
const NOT_SERVED: &[(&str, &str, &str)] = &[
    (
        "admissionregistration.k8s.io/v1",
        "MutatingAdmissionPolicy",
        "GA after 1.33",
    ),
    (
        "admissionregistration.k8s.io/v1",
        "MutatingAdmissionPolicyBinding",
        "GA after 1.33",
    ),
    (
        "certificates.k8s.io/v1",
        "ClusterTrustBundle",
        "GA after 1.33",
    ),
    (
        "certificates.k8s.io/v1",
        "PodCertificateRequest",
        "GA after 1.33",
    ),
    ("resource.k8s.io/v1", "DeviceClass", "GA after 1.33"),
    ("resource.k8s.io/v1", "DeviceTaintRule", "GA after 1.33"),
    ("resource.k8s.io/v1", "ResourceClaim", "GA after 1.33"),
    (
        "resource.k8s.io/v1",
        "ResourceClaimTemplate",
        "GA after 1.33",
    ),
    ("resource.k8s.io/v1", "ResourceSlice", "GA after 1.33"),
    (
        "storage.k8s.io/v1",
        "VolumeAttributesClass",
        "GA after 1.33",
    ),
    (
        "storagemigration.k8s.io/v1",
        "StorageVersionMigration",
        "GA after 1.33",
    ),
];

#[test]
fn every_ga_kind_of_k8s_openapi_is_served_with_its_metadata_or_named_as_not() {
    let ga = ga_listable();
    for (av, kind, plural, namespaced) in &ga {
        let served = BUILTINS.iter().find(|b| b.0 == *av && b.1 == *kind);
        let excluded = NOT_SERVED.iter().any(|n| n.0 == *av && n.1 == *kind);
        match served {
            Some(b) => {
                assert!(!excluded, "{av} {kind} is both served and excluded");
                assert_eq!((b.2, b.3), (*plural, *namespaced), "{av} {kind}");
            }
            None => assert!(excluded, "{av} {kind} is neither served nor excluded"),
        }
    }
    for b in BUILTINS {
        assert!(
            ga.iter().any(|m| m.0 == b.0 && m.1 == b.1),
            "{} {} is served but is no GA kind of k8s-openapi",
            b.0,
            b.1
        );
    }
    for n in NOT_SERVED {
        assert!(
            ga.iter().any(|m| m.0 == n.0 && m.1 == n.1),
            "{n:?} is no kind"
        );
    }
}

#[tokio::test]
async fn a_fresh_server_serves_workloads_and_rbac_and_holds_the_bootstrap_objects() {
    let server = ApiServer::start_in_process().await;
    let client = server.client();
    let mut d: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
    }))
    .unwrap();
    let deployments = Api::<Deployment>::namespaced(client.clone(), "default");
    d = deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    assert_eq!(d.metadata.generation, Some(1));
    assert_eq!(
        deployments
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    let rb: RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "rb"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "default"}]
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &rb)
        .await
        .unwrap();

    let admin = Api::<ClusterRole>::all(client.clone())
        .get("cluster-admin")
        .await
        .unwrap();
    let rule = &admin.rules.unwrap()[0];
    assert_eq!(rule.verbs, ["*"]);
    for name in ["admin", "edit", "view"] {
        Api::<ClusterRole>::all(client.clone())
            .get(name)
            .await
            .unwrap();
    }
    let binding = Api::<ClusterRoleBinding>::all(client.clone())
        .get("cluster-admin")
        .await
        .unwrap();
    assert_eq!(binding.subjects.unwrap()[0].name, "system:masters");
    let svc = Api::<Service>::namespaced(client.clone(), "default")
        .get("kubernetes")
        .await
        .unwrap();
    let spec = svc.spec.unwrap();
    assert_eq!(spec.ports.unwrap()[0].port, 443);
    assert_eq!(spec.cluster_ip.as_deref(), Some("10.96.0.1"));
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        Api::<Namespace>::all(client.clone()).get(ns).await.unwrap();
    }
}

/// An HPA written at `autoscaling/v1` is one object with its `v2` form: a
/// v2 client's metrics survive a v1 client's read-modify-write.
#[tokio::test]
async fn a_horizontal_pod_autoscaler_is_served_at_v1_and_v2() {
    use k8s_openapi::api::autoscaling::{v1, v2};
    let server = ApiServer::start_in_process().await;
    let client = server.client();
    let old = Api::<v1::HorizontalPodAutoscaler>::namespaced(client.clone(), "default");
    let new = Api::<v2::HorizontalPodAutoscaler>::namespaced(client.clone(), "default");
    let hpa: v1::HorizontalPodAutoscaler = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "maxReplicas": 4, "targetCPUUtilizationPercentage": 70}
    }))
    .unwrap();
    let created = old.create(&PostParams::default(), &hpa).await.unwrap();
    let mut at_v2 = new.get("web").await.unwrap();
    assert_eq!(at_v2.metadata.uid, created.metadata.uid);
    let metrics = at_v2.spec.metrics.clone().unwrap();
    let cpu = metrics[0].resource.as_ref().unwrap();
    assert_eq!(
        (cpu.name.as_str(), cpu.target.average_utilization),
        ("cpu", Some(70))
    );
    let memory: v2::MetricSpec = serde_json::from_value(serde_json::json!({"type": "Resource",
        "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1Gi"}}}))
    .unwrap();
    at_v2.spec.metrics = Some(vec![memory, metrics[0].clone()]);
    new.replace("web", &PostParams::default(), &at_v2)
        .await
        .unwrap();
    let mut at_v1 = old.get("web").await.unwrap();
    let spec = &mut at_v1.spec;
    assert_eq!(spec.target_cpu_utilization_percentage, Some(70));
    spec.max_replicas = 6;
    old.replace("web", &PostParams::default(), &at_v1)
        .await
        .unwrap();
    let after = new.get("web").await.unwrap();
    let spec = after.spec;
    assert_eq!(spec.max_replicas, 6);
    let names: Vec<String> = spec
        .metrics
        .unwrap()
        .iter()
        .map(|m| m.resource.as_ref().unwrap().name.clone())
        .collect();
    assert_eq!(names, ["memory", "cpu"]);
    assert!(after.metadata.annotations.is_none_or(|a| a.is_empty()));
}
