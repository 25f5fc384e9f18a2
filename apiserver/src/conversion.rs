//! Custom resources served in several versions, converted as
//! apiextensions-apiserver converts them: objects are stored in the CRD's
//! storage version; a read in another version is converted to it, and a
//! write in another version is converted to the storage version before it
//! is stored. `strategy: None` rewrites `apiVersion` only;
//! `strategy: Webhook` sends a ConversionReview v1 to the CRD's conversion
//! webhook over HTTPS (the admission webhooks' client, [`crate::admission::call`]).
//!
//! Where each conversion happens: a write's (the stored object into the
//! request's version before a patch or an update applies, the result into
//! the storage version) runs in the write's passes, as an admission step
//! does ([`crate::admission::Admission::convert`]); a get's and a list's
//! answers are converted by the handler once they are rendered (one review
//! for a list's items); a watch converts each event before it is sent.

use std::time::Duration;

use serde_json::{Value, json};

use crate::admission::config::Endpoint;
use crate::faults::Faults;
use crate::status::ApiError;
use crate::store::Store;

/// How long a conversion webhook may take (apiextensions-apiserver's
/// fixed timeout).
pub const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(30);

/// A CRD's `spec.conversion` and storage version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversion {
    /// The storage version's apiVersion (`group/version`).
    pub storage: String,
    /// The conversion webhook (`strategy: Webhook`); None for `strategy: None`.
    pub webhook: Option<Webhook>,
    /// `group/version, Kind=<kind>` of the storage version... the kind, as
    /// errors name a version of it.
    pub kind: String,
}

/// A conversion webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    /// Where it is called.
    pub endpoint: Endpoint,
    /// The PEM certificates that verify it (`caBundle`, decoded).
    pub ca_bundle: Vec<u8>,
}

