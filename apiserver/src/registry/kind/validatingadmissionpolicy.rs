//! ValidatingAdmissionPolicies and ValidatingAdmissionPolicyBindings
//! (`admissionregistration.k8s.io/v1`): defaulted and checked at
//! registration as kube-apiserver does ([`crate::admission::policy_config`]),
//! so a stored policy can be enforced. `status.typeChecking` is not
//! written (kube's controller type-checks expressions against the matched
//! kinds' schemas; this server compiles them `dyn`).

use serde_json::Value;

use super::strategy::KindStrategy;
use crate::machinery::status::ApiError;
use crate::registry::spec::policy as policy_config;

/// The ValidatingAdmissionPolicy kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct ValidatingAdmissionPolicy;

/// The ValidatingAdmissionPolicyBinding kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct ValidatingAdmissionPolicyBinding;

fn invalid(obj: &Value, kind: &str, errs: &[String]) -> Result<(), ApiError> {
    let message = match errs {
        [] => return Ok(()),
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    Err(ApiError::invalid(
        &format!("{kind}.admissionregistration.k8s.io"),
        obj["metadata"]["name"].as_str().unwrap_or_default(),
        message,
    ))
}

impl KindStrategy for ValidatingAdmissionPolicy {
    fn name(&self) -> &'static str {
        "ValidatingAdmissionPolicy"
    }

    fn validate(&self, obj: &Value) -> Result<(), ApiError> {
        invalid(obj, self.name(), &policy_config::policy_errors(obj))
    }

    fn default(&self, obj: &mut Value) {
        policy_config::default_policy(obj);
    }
}

impl KindStrategy for ValidatingAdmissionPolicyBinding {
    fn name(&self) -> &'static str {
        "ValidatingAdmissionPolicyBinding"
    }

    fn validate(&self, obj: &Value) -> Result<(), ApiError> {
        invalid(obj, self.name(), &policy_config::binding_errors(obj))
    }

    fn default(&self, obj: &mut Value) {
        policy_config::default_binding(obj);
    }
}
