//! ReplicaSets (`apps/v1`): one replica and their pod template's defaults.

use serde_json::{Value, json};

use super::fill::{or, spec};
use super::strategy::KindStrategy;

/// The ReplicaSet kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReplicaSet;

impl KindStrategy for ReplicaSet {
    fn name(&self) -> &'static str {
        "ReplicaSet"
    }

    fn validate(&self, obj: &Value) -> Result<(), crate::machinery::status::ApiError> {
        super::pod::has_containers(obj, "spec.template.spec", "ReplicaSet.apps")
    }

    fn default(&self, obj: &mut Value) {
        spec(obj, |s| {
            or(s, "replicas", json!(1));
            super::pod::template(s);
        });
    }
}
