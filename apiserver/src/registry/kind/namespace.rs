//! Namespaces (`v1`): names that are DNS labels; created Active with the
//! `kubernetes` finalizer and their name as a label; every delete marks
//! them Terminating and holds them by that finalizer until they are empty
//! (the store empties them); no deletecollection.

use serde_json::{Value, json};

use super::strategy::{Column, KindStrategy, NameRule, phase_or_terminating};

/// The finalizer that holds a namespace until its objects are gone.
pub const FINALIZER: &str = "kubernetes";

/// The Namespace kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct Namespace;

impl KindStrategy for Namespace {
    fn name(&self) -> &'static str {
        "Namespace"
    }

    fn name_rule(&self) -> NameRule {
        NameRule::Label
    }

    fn prepare_create(&self, obj: &mut Value, _now: &str) {
        obj["spec"] = json!({"finalizers": [FINALIZER]});
        obj["status"] = json!({"phase": "Active"});
    }

    /// `SetDefaults_Namespace`: the name as a label, on every write (the
    /// writer owns it, as it owns every default).
    fn default(&self, obj: &mut Value) {
        let name = obj["metadata"]["name"].clone();
        let labels = obj["metadata"]
            .as_object_mut()
            .map(|m| m.entry("labels").or_insert_with(|| json!({})));
        if let Some(l) = labels.and_then(Value::as_object_mut) {
            l.insert("kubernetes.io/metadata.name".into(), name);
        }
    }

    fn verbs(&self) -> &'static [&'static str] {
        &[
            "create", "delete", "get", "list", "patch", "update", "watch",
        ]
    }

    fn undeletable(&self, name: &str) -> Option<&'static str> {
        matches!(name, "default" | "kube-system" | "kube-public")
            .then_some("this namespace may not be deleted")
    }

    fn delete_finalizers(&self) -> &'static [&'static str] {
        &[FINALIZER]
    }

    fn mark_terminating(&self, obj: &mut Value) {
        obj["status"]["phase"] = "Terminating".into();
    }

    fn columns(&self) -> &'static [Column] {
        &[Column {
            name: "Status",
            format: "",
            cell: phase_or_terminating,
        }]
    }
}

/// Drop the finalizer that held `ns` for its objects (none are left).
pub fn emptied(ns: &mut Value) {
    let kept: Vec<Value> = ns["metadata"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f.as_str() != Some(FINALIZER))
        .cloned()
        .collect();
    ns["metadata"]["finalizers"] = kept.into();
}
