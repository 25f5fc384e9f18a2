//! API errors as the real server reports them: an HTTP status code and a
//! `metav1.Status` body (kind Status, status Failure, reason, message, code).

use std::borrow::Cow;

use serde_json::{Value, json};

/// An error answered to a client as a `metav1.Status`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// Machine-readable reason, e.g. `NotFound`, `Conflict`, `Invalid`
    /// (an admission webhook's denial passes on its own).
    pub reason: Cow<'static, str>,
    /// Human-readable message, worded like the real server's.
    pub message: String,
    /// Optional `details` (name, group, kind).
    pub details: Option<Value>,
    /// The Status's `metadata.continue`: on a 410 for a continue token
    /// too old to be served, the token to go on with, inconsistently.
    pub continue_token: Option<String>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason: Cow::Borrowed(reason),
            message: message.into(),
            details: None,
            continue_token: None,
        }
    }

    /// Attach `details: {name, group, kind}` (no `group` for the core
    /// group, as kube-apiserver leaves it out when empty).
    #[must_use]
    pub fn with_details(mut self, group: &str, kind: &str, name: &str) -> Self {
        let mut details = json!({"name": name, "kind": kind});
        if !group.is_empty() {
            details["group"] = json!(group);
        }
        self.details = Some(details);
        self
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 404 NotFound for a named object: `pods "web-0" not found`.
    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        let gr = group_resource(group, plural);
        Self::new(404, "NotFound", format!("{gr} \"{name}\" not found"))
            .with_details(group, plural, name)
    }

    /// 404 NotFound for a path nobody serves (kube-apiserver's words, which
    /// do not name it).
    pub fn no_route(_path: &str) -> Self {
        let mut e = Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
        e.details = Some(json!({}));
        e
    }

    /// 401 Unauthorized, kube-apiserver's answer to a credential it does
    /// not accept.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 Forbidden.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// 405 MethodNotAllowed (kube-apiserver's words, which do not name the
    /// method).
    pub fn method_not_allowed(_method: &str) -> Self {
        let mut e = Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        );
        e.details = Some(json!({}));
        e
    }

    /// 409 AlreadyExists.
    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        let gr = group_resource(group, plural);
        Self::new(
            409,
            "AlreadyExists",
            format!("{gr} \"{name}\" already exists"),
        )
        .with_details(group, plural, name)
    }

    /// 409 Conflict with the real optimistic-concurrency message.
    pub fn conflict_modified(group: &str, plural: &str, name: &str) -> Self {
        let gr = group_resource(group, plural);
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {gr} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
            ),
        )
        .with_details(group, plural, name)
    }

    /// 409 Conflict with a free message (preconditions, apply conflicts).
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(409, "Conflict", message)
    }

    /// 410 Expired (watch from a compacted resourceVersion).
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 504 Timeout, asking the client to retry after a second (a list at a
    /// resourceVersion the server has not reached: kube-apiserver's
    /// `Too large resource version`).
    pub fn timeout(message: impl Into<String>) -> Self {
        let mut e = Self::new(504, "Timeout", message);
        e.details = Some(json!({"retryAfterSeconds": 1}));
        e
    }

    /// 429 TooManyRequests, asking the client to retry after a second
    /// (`details.retryAfterSeconds` and a `Retry-After` header, as
    /// kube-apiserver's max-in-flight filter answers).
    pub fn too_many_requests() -> Self {
        let mut e = Self::new(
            429,
            "TooManyRequests",
            "injected fault: too many requests, please try again later",
        );
        e.details = Some(json!({"retryAfterSeconds": 1}));
        e
    }

    /// The `details.retryAfterSeconds` the error asks the client to wait,
    /// if any (answered as a `Retry-After` header too).
    #[must_use]
    pub fn retry_after_seconds(&self) -> Option<u64> {
        self.details.as_ref()?["retryAfterSeconds"].as_u64()
    }

    /// 429 TooManyRequests with a message of its own (an eviction a
    /// PodDisruptionBudget does not allow).
    pub fn too_many(message: impl Into<String>) -> Self {
        Self::new(429, "TooManyRequests", message)
    }

    /// 413 RequestEntityTooLarge.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    /// 414 RequestURITooLong: a path longer than a URI may be.
    pub fn uri_too_long() -> Self {
        Self::new(
            414,
            "RequestURITooLong",
            "the request path is longer than 65534 bytes",
        )
    }

    /// 431 RequestHeaderFieldsTooLarge: a request head over the limit.
    pub fn head_too_large(message: impl Into<String>) -> Self {
        Self::new(431, "RequestHeaderFieldsTooLarge", message)
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }

    /// 406 NotAcceptable: no answer in a media type the client takes.
    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    /// 422 Invalid: `Pod "x" is invalid: metadata.name: Invalid value: ...`,
    /// with the `details` kube-apiserver gives: the name, the kind and its
    /// group (`kind` may be qualified, `Deployment.apps`), and a cause per
    /// error the message lists (`field: Type: detail`, several as `[a, b]`).
    pub fn invalid(kind: &str, name: &str, message: impl std::fmt::Display) -> Self {
        let message = message.to_string();
        let mut e = Self::new(
            422,
            "Invalid",
            format!("{kind} \"{name}\" is invalid: {message}"),
        );
        let (kind, group) = kind.split_once('.').unwrap_or((kind, ""));
        let mut details = json!({"kind": kind});
        if !name.is_empty() {
            details["name"] = json!(name);
        }
        if !group.is_empty() {
            details["group"] = json!(group);
        }
        let causes = causes(&message);
        if !causes.is_empty() {
            details["causes"] = Value::Array(causes);
        }
        e.details = Some(details);
        e
    }

    /// 422 Invalid with a free message.
    pub fn unprocessable(message: impl Into<String>) -> Self {
        Self::new(422, "Invalid", message)
    }

    /// 503 ServiceUnavailable: what the request needs is not running.
    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    /// 500 with no reason (`StatusReasonUnknown`): how kube-apiserver answers
    /// an error that is not an API status, such as server-side apply's
    /// "failed to create typed patch object".
    pub fn unknown(message: impl Into<String>) -> Self {
        Self::new(500, "", message)
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// The error a `metav1.Status` describes (an admission webhook's
    /// denial): its code (500 when absent), reason, message and details
    /// passed on as they are.
    #[must_use]
    pub fn from_status(status: &Value) -> Self {
        ApiError {
            code: status["code"]
                .as_u64()
                .and_then(|c| u16::try_from(c).ok())
                .unwrap_or(500),
            reason: Cow::Owned(status["reason"].as_str().unwrap_or_default().to_owned()),
            message: status["message"].as_str().unwrap_or_default().to_owned(),
            details: status.get("details").filter(|d| d.is_object()).cloned(),
            continue_token: None,
        }
    }

    /// The `metav1.Status` body.
    #[must_use]
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        if let Some(token) = &self.continue_token {
            s["metadata"]["continue"] = token.clone().into();
        }
        if self.reason.is_empty() {
            // Go's `omitempty`: an unknown reason is absent.
            if let Some(o) = s.as_object_mut() {
                o.remove("reason");
            }
        }
        s
    }
}

