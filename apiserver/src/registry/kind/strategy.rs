//! The contract between the generic request path and one kind's own
//! behaviour, as kube-apiserver's `RESTCreateStrategy`,
//! `RESTUpdateStrategy`, `RESTDeleteStrategy` and `TableConvertor` are in
//! each kind's `strategy.go`. Every method has the behaviour of a kind
//! with nothing special (a ConfigMap, a custom resource) as its default;
//! a kind overrides what it does differently, in its own file.
//!
//! Nothing here knows a kind: this file sits below the store, the
//! resource table and the handler, which all reach a kind only through a
//! [`Strategy`] they are handed.

use std::fmt;

use serde_json::Value;

use crate::machinery::status::ApiError;

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
    /// `namespaces/finalize`: only `spec.finalizers` (PUT only).
    Finalize,
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
            Subresource::Finalize => Some("finalize"),
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
            "finalize" => Some(Subresource::Finalize),
            _ => None,
        }
    }

    /// The one field a write to this subresource is for, as a JSON pointer
    /// (`finalize` writes the whole object but its status, as
    /// kube-apiserver's does: `storage::strategy::prepare_update`).
    #[must_use]
    pub fn owned_field(self) -> &'static str {
        match self {
            Subresource::EphemeralContainers => "/spec/ephemeralContainers",
            Subresource::Approval => "/status/conditions",
            Subresource::Finalize => "/spec/finalizers",
            _ => "/status",
        }
    }
}

/// A subresource served on a resource, as discovery lists it and the
/// router finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedSubresource {
    /// Its name in the URL, e.g. `status`.
    pub name: &'static str,
    /// (group, version, kind) of what it takes and answers; `None`: the object's own.
    pub kind: Option<(&'static str, &'static str, &'static str)>,
    /// Its verbs: `get, patch, update` for those that read and write (a
    /// part of) the object, `create` for those that act (`handler::act`).
    pub verbs: &'static [&'static str],
}

/// Which rule an object's name follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// A DNS-1123 subdomain (most kinds).
    Subdomain,
    /// A DNS-1123 label (namespaces, services: their names become DNS labels).
    Label,
    /// Any path segment: not `.` or `..`, no `/` or `%` (RBAC's kinds).
    PathSegment,
}

/// One column of a kind's server-side printing (between Name and Age,
/// which every kind has).
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// The header, e.g. `Status`.
    pub name: &'static str,
    /// The OpenAPI format of its cells (`""` for plain strings).
    pub format: &'static str,
    /// What its definition says it shows.
    pub doc: ColumnDoc,
    /// The cell for one object.
    pub cell: fn(&Value) -> Value,
}

/// What a column's definition says it shows, as kube-apiserver's printers
/// word it: in words of their own, or a field's API documentation.
#[derive(Debug, Clone, Copy)]
pub enum ColumnDoc {
    /// The printer's own words.
    Text(&'static str),
    /// The documentation of a field: its message (k8s-pb's name) and JSON
    /// name.
    Field(&'static str, &'static str),
}

impl ColumnDoc {
    /// The description (empty when the field has no documentation).
    #[must_use]
    pub fn text(self) -> &'static str {
        match self {
            ColumnDoc::Text(t) => t,
            ColumnDoc::Field(message, field) => {
                crate::machinery::proto::doc(message, field).unwrap_or_default()
            }
        }
    }
}

