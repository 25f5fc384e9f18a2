//! StatefulSets (`apps/v1`): ordered pod management, a rolling update
//! from partition 0, claims retained, their pod template's defaults, and
//! a Ready column.

use serde_json::{Value, json};

use super::fill::{child, or, spec};
use super::strategy::{Column, ColumnDoc, KindStrategy};

/// The StatefulSet kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct StatefulSet;

impl KindStrategy for StatefulSet {
    fn name(&self) -> &'static str {
        "StatefulSet"
    }

    fn validate(&self, obj: &Value) -> Result<(), crate::machinery::status::ApiError> {
        super::pod::has_containers(obj, "spec.template.spec", "StatefulSet.apps")
    }

    fn default(&self, obj: &mut Value) {
        spec(obj, |spec| {
            or(spec, "replicas", json!(1));
            or(spec, "podManagementPolicy", json!("OrderedReady"));
            or(spec, "revisionHistoryLimit", json!(10));
            or(
                spec,
                "persistentVolumeClaimRetentionPolicy",
                json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
            );
            if let Some(strategy) = child(spec, "updateStrategy") {
                or(strategy, "type", json!("RollingUpdate"));
                if strategy["type"] == "RollingUpdate"
                    && let Some(ru) = child(strategy, "rollingUpdate")
                {
                    or(ru, "partition", json!(0));
                }
            }
            super::pod::template(spec);
        });
    }

    fn columns(&self) -> &'static [Column] {
        &[Column {
            name: "Ready",
            format: "",
            doc: ColumnDoc::Text("Number of the pod with ready state"),
            cell: |obj| {
                format!(
                    "{}/{}",
                    obj["status"]["readyReplicas"].as_i64().unwrap_or(0),
                    obj["spec"]["replicas"].as_i64().unwrap_or(1)
                )
                .into()
            },
        }]
    }
}
