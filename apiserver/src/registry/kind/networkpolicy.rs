//! NetworkPolicies (`networking.k8s.io/v1`): policy types from the rules
//! given.

use serde_json::{Value, json};

use super::fill::{or, spec};
use super::strategy::KindStrategy;

/// The NetworkPolicy kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct NetworkPolicy;

impl KindStrategy for NetworkPolicy {
    fn name(&self) -> &'static str {
        "NetworkPolicy"
    }

    fn default(&self, obj: &mut Value) {
        spec(obj, |spec| {
            let egress = spec.get("egress").is_some_and(|e| !e.is_null());
            let types = if egress {
                json!(["Ingress", "Egress"])
            } else {
                json!(["Ingress"])
            };
            or(spec, "policyTypes", types);
        });
    }
}
