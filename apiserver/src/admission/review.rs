//! The AdmissionReview v1 exchange: the request kube-apiserver sends a
//! webhook ([`Request::review`]) and what its answer means
//! ([`Verdict::read`]), with kube's messages for an answer it cannot use.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::auth::UserInfo;

/// The admission operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// A create (and an apply that creates).
    Create,
    /// An update, patch or apply of an existing object or subresource.
    Update,
    /// A delete.
    Delete,
}

impl Operation {
    /// As a rule and an AdmissionRequest name it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }

    /// The kind of the options an AdmissionRequest carries.
    fn options_kind(self) -> &'static str {
        match self {
            Operation::Create => "CreateOptions",
            Operation::Update => "UpdateOptions",
            Operation::Delete => "DeleteOptions",
        }
    }
}

/// What is asked, as admission sees it (kube's `admission.Attributes`).
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// The operation.
    pub operation: Operation,
    /// The resource's group (`""` core).
    pub group: &'a str,
    /// Its version.
    pub version: &'a str,
    /// Its plural.
    pub resource: &'a str,
    /// The subresource (`""` for the object itself).
    pub subresource: &'a str,
    /// The kind.
    pub kind: &'a str,
    /// The namespace (`""` cluster-scoped).
    pub namespace: &'a str,
    /// The object's name (`""` for a create by generateName at the
    /// mutating step).
    pub name: &'a str,
    /// Whether the resource is namespaced.
    pub namespaced: bool,
    /// The new object (None on DELETE).
    pub object: Option<&'a Value>,
    /// The object it replaces (UPDATE, DELETE).
    pub old_object: Option<&'a Value>,
    /// Who asks.
    pub user: &'a UserInfo,
    /// A dry run.
    pub dry_run: bool,
    /// The request's options (`fieldManager`, `propagationPolicy`...),
    /// without apiVersion and kind.
    pub options: Value,
}

impl Request<'_> {
    /// The AdmissionRequest's JSON (`request` of the review), with `uid`.
    #[must_use]
    pub fn json(&self, uid: &str) -> Value {
        let kind = json!({"group": self.group, "version": self.version, "kind": self.kind});
        let resource =
            json!({"group": self.group, "version": self.version, "resource": self.resource});
        let mut options = match &self.options {
            Value::Object(m) => Value::Object(m.clone()),
            _ => json!({}),
        };
        options["apiVersion"] = "meta.k8s.io/v1".into();
        options["kind"] = self.operation.options_kind().into();
        let mut user = json!({"username": self.user.name});
        if !self.user.uid.is_empty() {
            user["uid"] = self.user.uid.clone().into();
        }
        if !self.user.groups.is_empty() {
            user["groups"] = self.user.groups.clone().into();
        }
        if !self.user.extra.is_empty() {
            user["extra"] = json!(self.user.extra);
        }
        let mut r = json!({
            "uid": uid,
            "kind": kind.clone(),
            "resource": resource.clone(),
            "requestKind": kind,
            "requestResource": resource,
            "name": self.name,
            "operation": self.operation.as_str(),
            "userInfo": user,
            "object": self.object.cloned().unwrap_or(Value::Null),
            "oldObject": self.old_object.cloned().unwrap_or(Value::Null),
            "dryRun": self.dry_run,
            "options": options,
        });
        if !self.namespace.is_empty() {
            r["namespace"] = self.namespace.into();
        }
        if !self.subresource.is_empty() {
            r["subResource"] = self.subresource.into();
            r["requestSubResource"] = self.subresource.into();
        }
        r
    }

    /// The whole AdmissionReview a webhook is POSTed.
    #[must_use]
    pub fn review(&self, uid: &str) -> Value {
        json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": self.json(uid),
        })
    }
}

/// A webhook's answer, understood.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Whether it allowed the request.
    pub allowed: bool,
    /// The `status` of a denial (a `metav1.Status`), if it gave one.
    pub status: Option<Value>,
    /// The JSON patch of a mutating webhook, decoded.
    pub patch: Option<Vec<u8>>,
    /// Its `patchType` (only `JSONPatch` is applied).
    pub patch_type: String,
    /// Warnings for the client.
    pub warnings: Vec<String>,
}

