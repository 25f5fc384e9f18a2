//! The generic write path every kind shares, as kube-apiserver's
//! `rest.BeforeCreate` and `rest.BeforeUpdate` are: status isolation,
//! `selfLink` dropped, name, label, annotation, finalizer and
//! owner-reference validation — each calling the kind's own
//! [`KindStrategy`](crate::registry::kind::KindStrategy) (its
//! [`ResourceInfo::strategy`]) where the kind decides: its name rule,
//! validation, create and update preparation, defaults and subresource
//! checks. [`KindRules`] is what the store is handed: each collection's
//! strategy, the bootstrap objects, what an emptied namespace drops.

use serde_json::{Value, json};

use crate::machinery::status::ApiError;
use crate::machinery::validation;
use crate::registry::fields;
pub use crate::registry::kind::Subresource;
use crate::registry::kind::{NameRule, Strategy, field_at, invalid, namespace_emptied};
use crate::registry::resources::{ResourceInfo, StorageKey, builtin_resources};
use crate::schema::{FieldError, FieldErrorKind};
use crate::storage::store::Rules;

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
/// object's own validation (422): the kind's
/// [`check_subresource`](crate::registry::kind::KindStrategy::check_subresource)
/// (ephemeral containers are only added, never changed or removed; a
/// CSR's approval conditions are `Approved`, `Denied` or `Failed`, and
/// not both approved and denied).
pub fn check_subresource(
    info: &ResourceInfo,
    sub: Subresource,
    name: &str,
    old: &Value,
    new: &Value,
) -> Result<(), ApiError> {
    let check = |new: &Value| {
        info.strategy
            .check_subresource(sub, old, new)
            .map_err(|msg| ApiError::invalid(&info.group_kind(), name, msg))
    };
    if matches!(
        sub,
        Subresource::Main | Subresource::Status | Subresource::Scale
    ) {
        return check(new);
    }
    // Compared as stored: in Go's form, its plain structs written.
    let mut new = new.clone();
    fields::write_plain_structs(info, &mut new);
    check(&new)
}

/// Validate an object's name and labels for its kind (422 on failure).
pub fn validate(info: &ResourceInfo, obj: &Value) -> Result<(), ApiError> {
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    let res = match info.strategy.name_rule() {
        NameRule::Label => validation::validate_dns1123_label(name).map_err(|e| e.to_string()),
        NameRule::Subdomain => {
            validation::validate_dns1123_subdomain(name).map_err(|e| e.to_string())
        }
        NameRule::PathSegment => match name {
            "." | ".." => Err(format!("may not be '{name}'")),
            _ => match ["/", "%"].into_iter().find(|c| name.contains(c)) {
                Some(c) => Err(format!("may not contain '{c}'")),
                None => Ok(()),
            },
        },
    };
    res.map_err(|e| {
        ApiError::invalid(
            &info.group_kind(),
            name,
            format!("metadata.name: Invalid value: \"{name}\": {e}"),
        )
    })?;
    match &obj["metadata"]["labels"] {
        Value::Null => {}
        Value::Object(m) if validation::validate_labels(m).is_ok() => {}
        Value::Object(m) => {
            // Every bad label, as kube-apiserver lists them.
            let errs = m
                .iter()
                .filter_map(|(k, v)| {
                    let one = serde_json::Map::from_iter([(k.clone(), v.clone())]);
                    validation::validate_labels(&one)
                        .err()
                        .map(|e| e.to_string())
                })
                .collect();
            invalid(&info.group_kind(), obj, errs)?;
        }
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
        let names: Vec<&str> = f
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        invalid(&info.group_kind(), obj, finalizer_errors(info, &names))?;
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
            &info.group_kind(),
            name,
            format!(
                "metadata.ownerReferences: Invalid value: \"{first}, {second}\": Only one reference can have Controller set to true. Found \"true\" in references for {first} and {second}"
            ),
        ));
    }
    info.strategy.validate(obj)
}

