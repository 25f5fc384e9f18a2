//! Pods (`v1`): created Pending, a grace period on delete while scheduled
//! and running, the DELETE answering the pod, spec defaults shared by
//! every pod template, `ephemeralcontainers` only added to, and the
//! kubelet's subresources.

use serde_json::{Value, json};

use super::fill::{child, each, or, spec};
use super::strategy::{Column, KindStrategy, ServedSubresource, Subresource, phase_or_terminating};

/// The Pod kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pod;

const RW: &[&str] = &["get", "patch", "update"];
const CREATE: &[&str] = &["create"];

impl KindStrategy for Pod {
    fn name(&self) -> &'static str {
        "Pod"
    }

    fn prepare_create(&self, obj: &mut Value, _now: &str) {
        obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
    }

    fn default(&self, obj: &mut Value) {
        spec(obj, pod_spec);
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

    /// Ephemeral containers are only added (each with a name and an image,
    /// names unique in the pod), never changed or removed.
    fn check_subresource(&self, sub: Subresource, old: &Value, new: &Value) -> Result<(), String> {
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
    fn grace(&self, obj: &Value, requested: Option<i64>) -> i64 {
        let scheduled = obj["spec"]["nodeName"]
            .as_str()
            .is_some_and(|n| !n.is_empty());
        let finished = matches!(
            obj["status"]["phase"].as_str(),
            Some("Succeeded" | "Failed")
        );
        if !scheduled || finished {
            return 0;
        }
        requested
            .or_else(|| obj["spec"]["terminationGracePeriodSeconds"].as_i64())
            .unwrap_or(30)
            .max(0)
    }

    fn returns_deleted_object(&self) -> bool {
        true
    }

    fn columns(&self) -> &'static [Column] {
        &[
            Column {
                name: "Status",
                format: "",
                cell: phase_or_terminating,
            },
            Column {
                name: "Node",
                format: "",
                cell: |obj| match obj["spec"]["nodeName"].as_str() {
                    Some(n) => n.into(),
                    None => "<none>".into(),
                },
            },
        ]
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &["spec.nodeName", "status.phase"]
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

#[cfg(test)]
mod tests {
    use super::*;

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