impl Conversion {
    /// The conversion a CRD object defines (its storage version and
    /// `spec.conversion`).
    #[must_use]
    pub fn of_crd(crd: &Value) -> Conversion {
        let spec = &crd["spec"];
        let group = spec["group"].as_str().unwrap_or_default();
        let storage = (spec["versions"].as_array().into_iter().flatten())
            .find(|v| v["storage"] == true)
            .and_then(|v| v["name"].as_str())
            .unwrap_or_default();
        let webhook = (spec["conversion"]["strategy"] == "Webhook").then(|| {
            let cc = &spec["conversion"]["webhook"]["clientConfig"];
            let endpoint = match cc["url"].as_str() {
                Some(url) => Endpoint::Url(url.to_owned()),
                None => {
                    let svc = &cc["service"];
                    Endpoint::Service {
                        namespace: svc["namespace"].as_str().unwrap_or_default().to_owned(),
                        name: svc["name"].as_str().unwrap_or_default().to_owned(),
                        path: svc["path"].as_str().unwrap_or("/").to_owned(),
                        port: svc["port"]
                            .as_u64()
                            .and_then(|p| u16::try_from(p).ok())
                            .unwrap_or(443),
                    }
                }
            };
            use base64::Engine as _;
            Webhook {
                endpoint,
                ca_bundle: cc["caBundle"]
                    .as_str()
                    .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                    .unwrap_or_default(),
            }
        });
        Conversion {
            storage: format!("{group}/{storage}"),
            webhook,
            kind: spec["names"]["kind"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        }
    }

    /// Whether converting needs the webhook (else only `apiVersion`
    /// changes).
    #[must_use]
    pub fn by_webhook(&self) -> bool {
        self.webhook.is_some()
    }

    /// `objects` (each of any version) in `desired`: each already there
    /// kept; the others converted, in one review.
    ///
    /// # Errors
    ///
    /// The webhook failed, or answered what cannot be used: 500 with
    /// apiextensions-apiserver's message.
    pub async fn convert(
        &self,
        objects: Vec<Value>,
        desired: &str,
        store: &Store,
        faults: &Faults,
    ) -> Result<Vec<Value>, ApiError> {
        let Some(webhook) = &self.webhook else {
            return Ok(objects
                .into_iter()
                .map(|mut o| {
                    o["apiVersion"] = desired.into();
                    o
                })
                .collect());
        };
        let todo: Vec<usize> = (0..objects.len())
            .filter(|i| objects[*i]["apiVersion"] != desired)
            .collect();
        if todo.is_empty() {
            return Ok(objects);
        }
        // Errors name the version converted from (the first object's).
        let from = objects[todo[0]]["apiVersion"].as_str().unwrap_or_default();
        let gvk = format!("{from}, Kind={}", self.kind);
        let failed =
            |e: String| ApiError::unknown(format!("conversion webhook for {gvk} failed: {e}"));
        let uid = crate::admission::review_uid(faults);
        let review = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {
                "uid": uid,
                "desiredAPIVersion": desired,
                "objects": todo.iter().map(|i| &objects[*i]).collect::<Vec<_>>(),
            },
        });
        let body = serde_json::to_vec(&review).map_err(|e| failed(e.to_string()))?;
        let target = crate::admission::resolve(&webhook.endpoint, WEBHOOK_TIMEOUT, store)
            .map_err(&failed)?;
        let answer =
            crate::admission::call::post(&target, &webhook.ca_bundle, body, WEBHOOK_TIMEOUT)
                .await
                .map_err(&failed)?;
        let answer: Value = serde_json::from_slice(&answer)
            .map_err(|e| failed(format!("couldn't get version/kind; json parse error: {e}")))?;
        let converted = read_answer(&answer, &uid, todo.len(), &gvk).map_err(ApiError::unknown)?;
        let mut out = objects;
        let single = todo.len() == 1;
        for (n, (i, mut c)) in todo.into_iter().zip(converted).enumerate() {
            let invalid = |e: String| {
                ApiError::unknown(if single {
                    format!("conversion webhook for {gvk} returned invalid object at index 0: {e}")
                } else {
                    format!(
                        "conversion webhook for {gvk} returned invalid converted object at index {n}: {e}"
                    )
                })
            };
            if c["apiVersion"] != desired {
                return Err(invalid(format!(
                    "invalid groupVersion (expected {desired}, received {})",
                    c["apiVersion"].as_str().unwrap_or_default()
                )));
            }
            if c["kind"] != out[i]["kind"] {
                return Err(invalid(format!(
                    "invalid kind (expected {}, received {})",
                    out[i]["kind"].as_str().unwrap_or_default(),
                    c["kind"].as_str().unwrap_or_default()
                )));
            }
            for f in ["name", "namespace", "uid"] {
                let (a, b) = (&out[i]["metadata"][f], &c["metadata"][f]);
                if a != b {
                    let show = |v: &Value| v.as_str().unwrap_or_default().to_owned();
                    let what = if f == "uid" { "UID" } else { f };
                    return Err(ApiError::unknown(format!(
                        "conversion webhook for {gvk} returned invalid object: must have the same {what}: {} != {}",
                        show(a),
                        show(b)
                    )));
                }
            }
            restore_metadata(&out[i], &mut c);
            out[i] = c;
        }
        Ok(out)
    }
}

