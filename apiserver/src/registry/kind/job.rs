//! Jobs (`batch/v1`): completions and parallelism, six retries, the
//! replacement policy, their pod template's defaults, and the selector
//! kube-apiserver generates unless `manualSelector` is true: matching the
//! Job's uid (`batch.kubernetes.io/controller-uid`), with the uid and the
//! Job's name labelled on its pod template (`controller-uid`, `job-name`
//! and their `batch.kubernetes.io/` forms), and refused, as kube-apiserver
//! refuses it, when the client set one of those labels to another value
//! or gave a selector that does not select them.

use serde_json::{Value, json};

use super::fill::{or, spec};
use super::strategy::KindStrategy;
use crate::machinery::status::ApiError;

/// The Job kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct Job;

impl KindStrategy for Job {
    fn name(&self) -> &'static str {
        "Job"
    }

    fn default(&self, obj: &mut Value) {
        spec(obj, job_spec);
    }

    fn validate(&self, obj: &Value) -> Result<(), ApiError> {
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        if obj["spec"]["manualSelector"] == true && obj["spec"]["selector"].is_null() {
            return Err(ApiError::invalid(
                "Job.batch",
                name,
                "spec.selector: Required value",
            ));
        }
        Ok(())
    }

    fn created(&self, obj: &mut Value, uid: &str) -> Result<(), ApiError> {
        if obj["spec"]["manualSelector"] == true || !obj["spec"].is_object() {
            return Ok(());
        }
        let name = obj["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let template = &mut obj["spec"]["template"];
        if !template["metadata"]["labels"].is_object() {
            template["metadata"]["labels"] = json!({});
        }
        let labels = &mut template["metadata"]["labels"];
        for (label, value) in generated_labels(uid, &name) {
            or(labels, label, json!(value));
        }
        let selector = &mut obj["spec"]["selector"];
        if !selector["matchLabels"].is_object() {
            selector["matchLabels"] = json!({});
        }
        or(&mut selector["matchLabels"], CONTROLLER_UID, json!(uid));
        generated_selector_errors(obj, uid, &name)
    }
}

/// The labels a generated selector puts on a Job's pod template, in the
/// order kube-apiserver checks them.
fn generated_labels<'a>(uid: &'a str, name: &'a str) -> [(&'static str, &'a str); 4] {
    [
        ("controller-uid", uid),
        ("job-name", name),
        (CONTROLLER_UID, uid),
        ("batch.kubernetes.io/job-name", name),
    ]
}

/// kube-apiserver's `ValidateGeneratedSelector`: the template keeps the
/// generated labels (a client's own value for one is refused) and the
/// selector selects them (a selector the client gave without
/// `manualSelector` is refused). The refused values print as JSON where
/// kube prints Go's `%#v`.
fn generated_selector_errors(job: &Value, uid: &str, name: &str) -> Result<(), ApiError> {
    let labels = &job["spec"]["template"]["metadata"]["labels"];
    let mut errors = Vec::new();
    for (label, want) in generated_labels(uid, name) {
        if labels[label].as_str() != Some(want) {
            errors.push(format!(
                "spec.template.metadata.labels[{label}]: Invalid value: {}: must be '{want}'",
                go_string_map(labels)
            ));
        }
    }
    let selector = &job["spec"]["selector"];
    let selects = crate::machinery::selector::selector_string(selector)
        .and_then(|s| crate::machinery::selector::LabelSelector::parse(&s).ok())
        .is_some_and(|s| {
            let expected: std::collections::HashMap<&str, &str> =
                generated_labels(uid, name).into();
            s.matches(|k| expected.get(k).copied())
        });
    if !selects {
        errors.push(format!(
            "spec.selector: Invalid value: {selector}: `selector` not auto-generated"
        ));
    }
    let message = match errors.as_slice() {
        [] => return Ok(()),
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    Err(ApiError::invalid("Job.batch", name, message))
}

/// Go's `%#v` of a `map[string]string`: `map[string]string{"a":"b"}`, keys
/// sorted.
fn go_string_map(map: &Value) -> String {
    let mut pairs: Vec<(&String, &str)> = (map.as_object().into_iter().flatten())
        .map(|(k, v)| (k, v.as_str().unwrap_or_default()))
        .collect();
    pairs.sort();
    let pairs: Vec<String> = pairs.iter().map(|(k, v)| format!("{k:?}:{v:?}")).collect();
    format!("map[string]string{{{}}}", pairs.join(", "))
}

/// The label a generated Job selector matches: the Job's uid.
const CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";

/// A Job's spec (also a CronJob's `jobTemplate.spec`).
pub fn job_spec(spec: &mut Value) {
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
    super::pod::template(spec);
}
