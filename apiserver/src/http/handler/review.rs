//! The reviews of `authentication.k8s.io` and `authorization.k8s.io`: a
//! POST of a review answers it (201, the review with its `status`) and
//! stores nothing, as kube-apiserver does.
//! - TokenReview: who a token names, for which audiences;
//! - SelfSubjectReview: who the caller is (`kubectl auth whoami`);
//! - SelfSubjectAccessReview, SubjectAccessReview,
//!   LocalSubjectAccessReview: whether the caller, or a named user, may do
//!   something (`kubectl auth can-i`);
//! - SelfSubjectRulesReview: what the caller may do in a namespace
//!   (`kubectl auth can-i --list`).

use std::borrow::Cow;

use http::{Method, StatusCode};
use serde_json::{Value, json};

use super::body::parse_body;
use super::params::{WriteOptions, WriteVerb};
use super::request::Req;
use super::response::{Resp, json_response};
use crate::auth::{Attributes, AuthorizationMode, Decision, UserInfo, tokens};
use crate::machinery::patch;
use crate::machinery::status::ApiError;

/// Which access review.
#[derive(Debug, Clone, Copy)]
pub(super) enum Access<'a> {
    /// The caller's own.
    SelfSubject,
    /// A named user's, anywhere.
    Subject,
    /// A named user's, in this namespace.
    Local(&'a str),
}

/// `POST .../tokenreviews`.
pub(super) fn token(req: &Req<'_>) -> Result<Resp, ApiError> {
    let mut review = posted(req, "TokenReview", "authentication.k8s.io/v1")?;
    let Some(token) = review["spec"]["token"].as_str().filter(|t| !t.is_empty()) else {
        return Err(ApiError::invalid(
            "TokenReview.authentication.k8s.io",
            "",
            "spec.token: Required value: token must not be empty",
        ));
    };
    let audiences = strings(&review["spec"]["audiences"]);
    let audiences = if audiences.is_empty() {
        vec![tokens::ISSUER.to_string()]
    } else {
        audiences
    };
    review["status"] = match req
        .state
        .auth
        .authenticate_token(&req.state.store, token, &audiences)
    {
        Ok(user) => {
            json!({"authenticated": true, "user": user_info(&user), "audiences": audiences})
        }
        Err(error) => json!({"user": {}, "error": error}),
    };
    Ok(json_response(StatusCode::CREATED, &review))
}

/// `POST .../selfsubjectreviews`.
pub(super) fn whoami(req: &Req<'_>) -> Result<Resp, ApiError> {
    let mut review = posted(req, "SelfSubjectReview", "authentication.k8s.io/v1")?;
    review["status"] = json!({"userInfo": user_info(&req.user)});
    Ok(json_response(StatusCode::CREATED, &review))
}

/// `POST .../selfsubjectaccessreviews`, `.../subjectaccessreviews` and
/// `.../namespaces/<ns>/localsubjectaccessreviews`.
pub(super) fn access(req: &Req<'_>, which: Access<'_>) -> Result<Resp, ApiError> {
    let kind = match which {
        Access::SelfSubject => "SelfSubjectAccessReview",
        Access::Subject => "SubjectAccessReview",
        Access::Local(_) => "LocalSubjectAccessReview",
    };
    let mut review = posted(req, kind, "authorization.k8s.io/v1")?;
    let invalid = |msg: &str| ApiError::invalid(&format!("{kind}.authorization.k8s.io"), "", msg);
    let spec = &review["spec"];
    let user = match which {
        Access::SelfSubject => UserInfo::clone(&req.user),
        Access::Subject | Access::Local(_) => {
            let user = UserInfo {
                name: spec["user"].as_str().unwrap_or_default().into(),
                uid: spec["uid"].as_str().unwrap_or_default().into(),
                groups: strings(&spec["groups"]),
                extra: spec["extra"]
                    .as_object()
                    .map(|m| m.iter().map(|(k, v)| (k.clone(), strings(v))).collect())
                    .unwrap_or_default(),
            };
            if user.name.is_empty() && user.groups.is_empty() {
                return Err(invalid(
                    "spec.user: Invalid value: \"\": at least one of user or group must be specified",
                ));
            }
            user
        }
    };
    let (res, non) = (&spec["resourceAttributes"], &spec["nonResourceAttributes"]);
    fn field<'v>(v: &'v Value, k: &str) -> Cow<'v, str> {
        v[k].as_str().unwrap_or_default().into()
    }
    let attrs = match (res.is_object(), non.is_object()) {
        (true, false) => {
            let namespace = field(res, "namespace");
            if let Access::Local(ns) = which
                && !namespace.is_empty()
                && namespace != ns
            {
                return Err(invalid(&format!(
                    "spec.resourceAttributes.namespace: Invalid value: {namespace:?}: must match metadata.namespace"
                )));
            }
            Attributes {
                verb: field(res, "verb"),
                resource_request: true,
                api_group: field(res, "group"),
                resource: field(res, "resource"),
                subresource: field(res, "subresource"),
                name: field(res, "name"),
                namespace: match which {
                    Access::Local(ns) => ns.into(),
                    _ => namespace,
                },
                path: "".into(),
            }
        }
        (false, true) => Attributes {
            verb: field(non, "verb"),
            resource_request: false,
            path: field(non, "path"),
            ..Attributes::default()
        },
        _ => {
            // kube-apiserver's words, its kind left empty.
            let mut e = ApiError::invalid(
                ".authorization.k8s.io",
                "",
                "spec: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified",
            );
            if let Some(d) = e.details.as_mut().and_then(Value::as_object_mut) {
                d.remove("kind");
                d.remove("name");
            }
            return Err(e);
        }
    };
    let (allowed, reason) = match req.state.auth.authorize(&req.state.store, &user, &attrs) {
        Decision::Allow(reason) => (true, reason),
        Decision::Deny(reason) => (false, reason),
    };
    review["status"] = json!({"allowed": allowed});
    if !reason.is_empty() {
        review["status"]["reason"] = reason.into();
    }
    Ok(json_response(StatusCode::CREATED, &review))
}

