//! A CRD's versions as far as conversion goes: its storage version and
//! `spec.conversion` ([`Conversion`]), defaulted and checked as
//! apiextensions-apiserver does.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};

use super::webhook::{Endpoint, client};

/// How long a conversion webhook may take (apiextensions-apiserver's
/// fixed timeout).
pub const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(30);

/// A CRD's `spec.conversion` and storage version, or a built-in kind's
/// conversion into the group it is stored in ([`Builtin`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversion {
    /// The storage version's apiVersion (`group/version`, `v1` for the
    /// core group).
    pub storage: String,
    /// The conversion webhook (`strategy: Webhook`); None for `strategy: None`.
    pub webhook: Option<Webhook>,
    /// A built-in kind's field-by-field conversion; None for CRDs.
    pub builtin: Option<Builtin>,
    /// The kind (`spec.names.kind`), as errors name it
    /// (`<group>/<version>, Kind=<kind>`).
    pub kind: String,
}

/// A built-in kind kube-apiserver serves in a second group from the
/// storage of the first, converting field by field on every read and
/// write (its generated conversions): one object, a resourceVersion and
/// a uid, whichever group a client reads it through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Builtin {
    /// `events.k8s.io/v1` Events, stored as core `v1` Events
    /// (`regarding` is `involvedObject`, `note` is `message`, ...).
    Events,
    /// `autoscaling/v1` HorizontalPodAutoscalers, stored at
    /// `autoscaling/v2` (`targetCPUUtilizationPercentage` is a `cpu`
    /// metric, ...).
    HorizontalPodAutoscalers,
}

impl Builtin {
    /// The built-in conversion of the resource `group`/`version`/`plural`,
    /// if it is stored in another group or version.
    #[must_use]
    pub fn of(group: &str, version: &str, plural: &str) -> Option<Builtin> {
        match (group, version, plural) {
            ("events.k8s.io", _, "events") => Some(Builtin::Events),
            ("autoscaling", "v1", "horizontalpodautoscalers") => {
                Some(Builtin::HorizontalPodAutoscalers)
            }
            _ => None,
        }
    }

    /// The group whose storage the resource shares.
    #[must_use]
    pub fn storage_group(self) -> &'static str {
        match self {
            Builtin::Events => "",
            Builtin::HorizontalPodAutoscalers => "autoscaling",
        }
    }

    /// The apiVersion objects are stored at.
    #[must_use]
    pub fn storage_api_version(self) -> &'static str {
        match self {
            Builtin::Events => "v1",
            Builtin::HorizontalPodAutoscalers => "autoscaling/v2",
        }
    }

    /// The stored kind's name for a field label a selector names (its
    /// field label conversion): `regarding.name` is `involvedObject.name`.
    #[must_use]
    pub fn stored_field_label(self, label: &str) -> &str {
        match self {
            Builtin::Events => crate::registry::kind::event::core_field_label(label),
            Builtin::HorizontalPodAutoscalers => label,
        }
    }

    /// `obj` (in either group's form) rewritten into `desired`'s form.
    pub fn convert(self, obj: &mut Value, desired: &str) {
        match self {
            Builtin::Events => crate::registry::kind::event::convert(obj, desired),
            Builtin::HorizontalPodAutoscalers => {
                crate::registry::kind::horizontalpodautoscaler::convert(obj, desired);
            }
        }
    }
}

/// A conversion webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    /// Where it is called.
    pub endpoint: Endpoint,
    /// The PEM certificates that verify it (`caBundle`, decoded).
    pub ca_bundle: Vec<u8>,
    /// Stored objects it has converted, so that every watch of a version
    /// (and every read) does not call it again for the same event.
    pub(crate) converted: Converted,
}

/// Conversions of stored objects, by (uid, resourceVersion, desired
/// apiVersion): a stored version never changes, so neither does its
/// conversion while the CRD stays as it is (a CRD write builds a new
/// [`Conversion`], cache and all). Bounded: emptied when full.
#[derive(Debug, Default)]
pub(crate) struct Converted(Mutex<HashMap<(String, String, String), Value>>);

/// What is kept before the cache is emptied.
const CONVERTED_MAX: usize = 4096;

impl Converted {
    pub(crate) fn get(&self, key: &(String, String, String)) -> Option<Value> {
        self.lock().get(key).cloned()
    }

    pub(crate) fn put(&self, key: (String, String, String), value: Value) {
        let mut map = self.lock();
        if map.len() >= CONVERTED_MAX {
            map.clear();
        }
        map.insert(key, value);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String, String), Value>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A cache is no part of what a webhook is.
impl PartialEq for Converted {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Converted {}

/// A copy starts empty.
impl Clone for Converted {
    fn clone(&self) -> Self {
        Converted::default()
    }
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
            let (endpoint, ca_bundle) = client(&spec["conversion"]["webhook"]["clientConfig"]);
            // A bundle that is not base64 trusts nothing: the call fails.
            Webhook {
                endpoint,
                ca_bundle: ca_bundle.unwrap_or_default(),
                converted: Converted::default(),
            }
        });
        Conversion {
            storage: format!("{group}/{storage}"),
            webhook,
            builtin: None,
            kind: spec["names"]["kind"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        }
    }

    /// A built-in kind's conversion into its storage group.
    #[must_use]
    pub fn of_builtin(builtin: Builtin, kind: &str) -> Conversion {
        Conversion {
            storage: builtin.storage_api_version().to_owned(),
            webhook: None,
            builtin: Some(builtin),
            kind: kind.to_owned(),
        }
    }

    /// Whether converting needs the webhook (else only `apiVersion`
    /// changes, and a built-in kind's fields).
    #[must_use]
    pub fn by_webhook(&self) -> bool {
        self.webhook.is_some()
    }

    /// `obj` in `desired` without a webhook: its `apiVersion` rewritten,
    /// and a built-in kind's fields converted.
    pub fn rewrite(&self, obj: &mut Value, desired: &str) {
        match self.builtin {
            Some(b) => b.convert(obj, desired),
            None => obj["apiVersion"] = desired.into(),
        }
    }
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
                for e in
                    super::webhook::client_config_errors(cc, &format!("{at}.webhookClientConfig"))
                {
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
