//! Nodes (`v1`): an empty spec by default, the status a create carries
//! kept (a kubelet registers so), a Status column from the Ready condition,
//! and `spec.unschedulable` selectable (unset selects as `false`, as
//! kube-apiserver formats it).

use serde_json::{Value, json};

use super::fill::or;
use super::strategy::{Column, ColumnDoc, KindStrategy, field_at};

/// The Node kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct Node;

impl KindStrategy for Node {
    fn name(&self) -> &'static str {
        "Node"
    }

    fn default(&self, obj: &mut Value) {
        or(obj, "spec", json!({}));
    }

    /// kube-apiserver keeps a Node's status on create: a kubelet registers
    /// its Node with its addresses, capacity and conditions.
    fn status_on_create(&self) -> bool {
        true
    }

    fn columns(&self) -> &'static [Column] {
        &[Column {
            name: "Status",
            format: "",
            doc: ColumnDoc::Text("The status of the node"),
            cell: status_cell,
        }]
    }

    fn kubelet_subresources(&self) -> &'static [&'static str] {
        &["proxy"]
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &["spec.unschedulable"]
    }

    /// kube-apiserver: `strconv.FormatBool(node.Spec.Unschedulable)`, so
    /// unset selects as `false`.
    fn field_value<'a>(&self, obj: &'a Value, path: &str) -> &'a Value {
        static FALSE: Value = Value::Bool(false);
        match field_at(obj, path) {
            Value::Null if path == "spec.unschedulable" => &FALSE,
            v => v,
        }
    }
}

/// kubectl's Status column of a Node, as kube-apiserver's printer words
/// it: its Ready condition (`Ready`, `NotReady`, `Unknown` without one),
/// then `,SchedulingDisabled` when it is cordoned.
fn status_cell(node: &Value) -> Value {
    let conditions = node["status"]["conditions"].as_array();
    let ready = conditions
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .map(|c| c["status"].as_str().unwrap_or_default());
    let mut status = match ready {
        Some("True") => "Ready".to_string(),
        Some(_) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    };
    if node["spec"]["unschedulable"] == true {
        status.push_str(",SchedulingDisabled");
    }
    status.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_column_is_the_ready_condition_and_cordoning() {
        let node = |ready: Option<&str>, cordoned: bool| {
            let conditions: Vec<Value> = ready
                .map(|s| json!({"type": "Ready", "status": s}))
                .into_iter()
                .collect();
            status_cell(&json!({"spec": {"unschedulable": cordoned},
                "status": {"conditions": conditions}}))
        };
        assert_eq!(node(Some("True"), false), "Ready");
        assert_eq!(node(Some("False"), false), "NotReady");
        assert_eq!(node(Some("Unknown"), true), "NotReady,SchedulingDisabled");
        assert_eq!(node(None, false), "Unknown");
    }
}
