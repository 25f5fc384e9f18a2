//! CronJobs (`batch/v1`): concurrency and history defaults, and their job
//! template's.

use serde_json::{Value, json};

use super::fill::{child, or, spec};
use super::strategy::KindStrategy;

/// The CronJob kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct CronJob;

impl KindStrategy for CronJob {
    fn name(&self) -> &'static str {
        "CronJob"
    }

    fn default(&self, obj: &mut Value) {
        spec(obj, |spec| {
            or(spec, "concurrencyPolicy", json!("Allow"));
            or(spec, "suspend", json!(false));
            or(spec, "successfulJobsHistoryLimit", json!(3));
            or(spec, "failedJobsHistoryLimit", json!(1));
            if let Some(job) = spec.get_mut("jobTemplate").and_then(|t| child(t, "spec")) {
                super::job::job_spec(job);
            }
        });
    }
}
