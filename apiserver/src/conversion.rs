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
            kind: spec["names"]["kind"].as_str().unwrap_or_default().to_owned(),
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
        let gvk = format!("{desired}, Kind={}", self.kind);
        let failed = |e: String| {
            ApiError::internal(format!(
                "Internal error occurred: conversion webhook for {gvk} failed: {e}"
            ))
        };
        let uid = review_uid(faults);
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
        let answer = crate::admission::call::post(&target, &webhook.ca_bundle, body, WEBHOOK_TIMEOUT)
            .await
            .map_err(&failed)?;
        let answer: Value = serde_json::from_slice(&answer)
            .map_err(|e| failed(format!("couldn't get version/kind; json parse error: {e}")))?;
        let converted = read_answer(&answer, &uid, todo.len(), desired, &gvk)?;
        let mut out = objects;
        for (i, mut c) in todo.into_iter().zip(converted) {
            restore_metadata(&out[i], &mut c);
            out[i] = c;
        }
        Ok(out)
    }
}

/// A ConversionReview's answer: the converted objects, checked as
/// apiextensions-apiserver checks them.
fn read_answer(
    answer: &Value,
    uid: &str,
    expected: usize,
    desired: &str,
    gvk: &str,
) -> Result<Vec<Value>, ApiError> {
    let internal = |m: String| ApiError::internal(format!("Internal error occurred: {m}"));
    let response = &answer["response"];
    if !response.is_object() {
        return Err(internal(format!(
            "conversion webhook for {gvk} failed: no response provided"
        )));
    }
    let got = response["uid"].as_str().unwrap_or_default();
    if got != uid {
        return Err(internal(format!(
            "conversion webhook for {gvk} failed: expected response uid {uid:?}, got {got:?}"
        )));
    }
    if response["result"]["status"] != "Success" {
        return Err(internal(format!(
            "conversion webhook for {gvk} returned failure: {}",
            response["result"]["message"].as_str().unwrap_or_default()
        )));
    }
    let converted = response["convertedObjects"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if converted.len() != expected {
        return Err(internal(format!(
            "conversion webhook for {gvk} returned {} objects, expected {expected}",
            converted.len()
        )));
    }
    for (i, c) in converted.iter().enumerate() {
        if c["apiVersion"] != desired {
            return Err(internal(format!(
                "conversion webhook for {gvk} returned invalid converted object at index {i}: expected apiVersion {desired:?}, got {}",
                c["apiVersion"]
            )));
        }
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

fn review_uid(faults: &Faults) -> String {
    let (a, b) = (faults.random(), faults.random());
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        (b >> 48) & 0x3fff | 0x8000,
        b & 0xffff_ffff_ffff
    )
}
