//! Pods (`v1`): created Pending, a grace period on delete while scheduled
//! and running, the DELETE answering the pod, spec defaults shared by
//! every pod template, `ephemeralcontainers` only added to, and the
//! kubelet's subresources.

use serde_json::{Value, json};

use super::fill::{child, each, or, spec};
use super::strategy::{Column, ColumnDoc, KindStrategy, ServedSubresource, Subresource};
use crate::machinery::status::ApiError;

/// The Pod kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pod;

const RW: &[&str] = &["get", "patch", "update"];
const CREATE: &[&str] = &["create"];

impl KindStrategy for Pod {
    fn name(&self) -> &'static str {
        "Pod"
    }

    fn validate(&self, obj: &Value) -> Result<(), ApiError> {
        has_containers(obj, "spec", "Pod")
    }

    fn prepare_create(&self, obj: &mut Value, _now: &str) {
        obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
        if let Some(s) = obj.get_mut("spec").filter(|s| s.is_object()) {
            priority(s);
            default_toleration_seconds(s);
        }
    }

    fn default(&self, obj: &mut Value) {
        spec(obj, pod_spec);
        // `SetDefaults_Pod`'s, not the spec's: a template leaves it out.
        if let Some(s) = obj.get_mut("spec") {
            or(s, "enableServiceLinks", json!(true));
        }
    }

    fn subresources(&self) -> &'static [ServedSubresource] {
        &[
            ServedSubresource {
                name: "ephemeralcontainers",
                kind: None,
                verbs: RW,
            },
            ServedSubresource {
                name: "binding",
                kind: Some(("", "v1", "Binding")),
                verbs: CREATE,
            },
            ServedSubresource {
                name: "eviction",
                kind: Some(("policy", "v1", "Eviction")),
                verbs: CREATE,
            },
        ]
    }

    fn kubelet_subresources(&self) -> &'static [&'static str] {
        &["log", "exec", "attach", "portforward", "proxy"]
    }

    /// An update keeps the pod's containers ([`same_containers`]);
    /// ephemeral containers are only added (each with a name and an image,
    /// names unique in the pod), never changed or removed.
    fn check_subresource(&self, sub: Subresource, old: &Value, new: &Value) -> Result<(), String> {
        if sub == Subresource::Main {
            return same_containers(old, new);
        }
        if sub != Subresource::EphemeralContainers {
            return Ok(());
        }
        let list = |v: &Value| {
            v["spec"]["ephemeralContainers"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        };
        let (before, after) = (list(old), list(new));
        for c in &before {
            match after.iter().find(|n| n["name"] == c["name"]) {
                None => {
                    return Err(format!(
                        "spec.ephemeralContainers: Forbidden: existing ephemeral containers {} may not be removed",
                        c["name"]
                    ));
                }
                Some(n) if n != c => {
                    return Err(format!(
                        "spec.ephemeralContainers: Forbidden: existing ephemeral containers {} may not be changed",
                        c["name"]
                    ));
                }
                Some(_) => {}
            }
        }
        let mut names: Vec<&str> = old["spec"]["containers"]
            .as_array()
            .into_iter()
            .chain(old["spec"]["initContainers"].as_array())
            .flatten()
            .filter_map(|c| c["name"].as_str())
            .collect();
        for (i, c) in after.iter().enumerate() {
            for field in ["name", "image"] {
                if c[field].as_str().is_none_or(str::is_empty) {
                    return Err(format!(
                        "spec.ephemeralContainers[{i}].{field}: Required value"
                    ));
                }
            }
            let n = c["name"].as_str().unwrap_or_default();
            if names.contains(&n) {
                return Err(format!(
                    "spec.ephemeralContainers[{i}].name: Duplicate value: \"{n}\""
                ));
            }
            names.push(n);
        }
        Ok(())
    }

    /// Only pods that are scheduled and not finished have a grace period:
    /// the request's, else the pod's `terminationGracePeriodSeconds`, else
    /// 30 s.
    fn grace(&self, obj: &Value, requested: Option<i64>) -> Option<i64> {
        let scheduled = obj["spec"]["nodeName"]
            .as_str()
            .is_some_and(|n| !n.is_empty());
        let finished = matches!(
            obj["status"]["phase"].as_str(),
            Some("Succeeded" | "Failed")
        );
        if !scheduled || finished {
            return Some(0);
        }
        let grace = requested
            .or_else(|| obj["spec"]["terminationGracePeriodSeconds"].as_i64())
            .unwrap_or(30);
        Some(grace.max(0))
    }

    fn returns_deleted_object(&self) -> bool {
        true
    }

    /// kube-apiserver's: Ready, Status, Restarts.
    fn columns(&self) -> &'static [Column] {
        &[
            Column {
                name: "Ready",
                format: "",
                doc: ColumnDoc::Text(
                    "The aggregate readiness state of this pod for accepting traffic.",
                ),
                cell: ready_cell,
            },
            Column {
                name: "Status",
                format: "",
                doc: ColumnDoc::Text("The aggregate status of the containers in this pod."),
                cell: status_cell,
            },
            Column {
                name: "Restarts",
                format: "",
                doc: ColumnDoc::Text(
                    "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
                ),
                cell: |pod| {
                    let statuses = pod["status"]["containerStatuses"].as_array();
                    let counts = statuses
                        .into_iter()
                        .flatten()
                        .map(|c| c["restartCount"].as_i64().unwrap_or(0));
                    counts.sum::<i64>().to_string().into()
                },
            },
        ]
    }

    /// kube-apiserver's: IP, Node, Nominated Node, Readiness Gates.
    fn wide_columns(&self) -> &'static [Column] {
        &[
            Column {
                name: "IP",
                format: "",
                doc: ColumnDoc::Field("api.core.v1.PodStatus", "podIP"),
                cell: |pod| or_none(&pod["status"]["podIP"]),
            },
            Column {
                name: "Node",
                format: "",
                doc: ColumnDoc::Field("api.core.v1.PodSpec", "nodeName"),
                cell: |pod| or_none(&pod["spec"]["nodeName"]),
            },
            Column {
                name: "Nominated Node",
                format: "",
                doc: ColumnDoc::Field("api.core.v1.PodStatus", "nominatedNodeName"),
                cell: |pod| or_none(&pod["status"]["nominatedNodeName"]),
            },
            Column {
                name: "Readiness Gates",
                format: "",
                doc: ColumnDoc::Field("api.core.v1.PodSpec", "readinessGates"),
                cell: gates_cell,
            },
        ]
    }

    /// kube-apiserver's pod fields (`pod.ToSelectableFields`).
    fn selectable_fields(&self) -> &'static [&'static str] {
        &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ]
    }

    /// `spec.hostNetwork` is `false` when absent (a Go bool).
    fn field_value<'a>(&self, obj: &'a Value, path: &str) -> &'a Value {
        const FALSE: &Value = &Value::Bool(false);
        match super::strategy::field_at(obj, path) {
            Value::Null if path == "spec.hostNetwork" => FALSE,
            v => v,
        }
    }
}

