//! CustomResourceDefinitions (`apiextensions.k8s.io/v1`): valid only when
//! they say what to serve ([`Definition::parse`]), created with no names
//! accepted yet, as kube-apiserver answers a create before its naming
//! controller runs, then accepted by a status write of the server's own
//! (`crate::storage::crd`) and again on every update ([`accept`]:
//! conditions `NamesAccepted` and `Established`, accepted names, stored
//! versions). Serving what a CRD defines is `crate::storage::crd`'s, above
//! the resource table.

use std::sync::Arc;

use serde_json::{Value, json};

use super::strategy::KindStrategy;
use crate::machinery::status::ApiError;
use crate::schema::{FieldError, Path};

/// The CustomResourceDefinition kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct CustomResourceDefinition;

impl KindStrategy for CustomResourceDefinition {
    fn name(&self) -> &'static str {
        "CustomResourceDefinition"
    }

    fn validate(&self, obj: &Value) -> Result<(), ApiError> {
        Definition::parse(obj)?;
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        let message = match crate::conversion::errors(obj).as_slice() {
            [] => return Ok(()),
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        Err(ApiError::invalid(
            "CustomResourceDefinition.apiextensions.k8s.io",
            name,
            message,
        ))
    }

    fn default(&self, obj: &mut Value) {
        crate::conversion::default(obj);
        // `SetDefaults_CustomResourceDefinitionSpec`'s names.
        let names = &mut obj["spec"]["names"];
        if let Some(kind) = names["kind"].as_str().filter(|k| !k.is_empty()) {
            let (singular, list) = (kind.to_lowercase(), format!("{kind}List"));
            if let Some(n) = names.as_object_mut() {
                n.entry("singular").or_insert_with(|| singular.into());
                n.entry("listKind").or_insert_with(|| list.into());
            }
        }
    }

    /// Nothing accepted yet: the names and conditions come with the
    /// server's own status write right after ([`accept`]).
    fn prepare_create(&self, obj: &mut Value, _now: &str) {
        accept(obj, "");
        obj["status"]["acceptedNames"] = json!({"kind": "", "plural": ""});
        obj["status"]["conditions"] = Value::Null;
    }

    /// Accepted again, keeping the time it was first accepted.
    fn prepare_update(&self, old: &Value, new: &mut Value) {
        let now = old["status"]["conditions"][0]["lastTransitionTime"]
            .as_str()
            .unwrap_or_default();
        accept(new, now);
        // A storage version stays stored until a client removes it from
        // the status: the new one is added after the old ones.
        let mut stored: Vec<Value> = old["status"]["storedVersions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for v in new["status"]["storedVersions"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if !stored.contains(v) {
                stored.push(v.clone());
            }
        }
        new["status"]["storedVersions"] = Value::Array(stored);
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
    /// Its `selectableFields`, as field selectors name them (`spec.color`
    /// for the jsonPath `.spec.color`).
    pub selectable_fields: Vec<String>,
    /// Its `additionalPrinterColumns`, or the Age column kube-apiserver
    /// serves when it has none.
    pub printer_columns: Vec<PrinterColumn>,
    /// What every answer at a `deprecated` version warns: its
    /// `deprecationWarning`, or kube-apiserver's default.
    pub deprecation: Option<String>,
}

/// A column a custom resource's Tables print (`additionalPrinterColumns`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrinterColumn {
    /// The header.
    pub name: String,
    /// `string`, `integer`, `number`, `boolean` or `date`.
    pub type_: String,
    /// The OpenAPI format of its cells.
    pub format: String,
    /// What it shows: the CRD's description, else kube's words naming
    /// the path.
    pub description: String,
    /// 0, or more for what only `-o wide` shows.
    pub priority: i64,
    /// Where each object's cell is read (`.spec.color`).
    pub json_path: String,
}

/// kube-apiserver's warning for a deprecated version without one of its
/// own: `group/v1beta1 Kind is deprecated`, naming the newest served
/// version newer than it that is not deprecated, when there is one.
fn default_deprecation(group: &str, kind: &str, version: &str, versions: &[Value]) -> String {
    use crate::registry::versions::version_priority;
    let newer = versions
        .iter()
        .filter(|v| v["served"] == true && v["deprecated"] != true)
        .filter_map(|v| v["name"].as_str())
        .filter(|v| version_priority(v) > version_priority(version))
        .max_by_key(|v| version_priority(v));
    let mut msg = format!("{group}/{version} {kind} is deprecated");
    if let Some(newer) = newer {
        msg.push_str(&format!("; use {group}/{newer} {kind}"));
    }
    msg
}

