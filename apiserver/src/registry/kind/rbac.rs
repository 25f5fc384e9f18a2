//! RBAC's kinds (`rbac.authorization.k8s.io/v1`): names that are any path
//! segment (`clusterRole-1` too), as kube-apiserver's `ValidateRBACName`
//! takes them; bindings checked as its `ValidateRoleBinding` checks them —
//! every subject a ServiceAccount, User or Group with a name, the role
//! named, of a kind the binding may refer to, in the RBAC group.

use serde_json::Value;

use super::strategy::{KindStrategy, NameRule, invalid};
use crate::machinery::status::ApiError;

const GROUP: &str = "rbac.authorization.k8s.io";

/// Role and ClusterRole (the kind's name): nothing special but their
/// names.
#[derive(Debug, Clone, Copy)]
pub struct RoleKind(pub &'static str);

/// RoleBinding and ClusterRoleBinding: the kind's name and the role kinds
/// it may refer to.
#[derive(Debug, Clone, Copy)]
pub struct BindingKind {
    kind: &'static str,
    role_kinds: &'static [&'static str],
}

/// The RoleBinding kind: to a Role or a ClusterRole.
pub const ROLE_BINDING: BindingKind = BindingKind {
    kind: "RoleBinding",
    role_kinds: &["Role", "ClusterRole"],
};

/// The ClusterRoleBinding kind: to a ClusterRole.
pub const CLUSTER_ROLE_BINDING: BindingKind = BindingKind {
    kind: "ClusterRoleBinding",
    role_kinds: &["ClusterRole"],
};

impl KindStrategy for RoleKind {
    fn name(&self) -> &'static str {
        self.0
    }

    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }
}

impl KindStrategy for BindingKind {
    fn name(&self) -> &'static str {
        self.kind
    }

    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    /// kube-apiserver's `SetDefaults_RoleBinding` and `SetDefaults_Subject`:
    /// a role reference without `apiGroup` is in the RBAC group, and so is
    /// a User or Group subject without one.
    fn default(&self, obj: &mut Value) {
        let empty = |v: &Value| v.as_str().is_none_or(str::is_empty);
        if let Some(role) = obj.get_mut("roleRef").and_then(Value::as_object_mut)
            && role.get("apiGroup").is_none_or(empty)
        {
            role.insert("apiGroup".into(), GROUP.into());
        }
        let subjects = obj.get_mut("subjects").and_then(Value::as_array_mut);
        for s in subjects
            .into_iter()
            .flatten()
            .filter_map(Value::as_object_mut)
        {
            if matches!(
                s.get("kind").and_then(Value::as_str),
                Some("User" | "Group")
            ) && s.get("apiGroup").is_none_or(empty)
            {
                s.insert("apiGroup".into(), GROUP.into());
            }
        }
    }

    fn validate(&self, obj: &Value) -> Result<(), ApiError> {
        validate(obj, self.kind, self.role_kinds)
    }
}

/// `"a", "b"`, as kube-apiserver lists supported values.
fn quoted(values: &[&str]) -> String {
    let q: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    q.join(", ")
}

/// The subjects' errors, then the role reference's, as kube-apiserver
/// lists them.
fn validate(obj: &Value, kind: &str, role_kinds: &[&str]) -> Result<(), ApiError> {
    let mut errs = Vec::new();
    let subjects = obj["subjects"].as_array().into_iter().flatten();
    for (i, s) in subjects.enumerate() {
        let subject_kind = s["kind"].as_str().unwrap_or_default();
        let kinds = ["ServiceAccount", "User", "Group"];
        if !kinds.contains(&subject_kind) {
            errs.push(format!(
                "subjects[{i}].kind: Unsupported value: {subject_kind:?}: supported values: {}",
                quoted(&kinds)
            ));
        }
        if s["name"].as_str().is_none_or(str::is_empty) {
            errs.push(format!("subjects[{i}].name: Required value"));
        }
    }
    let role = &obj["roleRef"];
    // Checked as defaulted (`default` fills an empty group before the
    // object is stored; kube-apiserver defaults before it validates).
    let group = role["apiGroup"]
        .as_str()
        .filter(|g| !g.is_empty())
        .unwrap_or(GROUP);
    if group != GROUP {
        errs.push(format!(
            "roleRef.apiGroup: Unsupported value: {group:?}: supported values: {GROUP:?}"
        ));
    }
    let role_kind = role["kind"].as_str().unwrap_or_default();
    if !role_kinds.contains(&role_kind) {
        errs.push(format!(
            "roleRef.kind: Unsupported value: {role_kind:?}: supported values: {}",
            quoted(role_kinds)
        ));
    }
    if role["name"].as_str().is_none_or(str::is_empty) {
        errs.push("roleRef.name: Required value".to_string());
    }
    invalid(&format!("{kind}.{GROUP}"), obj, errs)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn subjects_and_the_role_are_checked_as_kube_checks_them() {
        let ok = json!({"metadata": {"name": "b"},
            "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "r"},
            "subjects": [{"kind": "User", "name": "jane"}]});
        assert!(ROLE_BINDING.validate(&ok).is_ok());
        // A ClusterRoleBinding may not refer to a Role.
        let e = CLUSTER_ROLE_BINDING.validate(&ok).unwrap_err().to_status();
        assert_eq!(e["details"]["causes"][0]["field"], "roleRef.kind", "{e}");
        let broken = json!({"metadata": {"name": "broken"},
            "roleRef": {"apiGroup": GROUP, "kind": "Role"},
            "subjects": [{"kind": "Robot", "name": "r2"}]});
        let e = ROLE_BINDING.validate(&broken).unwrap_err().to_status();
        assert_eq!(
            e["message"],
            "RoleBinding.rbac.authorization.k8s.io \"broken\" is invalid: [subjects[0].kind: \
             Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \
             \"Group\", roleRef.name: Required value]"
        );
    }

    #[test]
    fn the_role_and_user_or_group_subjects_default_to_the_rbac_group() {
        let mut b = json!({"roleRef": {"kind": "Role", "name": "r"},
            "subjects": [{"kind": "User", "name": "jane"}, {"kind": "Group", "name": "g", "apiGroup": ""},
                {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]});
        // Valid before defaulting too: kube-apiserver defaults first.
        assert!(ROLE_BINDING.validate(&b).is_ok());
        ROLE_BINDING.default(&mut b);
        assert_eq!(
            b,
            json!({"roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "r"},
            "subjects": [{"kind": "User", "name": "jane", "apiGroup": GROUP},
                {"kind": "Group", "name": "g", "apiGroup": GROUP},
                {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]})
        );
        assert!(ROLE_BINDING.validate(&b).is_ok());
    }
}
