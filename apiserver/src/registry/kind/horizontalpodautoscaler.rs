//! HorizontalPodAutoscalers are stored at `autoscaling/v2` and served at
//! `autoscaling/v1` too, converted on every read and write as
//! kube-apiserver's conversions do (`pkg/apis/autoscaling/v1`): v1's
//! `targetCPUUtilizationPercentage` is v2's Resource `cpu` metric with an
//! `averageUtilization` (80 when a v1 object names none), its
//! `currentCPUUtilizationPercentage` that metric's current value. What v1
//! cannot say (other metrics, `behavior`, current metrics, conditions)
//! rides in the `autoscaling.alpha.kubernetes.io/*` annotations of the v1
//! form and comes back from them, so a v1 client's read-modify-write loses
//! nothing.
//!
//! Approximate: the annotations hold v2's JSON (kube-apiserver writes
//! v1's MetricSpec and MetricStatus, and its internal behavior type).

use serde_json::{Map, Value, json};

const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
const CURRENT_METRICS: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
const BEHAVIOR: &str = "autoscaling.alpha.kubernetes.io/behavior";
const CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";

/// The spec and status fields both versions have, as they are.
const SPEC: [&str; 3] = ["scaleTargetRef", "minReplicas", "maxReplicas"];
const STATUS: [&str; 4] = [
    "observedGeneration",
    "lastScaleTime",
    "currentReplicas",
    "desiredReplicas",
];

/// The fields `keys` of `from` that it has.
fn common(from: &Map<String, Value>, keys: &[&str]) -> Map<String, Value> {
    keys.iter()
        .filter_map(|k| from.get(*k).map(|v| ((*k).to_string(), v.clone())))
        .collect()
}

/// The utilization an `autoscaling/v1` object without a target aims at.
const DEFAULT_CPU_UTILIZATION: i64 = 80;

/// `obj`, at either version, in `desired`'s form (`autoscaling/v1` or
/// `autoscaling/v2`). An object already there is left as it is.
pub(crate) fn convert(obj: &mut Value, desired: &str) {
    if obj["apiVersion"] == desired {
        return;
    }
    if desired == "autoscaling/v1" {
        to_v1(obj);
    } else {
        to_v2(obj);
    }
    obj["apiVersion"] = desired.into();
}

/// Whether a v2 metric is the CPU utilization v1 has a field for.
fn is_cpu_utilization(m: &Value, value: &str) -> bool {
    m["type"] == "Resource"
        && m["resource"]["name"] == "cpu"
        && m["resource"][value].get("averageUtilization").is_some()
}

fn to_v1(obj: &mut Value) {
    let spec = obj["spec"].take();
    let status = obj["status"].take();
    let mut notes = Map::new();
    let metrics = spec["metrics"].as_array().cloned().unwrap_or_default();
    let cpu = metrics
        .iter()
        .find(|m| is_cpu_utilization(m, "target"))
        .map(|m| m["resource"]["target"]["averageUtilization"].clone());
    let others: Vec<&Value> = metrics
        .iter()
        .filter(|m| !is_cpu_utilization(m, "target"))
        .collect();
    if !others.is_empty() {
        notes.insert(METRICS.into(), json!(others).to_string().into());
    }
    if let Some(b) = spec.get("behavior").filter(|b| !b.is_null()) {
        notes.insert(BEHAVIOR.into(), b.to_string().into());
    }
    let mut v1_spec = spec
        .as_object()
        .map(|m| common(m, &SPEC))
        .unwrap_or_default();
    if let Some(cpu) = cpu {
        v1_spec.insert("targetCPUUtilizationPercentage".into(), cpu);
    }
    obj["spec"] = Value::Object(v1_spec);
    if let Value::Object(s) = &status {
        let mut v1_status = common(s, &STATUS);
        let current = s.get("currentMetrics").and_then(Value::as_array);
        if let Some(cpu) = current
            .into_iter()
            .flatten()
            .find(|m| is_cpu_utilization(m, "current"))
        {
            v1_status.insert(
                "currentCPUUtilizationPercentage".into(),
                cpu["resource"]["current"]["averageUtilization"].clone(),
            );
        }
        if let Some(c) = current.filter(|c| !c.is_empty()) {
            notes.insert(CURRENT_METRICS.into(), json!(c).to_string().into());
        }
        if let Some(c) = s
            .get("conditions")
            .and_then(Value::as_array)
            .filter(|c| !c.is_empty())
        {
            notes.insert(CONDITIONS.into(), json!(c).to_string().into());
        }
        obj["status"] = Value::Object(v1_status);
    }
    let annotations = annotations(obj);
    for k in [METRICS, CURRENT_METRICS, BEHAVIOR, CONDITIONS] {
        annotations.remove(k);
    }
    annotations.extend(notes);
    tidy_annotations(obj);
}

