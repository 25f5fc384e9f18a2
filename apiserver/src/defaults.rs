//! Defaulting: the fields kube-apiserver fills in when a client leaves them
//! out, so objects read back as they do from a real cluster (a Secret's
//! `type: Opaque`, a Deployment's `replicas: 1` and rolling-update
//! strategy, a pod's `restartPolicy: Always`, a Node's `spec: {}`).
//! Applied to every create and every write of the object (update, patch,
//! apply), after decoding, as kube-apiserver defaults each decoded object.
//!
//! Covered: the defaults of Kubernetes 1.33's `SetDefaults_*` functions for
//! pods and pod templates (in Deployments, ReplicaSets, StatefulSets,
//! DaemonSets, Jobs, CronJobs, ReplicationControllers, PodTemplates),
//! Services, Secrets, Nodes, the workload kinds, Jobs and CronJobs,
//! PersistentVolume(Claim)s and NetworkPolicies. Not covered: what a
//! registry allocates rather than defaults (a Service's clusterIP and IP
//! families, node ports), what admission plugins add (a pod's tolerations,
//! service account token volume, priority), and feature-gated fields.

use serde_json::{Value, json};

use crate::resources::ResourceInfo;

/// Set `obj[key]` to `value` if absent (or null). Does nothing when `obj`
/// is not an object.
fn or(obj: &mut Value, key: &str, value: Value) {
    if let Some(m) = obj.as_object_mut() {
        let slot = m.entry(key).or_insert(Value::Null);
        if slot.is_null() {
            *slot = value;
        }
    }
}

/// `obj[key]`, created as `{}` if absent; `None` if `obj` is not an object
/// or `obj[key]` is something else.
fn child<'a>(obj: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    or(obj, key, json!({}));
    obj.get_mut(key).filter(|v| v.is_object())
}

/// Each element of the array `obj[key]`.
fn each<'a>(obj: &'a mut Value, key: &str) -> impl Iterator<Item = &'a mut Value> {
    obj.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
}

/// Fill in the defaults of `obj`, an object of the built-in `info`.
pub fn apply(info: &ResourceInfo, obj: &mut Value) {
    if !info.builtin {
        return;
    }
    let spec_of: Option<fn(&mut Value)> = match (info.group.as_str(), info.plural.as_str()) {
        ("", "pods") => Some(pod),
        ("", "podtemplates") => Some(pod_template),
        ("", "replicationcontrollers") => Some(replication_controller),
        ("", "services") => Some(service),
        ("", "secrets") => {
            or(obj, "type", json!("Opaque"));
            None
        }
        ("", "nodes") => {
            or(obj, "spec", json!({}));
            None
        }
        ("", "persistentvolumeclaims") => Some(|s: &mut Value| {
            or(s, "volumeMode", json!("Filesystem"));
        }),
        ("", "persistentvolumes") => Some(|s: &mut Value| {
            or(s, "persistentVolumeReclaimPolicy", json!("Retain"));
            or(s, "volumeMode", json!("Filesystem"));
        }),
        ("apps", "deployments") => Some(deployment),
        ("apps", "replicasets") => Some(|s: &mut Value| {
            or(s, "replicas", json!(1));
            pod_template(s);
        }),
        ("apps", "statefulsets") => Some(stateful_set),
        ("apps", "daemonsets") => Some(daemon_set),
        ("batch", "jobs") => Some(job),
        ("batch", "cronjobs") => Some(cron_job),
        ("networking.k8s.io", "networkpolicies") => Some(network_policy),
        _ => None,
    };
    let Some(spec_of) = spec_of else { return };
    // PodTemplates hold their template at the top level, not in a spec.
    if info.plural == "podtemplates" {
        spec_of(obj);
    } else if let Some(spec) = child(obj, "spec") {
        spec_of(spec);
    }
}

/// `spec.template.spec` of a workload.
fn pod_template(spec: &mut Value) {
    if let Some(pod_spec) = spec.get_mut("template").and_then(|t| child(t, "spec")) {
        pod(pod_spec);
    }
}

/// A pod's spec (`SetDefaults_PodSpec`, `SetDefaults_Container`).
fn pod(spec: &mut Value) {
    or(spec, "dnsPolicy", json!("ClusterFirst"));
    or(spec, "restartPolicy", json!("Always"));
    or(spec, "terminationGracePeriodSeconds", json!(30));
    or(spec, "securityContext", json!({}));
    or(spec, "schedulerName", json!("default-scheduler"));
    or(spec, "enableServiceLinks", json!(true));
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for c in each(spec, list) {
            container(c);
        }
    }
    for v in each(spec, "volumes") {
        for source in ["configMap", "secret", "downwardAPI", "projected"] {
            if let Some(s) = v.get_mut(source).filter(|s| s.is_object()) {
                or(s, "defaultMode", json!(0o644));
            }
        }
        if let Some(s) = v.get_mut("hostPath").filter(|s| s.is_object()) {
            or(s, "type", json!(""));
        }
    }
}