/// `spec.template.spec` of a workload.
pub fn template(spec: &mut Value) {
    if let Some(pod) = spec.get_mut("template").and_then(|t| child(t, "spec")) {
        pod_spec(pod);
    }
}

/// A pod's spec (`SetDefaults_PodSpec`, `SetDefaults_Container`).
fn pod_spec(spec: &mut Value) {
    or(spec, "dnsPolicy", json!("ClusterFirst"));
    or(spec, "restartPolicy", json!("Always"));
    or(spec, "terminationGracePeriodSeconds", json!(30));
    or(spec, "securityContext", json!({}));
    or(spec, "schedulerName", json!("default-scheduler"));
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

/// A pod spec at `path` (`spec`, `spec.template.spec`) of an object of
/// `kind` (group-qualified) has a container: 422 `<path>.containers:
/// Required value` otherwise, as kube-apiserver's `ValidatePodSpec`.
pub fn has_containers(obj: &Value, path: &str, kind: &str) -> Result<(), ApiError> {
    let spec = path.split('.').fold(obj, |v, k| &v[k]);
    if spec["containers"].as_array().is_some_and(|c| !c.is_empty()) {
        return Ok(());
    }
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    Err(ApiError::invalid(
        kind,
        name,
        format!("{path}.containers: Required value"),
    ))
}

/// A pod's containers are fixed once it exists: an update may change
/// their images, never add or remove one (kube-apiserver's
/// `ValidatePodUpdate`; the rest of what it forbids is not checked).
fn same_containers(old: &Value, new: &Value) -> Result<(), String> {
    for list in ["containers", "initContainers"] {
        let names = |v: &Value| -> Vec<Value> {
            v["spec"][list]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| c["name"].clone())
                .collect()
        };
        if names(old) != names(new) {
            return Err(format!(
                "spec.{list}: Forbidden: pod updates may not add or remove containers"
            ));
        }
    }
    Ok(())
}

