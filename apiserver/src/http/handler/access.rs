//! Who a request is and whether it may: the user the authenticator names,
//! the user it impersonates, if it may, the request's attributes as
//! kube-apiserver's RequestInfo derives them from the path, method and
//! query, and the authorizer's decision (401 and 403 worded as
//! kube-apiserver words them).

use std::sync::Arc;

use http::{HeaderName, Method};
use serde_json::Value;

use super::params::Query;
use super::request::ResourcePath;
use super::state::State;
use crate::auth::{
    Attributes, AuthorizationMode, CertificateUser, Decision, Identity, MASTERS, Rbac, UserInfo,
    rbac,
};
use crate::machinery::status::ApiError;

/// The user of a request (its client certificate's, if it presented one;
/// else the [`Identity`] the in-process service set, unless a token
/// overrides it; else its token's), if it may do what it asks.
pub(super) fn admit(
    state: &State,
    extensions: &http::Extensions,
    headers: &http::HeaderMap,
    method: &Method,
    path: &str,
    resource_path: Option<ResourcePath<'_>>,
    query: &Query,
) -> Result<Arc<UserInfo>, ApiError> {
    let certificate = extensions.get::<CertificateUser>();
    let user = match (certificate, extensions.get::<Identity>()) {
        // kube-apiserver's x509 authenticator runs before its tokens'.
        (Some(cert), _) => cert.0.clone(),
        // A token in an in-process request is that token's user.
        (None, Some(id)) if !headers.contains_key(http::header::AUTHORIZATION) => id.0.clone(),
        _ => state.auth.authenticate(&state.store, headers)?,
    };
    let user = impersonated(state, user, headers)?;
    if state.auth.mode() == AuthorizationMode::AlwaysAllow {
        // Nothing to decide: no attributes to build.
        return Ok(user);
    }
    let attrs = attributes(method, path, resource_path, query);
    match state.auth.allows(&state.store, &user, &attrs) {
        Ok(()) => Ok(user),
        Err(reason) => Err(forbidden(&user, &attrs, &reason)),
    }
}

/// The impersonation headers, parsed once (a `&str` name is parsed on
/// every lookup).
const IMPERSONATE_USER: HeaderName = HeaderName::from_static("impersonate-user");
const IMPERSONATE_GROUP: HeaderName = HeaderName::from_static("impersonate-group");
const IMPERSONATE_UID: HeaderName = HeaderName::from_static("impersonate-uid");

