//! DaemonSets (`apps/v1`): a rolling update of one unavailable, none
//! surged, ten revisions kept, and their pod template's defaults.

use serde_json::{Value, json};

use super::fill::{child, or, spec};
use super::strategy::KindStrategy;

/// The DaemonSet kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct DaemonSet;

impl KindStrategy for DaemonSet {
    fn name(&self) -> &'static str {
        "DaemonSet"
    }

    fn validate(&self, obj: &Value) -> Result<(), crate::machinery::status::ApiError> {
        super::pod::has_containers(obj, "spec.template.spec", "DaemonSet.apps")
    }

    fn default(&self, obj: &mut Value) {
        spec(obj, |spec| {
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
            super::pod::template(spec);
        });
    }
}
