//! Nodes (`v1`): an empty spec by default, a Status column (no kubelet
//! reports here: `Unknown`), and `spec.unschedulable` selectable (unset
//! selects as `false`, as kube-apiserver formats it).

use serde_json::{Value, json};

use super::fill::or;
use super::strategy::{Column, KindStrategy, field_at};

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

    fn columns(&self) -> &'static [Column] {
        &[Column {
            name: "Status",
            format: "",
            cell: |_| "Unknown".into(),
        }]
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
