//! Mutating- and ValidatingWebhookConfigurations
//! (`admissionregistration.k8s.io/v1`): defaulted and checked at
//! registration as kube-apiserver does ([`crate::admission::config`]), so
//! a webhook that is stored can be called.

use serde_json::Value;

use super::strategy::KindStrategy;
use crate::machinery::status::ApiError;
use crate::registry::spec::webhook as config;

/// The MutatingWebhookConfiguration kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct MutatingWebhookConfiguration;

/// The ValidatingWebhookConfiguration kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct ValidatingWebhookConfiguration;

fn validate(obj: &Value, kind: &str, mutating: bool) -> Result<(), ApiError> {
    if let Some(e) = config::undecodable_ca_bundle(obj) {
        return Err(ApiError::bad_request(format!(
            "{kind} in version \"v1\" cannot be handled as a {kind}: {e}"
        )));
    }
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    let message = match config::errors(obj, mutating).as_slice() {
        [] => return Ok(()),
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    Err(ApiError::invalid(
        &format!("{kind}.admissionregistration.k8s.io"),
        name,
        message,
    ))
}

impl KindStrategy for MutatingWebhookConfiguration {
    fn name(&self) -> &'static str {
        "MutatingWebhookConfiguration"
    }

    fn validate(&self, obj: &Value) -> Result<(), ApiError> {
        validate(obj, self.name(), true)
    }

    fn default(&self, obj: &mut Value) {
        config::default(obj, true);
    }
}

impl KindStrategy for ValidatingWebhookConfiguration {
    fn name(&self) -> &'static str {
        "ValidatingWebhookConfiguration"
    }

    fn validate(&self, obj: &Value) -> Result<(), ApiError> {
        validate(obj, self.name(), false)
    }

    fn default(&self, obj: &mut Value) {
        config::default(obj, false);
    }
}