/// The error types apimachinery's `field.Error` prints, and the reason
/// each is as a Status cause.
const FIELD_ERRORS: &[(&str, &str)] = &[
    ("Invalid value", "FieldValueInvalid"),
    ("Required value", "FieldValueRequired"),
    ("Unsupported value", "FieldValueNotSupported"),
    ("Forbidden", "FieldValueForbidden"),
    ("Duplicate value", "FieldValueDuplicate"),
    ("Too long", "FieldValueTooLong"),
    ("Too many", "FieldValueTooMany"),
    ("Not found", "FieldValueNotFound"),
    ("Internal error", "InternalError"),
];

/// The causes of a 422's message: each `field: Type: detail` it lists
/// (one, or several as `[a, b]`), as `{reason, message, field}`; none when
/// the message is not in that form.
fn causes(message: &str) -> Vec<Value> {
    let inner = message
        .strip_prefix('[')
        .and_then(|m| m.strip_suffix(']'))
        .unwrap_or(message);
    // Where an error starts: the message's start, or after ", ", then a
    // field, ": " and one of the error types.
    let error_at = |at: usize| -> Option<(usize, &'static str)> {
        let rest = &inner[at..];
        let colon = rest.find(": ")?;
        if rest[..colon].contains(", ") {
            return None;
        }
        let after = &rest[colon + 2..];
        let (_, reason) = FIELD_ERRORS.iter().find(|(t, _)| {
            after
                .strip_prefix(t)
                .is_some_and(|r| r.is_empty() || r.starts_with(':'))
        })?;
        Some((colon, reason))
    };
    let starts: Vec<usize> = std::iter::once(0)
        .chain(inner.match_indices(", ").map(|(i, _)| i + 2))
        .filter(|&i| error_at(i).is_some())
        .collect();
    if starts.first() != Some(&0) {
        return Vec::new();
    }
    starts
        .iter()
        .enumerate()
        .map(|(n, &start)| {
            let end = starts.get(n + 1).map_or(inner.len(), |next| next - 2);
            let (colon, reason) = error_at(start).expect("a start found above");
            json!({
                "reason": reason,
                "message": &inner[start + colon + 2..end],
                "field": &inner[start..start + colon],
            })
        })
        .collect()
}