/// A version's printer columns (`additionalPrinterColumns`), or kube's
/// default Age column.
fn printer_columns(columns: &Value) -> Vec<PrinterColumn> {
    let text = |c: &Value, k: &str| c[k].as_str().unwrap_or_default().to_string();
    let defined: Vec<PrinterColumn> = columns
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let json_path = text(c, "jsonPath");
            PrinterColumn {
                name: text(c, "name"),
                type_: text(c, "type"),
                format: text(c, "format"),
                description: Some(text(c, "description"))
                    .filter(|d| !d.is_empty())
                    .unwrap_or_else(|| {
                        format!(
                            "Custom resource definition column (in JSONPath format): {json_path}"
                        )
                    }),
                priority: c["priority"].as_i64().unwrap_or(0),
                json_path,
            }
        })
        .collect();
    if !defined.is_empty() {
        return defined;
    }
    let meta = "apimachinery.pkg.apis.meta.v1.ObjectMeta";
    vec![PrinterColumn {
        name: "Age".into(),
        type_: "date".into(),
        format: String::new(),
        description: crate::machinery::proto::doc(meta, "creationTimestamp")
            .unwrap_or_default()
            .into(),
        priority: 0,
        json_path: ".metadata.creationTimestamp".into(),
    }]
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
        let invalid =
            |m: String| ApiError::invalid("CustomResourceDefinition.apiextensions.k8s.io", name, m);
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
            let fields_path = Path::new("spec")
                .child("versions")
                .index(i)
                .child("selectableFields");
            let selectable_fields = selectable_fields(&v["selectableFields"], raw, &fields_path)
                .unwrap_or_else(|errs| {
                    schema_errors.extend(errs);
                    Vec::new()
                });
            defined.push(DefinedVersion {
                schema,
                name: vname.into(),
                served: v["served"] == true,
                status: v["subresources"]["status"].is_object(),
                scale: scale_paths(&v["subresources"]["scale"]),
                selectable_fields,
                printer_columns: printer_columns(&v["additionalPrinterColumns"]),
                deprecation: (v["deprecated"] == true).then(|| {
                    v["deprecationWarning"].as_str().map_or_else(
                        || default_deprecation(group, kind, vname, &versions),
                        String::from,
                    )
                }),
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

/// The most `selectableFields` a version may declare.
const MAX_SELECTABLE_FIELDS: usize = 8;

/// A version's `selectableFields` (at `path`) as field selectors name them,
/// validated as kube-apiserver validates them against the version's
/// `openAPIV3Schema`: each jsonPath a simple path (`.a.b`, no array
/// notation) to a field the schema declares (a map's key counts), of type
/// string, integer or boolean, not in metadata, at most once; at most 8.
fn selectable_fields(
    fields: &Value,
    schema: &Value,
    path: &Path,
) -> Result<Vec<String>, Vec<FieldError>> {
    let (mut out, mut errors) = (Vec::new(), Vec::new());
    let fields = fields.as_array().map_or(&[][..], Vec::as_slice);
    for (i, field) in fields.iter().enumerate() {
        let at = path.index(i).child("jsonPath");
        let json_path = field["jsonPath"].as_str().unwrap_or_default();
        if json_path.is_empty() {
            errors.push(FieldError::required(&at, ""));
            continue;
        }
        let invalid = |detail: String| FieldError::invalid(&at, json_path.into(), detail);
        let (segments, leaf) = match schema_field(json_path, schema) {
            Ok(found) => found,
            Err(e) => {
                errors.push(invalid(format!("is an invalid path: {e}")));
                continue;
            }
        };
        if segments.first().map(String::as_str) == Some("metadata") {
            errors.push(invalid("must not point to fields in metadata".into()));
        }
        if !matches!(
            leaf["type"].as_str(),
            Some("string" | "integer" | "boolean")
        ) {
            errors.push(invalid(
                "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed."
                    .into(),
            ));
        }
        let label = segments.join(".");
        if out.contains(&label) {
            errors.push(FieldError::duplicate(&at, json_path.into()));
        } else {
            out.push(label);
        }
    }
    if fields.len() > MAX_SELECTABLE_FIELDS {
        errors.push(FieldError::too_many(
            path,
            fields.len(),
            MAX_SELECTABLE_FIELDS as u64,
        ));
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// The field names along `json_path` (`.spec.color`) and the schema of the
/// field it reaches, or why it reaches none (kube's `ValidFieldPath`
/// without array notation, worded as it words it).
fn schema_field<'a>(
    json_path: &str,
    schema: &'a Value,
) -> Result<(Vec<String>, &'a Value), String> {
    let (mut names, mut at) = (Vec::new(), schema);
    let mut rest = json_path;
    while !rest.is_empty() {
        let token_end = |s: &str| s.find(['.', '[', ']']).unwrap_or(s.len());
        match rest.as_bytes()[0] {
            b'[' => return Err("array notation is not allowed".into()),
            b'.' => {
                rest = &rest[1..];
                let end = token_end(rest);
                if end == 0 {
                    return Err("unexpected end of JSON path".into());
                }
                let name = &rest[..end];
                rest = &rest[end..];
                at = match (at["properties"].as_object(), &at["additionalProperties"]) {
                    (Some(properties), _) => properties.get(name),
                    (None, additional) if additional.is_object() => Some(additional),
                    _ => None,
                }
                .ok_or("does not refer to a valid field")?;
                names.push(name.to_string());
            }
            _ => {
                let end = token_end(rest).max(1);
                return Err(format!("expected [ or . but got: {}", &rest[..end]));
            }
        }
    }
    Ok((names, at))
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

/// Whether `crd` has been accepted and established.
#[must_use]
pub fn established(crd: &Value) -> bool {
    crd["status"]["conditions"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c["type"] == "Established"))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deprecated_version_names_the_newest_served_one() {
        let versions = json!([
            {"name": "v1alpha1", "served": true, "deprecated": true},
            {"name": "v1beta1", "served": true},
            {"name": "v1", "served": true},
            {"name": "v2", "served": false},
        ]);
        let versions = versions.as_array().unwrap();
        assert_eq!(
            default_deprecation("g.io", "W", "v1alpha1", versions),
            "g.io/v1alpha1 W is deprecated; use g.io/v1 W"
        );
        assert_eq!(
            default_deprecation("g.io", "W", "v1", versions),
            "g.io/v1 W is deprecated"
        );
    }

    #[test]
    fn printer_columns_default_to_age() {
        let age = printer_columns(&Value::Null);
        assert_eq!(
            (age[0].name.as_str(), age[0].type_.as_str()),
            ("Age", "date")
        );
        let defined = printer_columns(&json!([{"name": "Color", "type": "string",
            "jsonPath": ".spec.color", "priority": 1}]));
        assert_eq!(
            defined[0].description,
            "Custom resource definition column (in JSONPath format): .spec.color"
        );
        assert_eq!(defined[0].priority, 1);
    }
}