fn container(c: &mut Value) {
    or(c, "terminationMessagePath", json!("/dev/termination-log"));
    or(c, "terminationMessagePolicy", json!("File"));
    let policy = c["image"].as_str().map(pull_policy);
    if let Some(p) = policy {
        or(c, "imagePullPolicy", json!(p));
    }
    for p in each(c, "ports") {
        or(p, "protocol", json!("TCP"));
    }
}

/// `Always` for an image tagged `latest` or not tagged (and not pinned by
/// digest), else `IfNotPresent`.
fn pull_policy(image: &str) -> &'static str {
    let last = image.rsplit('/').next().unwrap_or(image);
    if last.contains('@') {
        return "IfNotPresent";
    }
    match last.rsplit_once(':') {
        Some((_, "latest")) | None => "Always",
        Some(_) => "IfNotPresent",
    }
}

fn replication_controller(spec: &mut Value) {
    or(spec, "replicas", json!(1));
    pod_template(spec);
}

fn service(spec: &mut Value) {
    or(spec, "type", json!("ClusterIP"));
    or(spec, "sessionAffinity", json!("None"));
    let kind = spec["type"].as_str().unwrap_or("").to_string();
    if kind != "ExternalName" {
        or(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if matches!(kind.as_str(), "NodePort" | "LoadBalancer") {
        or(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    for p in each(spec, "ports") {
        or(p, "protocol", json!("TCP"));
        let port = p["port"].clone();
        or(p, "targetPort", port);
    }
}

fn deployment(spec: &mut Value) {
    or(spec, "replicas", json!(1));
    or(spec, "revisionHistoryLimit", json!(10));
    or(spec, "progressDeadlineSeconds", json!(600));
    if let Some(strategy) = child(spec, "strategy") {
        or(strategy, "type", json!("RollingUpdate"));
        if strategy["type"] == "RollingUpdate"
            && let Some(ru) = child(strategy, "rollingUpdate")
        {
            or(ru, "maxUnavailable", json!("25%"));
            or(ru, "maxSurge", json!("25%"));
        }
    }
    pod_template(spec);
}

fn stateful_set(spec: &mut Value) {
    or(spec, "replicas", json!(1));
    or(spec, "podManagementPolicy", json!("OrderedReady"));
    or(spec, "revisionHistoryLimit", json!(10));
    or(
        spec,
        "persistentVolumeClaimRetentionPolicy",
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
    );
    if let Some(strategy) = child(spec, "updateStrategy") {
        or(strategy, "type", json!("RollingUpdate"));
        if strategy["type"] == "RollingUpdate"
            && let Some(ru) = child(strategy, "rollingUpdate")
        {
            or(ru, "partition", json!(0));
        }
    }
    pod_template(spec);
}

fn daemon_set(spec: &mut Value) {
    or(spec, "revisionHistoryLimit", json!(10));
    if let Some(strategy) = child(spec, "updateStrategy") {
        or(strategy, "type", json!("RollingUpdate"));
        if strategy["type"] == "RollingUpdate"
            && let Some(ru) = child(strategy, "rollingUpdate")
        {
            or(ru, "maxUnavailable", json!(1));
            or(ru, "maxSurge", json!(0));
        }
    }
    pod_template(spec);
}

fn job(spec: &mut Value) {
    // Both unset: one pod to completion; otherwise parallelism alone.
    let unset = |k: &str| spec.get(k).is_none_or(Value::is_null);
    if unset("completions") && unset("parallelism") {
        or(spec, "completions", json!(1));
    }
    or(spec, "parallelism", json!(1));
    or(spec, "backoffLimit", json!(6));
    or(spec, "completionMode", json!("NonIndexed"));
    or(spec, "suspend", json!(false));
    if spec.get("podFailurePolicy").is_none_or(Value::is_null) {
        or(spec, "podReplacementPolicy", json!("TerminatingOrFailed"));
    }
    pod_template(spec);
}

fn cron_job(spec: &mut Value) {
    or(spec, "concurrencyPolicy", json!("Allow"));
    or(spec, "suspend", json!(false));
    or(spec, "successfulJobsHistoryLimit", json!(3));
    or(spec, "failedJobsHistoryLimit", json!(1));
    if let Some(job_spec) = spec.get_mut("jobTemplate").and_then(|t| child(t, "spec")) {
        job(job_spec);
    }
}

fn network_policy(spec: &mut Value) {
    let egress = spec.get("egress").is_some_and(|e| !e.is_null());
    let types = if egress {
        json!(["Ingress", "Egress"])
    } else {
        json!(["Ingress"])
    };
    or(spec, "policyTypes", types);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaulted(group: &str, plural: &str, mut obj: Value) -> Value {
        let info = crate::resources::Registry::with_builtins()
            .get(group, "v1", plural)
            .unwrap_or_else(|| panic!("{group}/{plural}"));
        apply(&info, &mut obj);
        obj
    }

    #[test]
    fn image_pull_policy_follows_the_tag() {
        for (image, want) in [
            ("nginx", "Always"),
            ("nginx:latest", "Always"),
            ("nginx:1.27", "IfNotPresent"),
            ("registry:5000/nginx", "Always"),
            ("registry:5000/nginx:1", "IfNotPresent"),
            ("nginx@sha256:abc", "IfNotPresent"),
        ] {
            assert_eq!(pull_policy(image), want, "{image}");
        }
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
