//! ComponentStatuses (`v1`): read-only (the real server computes them on
//! read; here they are stored at start, each Healthy), with kubectl's
//! Status, Message and Error columns.

use serde_json::Value;

use super::strategy::{Column, ColumnDoc, KindStrategy};

/// The ComponentStatus kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct ComponentStatus;

impl KindStrategy for ComponentStatus {
    fn name(&self) -> &'static str {
        "ComponentStatus"
    }

    fn verbs(&self) -> &'static [&'static str] {
        &["get", "list"]
    }

    fn columns(&self) -> &'static [Column] {
        &[
            Column {
                name: "Status",
                format: "",
                doc: ColumnDoc::Text("Status of the component conditions"),
                cell: |cs| match healthy(cs)["status"].as_str() {
                    Some("True") => "Healthy".into(),
                    _ => "Unhealthy".into(),
                },
            },
            Column {
                name: "Message",
                format: "",
                doc: ColumnDoc::Text("Message of the component conditions"),
                cell: |cs| healthy(cs)["message"].as_str().unwrap_or_default().into(),
            },
            Column {
                name: "Error",
                format: "",
                doc: ColumnDoc::Text("Error of the component conditions"),
                cell: |cs| healthy(cs)["error"].as_str().unwrap_or_default().into(),
            },
        ]
    }
}

/// The Healthy condition of a ComponentStatus (null without one).
fn healthy(cs: &Value) -> &Value {
    static NONE: Value = Value::Null;
    let mut conditions = cs["conditions"].as_array().into_iter().flatten();
    conditions.find(|c| c["type"] == "Healthy").unwrap_or(&NONE)
}