fn to_v2(obj: &mut Value) {
    let annotations = annotations(obj);
    let mut note = |k: &str| {
        annotations
            .remove(k)
            .and_then(|v| serde_json::from_str::<Value>(v.as_str()?).ok())
    };
    let (others, behavior, current, conditions) = (
        note(METRICS),
        note(BEHAVIOR),
        note(CURRENT_METRICS),
        note(CONDITIONS),
    );
    tidy_annotations(obj);
    let spec = obj["spec"].take();
    let mut v2_spec = spec
        .as_object()
        .map(|m| common(m, &SPEC))
        .unwrap_or_default();
    let mut metrics: Vec<Value> = others
        .and_then(|o| o.as_array().cloned())
        .unwrap_or_default();
    let cpu = |kind: &str, v: &Value| json!({"type": "Resource", "resource": {"name": "cpu", kind: {"type": "Utilization", "averageUtilization": v}}});
    match spec.get("targetCPUUtilizationPercentage") {
        Some(t) if !t.is_null() => metrics.push(cpu("target", t)),
        _ if metrics.is_empty() => metrics.push(cpu("target", &DEFAULT_CPU_UTILIZATION.into())),
        _ => {}
    }
    v2_spec.insert("metrics".into(), metrics.into());
    if let Some(b) = behavior.filter(|b| b.as_object().is_some_and(|o| !o.is_empty())) {
        v2_spec.insert("behavior".into(), b);
    }
    obj["spec"] = Value::Object(v2_spec);
    let status = obj["status"].take();
    if let Value::Object(s) = status {
        let mut v2_status = common(&s, &STATUS);
        let current = match (current, s.get("currentCPUUtilizationPercentage")) {
            (Some(c), _) => Some(c),
            (None, Some(u)) if !u.is_null() => {
                let mut m = cpu("current", u);
                m["resource"]["current"]
                    .as_object_mut()
                    .map(|c| c.remove("type"));
                Some(json!([m]))
            }
            _ => None,
        };
        if let Some(c) = current {
            v2_status.insert("currentMetrics".into(), c);
        }
        if let Some(c) = conditions {
            v2_status.insert("conditions".into(), c);
        }
        obj["status"] = Value::Object(v2_status);
    }
}

/// `metadata.annotations`, made a map if it is not one.
fn annotations(obj: &mut Value) -> &mut Map<String, Value> {
    let meta = &mut obj["metadata"];
    if !meta["annotations"].is_object() {
        meta["annotations"] = json!({});
    }
    meta["annotations"].as_object_mut().expect("made a map")
}

/// No `annotations` key when none is left, as Go's omitempty writes it.
fn tidy_annotations(obj: &mut Value) {
    if obj["metadata"]["annotations"]
        .as_object()
        .is_some_and(Map::is_empty)
        && let Some(m) = obj["metadata"].as_object_mut()
    {
        m.remove("annotations");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2() -> Value {
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "h", "annotations": {"keep": "me"}},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
                "minReplicas": 1, "maxReplicas": 5,
                "metrics": [
                    {"type": "Resource", "resource": {"name": "memory",
                        "target": {"type": "AverageValue", "averageValue": "1Gi"}}},
                    {"type": "Resource", "resource": {"name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 60}}}],
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 30}}},
            "status": {"currentReplicas": 2, "desiredReplicas": 3,
                "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu",
                    "current": {"averageUtilization": 55, "averageValue": "110m"}}}],
                "conditions": [{"type": "AbleToScale", "status": "True"}]}})
    }

    #[test]
    fn v1_shows_the_cpu_target_and_carries_the_rest() {
        let mut o = v2();
        convert(&mut o, "autoscaling/v1");
        assert_eq!(o["apiVersion"], "autoscaling/v1");
        assert_eq!(o["spec"]["targetCPUUtilizationPercentage"], 60);
        assert_eq!(o["spec"].get("metrics"), None);
        assert_eq!(o["status"]["currentCPUUtilizationPercentage"], 55);
        let a = &o["metadata"]["annotations"];
        assert_eq!(a["keep"], "me");
        let others: Value = serde_json::from_str(a[METRICS].as_str().unwrap()).unwrap();
        assert_eq!(others[0]["resource"]["name"], "memory");
        convert(&mut o, "autoscaling/v2");
        // The carried metrics first, then the CPU target: as it was.
        assert_eq!(o, v2());
    }

    #[test]
    fn a_v1_object_without_a_target_aims_at_80_percent() {
        let mut o = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "h"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "d"}, "maxReplicas": 3},
            "status": {"currentReplicas": 0, "desiredReplicas": 0, "currentCPUUtilizationPercentage": 7}});
        convert(&mut o, "autoscaling/v2");
        assert_eq!(
            o["spec"]["metrics"],
            json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 80}}}])
        );
        assert_eq!(
            o["status"]["currentMetrics"][0]["resource"]["current"],
            json!({"averageUtilization": 7})
        );
        assert_eq!(o["metadata"].get("annotations"), None);
        convert(&mut o, "autoscaling/v1");
        assert_eq!(o["spec"]["targetCPUUtilizationPercentage"], 80);
        assert_eq!(o["status"]["currentCPUUtilizationPercentage"], 7);
    }
}