/// The user `user` asks to act as (`Impersonate-User`, `-Group`, `-Uid`,
/// `-Extra-<key>` headers), if it may impersonate each of them (the
/// `impersonate` verb on `users`, `groups`, `serviceaccounts`, and
/// `authentication.k8s.io`'s `uids` and `userextras/<key>`); `user`
/// itself when it asks for nobody. 400 for groups, a uid or extras
/// without a user; 403 worded as kube-apiserver words it.
fn impersonated(
    state: &State,
    user: Arc<UserInfo>,
    headers: &http::HeaderMap,
) -> Result<Arc<UserInfo>, ApiError> {
    let values = |name: HeaderName| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(String::from)
            .collect()
    };
    let (names, groups, uids) = (
        values(IMPERSONATE_USER),
        values(IMPERSONATE_GROUP),
        values(IMPERSONATE_UID),
    );
    let extras: Vec<(String, String)> = headers
        .iter()
        .filter_map(|(k, v)| {
            let key = k.as_str().strip_prefix("impersonate-extra-")?;
            let key = percent_encoding::percent_decode_str(key)
                .decode_utf8()
                .ok()?;
            Some((key.into_owned(), v.to_str().ok()?.to_string()))
        })
        .collect();
    let Some(name) = names.first() else {
        if groups.is_empty() && uids.is_empty() && extras.is_empty() {
            return Ok(user);
        }
        return Err(ApiError::bad_request(
            "requested impersonation of groups, a uid or extras without impersonating a user",
        ));
    };
    let may = |attrs: Attributes| match state.auth.authorize(&state.store, &user, &attrs) {
        Decision::Allow(_) => Ok(()),
        Decision::Deny(reason) => Err(forbidden(&user, &attrs, &reason)),
    };
    fn ask<'a>(
        group: &'a str,
        resource: &'a str,
        sub: &'a str,
        name: &'a str,
        namespace: &'a str,
    ) -> Attributes<'a> {
        asking("impersonate", group, resource, sub, namespace, name)
    }
    let mut groups_of_user = Vec::new();
    match name
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'))
    {
        Some((ns, sa)) => {
            may(ask("", "serviceaccounts", "", sa, ns))?;
            if groups.is_empty() {
                groups_of_user = vec![
                    "system:serviceaccounts".to_string(),
                    format!("system:serviceaccounts:{ns}"),
                ];
            }
        }
        None => may(ask("", "users", "", name, ""))?,
    }
    for g in &groups {
        may(ask("", "groups", "", g, ""))?;
    }
    for u in &uids {
        may(ask("authentication.k8s.io", "uids", "", u, ""))?;
    }
    let mut extra = std::collections::BTreeMap::<String, Vec<String>>::new();
    for (key, value) in extras {
        may(ask("authentication.k8s.io", "userextras", &key, &value, ""))?;
        extra.entry(key).or_default().push(value);
    }
    groups_of_user.extend(groups);
    if name != "system:anonymous" && !groups_of_user.iter().any(|g| g == "system:authenticated") {
        groups_of_user.push("system:authenticated".into());
    }
    Ok(Arc::new(UserInfo {
        name: name.clone(),
        uid: uids.first().cloned().unwrap_or_default(),
        groups: groups_of_user,
        extra,
    }))
}

/// A resource request's attributes: `verb` on `group`'s `resource`
/// (`sub` its subresource), object `name` in `namespace`.
fn asking<'a>(
    verb: &'a str,
    group: &'a str,
    resource: &'a str,
    sub: &'a str,
    namespace: &'a str,
    name: &'a str,
) -> Attributes<'a> {
    Attributes {
        verb: verb.into(),
        resource_request: true,
        api_group: group.into(),
        resource: resource.into(),
        subresource: sub.into(),
        name: name.into(),
        namespace: namespace.into(),
        path: "".into(),
    }
}

/// 403 unless `user` may also `create` what an apply to a missing object
/// would create (kube-apiserver authorizes a create-by-patch as both).
pub(super) fn may_create(
    state: &State,
    user: &UserInfo,
    group: &str,
    resource: &str,
    namespace: &str,
    name: &str,
) -> Result<(), ApiError> {
    let attrs = asking("create", group, resource, "", namespace, name);
    state
        .auth
        .allows(&state.store, user, &attrs)
        .map_err(|reason| forbidden(user, &attrs, &reason))
}

/// The check kube-apiserver makes on a write of a Role, ClusterRole or
/// binding under RBAC: nobody grants what they do not hold. Taken before
/// the write (it reads the RBAC snapshot, never the store under its lock)
/// and applied to the object about to be stored.
pub(super) struct Escalation {
    user: UserInfo,
    rbac: Arc<Rbac>,
}

impl Escalation {
    /// The check for a write of `resource` by `user`, when one applies:
    /// RBAC on, an RBAC kind, a user outside `system:masters`.
    pub(super) fn for_write(
        state: &State,
        user: &UserInfo,
        group: &str,
        resource: &str,
    ) -> Option<Self> {
        let applies = state.auth.mode() == AuthorizationMode::Rbac
            && group == "rbac.authorization.k8s.io"
            && matches!(
                resource,
                "roles" | "clusterroles" | "rolebindings" | "clusterrolebindings"
            )
            && !user.groups.iter().any(|g| g == MASTERS);
        applies.then(|| Escalation {
            user: user.clone(),
            rbac: state.auth.rbac(&state.store),
        })
    }

