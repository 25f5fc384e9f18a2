//! Services (`v1`): names that are DNS labels, type and traffic-policy
//! defaults, ports' protocol and target port, the DELETE answering the
//! Service; its cluster IP, IP families and node ports are allocated
//! ([`crate::controllers::alloc`]).

use serde_json::{Value, json};

use super::fill::{each, or, spec};
use super::strategy::{KindStrategy, NameRule};

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

    fn allocates(&self) -> bool {
        true
    }

    fn returns_deleted_object(&self) -> bool {
        true
    }
}