/// A ConversionReview's answer: the converted objects, checked as
/// apiextensions-apiserver checks the review (the objects themselves are
/// checked by the caller).
fn read_answer(
    answer: &Value,
    uid: &str,
    expected: usize,
    gvk: &str,
) -> Result<Vec<Value>, String> {
    let failed = |e: String| format!("conversion webhook for {gvk} failed: {e}");
    let response = &answer["response"];
    if !response.is_object() {
        return Err(failed("no response provided".into()));
    }
    let kind = (answer["apiVersion"].as_str(), answer["kind"].as_str());
    if kind != (Some("apiextensions.k8s.io/v1"), Some("ConversionReview")) {
        return Err(failed(format!(
            "expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got {}, Kind={}",
            kind.0.unwrap_or_default(),
            kind.1.unwrap_or_default()
        )));
    }
    let got = response["uid"].as_str().unwrap_or_default();
    if got != uid {
        return Err(failed(format!(
            "expected response.uid={uid:?}, got {got:?}"
        )));
    }
    let status = response["result"]["status"].as_str().unwrap_or_default();
    if status != "Success" {
        let message = response["result"]["message"].as_str().unwrap_or_default();
        return Err(failed(if message.is_empty() {
            format!("response.result.status was '{status}', not 'Success'")
        } else {
            message.to_owned()
        }));
    }
    let converted = response["convertedObjects"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if converted.len() != expected {
        return Err(format!(
            "conversion webhook for {gvk} returned {} objects, expected {expected}",
            converted.len()
        ));
    }
    Ok(converted)
}

/// A webhook may change an object's labels and annotations only: its
/// other metadata is the original's, as apiextensions-apiserver restores
/// it.
fn restore_metadata(original: &Value, converted: &mut Value) {
    let mut meta = original["metadata"].clone();
    for k in ["labels", "annotations"] {
        match converted["metadata"].get(k) {
            Some(v) if !v.is_null() => meta[k] = v.clone(),
            _ => {
                if let Some(m) = meta.as_object_mut() {
                    m.remove(k);
                }
            }
        }
    }
    converted["metadata"] = meta;
}

/// `spec.conversion`'s v1 defaults: strategy None when absent, a
/// service's port 443.
pub fn default(crd: &mut Value) {
    let Some(spec) = crd.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    if spec.get("conversion").is_none_or(Value::is_null) {
        spec["conversion"] = json!({"strategy": "None"});
    }
    if let Some(svc) = spec.pointer_mut("/conversion/webhook/clientConfig/service")
        && svc.is_object()
        && svc.get("port").is_none_or(Value::is_null)
    {
        svc["port"] = 443.into();
    }
}

/// The field errors kube-apiserver reports for a CRD's `spec.conversion`
/// (its internal field names in the paths, as it reports them).
#[must_use]
pub fn errors(crd: &Value) -> Vec<String> {
    let c = &crd["spec"]["conversion"];
    let mut errs = Vec::new();
    if c.is_null() {
        // Defaulted to strategy None.
        return errs;
    }
    let quoted = |s: &str| Value::String(s.to_owned()).to_string();
    let at = "spec.conversion";
    let cc = &c["webhook"]["clientConfig"];
    let versions = &c["webhook"]["conversionReviewVersions"];
    match c["strategy"].as_str() {
        None | Some("") => errs.push(format!("{at}.strategy: Required value")),
        Some("Webhook") => {
            if !cc.is_object() {
                errs.push(format!(
                    "{at}.webhookClientConfig: Required value: required when strategy is set to Webhook"
                ));
            } else {
                for e in crate::admission::config::client_config_errors(
                    cc,
                    &format!("{at}.webhookClientConfig"),
                ) {
                    errs.push(e);
                }
            }
            let list: Vec<&str> = (versions.as_array().into_iter().flatten())
                .filter_map(Value::as_str)
                .collect();
            if list.is_empty() {
                errs.push(format!("{at}.conversionReviewVersions: Required value"));
            } else if !list.iter().any(|v| matches!(*v, "v1" | "v1beta1")) {
                let shown: Vec<String> = list.iter().map(|v| quoted(v)).collect();
                errs.push(format!(
                    "{at}.conversionReviewVersions: Invalid value: []string{{{}}}: must include at least one of v1, v1beta1",
                    shown.join(", ")
                ));
            }
        }
        Some("None") => {
            if cc.is_object() {
                errs.push(format!(
                    "{at}.webhookClientConfig: Forbidden: should not be set when strategy is not set to Webhook"
                ));
            }
            if !versions.is_null() {
                errs.push(format!(
                    "{at}.conversionReviewVersions: Forbidden: should not be set when strategy is not set to Webhook"
                ));
            }
        }
        Some(s) => errs.push(format!(
            "{at}.strategy: Unsupported value: {}: supported values: \"None\", \"Webhook\"",
            quoted(s)
        )),
    }
    errs
}
