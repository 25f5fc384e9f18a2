//! Jobs (`batch/v1`): completions and parallelism, six retries, the
//! replacement policy, and their pod template's defaults.

use serde_json::{Value, json};

use super::fill::{or, spec};
use super::strategy::KindStrategy;

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
}

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
