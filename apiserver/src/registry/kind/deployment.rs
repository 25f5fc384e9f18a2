//! Deployments (`apps/v1`): one replica, ten revisions kept, a 600 s
//! progress deadline, a rolling update of 25% / 25%, and their pod
//! template's defaults.

use serde_json::{Value, json};

use super::fill::{child, or, spec};
use super::strategy::KindStrategy;

/// The Deployment kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct Deployment;

impl KindStrategy for Deployment {
    fn name(&self) -> &'static str {
        "Deployment"
    }

    fn validate(&self, obj: &Value) -> Result<(), crate::machinery::status::ApiError> {
        super::pod::has_containers(obj, "spec.template.spec", "Deployment.apps")
    }

    fn default(&self, obj: &mut Value) {
        spec(obj, |spec| {
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
            super::pod::template(spec);
        });
    }
}