/// `POST .../selfsubjectrulesreviews`.
pub(super) fn rules(req: &Req<'_>) -> Result<Resp, ApiError> {
    let mut review = posted(req, "SelfSubjectRulesReview", "authorization.k8s.io/v1")?;
    let ns = review["spec"]["namespace"].as_str().unwrap_or_default();
    let (resource, non_resource) = match req.state.auth.mode() {
        AuthorizationMode::AlwaysAllow => (
            vec![json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})],
            vec![json!({"verbs": ["*"], "nonResourceURLs": ["*"]})],
        ),
        AuthorizationMode::Rbac => req
            .state
            .auth
            .rbac(&req.state.store)
            .rules_for(&req.user, ns),
    };
    review["status"] = json!({
        "resourceRules": resource,
        "nonResourceRules": non_resource,
        "incomplete": false,
    });
    Ok(json_response(StatusCode::CREATED, &review))
}

/// The posted review (POST only), with its kind and apiVersion set.
fn posted(req: &Req<'_>, kind: &str, api_version: &str) -> Result<Value, ApiError> {
    if req.method != Method::POST {
        return Err(ApiError::method_not_allowed(req.method.as_str()));
    }
    if only_transformed(req.header(http::header::ACCEPT)) {
        return Err(ApiError::not_acceptable(
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf",
        ));
    }
    let mut review = parse_body(req)?;
    if !review.is_object() {
        return Err(ApiError::bad_request(format!("a {kind} must be an object")));
    }
    review["kind"] = kind.into();
    review["apiVersion"] = api_version.into();
    if !review["metadata"].is_object() {
        review["metadata"] = json!({});
    }
    // A review is created as any object is, though never stored: its
    // managedFields recorded (what the client set), as kube-apiserver
    // answers it.
    let opts = WriteOptions::from_query(&req.query, WriteVerb::Create)?;
    let manager = req.field_manager(&opts);
    patch::record_update(None, &mut review, &manager, &req.now(), api_version, None);
    Ok(review)
}

/// Whether an Accept header takes a review only transformed (a Table, a
/// PartialObjectMetadata), which a review has no form of: kube-apiserver
/// refuses it (406) before it acts.
fn only_transformed(accept: &str) -> bool {
    !accept.trim().is_empty()
        && accept.split(',').all(|range| {
            range
                .split(';')
                .skip(1)
                .any(|p| p.trim().to_ascii_lowercase().starts_with("as="))
        })
}

/// A user as authentication.k8s.io's `UserInfo`.
fn user_info(u: &UserInfo) -> Value {
    let mut out = json!({"username": u.name, "groups": u.groups});
    if !u.uid.is_empty() {
        out["uid"] = u.uid.clone().into();
    }
    if !u.extra.is_empty() {
        out["extra"] = json!(u.extra);
    }
    out
}

/// The strings of a JSON array (others skipped).
fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_review_is_never_a_table() {
        assert!(only_transformed(
            "application/json;as=Table;v=v1;g=meta.k8s.io"
        ));
        assert!(only_transformed(
            "application/json;as=Table;v=v1;g=meta.k8s.io, application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
        ));
        assert!(!only_transformed(
            "application/json;as=Table;v=v1;g=meta.k8s.io, application/json"
        ));
        assert!(!only_transformed(""));
        assert!(!only_transformed("*/*"));
    }
}