/// kube-apiserver's `Priority` admission plugin (on by default), for a pod
/// that names no PriorityClass or a built-in one: its priority from the
/// class (0 without one: ward-apiserver serves no PriorityClass, so no
/// global default exists), preempting lower priorities. A pod naming
/// another class is left as it is (kube-apiserver reads the class, or
/// refuses the pod when there is none; docs/apiserver.md).
fn priority(spec: &mut Value) {
    let value = match spec["priorityClassName"].as_str().unwrap_or_default() {
        "" => 0,
        "system-node-critical" => 2_000_001_000,
        "system-cluster-critical" => 2_000_000_000,
        _ => return,
    };
    or(spec, "priority", json!(value));
    or(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
}

/// kube-apiserver's `DefaultTolerationSeconds` admission plugin (on by
/// default): a pod that tolerates neither taint gets 300 s of the
/// `not-ready` and `unreachable` NoExecute taints a node controller puts
/// on a node it lost.
fn default_toleration_seconds(spec: &mut Value) {
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let tolerated = spec["tolerations"].as_array().is_some_and(|ts| {
            ts.iter().any(|t| {
                let effect = t["effect"].as_str().unwrap_or_default();
                let k = t["key"].as_str().unwrap_or_default();
                let exists = t["operator"].as_str() == Some("Exists");
                (effect.is_empty() || effect == "NoExecute")
                    && (k == key || (k.is_empty() && exists))
            })
        });
        if tolerated {
            continue;
        }
        let toleration = json!({"key": key, "operator": "Exists", "effect": "NoExecute",
            "tolerationSeconds": 300});
        match spec.get_mut("tolerations").and_then(Value::as_array_mut) {
            Some(ts) => ts.push(toleration),
            None => spec["tolerations"] = json!([toleration]),
        }
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

/// A string field's value, or `<none>`.
fn or_none(v: &Value) -> Value {
    match v.as_str().filter(|s| !s.is_empty()) {
        Some(s) => s.into(),
        None => "<none>".into(),
    }
}

/// kubectl's Ready column: ready containers / containers.
fn ready_cell(pod: &Value) -> Value {
    let total = pod["spec"]["containers"].as_array().map_or(0, Vec::len);
    let statuses = pod["status"]["containerStatuses"].as_array();
    let ready = statuses
        .into_iter()
        .flatten()
        .filter(|c| c["ready"] == true)
        .count();
    format!("{ready}/{total}").into()
}

/// kubectl's Status column, as kube-apiserver's printer reasons it: the
/// pod's reason, else its phase; a container's waiting or terminated
/// reason (or `Signal:n`, `ExitCode:n`) over that, the last container's
/// first; `Terminating` for a pod being deleted that has not ended
/// (`Unknown` for one whose node was lost). (Init containers and
/// sidecars, which the printer also reasons about, are not.)
fn status_cell(pod: &Value) -> Value {
    let status = &pod["status"];
    let mut reason = status["reason"]
        .as_str()
        .filter(|r| !r.is_empty())
        .or_else(|| status["phase"].as_str())
        .unwrap_or_default()
        .to_string();
    let mut running = false;
    let statuses = status["containerStatuses"].as_array();
    for c in statuses.into_iter().flatten().rev() {
        let (waiting, done) = (&c["state"]["waiting"], &c["state"]["terminated"]);
        let said = |s: &Value| {
            s["reason"]
                .as_str()
                .filter(|r| !r.is_empty())
                .map(String::from)
        };
        if let Some(r) = said(waiting) {
            reason = r;
        } else if let Some(r) = said(done) {
            reason = r;
        } else if done.is_object() {
            reason = match done["signal"].as_i64().filter(|s| *s != 0) {
                Some(signal) => format!("Signal:{signal}"),
                None => format!("ExitCode:{}", done["exitCode"].as_i64().unwrap_or(0)),
            };
        } else if c["ready"] == true && c["state"]["running"].is_object() {
            running = true;
        }
    }
    if reason == "Completed" && running {
        let conditions = status["conditions"].as_array();
        let ready = conditions
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        reason = if ready { "Running" } else { "NotReady" }.into();
    }
    if !pod["metadata"]["deletionTimestamp"].is_null() {
        let terminal = matches!(status["phase"].as_str(), Some("Succeeded" | "Failed"));
        if status["reason"] == "NodeLost" {
            reason = "Unknown".into();
        } else if !terminal {
            reason = "Terminating".into();
        }
    }
    reason.into()
}

/// kubectl's Readiness Gates column: the gates whose condition is True /
/// the gates, `<none>` without any.
fn gates_cell(pod: &Value) -> Value {
    let Some(gates) = pod["spec"]["readinessGates"]
        .as_array()
        .filter(|g| !g.is_empty())
    else {
        return "<none>".into();
    };
    let conditions = pod["status"]["conditions"].as_array();
    let met = gates
        .iter()
        .filter(|g| {
            conditions
                .into_iter()
                .flatten()
                .any(|c| c["type"] == g["conditionType"] && c["status"] == "True")
        })
        .count();
    format!("{met}/{}", gates.len()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_pod_gets_what_the_default_admission_plugins_give() {
        let mut bare = json!({"spec": {"containers": [{"name": "a"}]}});
        Pod.prepare_create(&mut bare, "");
        let spec = &bare["spec"];
        assert_eq!(spec["priority"], 0);
        assert_eq!(spec["preemptionPolicy"], "PreemptLowerPriority");
        let keys: Vec<_> = spec["tolerations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                assert_eq!(
                    (&t["effect"], &t["tolerationSeconds"]),
                    (&json!("NoExecute"), &json!(300))
                );
                t["key"].as_str().unwrap()
            })
            .collect();
        assert_eq!(
            keys,
            [
                "node.kubernetes.io/not-ready",
                "node.kubernetes.io/unreachable"
            ]
        );
        // Tolerating every taint, or naming a class of its own: left alone.
        let mut own = json!({"spec": {"priorityClassName": "high",
            "tolerations": [{"operator": "Exists"}]}});
        Pod.prepare_create(&mut own, "");
        assert_eq!(
            own["spec"],
            json!({"priorityClassName": "high",
            "tolerations": [{"operator": "Exists"}]})
        );
    }

    #[test]
    fn the_pod_table_reads_as_kubectl_prints_it() {
        let pod = json!({"metadata": {"name": "p"},
            "spec": {"nodeName": "n1", "containers": [{"name": "a"}, {"name": "b"}],
                "readinessGates": [{"conditionType": "x.io/ok"}]},
            "status": {"phase": "Running", "podIP": "10.1.0.4",
                "conditions": [{"type": "x.io/ok", "status": "True"}],
                "containerStatuses": [
                    {"name": "a", "ready": true, "restartCount": 2, "state": {"running": {}}},
                    {"name": "b", "ready": false, "restartCount": 1,
                        "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        let cells = |cols: &[Column], pod: &Value| -> Vec<Value> {
            cols.iter().map(|c| (c.cell)(pod)).collect()
        };
        assert_eq!(
            cells(Pod.columns(), &pod),
            [json!("1/2"), json!("CrashLoopBackOff"), json!("3")]
        );
        assert_eq!(
            cells(Pod.wide_columns(), &pod),
            [
                json!("10.1.0.4"),
                json!("n1"),
                json!("<none>"),
                json!("1/1")
            ]
        );
        let pending =
            json!({"spec": {"containers": [{"name": "a"}]}, "status": {"phase": "Pending"}});
        assert_eq!(
            cells(Pod.columns(), &pending),
            [json!("0/1"), json!("Pending"), json!("0")]
        );
        let mut deleting = pending.clone();
        deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z".into();
        assert_eq!(status_cell(&deleting), "Terminating");
        let done = json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"phase": "Succeeded", "containerStatuses": [
                {"state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}});
        assert_eq!(status_cell(&done), "Completed");
        let killed = json!({"status": {"phase": "Failed", "containerStatuses": [
            {"state": {"terminated": {"exitCode": 137, "signal": 9}}}]}});
        assert_eq!(status_cell(&killed), "Signal:9");
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
}
