//! Per-kind rules: on create and update, status isolation, defaults (pods
//! start Pending, namespaces Active), name and label validation, and
//! CustomResourceDefinition acceptance (conditions Established and
//! NamesAccepted, the resources it serves); on delete ([`KindRules`]), pods'
//! grace period and namespaces' finalizer and phase.

use serde_json::{Value, json};

use crate::resources::{ResourceInfo, StorageKey};
use crate::status::ApiError;
use crate::store::Rules;
use crate::validation;

/// Which part of an object a write targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subresource {
    /// The object itself: status changes are ignored when a status subresource exists.
    Main,
    /// `/status`: only status changes.
    Status,
    /// `/scale`: an `autoscaling/v1` Scale onto the replicas (`handler::scale`).
    Scale,
    /// `pods/ephemeralcontainers`: only `spec.ephemeralContainers`, added to, never changed.
    EphemeralContainers,
    /// `certificatesigningrequests/approval`: only `status.conditions`.
    Approval,
}

impl Subresource {
    /// The subresource's name in a URL and in managedFields (`None` for the object).
    #[must_use]
    pub fn name(self) -> Option<&'static str> {
        match self {
            Subresource::Main => None,
            Subresource::Status => Some("status"),
            Subresource::Scale => Some("scale"),
            Subresource::EphemeralContainers => Some("ephemeralcontainers"),
            Subresource::Approval => Some("approval"),
        }
    }

    /// The subresource served under `name` that reads and writes the
    /// object (`None` for one that acts, or none at all).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "status" => Some(Subresource::Status),
            "scale" => Some(Subresource::Scale),
            "ephemeralcontainers" => Some(Subresource::EphemeralContainers),
            "approval" => Some(Subresource::Approval),
            _ => None,
        }
    }

    /// The one field a write to this subresource may change, as a JSON pointer.
    fn owned_field(self) -> &'static str {
        match self {
            Subresource::EphemeralContainers => "/spec/ephemeralContainers",
            Subresource::Approval => "/status/conditions",
            _ => "/status",
        }
    }
}

/// Set (`Some`) or remove (`None`) the field at JSON pointer `pointer`
/// (no escapes), making the objects on the way to set it.
pub(crate) fn put_field(obj: &mut Value, pointer: &str, value: Option<Value>) {
    let (parent, field) = pointer.rsplit_once('/').unwrap_or(("", pointer));
    match value {
        Some(v) => {
            let mut at = obj;
            for k in parent.split('/').filter(|k| !k.is_empty()) {
                if !at.is_object() {
                    *at = json!({});
                }
                at = &mut at[k];
            }
            at[field] = v;
        }
        None => {
            if let Some(m) = obj.pointer_mut(parent).and_then(Value::as_object_mut) {
                m.remove(field);
            }
        }
    }
}