/// What kube says of an object's finalizers: each a qualified name, not
/// both `orphan` and `foregroundDeletion` (apimachinery's
/// `ValidateFinalizers`, for every object); and where the group's
/// validation uses `pkg/apis/core/validation`'s `ValidateObjectMeta` (most
/// built-in groups), a name without a `/` one of the standard three.
fn finalizer_errors(info: &ResourceInfo, names: &[&str]) -> Vec<String> {
    const STANDARD: [&str; 3] = ["kubernetes", "orphan", "foregroundDeletion"];
    const CORE_META_GROUPS: [&str; 16] = [
        "",
        "apps",
        "autoscaling",
        "batch",
        "certificates.k8s.io",
        "discovery.k8s.io",
        "events.k8s.io",
        "flowcontrol.apiserver.k8s.io",
        "internal.apiserver.k8s.io",
        "networking.k8s.io",
        "node.k8s.io",
        "rbac.authorization.k8s.io",
        "resource.k8s.io",
        "scheduling.k8s.io",
        "storage.k8s.io",
        "storagemigration.k8s.io",
    ];
    let mut errs: Vec<String> = names
        .iter()
        .flat_map(|f| {
            validation::label_key_errors(f)
                .into_iter()
                .map(move |m| format!("metadata.finalizers: Invalid value: {f:?}: {m}"))
        })
        .collect();
    if names.contains(&"orphan") && names.contains(&"foregroundDeletion") {
        let list: Vec<String> = names.iter().map(|f| format!("{f:?}")).collect();
        errs.push(format!(
            "metadata.finalizers: Invalid value: []string{{{}}}: finalizer orphan and foregroundDeletion cannot be both set",
            list.join(", ")
        ));
    }
    if info.builtin && CORE_META_GROUPS.contains(&info.group.as_str()) {
        errs.extend(
            names
                .iter()
                .enumerate()
                .filter(|(_, f)| !f.contains('/') && !STANDARD.contains(f))
                .map(|(i, f)| {
                    format!(
                        "metadata.finalizers[{i}]: Invalid value: {f:?}: name is neither a standard finalizer name nor is it fully qualified"
                    )
                }),
        );
    }
    errs
}

/// Defaults and resets applied to a new object as it is decoded, before
/// its `managedFields` are recorded: the writer owns what defaulting set.
/// [`finish_create`] comes after.
pub fn prepare_create(info: &ResourceInfo, obj: &mut Value) {
    if info.status_subresource
        && !info.strategy.status_on_create()
        && let Some(m) = obj.as_object_mut()
    {
        m.remove("status");
    }
    if let Some(m) = obj["metadata"].as_object_mut() {
        m.remove("selfLink");
    }
    info.strategy.default(obj);
    fields::write_plain_structs(info, obj);
}

/// What kube-apiserver's admission plugins and its strategy's
/// `PrepareForCreate` set on a new object after its `managedFields` are
/// recorded (nobody owns them): a pod's status and priority, a
/// namespace's finalizer.
pub fn finish_create(info: &ResourceInfo, obj: &mut Value, now: &str) {
    info.strategy.prepare_create(obj, now);
    fields::write_plain_structs(info, obj);
}

/// A custom resource's schema pass over the object a write is about to
/// store ([`crate::schema`]): defaults filled, then validated against the
/// schema (422 naming every failing field, as kube-apiserver words it;
/// `old` is the stored object of an update, for ratcheting and transition
/// rules). Unknown fields were pruned as the request was decoded
/// ([`crate::registry::fields`], which every write path calls before this).
/// Built-ins have no schema: nothing happens.
///
/// # Errors
/// The object does not validate against its schema.
pub fn admit(info: &ResourceInfo, old: Option<&Value>, obj: &mut Value) -> Result<(), ApiError> {
    let Some(schema) = &info.schema else {
        return Ok(());
    };
    schema.default_changed(obj, old);
    let scale = info
        .scale
        .as_ref()
        .map_or_else(Vec::new, |s| scale_errors(s, obj));
    let errs = schema.validate_between(obj, old, scale);
    if errs.is_empty() {
        return Ok(());
    }
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    Err(crate::schema::to_api_error(
        &info.group_kind(),
        &info.group,
        &info.kind,
        name,
        &errs,
    ))
}