    /// 403 unless writing `obj` (of `resource`) grants nothing its writer
    /// lacks: a role's rules must be covered by the writer's own (or the
    /// writer may `escalate` it; an aggregated ClusterRole needs
    /// `escalate`); a binding's role must be covered (or the writer may
    /// `bind` it).
    pub(super) fn check(&self, resource: &str, obj: &Value) -> Result<(), ApiError> {
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        let ns = obj["metadata"]["namespace"].as_str().unwrap_or_default();
        let allowed = |verb: &str, resource: &str, name: &str| {
            let attrs = asking(verb, "rbac.authorization.k8s.io", resource, "", ns, name);
            self.rbac.allows(&self.user, &attrs)
        };
        let refuse = |message: String| {
            ApiError::forbidden(format!(
                "{resource}.rbac.authorization.k8s.io {name:?} is forbidden: {message}"
            ))
            .with_details("rbac.authorization.k8s.io", resource, name)
        };
        let rules: Vec<Value> = match resource {
            "roles" | "clusterroles" => {
                if allowed("escalate", resource, name) {
                    return Ok(());
                }
                if resource == "clusterroles" && !obj["aggregationRule"].is_null() {
                    return Err(refuse(format!(
                        "user {:?} (groups={}) must have cluster-admin privileges to write a ClusterRole with an aggregationRule",
                        self.user.name,
                        go_strings(&self.user.groups)
                    )));
                }
                obj["rules"].as_array().cloned().unwrap_or_default()
            }
            _ => {
                let kind = obj["roleRef"]["kind"].as_str().unwrap_or_default();
                let role = obj["roleRef"]["name"].as_str().unwrap_or_default();
                let role_resource = if kind == "Role" {
                    "roles"
                } else {
                    "clusterroles"
                };
                if allowed("bind", role_resource, role) {
                    return Ok(());
                }
                self.rbac.role_rules(ns, kind, role).ok_or_else(|| {
                    refuse(format!(
                        "{role_resource}.rbac.authorization.k8s.io {role:?} not found"
                    ))
                })?
            }
        };
        self.rbac.covers(&self.user, ns, &rules).map_err(|missing| {
            let lines: Vec<String> = missing.iter().map(go_rule).collect();
            refuse(format!(
                "user {:?} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
                self.user.name,
                go_strings(&self.user.groups),
                lines.join("\n")
            ))
        })
    }
}

/// A list of strings as Go's `%q` prints a `[]string`: `["a" "b"]`.
fn go_strings(v: &[String]) -> String {
    let items: Vec<String> = v.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", items.join(" "))
}