/// The verbs of a kind that serves them all.
pub const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// What one kind does differently from the generic request path. Each
/// default is a kind with nothing special.
pub trait KindStrategy: Send + Sync + 'static {
    /// The kind's name in diagnostics (`Pod`, `generic`).
    fn name(&self) -> &'static str;

    /// The rule the object's name follows.
    fn name_rule(&self) -> NameRule {
        NameRule::Subdomain
    }

    /// Checks beyond the generic ones (name, labels, annotations,
    /// finalizers, owner references), on create and on every update of
    /// the object. A 422 names the field.
    ///
    /// # Errors
    /// The object is not valid for its kind.
    fn validate(&self, obj: &Value) -> Result<(), ApiError> {
        let _ = obj;
        Ok(())
    }

    /// What a create sets beyond the client's object and its defaults, as
    /// kube-apiserver's admission and `PrepareForCreate` do after the
    /// writer's managedFields are recorded (so nobody owns it): a pod
    /// starts Pending, with its priority and tolerations; a namespace gets
    /// its finalizer and phase. `now` is the creation time.
    fn prepare_create(&self, obj: &mut Value, now: &str) {
        let _ = (obj, now);
    }

    /// What a create sets once the object has its `uid`, as it is stored
    /// (a Job's generated selector names its uid), and what it then checks
    /// (422 naming the field).
    ///
    /// # Errors
    /// The object is not valid with its uid.
    fn created(&self, obj: &mut Value, uid: &str) -> Result<(), ApiError> {
        let _ = (obj, uid);
        Ok(())
    }

    /// Whether a create keeps the client's `status` though the kind has a
    /// status subresource (a Node: a kubelet registers with its status).
    fn status_on_create(&self) -> bool {
        false
    }

    /// What an update of the object (not of a subresource) sets beyond the
    /// client's object, given the stored `old` one.
    fn prepare_update(&self, old: &Value, new: &mut Value) {
        let _ = (old, new);
    }

    /// Fill in the fields kube-apiserver defaults when a client leaves
    /// them out (its `SetDefaults_*`), on every write of the object.
    fn default(&self, obj: &mut Value) {
        let _ = obj;
    }

    /// Whether the kind's registry allocates what a client leaves out
    /// rather than defaulting it (a Service's cluster IP, IP families and
    /// node ports, from [`crate::controllers::alloc`]): every create and update of the
    /// object, not of a subresource, then goes through the allocator.
    fn allocates(&self) -> bool {
        false
    }

    /// Subresources served beyond `status` and `scale`, in discovery's order.
    fn subresources(&self) -> &'static [ServedSubresource] {
        &[]
    }

    /// Subresources a kubelet serves (`pods/log`, `exec`, ...): routed,
    /// and answered as a cluster without that kubelet answers.
    fn kubelet_subresources(&self) -> &'static [&'static str] {
        &[]
    }

    /// What a write to subresource `sub` must respect beyond the object's
    /// own validation (ephemeral containers are only added): the message
    /// of the 422.
    ///
    /// # Errors
    /// The write changes what the subresource forbids.
    fn check_subresource(&self, sub: Subresource, old: &Value, new: &Value) -> Result<(), String> {
        let _ = (sub, old, new);
        Ok(())
    }

    /// The verbs discovery advertises and the handler routes.
    fn verbs(&self) -> &'static [&'static str] {
        ALL_VERBS
    }

    /// The grace period in seconds a delete asking for `requested` gives
    /// `obj` as it is now, for a kind deleted gracefully (pods); 0 removes
    /// it at once, in the state a graceful deletion leaves
    /// (`deletionTimestamp` now, `deletionGracePeriodSeconds: 0`), as
    /// kube-apiserver answers it. None for the other kinds: removed at once,
    /// as they are.
    fn grace(&self, obj: &Value, requested: Option<i64>) -> Option<i64> {
        let _ = (obj, requested);
        None
    }

    /// Why the object named `name` may never be deleted (kube-apiserver's
    /// `NamespaceLifecycle` admission keeps `default`, `kube-system` and
    /// `kube-public`): the DELETE is refused, 403.
    fn undeletable(&self, name: &str) -> Option<&'static str> {
        let _ = name;
        None
    }

    /// Whether something of the kind's own, beyond `metadata.finalizers`,
    /// holds a terminating `obj` (a namespace's `spec.finalizers`): it is
    /// removed only once nothing does.
    fn held(&self, obj: &Value) -> bool {
        let _ = obj;
        false
    }

    /// What else changes when `obj` starts terminating (beyond its
    /// deletionTimestamp and grace period).
    fn mark_terminating(&self, obj: &mut Value) {
        let _ = obj;
    }

    /// Whether a DELETE that removes the object answers the object itself
    /// (kube-apiserver's `ReturnDeletedObject`) rather than a Status.
    fn returns_deleted_object(&self) -> bool {
        false
    }

    /// Columns of `kubectl get` between Name and Age.
    fn columns(&self) -> &'static [Column] {
        &[]
    }

    /// Columns `kubectl get -o wide` adds after Age (priority 1).
    fn wide_columns(&self) -> &'static [Column] {
        &[]
    }

    /// Field-selector paths beyond `metadata.name` and `metadata.namespace`
    /// (what the real server indexes for the kind).
    fn selectable_fields(&self) -> &'static [&'static str] {
        &[]
    }

    /// The value a selector on `path` (one of
    /// [`selectable_fields`](Self::selectable_fields)) compares in `obj`:
    /// the field at that dotted path.
    fn field_value<'a>(&self, obj: &'a Value, path: &str) -> &'a Value {
        field_at(obj, path)
    }
}