impl Verdict {
    /// Reads a webhook's answer (decoded JSON) to the review with `uid`; the error
    /// is what kube-apiserver says of an answer it cannot use (after
    /// `received invalid webhook response: `).
    ///
    /// # Errors
    ///
    /// Not an AdmissionReview v1, no `response`, the wrong uid, a
    /// patch that is not a base64 JSONPatch, a patch from a validating
    /// webhook.
    pub fn read(review: &Value, uid: &str, mutating: bool) -> Result<Verdict, String> {
        let response = &review["response"];
        if !response.is_object() {
            return Err("webhook response was absent".into());
        }
        let got = response["uid"].as_str().unwrap_or_default();
        if got != uid {
            return Err(format!("expected response.uid={uid:?}, got {got:?}"));
        }
        let gvk = (review["apiVersion"].as_str(), review["kind"].as_str());
        if gvk != (Some("admission.k8s.io/v1"), Some("AdmissionReview")) {
            return Err(format!(
                "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {}, Kind={}",
                gvk.0.unwrap_or_default(),
                gvk.1.unwrap_or_default()
            ));
        }
        let patch = match &response["patch"] {
            Value::Null => None,
            // Go's []byte is base64 in JSON; its decoder also takes an
            // array of numbers, which is what kube-rs's AdmissionResponse
            // serializes.
            Value::String(s) => Some(
                base64::engine::general_purpose::STANDARD
                    .decode(s)
                    .map_err(|e| format!("illegal base64 data in patch: {e}"))?,
            ),
            Value::Array(a) => Some(
                a.iter()
                    .map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
                    .collect::<Option<Vec<u8>>>()
                    .ok_or("the patch is neither base64 nor bytes")?,
            ),
            other => return Err(format!("the patch is neither base64 nor bytes: {other}")),
        }
        .filter(|p| !p.is_empty());
        let patch_type = response["patchType"].as_str();
        match (mutating, &patch, patch_type) {
            (false, Some(_), _) => {
                return Err("validating webhook may not return response.patch".into());
            }
            (false, None, Some(_)) => {
                return Err("validating webhook may not return response.patchType".into());
            }
            (true, Some(_), None) => {
                return Err("webhook returned response.patch but not response.patchType".into());
            }
            (true, None, Some(_)) => {
                return Err("webhook returned response.patchType but not response.patch".into());
            }
            (true, Some(_), Some("")) => {
                return Err("webhook returned invalid response.patchType of \"\"".into());
            }
            _ => {}
        }
        Ok(Verdict {
            patch_type: patch_type.unwrap_or_default().to_owned(),
            allowed: response["allowed"].as_bool().unwrap_or(false),
            status: response.get("status").filter(|s| s.is_object()).cloned(),
            patch,
            warnings: (response["warnings"].as_array().into_iter().flatten())
                .filter_map(|w| w.as_str().map(String::from))
                .collect(),
        })
    }
}

/// kube's `ToStatusErr`: a denial as the client sees it, a `metav1.Status`
/// (code at least 400, status Failure, message prefixed with who denied).
#[must_use]
pub fn denial(webhook: &str, status: Option<&Value>) -> Value {
    let mut s = status.cloned().unwrap_or_else(|| json!({}));
    let denied_by = format!("admission webhook {webhook:?} denied the request");
    if s["code"].as_u64().is_none_or(|c| c < 400) {
        s["code"] = 400.into();
    }
    if matches!(s["status"].as_str(), None | Some("" | "Success")) {
        s["status"] = "Failure".into();
    }
    let message = match (s["message"].as_str(), s["reason"].as_str()) {
        (Some(m), _) if !m.is_empty() => format!("{denied_by}: {m}"),
        (_, Some(r)) if !r.is_empty() => format!("{denied_by}: {r}"),
        _ => format!("{denied_by} without explanation"),
    };
    s["message"] = message.into();
    s["kind"] = "Status".into();
    s["apiVersion"] = "v1".into();
    if !s["metadata"].is_object() {
        s["metadata"] = json!({});
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(response: Value) -> Value {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
    }

    #[test]
    fn an_answer_is_read_or_refused_with_kubes_words() {
        let ok = Verdict::read(&answer(json!({"uid": "u", "allowed": true})), "u", true).unwrap();
        assert!(ok.allowed && ok.patch.is_none());
        let b64 = base64::engine::general_purpose::STANDARD.encode(b"[]");
        let patched = Verdict::read(
            &answer(json!({"uid": "u", "allowed": true, "patch": b64, "patchType": "JSONPatch"})),
            "u",
            true,
        )
        .unwrap();
        assert_eq!(patched.patch.as_deref(), Some(&b"[]"[..]));
        let bytes = Verdict::read(
            &answer(
                json!({"uid": "u", "allowed": true, "patch": [91, 93], "patchType": "JSONPatch"}),
            ),
            "u",
            true,
        )
        .unwrap();
        assert_eq!(bytes.patch.as_deref(), Some(&b"[]"[..]));
        let cases = [
            (
                answer(json!({"uid": "v", "allowed": true})),
                "expected response.uid=\"u\", got \"v\"",
            ),
            (answer(Value::Null), "webhook response was absent"),
            (
                answer(json!({"uid": "u", "allowed": true, "patch": b64})),
                "webhook returned response.patch but not response.patchType",
            ),
            (
                json!({"response": {"uid": "u"}}),
                "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got , Kind=",
            ),
        ];
        for (body, want) in cases {
            let e = Verdict::read(&body, "u", true).unwrap_err();
            assert!(e.starts_with(want), "{e}");
        }
        let e = Verdict::read(
            &answer(json!({"uid": "u", "allowed": true, "patch": b64, "patchType": "JSONPatch"})),
            "u",
            false,
        )
        .unwrap_err();
        assert_eq!(e, "validating webhook may not return response.patch");
    }

    #[test]
    fn a_denial_says_who_denied_it() {
        let s = denial(
            "deny.example.com",
            Some(&json!({"message": "no", "code": 403})),
        );
        assert_eq!(
            s["message"],
            "admission webhook \"deny.example.com\" denied the request: no"
        );
        assert_eq!(s["code"], 403);
        assert_eq!(s["status"], "Failure");
        let s = denial("deny.example.com", None);
        assert_eq!(
            s["message"],
            "admission webhook \"deny.example.com\" denied the request without explanation"
        );
        assert_eq!(s["code"], 400);
    }
}