/// What kube-apiserver says of a custom resource's `/scale` paths on every
/// write: each replicas field, when present, an int64 in 0..=2^31-1 (its
/// error named by the path as the CRD wrote it).
fn scale_errors(scale: &crate::registry::resources::ScalePaths, obj: &Value) -> Vec<FieldError> {
    [&scale.spec_replicas, &scale.status_replicas]
        .into_iter()
        .filter_map(|path| {
            let at = path.trim_start_matches('.');
            let v = Some(field_at(obj, at)).filter(|v| !v.is_null())?;
            let (value, detail) = match v.as_i64() {
                Some(n) if n < 0 => (n, "should be a non-negative integer".to_string()),
                Some(n) if n > i64::from(i32::MAX) => {
                    (n, format!("should be less than or equal to {}", i32::MAX))
                }
                Some(_) => return None,
                None => {
                    let (shown, ty) = match v {
                        Value::String(s) => (s.clone(), "string"),
                        Value::Bool(b) => (b.to_string(), "bool"),
                        Value::Number(n) => (n.to_string(), "float64"),
                        Value::Array(_) => (v.to_string(), "[]interface {}"),
                        _ => (v.to_string(), "map[string]interface {}"),
                    };
                    (
                        0,
                        format!(
                            ".{at} accessor error: {shown} is of the type {ty}, expected int64"
                        ),
                    )
                }
            };
            Some(FieldError {
                kind: FieldErrorKind::Invalid,
                path: path.clone(),
                value: Some(value.into()),
                detail,
            })
        })
        .collect()
}

/// Build the stored object of an update from the old object and the
/// client's `new` one: a write to the object keeps the old status (when a
/// status subresource exists), a write to `/status` keeps everything but
/// status and, for a built-in kind, the metadata its status strategy lets
/// through (`registry::kind::status_metadata`: labels, annotations,
/// finalizers, owner references for most);
/// `ephemeralcontainers`, `approval`: everything but their field;
/// `finalize`: everything but status.
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
            info.strategy.prepare_update(old, &mut new);
            info.strategy.default(&mut new);
            fields::write_plain_structs(info, &mut new);
            new
        }
        // `namespaces/finalize`: the whole object but its status, as the
        // client sent it (spec.finalizers too, which an update keeps).
        Subresource::Finalize => {
            if let Some(s) = old.get("status") {
                new["status"] = s.clone();
            }
            info.strategy.default(&mut new);
            fields::write_plain_structs(info, &mut new);
            new
        }
        Subresource::Status | Subresource::EphemeralContainers | Subresource::Approval => {
            let mut out = old.clone();
            let field = sub.owned_field();
            put_field(&mut out, field, new.pointer(field).cloned());
            if sub == Subresource::Status
                && info.builtin
                && let Some(meta) = out["metadata"].as_object_mut()
            {
                for f in crate::registry::kind::status_metadata(&info.group, &info.plural) {
                    match new["metadata"].get(*f) {
                        Some(v) => meta.insert((*f).to_string(), v.clone()),
                        None => meta.remove(*f),
                    };
                }
            }
            // The rv the client sent stays a precondition; managedFields follow the write.
            out["metadata"]["resourceVersion"] = new["metadata"]["resourceVersion"].clone();
            if let Some(mf) = new["metadata"].get("managedFields") {
                out["metadata"]["managedFields"] = mf.clone();
            }
            fields::write_plain_structs(info, &mut out);
            out
        }
    }
}

/// What the store is handed for the cluster as a whole
/// ([`crate::storage::store::Rules`]): the objects a fresh cluster holds, and the
/// namespace finalizer dropped once a namespace is empty. Each kind's
/// delete behaviour (pods' grace period, namespaces' finalizer and
/// Terminating phase) is its own strategy's.
#[derive(Debug, Clone, Copy, Default)]
pub struct KindRules;

/// Whether a DELETE that removes the object answers the object itself,
/// as kube-apiserver's registries set `ReturnDeletedObject`: pods,
/// services, service accounts, persistent volumes and their claims
/// ([`KindStrategy::returns_deleted_object`](crate::registry::kind::KindStrategy::returns_deleted_object)).
/// Every other removal answers a Status; an object that lingers
/// (finalizers, a grace period) always comes back as the object.
pub fn returns_deleted_object(info: &ResourceInfo) -> bool {
    info.strategy.returns_deleted_object()
}

