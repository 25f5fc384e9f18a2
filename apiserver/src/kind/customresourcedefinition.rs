//! CustomResourceDefinitions (`apiextensions.k8s.io/v1`): valid only when
//! they say what to serve ([`Definition::parse`]), accepted on every
//! write ([`accept`]: conditions `NamesAccepted` and `Established`,
//! accepted names, stored versions). Serving what a CRD defines is
//! `crate::crd`'s, above the resource table.

use std::sync::Arc;

use serde_json::{Value, json};

use super::strategy::KindStrategy;
use crate::schema::{FieldError, Path};
use crate::status::ApiError;

/// The CustomResourceDefinition kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct CustomResourceDefinition;

impl KindStrategy for CustomResourceDefinition {
    fn name(&self) -> &'static str {
        "CustomResourceDefinition"
    }

    fn validate(&self, obj: &Value) -> Result<(), ApiError> {
        Definition::parse(obj).map(|_| ())
    }

    fn prepare_create(&self, obj: &mut Value, now: &str) {
        accept(obj, now);
    }

    /// Accepted again, keeping the time it was first accepted.
    fn prepare_update(&self, old: &Value, new: &mut Value) {
        let now = old["status"]["conditions"][0]["lastTransitionTime"]
            .as_str()
            .unwrap_or_default();
        accept(new, now);
    }
}

/// What a valid CRD defines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Definition {
    /// `spec.group`.
    pub group: String,
    /// `spec.names.plural`.
    pub plural: String,
    /// `spec.names.singular`, else the kind in lower case.
    pub singular: String,
    /// `spec.names.kind`.
    pub kind: String,
    /// `spec.names.listKind`, else the kind and `List`.
    pub list_kind: String,
    /// `spec.scope` is `Namespaced`.
    pub namespaced: bool,
    /// `spec.names.shortNames`.
    pub short_names: Vec<String>,
    /// `spec.names.categories`.
    pub categories: Vec<String>,
    /// `spec.versions`, in order.
    pub versions: Vec<DefinedVersion>,
}

/// One of a CRD's versions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefinedVersion {
    /// Its structural schema, compiled.
    pub schema: Arc<crate::schema::VersionSchema>,
    /// Its name, e.g. `v1`.
    pub name: String,
    /// Whether it is served.
    pub served: bool,
    /// Whether it has a `status` subresource.
    pub status: bool,
    /// Its `scale` subresource's paths (spec replicas, status replicas,
    /// label selector — `""` when not given), when it declares one with
    /// its two required paths.
    pub scale: Option<[String; 3]>,
}

