//! Each kind's own behaviour, one file per kind, as kube-apiserver keeps a
//! `strategy.go` per kind: what a create or an update sets, its defaults,
//! its validation beyond the generic checks, its subresources, verbs,
//! grace period and finalizers on delete, its `kubectl get` columns and
//! its selectable fields. [`KindStrategy`] is the contract, with the
//! behaviour of a kind with nothing special as every default; [`builtin`]
//! is the one place a kind is looked up by name, when the resource table
//! is built. The generic request path (`strategy`, the store, the handler,
//! `table`, discovery) only ever calls the [`Strategy`] a
//! [`ResourceInfo`](crate::registry::resources::ResourceInfo) carries.
//!
//! Adding a kind's behaviour: a file here implementing [`KindStrategy`],
//! and its line in [`builtin`].
//!
//! Defaults cover Kubernetes 1.33's `SetDefaults_*` functions for pods and
//! pod templates (in Deployments, ReplicaSets, StatefulSets, DaemonSets,
//! Jobs, CronJobs, ReplicationControllers, PodTemplates), Services,
//! Secrets, Nodes, the workload kinds, Jobs and CronJobs,
//! PersistentVolume(Claim)s and NetworkPolicies, applied to every create
//! and every write of the object (update, patch, apply) after decoding, as
//! kube-apiserver defaults each decoded object. What a registry allocates
//! rather than defaults (a Service's clusterIP, IP families and node
//! ports) is [`crate::controllers::alloc`]'s, for a kind whose
//! [`KindStrategy::allocates`]. Not covered: what admission plugins add (a pod's
//! tolerations, service account token volume, priority), and
//! feature-gated fields.

mod certificatesigningrequest;
mod componentstatus;
mod configmap;
mod cronjob;
mod customresourcedefinition;
mod daemonset;
mod deployment;
pub(crate) mod event;
mod fill;
pub(crate) mod horizontalpodautoscaler;
mod job;
mod namespace;
mod networkpolicy;
mod node;
mod persistentvolume;
mod persistentvolumeclaim;
mod pod;
mod podtemplate;
mod rbac;
mod replicaset;
mod replicationcontroller;
mod secret;
mod service;
mod serviceaccount;
mod statefulset;
mod strategy;
mod validatingadmissionpolicy;
mod webhookconfiguration;

pub use customresourcedefinition::{Definition, PrinterColumn, accept as accept_crd, established};
pub use namespace::emptied as namespace_emptied;
pub use strategy::{
    Column, ColumnDoc, Generic, KindStrategy, NameRule, ServedSubresource, Strategy, Subresource,
    field_at, invalid,
};

/// The strategy of the built-in kind `kind` at `api_version` (e.g. `v1`,
/// `Pod`); [`Generic`] for one that is not built in.
#[cfg(test)]
#[must_use]
pub(crate) fn by_kind(api_version: &str, kind: &str) -> Strategy {
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    crate::registry::builtins::BUILTINS
        .iter()
        .find(|row| row.0 == api_version && row.1 == kind)
        .map_or(Strategy::generic(), |row| builtin(group, row.2))
}

/// The strategy of the built-in resource `group`/`plural` ([`Generic`]
/// for a kind with nothing special).
#[must_use]
pub fn builtin(group: &str, plural: &str) -> Strategy {
    let kind: &'static dyn KindStrategy = match (group, plural) {
        ("", "componentstatuses") => &componentstatus::ComponentStatus,
        ("", "configmaps") => &configmap::ConfigMap,
        ("", "events") => &event::CoreEvent,
        ("", "namespaces") => &namespace::Namespace,
        ("", "nodes") => &node::Node,
        ("", "persistentvolumeclaims") => &persistentvolumeclaim::PersistentVolumeClaim,
        ("", "persistentvolumes") => &persistentvolume::PersistentVolume,
        ("", "pods") => &pod::Pod,
        ("", "podtemplates") => &podtemplate::PodTemplate,
        ("", "replicationcontrollers") => &replicationcontroller::ReplicationController,
        ("", "secrets") => &secret::Secret,
        ("", "serviceaccounts") => &serviceaccount::ServiceAccount,
        ("", "services") => &service::Service,
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            &customresourcedefinition::CustomResourceDefinition
        }
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations") => {
            &webhookconfiguration::MutatingWebhookConfiguration
        }
        ("admissionregistration.k8s.io", "validatingadmissionpolicies") => {
            &validatingadmissionpolicy::ValidatingAdmissionPolicy
        }
        ("admissionregistration.k8s.io", "validatingadmissionpolicybindings") => {
            &validatingadmissionpolicy::ValidatingAdmissionPolicyBinding
        }
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations") => {
            &webhookconfiguration::ValidatingWebhookConfiguration
        }
        ("apps", "daemonsets") => &daemonset::DaemonSet,
        ("apps", "deployments") => &deployment::Deployment,
        ("apps", "replicasets") => &replicaset::ReplicaSet,
        ("apps", "statefulsets") => &statefulset::StatefulSet,
        ("batch", "cronjobs") => &cronjob::CronJob,
        ("batch", "jobs") => &job::Job,
        ("certificates.k8s.io", "certificatesigningrequests") => {
            &certificatesigningrequest::CertificateSigningRequest
        }
        ("events.k8s.io", "events") => &event::Event,
        ("networking.k8s.io", "networkpolicies") => &networkpolicy::NetworkPolicy,
        ("rbac.authorization.k8s.io", "clusterrolebindings") => &rbac::CLUSTER_ROLE_BINDING,
        ("rbac.authorization.k8s.io", "clusterroles") => &rbac::RoleKind("ClusterRole"),
        ("rbac.authorization.k8s.io", "rolebindings") => &rbac::ROLE_BINDING,
        ("rbac.authorization.k8s.io", "roles") => &rbac::RoleKind("Role"),
        _ => &Generic,
    };
    Strategy::new(kind)
}

