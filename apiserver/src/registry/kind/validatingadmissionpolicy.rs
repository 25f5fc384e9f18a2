//! ValidatingAdmissionPolicies and ValidatingAdmissionPolicyBindings
//! (`admissionregistration.k8s.io/v1`): defaulted and checked at
//! registration as kube-apiserver does ([`crate::admission::policy_config`]),
//! so a stored policy can be enforced. `status.typeChecking` is not
//! written (kube's controller type-checks expressions against the matched
//! kinds' schemas; this server compiles them `dyn`).

use serde_json::Value;

use super::strategy::{KindStrategy, invalid};
use crate::machinery::status::ApiError;
use crate::registry::spec::policy as policy_config;

/// The ValidatingAdmissionPolicy kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct ValidatingAdmissionPolicy;

/// The ValidatingAdmissionPolicyBinding kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct ValidatingAdmissionPolicyBinding;

impl KindStrategy for ValidatingAdmissionPolicy {
    fn name(&self) -> &'static str {
        "ValidatingAdmissionPolicy"
    }

    fn validate(&self, obj: &Value) -> Result<(), ApiError> {
        invalid(
            "ValidatingAdmissionPolicy.admissionregistration.k8s.io",
            obj,
            policy_config::policy_errors(obj),
        )
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
        invalid(
            "ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io",
            obj,
            policy_config::binding_errors(obj),
        )
    }

    fn default(&self, obj: &mut Value) {
        policy_config::default_binding(obj);
    }
}