/// A PolicyRule as kube-apiserver's escalation message prints it.
fn go_rule(rule: &Value) -> String {
    let list = |k: &str| -> Vec<String> {
        rule[k]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(|s| format!("{s:?}"))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut parts = Vec::new();
    for (field, name) in [
        ("apiGroups", "APIGroups"),
        ("resources", "Resources"),
        ("resourceNames", "ResourceNames"),
        ("nonResourceURLs", "NonResourceURLs"),
        ("verbs", "Verbs"),
    ] {
        let items = list(field);
        if !items.is_empty() || (field == "apiGroups" && rule["resources"].is_array()) {
            parts.push(format!("{name}:[{}]", items.join(", ")));
        }
    }
    format!("{{{}}}", parts.join(", "))
}

/// kube-apiserver's 403 for `attrs` denied to `user`.
pub(super) fn forbidden(user: &UserInfo, attrs: &Attributes, reason: &str) -> ApiError {
    let message = rbac::forbidden_message(user, attrs, reason);
    if attrs.resource_request {
        let kind = match &*attrs.subresource {
            "" => attrs.resource.to_string(),
            sub => format!("{}/{sub}", attrs.resource),
        };
        ApiError::forbidden(message).with_details(&attrs.api_group, &kind, &attrs.name)
    } else {
        ApiError::forbidden(message)
    }
}

/// What a request asks, as kube-apiserver's RequestInfo says it.
pub(super) fn attributes<'a>(
    method: &Method,
    path: &'a str,
    resource_path: Option<ResourcePath<'a>>,
    query: &Query,
) -> Attributes<'a> {
    let Some(p) = resource_path else {
        return non_resource(method, path);
    };
    let verb = match (method, p.name.is_some()) {
        (&Method::GET | &Method::HEAD, true) => "get",
        (&Method::GET | &Method::HEAD, false) if query.flag("watch").unwrap_or(false) => "watch",
        (&Method::GET | &Method::HEAD, false) => "list",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, true) => "delete",
        (&Method::DELETE, false) => "deletecollection",
        (m, _) => return non_resource(m, path),
    };
    // A namespace is in itself.
    let namespace = match (p.namespace, p.plural, p.name) {
        (Some(ns), _, _) => ns,
        (None, "namespaces", Some(name)) => name,
        _ => "",
    };
    Attributes {
        verb: verb.into(),
        resource_request: true,
        api_group: p.group.into(),
        resource: p.plural.into(),
        subresource: p.sub.unwrap_or_default().into(),
        name: p.name.unwrap_or_default().into(),
        namespace: namespace.into(),
        path: path.into(),
    }
}

/// A non-resource request's attributes: its lowercase method on `path`.
fn non_resource<'a>(method: &Method, path: &'a str) -> Attributes<'a> {
    let verb = match *method {
        Method::GET => "get".into(),
        Method::HEAD => "head".into(),
        Method::POST => "post".into(),
        Method::PUT => "put".into(),
        Method::PATCH => "patch".into(),
        Method::DELETE => "delete".into(),
        Method::OPTIONS => "options".into(),
        ref m => m.as_str().to_ascii_lowercase().into(),
    };
    Attributes {
        verb,
        resource_request: false,
        path: path.into(),
        ..Attributes::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_attributed_as_kube_apiserver_attributes_them() {
        let at = |method: Method, path: &str, query: &str| {
            let q = Query::parse(Some(query));
            let a = attributes(&method, path, ResourcePath::parse(path), &q);
            (
                a.verb.into_owned(),
                a.resource_request,
                a.api_group.into_owned(),
                a.resource.into_owned(),
                a.subresource.into_owned(),
                a.name.into_owned(),
                a.namespace.into_owned(),
            )
        };
        let s = String::from;
        assert_eq!(
            at(Method::GET, "/api/v1/namespaces/d/pods/p/log", ""),
            (s("get"), true, s(""), s("pods"), s("log"), s("p"), s("d"))
        );
        assert_eq!(
            at(Method::GET, "/apis/apps/v1/deployments", "watch=true"),
            (
                s("watch"),
                true,
                s("apps"),
                s("deployments"),
                s(""),
                s(""),
                s("")
            )
        );
        assert_eq!(at(Method::GET, "/api/v1/namespaces/d/pods", "").0, "list");
        assert_eq!(
            at(Method::DELETE, "/api/v1/namespaces/d/pods", "").0,
            "deletecollection"
        );
        assert_eq!(
            at(Method::PUT, "/api/v1/namespaces/d", ""),
            (
                s("update"),
                true,
                s(""),
                s("namespaces"),
                s(""),
                s("d"),
                s("d")
            )
        );
        assert_eq!(
            at(
                Method::POST,
                "/api/v1/namespaces/d/serviceaccounts/sa/token",
                ""
            ),
            (
                s("create"),
                true,
                s(""),
                s("serviceaccounts"),
                s("token"),
                s("sa"),
                s("d")
            )
        );
        let healthz = at(Method::GET, "/healthz", "");
        assert_eq!((healthz.0.as_str(), healthz.1), ("get", false));
    }
}