/// The metadata a write to a built-in kind's `/status` takes from the
/// client, as kube-apiserver's status strategies leave it: most reset only
/// the spec, so labels, annotations, finalizers and owner references pass
/// (a status PUT without labels removes them there too); a Deployment's
/// keeps its labels, a Pod's its owner references; the kinds whose
/// strategy resets the whole metadata (`ResetObjectMetaForStatus`,
/// FlowSchemas, APIServices) take none, as custom resources do.
#[must_use]
pub fn status_metadata(group: &str, plural: &str) -> &'static [&'static str] {
    match (group, plural) {
        ("apps", "deployments") => &["annotations", "finalizers", "ownerReferences"],
        ("", "pods") => &["labels", "annotations", "finalizers"],
        ("admissionregistration.k8s.io", "validatingadmissionpolicies")
        | ("apiregistration.k8s.io" | "flowcontrol.apiserver.k8s.io", _)
        | ("networking.k8s.io", "servicecidrs")
        | ("storage.k8s.io", "volumeattachments" | "csinodes")
        | ("resource.k8s.io" | "internal.apiserver.k8s.io" | "scheduling.k8s.io", _)
        | ("certificates.k8s.io", "podcertificaterequests") => &[],
        _ => &["labels", "annotations", "finalizers", "ownerReferences"],
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// Every kind the table names is served, under its own kind name: a
    /// typo in a plural would silently make that kind generic.
    #[test]
    fn every_kind_in_the_table_is_a_builtin() {
        let mut special = 0;
        for &(api_version, kind, plural, ..) in crate::registry::builtins::BUILTINS {
            let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
            let s = builtin(group, plural);
            assert_eq!(by_kind(api_version, kind), s, "{api_version} {kind}");
            if s != Strategy::generic() {
                special += 1;
                assert!(
                    s.name() == kind || s.name().ends_with(&format!("/{kind}")),
                    "{plural} is served by {}",
                    s.name()
                );
            }
        }
        assert_eq!(special, 31, "kinds with a file of their own");
    }

    fn defaulted(group: &str, plural: &str, mut obj: Value) -> Value {
        let info = crate::registry::resources::Registry::with_builtins()
            .get(group, "v1", plural)
            .unwrap_or_else(|| panic!("{group}/{plural}"));
        info.strategy.default(&mut obj);
        obj
    }

    #[test]
    fn a_bare_deployment_reads_back_as_a_cluster_returns_it() {
        let d = defaulted(
            "apps",
            "deployments",
            json!({"spec": {"selector": {}, "template": {"spec": {"containers": [
                {"name": "c", "image": "nginx:1", "ports": [{"containerPort": 80}]}]}}}}),
        );
        let spec = &d["spec"];
        assert_eq!(spec["replicas"], 1);
        assert_eq!(
            spec["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        let pod = &spec["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Always");
        assert_eq!(pod["terminationGracePeriodSeconds"], 30);
        let c = &pod["containers"][0];
        assert_eq!(c["imagePullPolicy"], "IfNotPresent");
        assert_eq!(c["ports"][0]["protocol"], "TCP");
    }

    #[test]
    fn what_a_client_set_is_kept() {
        let d = defaulted(
            "apps",
            "deployments",
            json!({"spec": {"replicas": 0, "strategy": {"type": "Recreate"},
                "template": {"spec": {"restartPolicy": "Never", "containers": []}}}}),
        );
        assert_eq!(d["spec"]["replicas"], 0);
        assert_eq!(d["spec"]["strategy"], json!({"type": "Recreate"}));
        assert_eq!(d["spec"]["template"]["spec"]["restartPolicy"], "Never");
        let svc = defaulted(
            "",
            "services",
            json!({"spec": {"type": "NodePort", "ports": [{"port": 80, "targetPort": "http", "protocol": "UDP"}]}}),
        );
        assert_eq!(
            svc["spec"]["ports"][0],
            json!({"port": 80, "targetPort": "http", "protocol": "UDP"})
        );
        assert_eq!(svc["spec"]["externalTrafficPolicy"], "Cluster");
    }

    #[test]
    fn the_small_kinds() {
        assert_eq!(defaulted("", "secrets", json!({}))["type"], "Opaque");
        assert_eq!(defaulted("", "nodes", json!({}))["spec"], json!({}));
        let svc = defaulted("", "services", json!({"spec": {"ports": [{"port": 80}]}}));
        assert_eq!(
            svc["spec"],
            json!({"type": "ClusterIP", "sessionAffinity": "None", "internalTrafficPolicy": "Cluster",
                "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}]})
        );
        let job = defaulted("batch", "jobs", json!({"spec": {"parallelism": 3}}));
        assert!(job["spec"].get("completions").is_none());
        assert_eq!(job["spec"]["backoffLimit"], 6);
        let cm = defaulted("", "configmaps", json!({"data": {}}));
        assert_eq!(cm, json!({"data": {}}));
        // A spec of the wrong shape is left for validation to refuse.
        let odd = defaulted("apps", "deployments", json!({"spec": "x"}));
        assert_eq!(odd, json!({"spec": "x"}));
    }
}
