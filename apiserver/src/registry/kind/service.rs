//! Services (`v1`): names that are DNS labels, type and traffic-policy
//! defaults, ports' protocol and target port, the DELETE answering the
//! Service; its cluster IP, IP families and node ports are allocated
//! ([`crate::controllers::alloc`]).

use serde_json::{Value, json};

use super::fill::{each, or, spec};
use super::strategy::{KindStrategy, NameRule, invalid};
use crate::machinery::status::ApiError;

/// The Service kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct Service;

impl KindStrategy for Service {
    fn name(&self) -> &'static str {
        "Service"
    }

    fn name_rule(&self) -> NameRule {
        NameRule::Label
    }

    fn default(&self, obj: &mut Value) {
        spec(obj, |spec| {
            or(spec, "type", json!("ClusterIP"));
            or(spec, "sessionAffinity", json!("None"));
            let kind = spec["type"].as_str().unwrap_or("").to_string();
            if kind != "ExternalName" {
                or(spec, "internalTrafficPolicy", json!("Cluster"));
            }
            if matches!(kind.as_str(), "NodePort" | "LoadBalancer") {
                or(spec, "externalTrafficPolicy", json!("Cluster"));
            }
            for p in each(spec, "ports") {
                or(p, "protocol", json!("TCP"));
                let port = p["port"].clone();
                or(p, "targetPort", port);
            }
        });
    }

    /// Ports in range; a port's `targetPort` defaults to it, and is
    /// checked as defaulted.
    fn validate(&self, obj: &Value) -> Result<(), ApiError> {
        let mut errs = Vec::new();
        let ports = obj["spec"]["ports"].as_array().into_iter().flatten();
        for (i, p) in ports.enumerate() {
            let target = p.get("targetPort").unwrap_or(&p["port"]);
            for (field, v) in [("port", &p["port"]), ("targetPort", target)] {
                if let Some(n) = v.as_i64().filter(|n| !(1..=65535).contains(n)) {
                    errs.push(format!(
                        "spec.ports[{i}].{field}: Invalid value: {n}: must be between 1 and 65535, inclusive"
                    ));
                }
            }
        }
        invalid("Service", obj, errs)
    }

    fn allocates(&self) -> bool {
        true
    }

    fn returns_deleted_object(&self) -> bool {
        true
    }
}
