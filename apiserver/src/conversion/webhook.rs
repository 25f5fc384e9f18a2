//! Calling a CRD's conversion webhook: a ConversionReview v1 over the
//! admission webhooks' client, its answer checked as apiextensions-apiserver
//! checks it.

use serde_json::{Value, json};

use crate::faults::Faults;
use crate::machinery::status::ApiError;
use crate::registry::spec::conversion::{Conversion, WEBHOOK_TIMEOUT};
use crate::storage::store::Store;

impl Conversion {
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
                    self.rewrite(&mut o, desired);
                    o
                })
                .collect());
        };
        // A stored object (uid and resourceVersion) converted before is
        // not sent again.
        let key = |o: &Value| {
            let meta = &o["metadata"];
            match (meta["uid"].as_str(), meta["resourceVersion"].as_str()) {
                (Some(uid), Some(rv)) if !uid.is_empty() && !rv.is_empty() => {
                    Some((uid.to_owned(), rv.to_owned(), desired.to_owned()))
                }
                _ => None,
            }
        };
        let mut objects = objects;
        let mut todo = Vec::new();
        for (i, o) in objects.iter_mut().enumerate() {
            if o["apiVersion"] == desired {
                continue;
            }
            match key(o).and_then(|k| webhook.converted.get(&k)) {
                Some(hit) => *o = hit,
                None => todo.push(i),
            }
        }
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
            if let Some(k) = key(&out[i]) {
                webhook.converted.put(k, c.clone());
            }
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
