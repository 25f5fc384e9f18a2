//! Namespaces (`v1`): names that are DNS labels; created Active with the
//! `kubernetes` finalizer in `spec.finalizers` and their name as a label;
//! every delete marks them Terminating, and `spec.finalizers` holds them
//! as `metadata.finalizers` does: the store empties them and drops
//! `kubernetes`, anyone else's goes through `namespaces/finalize` (PUT,
//! only `spec.finalizers`; the main object's update keeps them). No
//! deletecollection.

use serde_json::{Value, json};

use super::strategy::{
    Column, ColumnDoc, KindStrategy, NameRule, ServedSubresource, phase_or_terminating,
};
use crate::machinery::status::ApiError;
use crate::machinery::validation::label_key_errors;

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

    /// `kubernetes` is added to the client's `spec.finalizers`, last.
    fn prepare_create(&self, obj: &mut Value, _now: &str) {
        let mut finalizers = spec_finalizers(obj);
        if !finalizers.iter().any(|f| f == FINALIZER) {
            finalizers.push(FINALIZER.into());
        }
        if !obj["spec"].is_object() {
            obj["spec"] = json!({});
        }
        obj["spec"]["finalizers"] = finalizers.into();
        obj["status"] = json!({"phase": "Active"});
    }

    fn prepare_update(&self, old: &Value, new: &mut Value) {
        match old["spec"].get("finalizers") {
            Some(f) => {
                if !new["spec"].is_object() {
                    new["spec"] = json!({});
                }
                new["spec"]["finalizers"] = f.clone();
            }
            None => {
                if let Some(spec) = new["spec"].as_object_mut() {
                    spec.remove("finalizers");
                }
            }
        }
    }

    /// Each of `spec.finalizers` is a qualified name, or one of the
    /// standard ones (`ValidateFinalizerName`).
    fn validate(&self, obj: &Value) -> Result<(), ApiError> {
        for (i, f) in spec_finalizers(obj).iter().enumerate() {
            let mut errs = label_key_errors(f);
            if errs.is_empty()
                && !f.contains('/')
                && !matches!(f.as_str(), FINALIZER | "orphan" | "foregroundDeletion")
            {
                errs.push(
                    "name is neither a standard finalizer name nor is it fully qualified".into(),
                );
            }
            if let Some(e) = errs.first() {
                let name = obj["metadata"]["name"].as_str().unwrap_or_default();
                return Err(ApiError::invalid(
                    "Namespace",
                    name,
                    format!("spec.finalizers[{i}]: Invalid value: {f:?}: {e}"),
                ));
            }
        }
        Ok(())
    }

    fn subresources(&self) -> &'static [ServedSubresource] {
        &[ServedSubresource {
            name: "finalize",
            kind: None,
            verbs: &["update"],
        }]
    }

    /// `SetDefaults_Namespace`: the name as a label, on every write (the
    /// writer owns it, as it owns every default). An empty
    /// `spec.finalizers` is left out, as Go's `omitempty` writes it.
    fn default(&self, obj: &mut Value) {
        if let Some(spec) = obj["spec"].as_object_mut()
            && spec
                .get("finalizers")
                .is_some_and(|f| f.as_array().is_some_and(Vec::is_empty) || f.is_null())
        {
            spec.remove("finalizers");
        }
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

    fn held(&self, obj: &Value) -> bool {
        !spec_finalizers(obj).is_empty()
    }

    fn mark_terminating(&self, obj: &mut Value) {
        obj["status"]["phase"] = "Terminating".into();
        // kube's namespace deletion sets only the deletionTimestamp (its
        // REST Delete, not the generic store's graceful deletion).
        if let Some(m) = obj["metadata"].as_object_mut() {
            m.remove("deletionGracePeriodSeconds");
        }
    }

    fn columns(&self) -> &'static [Column] {
        &[Column {
            name: "Status",
            format: "",
            doc: ColumnDoc::Text("The status of the namespace"),
            cell: phase_or_terminating,
        }]
    }
}

/// A namespace's `spec.finalizers`.
fn spec_finalizers(ns: &Value) -> Vec<String> {
    ns["spec"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f.as_str().map(String::from))
        .collect()
}

/// Drop the finalizer that held `ns` for its objects (none are left), as
/// kube-controller-manager's namespace controller does through
/// `namespaces/finalize`.
pub fn emptied(ns: &mut Value) {
    let kept: Vec<String> = spec_finalizers(ns)
        .into_iter()
        .filter(|f| f != FINALIZER)
        .collect();
    if let Some(spec) = ns["spec"].as_object_mut() {
        if kept.is_empty() {
            spec.remove("finalizers");
        } else {
            spec.insert("finalizers".into(), kept.into());
        }
    }
}