impl Rules for KindRules {
    /// Built-in collections follow their kind's strategy; custom resources
    /// the generic one.
    fn strategy(&self, key: &StorageKey) -> Strategy {
        crate::registry::kind::builtin(&key.group, &key.plural)
    }

    fn namespace_emptied(&self, ns: &mut Value) {
        namespace_emptied(ns);
    }

    fn bootstrap(&self) -> Vec<(ResourceInfo, Value)> {
        let builtins = builtin_resources();
        crate::registry::bootstrap::objects()
            .into_iter()
            .map(|obj| {
                let info = builtins
                    .iter()
                    .find(|r| {
                        r.is_api_version(obj["apiVersion"].as_str().unwrap_or(""))
                            && r.kind == obj["kind"]
                    })
                    .expect("bootstrap kinds are built in")
                    .clone();
                (info, obj)
            })
            .collect()
    }

    /// kube-apiserver's ComponentStatuses, as a healthy cluster's read:
    /// `scheduler`, `controller-manager` and `etcd-0`, each Healthy.
    fn computed_objects(&self) -> Vec<(ResourceInfo, Value)> {
        let info = builtin_resources()
            .into_iter()
            .find(|r| r.group.is_empty() && r.plural == "componentstatuses")
            .expect("componentstatuses are built in");
        ["scheduler", "controller-manager", "etcd-0"]
            .into_iter()
            .map(|name| {
                let status = json!({"apiVersion": "v1", "kind": "ComponentStatus",
                    "metadata": {"name": name},
                    "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}]});
                (info.clone(), status)
            })
            .collect()
    }
}

/// [`KindRules`] and what kube-controller-manager's root-CA publisher
/// puts in every namespace: the ConfigMap `kube-root-ca.crt` holding the
/// server's CA (`ca.crt`), in the four initial namespaces and in each new
/// one as it is created. What ward-apiserver's servers are handed.
///
/// Unlike the publisher, nothing puts the ConfigMap back if it is deleted
/// or changed.
#[derive(Debug, Clone)]
pub struct ClusterRules {
    configmaps: ResourceInfo,
    ca_pem: std::sync::Arc<str>,
}

/// The name of the ConfigMap every namespace holds with the CA.
pub const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";

impl ClusterRules {
    /// [`KindRules`], and every namespace's `kube-root-ca.crt` holding
    /// `ca_pem`.
    #[must_use]
    pub fn new(ca_pem: &str) -> Self {
        let configmaps = builtin_resources()
            .into_iter()
            .find(|r| r.group.is_empty() && r.plural == "configmaps")
            .expect("configmaps are built in");
        ClusterRules {
            configmaps,
            ca_pem: ca_pem.into(),
        }
    }
}

impl Rules for ClusterRules {
    fn strategy(&self, key: &StorageKey) -> Strategy {
        KindRules.strategy(key)
    }

    fn namespace_emptied(&self, ns: &mut Value) {
        KindRules.namespace_emptied(ns);
    }

    fn bootstrap(&self) -> Vec<(ResourceInfo, Value)> {
        KindRules.bootstrap()
    }

    fn computed_objects(&self) -> Vec<(ResourceInfo, Value)> {
        KindRules.computed_objects()
    }

    fn namespace_objects(&self, namespace: &str) -> Vec<(ResourceInfo, Value)> {
        let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": ROOT_CA_CONFIGMAP, "namespace": namespace,
                "annotations": {"kubernetes.io/description": "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."}},
            "data": {"ca.crt": &*self.ca_pem}});
        vec![(self.configmaps.clone(), configmap)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(group: &str, plural: &str) -> ResourceInfo {
        builtin_resources()
            .into_iter()
            .find(|r| r.group == group && r.plural == plural)
            .unwrap()
    }

    /// Finalizer names as kube validates them: qualified everywhere, the
    /// standard three or prefixed where the group uses core's validation.
    #[test]
    fn finalizer_names_are_checked_as_kube_checks_them() {
        let cm = |fs: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "finalizers": fs}});
        let cms = info("", "configmaps");
        assert!(validate(&cms, &cm(json!(["kubernetes", "orphan", "example.com/x"]))).is_ok());
        let e = validate(&cms, &cm(json!(["x/y", "plain"]))).unwrap_err();
        assert_eq!(
            e.message,
            "ConfigMap \"a\" is invalid: metadata.finalizers[1]: Invalid value: \"plain\": name is neither a standard finalizer name nor is it fully qualified"
        );
        let e = validate(&cms, &cm(json!(["orphan", "foregroundDeletion"]))).unwrap_err();
        assert!(e.message.ends_with("metadata.finalizers: Invalid value: []string{\"orphan\", \"foregroundDeletion\"}: finalizer orphan and foregroundDeletion cannot be both set"), "{}", e.message);
        let e = validate(&cms, &cm(json!(["a b/c"]))).unwrap_err();
        assert!(
            e.message
                .contains("metadata.finalizers: Invalid value: \"a b/c\": prefix part"),
            "{}",
            e.message
        );
        // A Lease is validated by apimachinery alone: a plain name passes.
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "a", "finalizers": ["plain"]}});
        assert!(validate(&info("coordination.k8s.io", "leases"), &lease).is_ok());
    }

    /// A custom resource's `/scale` paths are checked on every write, as
    /// kube's `ValidateScaleSpec` and `ValidateScaleStatus` check them.
    #[test]
    fn scale_replicas_are_checked_on_every_write() {
        let paths = crate::registry::resources::ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: None,
        };
        let bodies = |v: Value| -> Vec<String> {
            scale_errors(&paths, &v)
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert!(bodies(json!({"spec": {}})).is_empty());
        assert!(bodies(json!({"spec": {"replicas": 3}, "status": {"replicas": null}})).is_empty());
        assert_eq!(
            bodies(json!({"spec": {"replicas": -1}, "status": {"replicas": "x"}})),
            [
                ".spec.replicas: Invalid value: -1: should be a non-negative integer",
                ".status.replicas: Invalid value: 0: .status.replicas accessor error: x is of the type string, expected int64"
            ]
        );
        assert_eq!(
            bodies(json!({"spec": {"replicas": 2_147_483_648_i64}})),
            [
                ".spec.replicas: Invalid value: 2147483648: should be less than or equal to 2147483647"
            ]
        );
    }

    /// A `/status` write takes the metadata the kind's status strategy
    /// lets through, and nothing else but status.
    #[test]
    fn a_status_write_takes_the_metadata_its_kind_lets_through() {
        let old = json!({"metadata": {"name": "d", "labels": {"a": "1"}, "annotations": {"x": "old"}},
            "spec": {"replicas": 1}, "status": {}});
        let new = json!({"metadata": {"name": "d", "labels": {"a": "2"}, "annotations": {"x": "new"},
            "finalizers": ["f/x"]}, "spec": {"replicas": 9}, "status": {"replicas": 3}});
        let sub = Subresource::Status;
        let ns = prepare_update(&info("", "namespaces"), sub, &old, new.clone());
        assert_eq!(ns["metadata"]["labels"], json!({"a": "2"}));
        assert_eq!(ns["metadata"]["annotations"], json!({"x": "new"}));
        assert_eq!(ns["metadata"]["finalizers"], json!(["f/x"]));
        assert_eq!(ns["spec"], json!({"replicas": 1}));
        assert_eq!(ns["status"], json!({"replicas": 3}));
        // A Deployment keeps its labels.
        let d = prepare_update(&info("apps", "deployments"), sub, &old, new.clone());
        assert_eq!(d["metadata"]["labels"], json!({"a": "1"}));
        assert_eq!(d["metadata"]["annotations"], json!({"x": "new"}));
        // A custom resource takes only status.
        let mut cr = info("apps", "deployments");
        cr.builtin = false;
        let c = prepare_update(&cr, sub, &old, new);
        assert_eq!(c["metadata"]["annotations"], json!({"x": "old"}));
        assert!(c["metadata"].get("finalizers").is_none());
        assert_eq!(c["status"], json!({"replicas": 3}));
    }
}