/// What kube-apiserver checks of a write to a subresource beyond the
/// object's own validation (422): ephemeral containers are only added
/// (each with a name and an image, names unique in the pod), never changed
/// or removed; a CSR's approval conditions are `Approved`, `Denied` or
/// `Failed`, and not both approved and denied.
pub fn check_subresource(
    info: &ResourceInfo,
    sub: Subresource,
    name: &str,
    old: &Value,
    new: &Value,
) -> Result<(), ApiError> {
    let invalid = |msg: String| ApiError::invalid(&info.kind, name, msg);
    match sub {
        Subresource::EphemeralContainers => {
            let list = |v: &Value| {
                v["spec"]["ephemeralContainers"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            };
            let (before, after) = (list(old), list(new));
            for c in &before {
                match after.iter().find(|n| n["name"] == c["name"]) {
                    None => {
                        return Err(invalid(format!(
                            "spec.ephemeralContainers: Forbidden: existing ephemeral containers {} may not be removed",
                            c["name"]
                        )));
                    }
                    Some(n) if n != c => {
                        return Err(invalid(format!(
                            "spec.ephemeralContainers: Forbidden: existing ephemeral containers {} may not be changed",
                            c["name"]
                        )));
                    }
                    Some(_) => {}
                }
            }
            let mut names: Vec<&str> = old["spec"]["containers"]
                .as_array()
                .into_iter()
                .chain(old["spec"]["initContainers"].as_array())
                .flatten()
                .filter_map(|c| c["name"].as_str())
                .collect();
            for (i, c) in after.iter().enumerate() {
                for field in ["name", "image"] {
                    if c[field].as_str().is_none_or(str::is_empty) {
                        return Err(invalid(format!(
                            "spec.ephemeralContainers[{i}].{field}: Required value"
                        )));
                    }
                }
                let n = c["name"].as_str().unwrap_or_default();
                if names.contains(&n) {
                    return Err(invalid(format!(
                        "spec.ephemeralContainers[{i}].name: Duplicate value: \"{n}\""
                    )));
                }
                names.push(n);
            }
            Ok(())
        }
        Subresource::Approval => {
            let types: Vec<&str> = new["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| c["type"].as_str().unwrap_or_default())
                .collect();
            if let Some(t) = types
                .iter()
                .find(|t| !matches!(**t, "Approved" | "Denied" | "Failed"))
            {
                return Err(invalid(format!(
                    "status.conditions[].type: Unsupported value: \"{t}\": supported values: \"Approved\", \"Denied\", \"Failed\""
                )));
            }
            if types.contains(&"Approved") && types.contains(&"Denied") {
                return Err(invalid(
                    "status.conditions: Invalid value: Approved and Denied conditions are mutually exclusive".to_string(),
                ));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Validate an object's name and labels for its kind (422 on failure).
pub fn validate(info: &ResourceInfo, obj: &Value) -> Result<(), ApiError> {
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    let res = if info.group.is_empty() && matches!(info.plural.as_str(), "namespaces" | "services")
    {
        validation::validate_dns1123_label(name)
    } else {
        validation::validate_dns1123_subdomain(name)
    };
    res.map_err(|e| {
        ApiError::invalid(
            &info.kind,
            name,
            format!("metadata.name: Invalid value: \"{name}\": {e}"),
        )
    })?;
    match &obj["metadata"]["labels"] {
        Value::Null => {}
        Value::Object(m) => validation::validate_labels(m).map_err(|e| {
            ApiError::invalid(
                &info.kind,
                name,
                format!("metadata.labels: Invalid value: {e}"),
            )
        })?,
        _ => {
            return Err(ApiError::bad_request(
                "metadata.labels must be a map of string keys to string values",
            ));
        }
    }
    if let Some(a) = obj["metadata"].get("annotations").filter(|a| !a.is_null()) {
        let ok = a
            .as_object()
            .is_some_and(|m| m.values().all(Value::is_string));
        if !ok {
            return Err(ApiError::bad_request(
                "metadata.annotations must be a map of string keys to string values",
            ));
        }
    }
    if let Some(f) = obj["metadata"].get("finalizers").filter(|a| !a.is_null()) {
        let ok = f.as_array().is_some_and(|a| a.iter().all(Value::is_string));
        if !ok {
            return Err(ApiError::bad_request(
                "metadata.finalizers must be a list of strings",
            ));
        }
    }
    // At most one controller (apimachinery's ValidateOwnerReferences).
    let controllers: Vec<String> = obj["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["controller"] == true)
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            format!("{}/{}", s("kind"), s("name"))
        })
        .collect();
    if let [first, second, ..] = controllers.as_slice() {
        return Err(ApiError::invalid(
            &info.kind,
            name,
            format!(
                "metadata.ownerReferences: Invalid value: \"{first}, {second}\": Only one reference can have Controller set to true. Found \"true\" in references for {first} and {second}"
            ),
        ));
    }
    if crate::crd::is_crd(info) {
        crate::crd::resources(obj).map(|_| ())?;
    }
    Ok(())
}

/// Defaults and resets applied to a new object before it is stored.
pub fn prepare_create(info: &ResourceInfo, obj: &mut Value, now: &str) {
    let core = info.group.is_empty();
    if info.status_subresource
        && let Some(m) = obj.as_object_mut()
    {
        m.remove("status");
    }
    if core && info.plural == "pods" {
        obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
    }
    if core && info.plural == "namespaces" {
        obj["spec"] = json!({"finalizers": ["kubernetes"]});
        obj["status"] = json!({"phase": "Active"});
        let name = obj["metadata"]["name"].clone();
        let labels = obj["metadata"]
            .as_object_mut()
            .map(|m| m.entry("labels").or_insert_with(|| json!({})));
        if let Some(l) = labels.and_then(Value::as_object_mut) {
            l.insert("kubernetes.io/metadata.name".into(), name);
        }
    }
    if crate::crd::is_crd(info) {
        crate::crd::accept(obj, now);
    }
    if let Some(m) = obj["metadata"].as_object_mut() {
        m.remove("selfLink");
    }
    crate::defaults::apply(info, obj);
}

/// Build the stored object of an update from the old object and the
/// client's `new` one: a write to the object keeps the old status (when a
/// status subresource exists), a write to `/status` keeps everything but
/// status (`ephemeralcontainers`, `approval`: everything but their field).
#[must_use]
pub fn prepare_update(info: &ResourceInfo, sub: Subresource, old: &Value, mut new: Value) -> Value {
    match sub {
        Subresource::Main | Subresource::Scale => {
            if info.status_subresource {
                match old.get("status") {
                    Some(s) => new["status"] = s.clone(),
                    None => {
                        if let Some(m) = new.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
            }
            if crate::crd::is_crd(info) {
                let now = old["status"]["conditions"][0]["lastTransitionTime"]
                    .as_str()
                    .unwrap_or_default();
                crate::crd::accept(&mut new, now);
            }
            crate::defaults::apply(info, &mut new);
            new
        }
        Subresource::Status | Subresource::EphemeralContainers | Subresource::Approval => {
            let mut out = old.clone();
            let field = sub.owned_field();
            put_field(&mut out, field, new.pointer(field).cloned());
            // The rv the client sent stays a precondition; managedFields follow the write.
            out["metadata"]["resourceVersion"] = new["metadata"]["resourceVersion"].clone();
            if let Some(mf) = new["metadata"].get("managedFields") {
                out["metadata"]["managedFields"] = mf.clone();
            }
            out
        }
    }
}

/// The per-kind rules of a delete, which the store asks for
/// ([`crate::store::Rules`]): pods' grace period, and namespaces'
/// `kubernetes` finalizer and Terminating phase.
#[derive(Debug, Clone, Copy, Default)]
pub struct KindRules;

/// The resources whose DELETE answers the removed object itself, as
/// kube-apiserver's registries set `ReturnDeletedObject`: pods, services,
/// service accounts, persistent volumes and their claims. Every other
/// removal answers a Status; an object that lingers (finalizers, a grace
/// period) always comes back as the object.
pub fn returns_deleted_object(info: &ResourceInfo) -> bool {
    info.group.is_empty()
        && matches!(
            info.plural.as_str(),
            "pods"
                | "services"
                | "serviceaccounts"
                | "persistentvolumes"
                | "persistentvolumeclaims"
        )
}

/// The finalizer that holds a namespace until its objects are gone.
const NAMESPACE_FINALIZER: &str = "kubernetes";

fn is_core(key: &StorageKey, plural: &str) -> bool {
    key.group.is_empty() && key.plural == plural
}

impl Rules for KindRules {
    /// Only pods that are scheduled and not finished have a grace period:
    /// the request's, else the pod's `terminationGracePeriodSeconds`, else
    /// 30 s; everything else has none.
    fn grace(&self, key: &StorageKey, obj: &Value, requested: Option<i64>) -> i64 {
        if !is_core(key, "pods") {
            return 0;
        }
        let scheduled = obj["spec"]["nodeName"]
            .as_str()
            .is_some_and(|n| !n.is_empty());
        let finished = matches!(
            obj["status"]["phase"].as_str(),
            Some("Succeeded" | "Failed")
        );
        if !scheduled || finished {
            return 0;
        }
        requested
            .or_else(|| obj["spec"]["terminationGracePeriodSeconds"].as_i64())
            .unwrap_or(30)
            .max(0)
    }

    fn delete_finalizers(&self, key: &StorageKey) -> &'static [&'static str] {
        if is_core(key, "namespaces") {
            &[NAMESPACE_FINALIZER]
        } else {
            &[]
        }
    }

    fn mark_terminating(&self, key: &StorageKey, obj: &mut Value) {
        if is_core(key, "namespaces") {
            obj["status"]["phase"] = "Terminating".into();
        }
    }

    fn namespace_emptied(&self, ns: &mut Value) {
        let kept: Vec<Value> = ns["metadata"]["finalizers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|f| f.as_str() != Some(NAMESPACE_FINALIZER))
            .cloned()
            .collect();
        ns["metadata"]["finalizers"] = kept.into();
    }
}

/// The resources a CustomResourceDefinition serves.
///
/// # Errors
/// A CRD that does not say what to serve: 422, as [`crate::crd::resources`].
#[deprecated(since = "0.2.0", note = "moved to `crd::resources`")]
pub fn crd_resources(crd: &Value) -> Result<Vec<ResourceInfo>, ApiError> {
    crate::crd::resources(crd)
}