/// `pods` or `statefulsets.apps`, as the real server names a group-resource.
#[must_use]
pub fn group_resource(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_body_has_the_real_shape() {
        let e = ApiError::not_found("apps", "statefulsets", "web");
        let s = e.to_status();
        assert_eq!(s["kind"], "Status");
        assert_eq!(s["status"], "Failure");
        assert_eq!(s["reason"], "NotFound");
        assert_eq!(s["code"], 404);
        assert_eq!(s["message"], "statefulsets.apps \"web\" not found");
        assert_eq!(s["details"]["name"], "web");
    }

    #[test]
    fn throttling_asks_for_a_retry_after_a_second() {
        let e = ApiError::too_many_requests();
        assert_eq!(e.to_status()["details"]["retryAfterSeconds"], 1);
        assert_eq!(e.retry_after_seconds(), Some(1));
        assert_eq!(ApiError::too_many("budget").retry_after_seconds(), None);
        let resp = crate::http::handler::error_response(&e);
        assert_eq!(resp.headers()[http::header::RETRY_AFTER], "1");
    }

    #[test]
    fn conflict_message_matches_the_real_server() {
        let e = ApiError::conflict_modified("", "configmaps", "a");
        assert_eq!(
            e.message,
            "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again"
        );
        assert_eq!(e.code, 409);
    }

    #[test]
    fn an_invalid_lists_each_error_as_a_cause() {
        let e = ApiError::invalid(
            "Deployment.apps",
            "d",
            "[spec.replicas: Invalid value: -1: must be >= 0, spec.selector: Required value]",
        );
        let d = e.details.unwrap();
        assert_eq!(d["kind"], "Deployment");
        assert_eq!(d["group"], "apps");
        assert_eq!(d["name"], "d");
        assert_eq!(
            d["causes"],
            json!([
                {"reason": "FieldValueInvalid", "message": "Invalid value: -1: must be >= 0", "field": "spec.replicas"},
                {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.selector"},
            ])
        );
        let free = ApiError::invalid("ConfigMap", "c", "something else")
            .details
            .unwrap();
        assert_eq!(free, json!({"kind": "ConfigMap", "name": "c"}));
    }
}
