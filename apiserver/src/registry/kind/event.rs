//! Events, both kinds of them (`v1` and `events.k8s.io/v1`): the fields
//! kube-apiserver lets a field selector name.

use serde_json::Value;

use super::strategy::{KindStrategy, field_at};

/// The core Event kind (`v1`).
#[derive(Debug, Clone, Copy, Default)]
pub struct CoreEvent;

/// The `events.k8s.io/v1` Event kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct Event;

impl KindStrategy for CoreEvent {
    fn name(&self) -> &'static str {
        "Event"
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ]
    }

    /// `source` selects on `source.component`.
    fn field_value<'a>(&self, obj: &'a Value, path: &str) -> &'a Value {
        if path == "source" {
            return &obj["source"]["component"];
        }
        field_at(obj, path)
    }
}

impl KindStrategy for Event {
    fn name(&self) -> &'static str {
        "events.k8s.io/Event"
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &[
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "reason",
            "reportingController",
            "type",
        ]
    }
}
