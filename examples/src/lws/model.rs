//! The LeaderWorkerSet custom resource (`leaderworkerset.x-k8s.io/v1`), as
//! far as the revision race goes: replicas, the leader/worker template, the
//! rollout strategy, and the status the controller writes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The label naming the LWS on its StatefulSet and revisions.
pub const NAME_LABEL: &str = "leaderworkerset.sigs.k8s.io/name";
/// The label carrying the template revision hash.
pub const HASH_LABEL: &str = "leaderworkerset.sigs.k8s.io/template-revision-hash";
/// The label marking a group's pods by their index in the group: `"0"` is
/// the group's leader (upstream's `worker-index`).
pub const WORKER_INDEX_LABEL: &str = "leaderworkerset.sigs.k8s.io/worker-index";
/// The annotation a write stamps on the StatefulSet: the uid of the LWS it
/// was written for (how the checker sees whose write landed where).
pub const WRITTEN_FOR: &str = "lws.ward.dev/written-for";

/// A group of pods (a leader and its workers) replicated as a unit.
#[derive(
    kube::CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema,
)]
#[kube(
    group = "leaderworkerset.x-k8s.io",
    version = "v1",
    kind = "LeaderWorkerSet",
    namespaced,
    status = "LeaderWorkerSetStatus",
    shortname = "lws"
)]
#[serde(rename_all = "camelCase")]
pub struct LeaderWorkerSetSpec {
    /// How many groups.
    #[serde(default = "one")]
    pub replicas: i32,
    /// The template of every group.
    pub leader_worker_template: LeaderWorkerTemplate,
    /// How a template change rolls out.
    #[serde(default)]
    pub rollout_strategy: RolloutStrategy,
}

fn one() -> i32 {
    1
}

/// The template of one group.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LeaderWorkerTemplate {
    /// Pods per group, leader included.
    #[serde(default = "one")]
    pub size: i32,
    /// The leader's pod template (the worker template when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_object")]
    pub leader_template: Option<Value>,
    /// The workers' pod template.
    #[schemars(schema_with = "any_object")]
    pub worker_template: Value,
}

/// How a template change rolls out.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStrategy {
    /// `RollingUpdate`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Its parameters.
    #[serde(default)]
    pub rolling_update_configuration: RollingUpdateConfiguration,
}

impl Default for RolloutStrategy {
    fn default() -> Self {
        RolloutStrategy {
            type_: "RollingUpdate".into(),
            rolling_update_configuration: RollingUpdateConfiguration::default(),
        }
    }
}

/// Rolling-update parameters.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdateConfiguration {
    /// Groups with an index below it keep the old template.
    #[serde(default)]
    pub partition: i32,
    /// Groups that may be unavailable during the update.
    #[serde(default = "one")]
    pub max_unavailable: i32,
    /// Extra groups during the update.
    #[serde(default)]
    pub max_surge: i32,
}

impl Default for RollingUpdateConfiguration {
    fn default() -> Self {
        RollingUpdateConfiguration {
            partition: 0,
            max_unavailable: 1,
            max_surge: 0,
        }
    }
}

/// What the controller reports.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LeaderWorkerSetStatus {
    /// Groups created.
    #[serde(default)]
    pub replicas: i32,
    /// Groups ready: a group counts once its leader pod is Running and
    /// Ready and, in a group of more than one pod, its worker StatefulSet
    /// has every replica ready.
    #[serde(default)]
    pub ready_replicas: i32,
    /// The revision the StatefulSet runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_revision: Option<String>,
    /// The revision being rolled out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_revision: Option<String>,
    /// Bumped on a revision name collision; folded into the hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    /// Conditions (`Available` when every group is ready, `Progressing`
    /// until then), one per type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions")]
    pub conditions: Vec<Value>,
}

/// metav1.Condition's fields, one condition per `type` (a structural
/// schema: every item field is declared, so nothing is pruned).
fn conditions(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": ["type", "status"],
            "properties": {
                "type": {"type": "string"},
                "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                "reason": {"type": "string"},
                "message": {"type": "string"},
                "lastTransitionTime": {"type": "string", "format": "date-time"},
                "observedGeneration": {"type": "integer", "format": "int64"}
            }
        }
    })
}

fn any_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}