/// A kind with nothing special: every ConfigMap-like built-in and every
/// custom resource.
#[derive(Debug, Clone, Copy, Default)]
pub struct Generic;

impl KindStrategy for Generic {
    fn name(&self) -> &'static str {
        "generic"
    }
}

/// The strategy a served resource carries ([`crate::registry::resources::ResourceInfo::strategy`]).
/// Two are equal when they are the same kind's.
#[derive(Clone, Copy)]
pub struct Strategy(&'static dyn KindStrategy);

impl Strategy {
    /// Wrap a kind's strategy.
    #[must_use]
    pub const fn new(kind: &'static dyn KindStrategy) -> Self {
        Strategy(kind)
    }

    /// The strategy of a kind with nothing special ([`Generic`]).
    #[must_use]
    pub const fn generic() -> Self {
        Strategy(&Generic)
    }
}

impl Default for Strategy {
    fn default() -> Self {
        Strategy::generic()
    }
}

impl std::ops::Deref for Strategy {
    type Target = dyn KindStrategy;

    fn deref(&self) -> &Self::Target {
        self.0
    }
}

impl PartialEq for Strategy {
    fn eq(&self, other: &Self) -> bool {
        self.0.name() == other.0.name()
    }
}

impl Eq for Strategy {}

impl fmt::Debug for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Strategy({})", self.0.name())
    }
}

/// A kind's validation errors (`field: Type: detail` each) as
/// kube-apiserver answers them: nothing when there are none, else 422
/// naming `obj` as a `kind` (group-qualified) with every error a cause.
///
/// # Errors
/// `errs` is not empty.
pub fn invalid(kind: &str, obj: &Value, errs: Vec<String>) -> Result<(), ApiError> {
    let message = match <[String; 1]>::try_from(errs) {
        Ok([one]) => one,
        Err(errs) if errs.is_empty() => return Ok(()),
        Err(many) => format!("[{}]", many.join(", ")),
    };
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    Err(ApiError::invalid(kind, name, message))
}

/// The field at dotted `path` in `obj` (`Null` when absent).
#[must_use]
pub fn field_at<'a>(obj: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(obj, |cur, seg| &cur[seg])
}

/// A `Status` cell: `Terminating` once deletion started, else `status.phase`.
#[must_use]
pub fn phase_or_terminating(obj: &Value) -> Value {
    if obj["metadata"]["deletionTimestamp"].is_null() {
        Value::String(obj["status"]["phase"].as_str().unwrap_or("").to_string())
    } else {
        "Terminating".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generic_kind_does_nothing_special() {
        let g = Strategy::generic();
        let mut obj = serde_json::json!({"metadata": {"name": "a"}, "spec": {}});
        let before = obj.clone();
        g.prepare_create(&mut obj, "2020-01-01T00:00:00Z");
        g.default(&mut obj);
        assert_eq!(obj, before);
        assert_eq!(g.grace(&obj, Some(30)), None);
        assert_eq!(g.verbs(), ALL_VERBS);
        assert!(!g.held(&obj) && g.columns().is_empty());
        assert_eq!(format!("{g:?}"), "Strategy(generic)");
        assert_eq!(g, Strategy::default());
    }
}