impl Definition {
    /// What `crd` defines, or kube-apiserver's 422 for a CRD that does
    /// not say what to serve.
    ///
    /// # Errors
    /// The group, names, scope or versions are missing or wrong.
    pub fn parse(crd: &Value) -> Result<Definition, ApiError> {
        let name = crd["metadata"]["name"].as_str().unwrap_or_default();
        let spec = &crd["spec"];
        let invalid = |m: String| ApiError::invalid("CustomResourceDefinition", name, m);
        let group = spec["group"].as_str().unwrap_or_default();
        let names = &spec["names"];
        let plural = names["plural"].as_str().unwrap_or_default();
        let kind = names["kind"].as_str().unwrap_or_default();
        if group.is_empty() || !group.contains('.') {
            return Err(invalid(format!(
                "spec.group: Invalid value: \"{group}\": should be a domain with at least one dot"
            )));
        }
        if plural.is_empty() || kind.is_empty() {
            return Err(invalid(
                "spec.names.plural and spec.names.kind: Required value".into(),
            ));
        }
        if name != format!("{plural}.{group}") {
            return Err(invalid(format!(
                "metadata.name: Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"
            )));
        }
        let namespaced = match spec["scope"].as_str() {
            Some("Namespaced") => true,
            Some("Cluster") => false,
            other => {
                return Err(invalid(format!(
                    "spec.scope: Unsupported value: {}: supported values: \"Cluster\", \"Namespaced\"",
                    other
                        .map(|s| format!("\"{s}\""))
                        .unwrap_or_else(|| "\"\"".into())
                )));
            }
        };
        let versions = spec["versions"].as_array().cloned().unwrap_or_default();
        if versions.is_empty() || versions.iter().filter(|v| v["storage"] == true).count() != 1 {
            return Err(invalid(
                "spec.versions: Invalid value: must have exactly one version marked as storage version"
                    .into(),
            ));
        }
        let strs = |v: &Value| -> Vec<String> {
            v.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut defined = Vec::new();
        let mut schema_errors = Vec::new();
        for (i, v) in versions.iter().enumerate() {
            let Some(vname) = v["name"].as_str().filter(|s| !s.is_empty()) else {
                return Err(invalid("spec.versions[].name: Required value".into()));
            };
            let path = Path::new("spec")
                .child("versions")
                .index(i)
                .child("schema")
                .child("openAPIV3Schema");
            let raw = &v["schema"]["openAPIV3Schema"];
            let schema = if raw.is_null() {
                // apiextensions.k8s.io/v1 requires a schema for every version.
                schema_errors.push(FieldError::required(&path, ""));
                Arc::default()
            } else {
                match crate::schema::compile(raw, &path) {
                    Ok(mut s) => {
                        s.since = crd["metadata"]["resourceVersion"]
                            .as_str()
                            .and_then(|rv| rv.parse().ok())
                            .unwrap_or(0);
                        Arc::new(s)
                    }
                    Err(errs) => {
                        schema_errors.extend(errs);
                        Arc::default()
                    }
                }
            };
            defined.push(DefinedVersion {
                schema,
                name: vname.into(),
                served: v["served"] == true,
                status: v["subresources"]["status"].is_object(),
                scale: scale_paths(&v["subresources"]["scale"]),
            });
        }
        if !schema_errors.is_empty() {
            return Err(crate::schema::to_api_error(
                "CustomResourceDefinition.apiextensions.k8s.io",
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                name,
                &schema_errors,
            ));
        }
        Ok(Definition {
            group: group.into(),
            plural: plural.into(),
            singular: names["singular"]
                .as_str()
                .map(String::from)
                .unwrap_or_else(|| kind.to_lowercase()),
            kind: kind.into(),
            list_kind: names["listKind"]
                .as_str()
                .map(String::from)
                .unwrap_or_else(|| format!("{kind}List")),
            namespaced,
            short_names: strs(&names["shortNames"]),
            categories: strs(&names["categories"]),
            versions: defined,
        })
    }
}

/// A version's `subresources.scale`, when it declares one with its two
/// required paths.
fn scale_paths(scale: &Value) -> Option<[String; 3]> {
    let path = |k: &str| {
        scale[k]
            .as_str()
            .filter(|p| p.starts_with('.'))
            .map(String::from)
    };
    Some([
        path("specReplicasPath")?,
        path("statusReplicasPath")?,
        path("labelSelectorPath").unwrap_or_default(),
    ])
}

/// Accept a CRD as the real server does at once when its names do not
/// conflict: `acceptedNames`, `storedVersions` and the `NamesAccepted` and
/// `Established` conditions (at `now`).
pub fn accept(crd: &mut Value, now: &str) {
    let names = crd["spec"]["names"].clone();
    let mut accepted = names.clone();
    if accepted["singular"].is_null() {
        accepted["singular"] = names["kind"]
            .as_str()
            .unwrap_or_default()
            .to_lowercase()
            .into();
    }
    if accepted["listKind"].is_null() {
        accepted["listKind"] = format!("{}List", names["kind"].as_str().unwrap_or_default()).into();
    }
    let stored: Vec<Value> = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["storage"] == true)
        .map(|v| v["name"].clone())
        .collect();
    let cond = |t: &str, reason: &str, msg: &str| {
        json!({"type": t, "status": "True", "reason": reason, "message": msg,
               "lastTransitionTime": now})
    };
    crd["status"] = json!({
        "acceptedNames": accepted,
        "storedVersions": stored,
        "conditions": [
            cond("NamesAccepted", "NoConflicts", "no conflicts found"),
            cond("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
    });
}
