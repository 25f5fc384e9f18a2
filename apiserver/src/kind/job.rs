//! Jobs (`batch/v1`): completions and parallelism, six retries, the
//! replacement policy, their pod template's defaults, and the selector
//! kube-apiserver generates unless `manualSelector` is true: matching the
//! Job's uid (`batch.kubernetes.io/controller-uid`), with the uid and the
//! Job's name labelled on its pod template (`controller-uid`, `job-name`
//! and their `batch.kubernetes.io/` forms; labels the client set are kept).

use serde_json::{Value, json};

use super::fill::{or, spec};
use super::strategy::KindStrategy;
use crate::status::ApiError;

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

    fn created(&self, obj: &mut Value, uid: &str) {
        if obj["spec"]["manualSelector"] == true || !obj["spec"].is_object() {
            return;
        }
        let name = obj["metadata"]["name"].clone();
        let template = &mut obj["spec"]["template"];
        if !template["metadata"]["labels"].is_object() {
            template["metadata"]["labels"] = json!({});
        }
        let labels = &mut template["metadata"]["labels"];
        for (label, value) in [
            ("job-name", &name),
            ("batch.kubernetes.io/job-name", &name),
            ("controller-uid", &json!(uid)),
            ("batch.kubernetes.io/controller-uid", &json!(uid)),
        ] {
            or(labels, label, value.clone());
        }
        let selector = &mut obj["spec"]["selector"];
        if !selector["matchLabels"].is_object() {
            selector["matchLabels"] = json!({});
        }
        or(&mut selector["matchLabels"], CONTROLLER_UID, json!(uid));
    }
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
