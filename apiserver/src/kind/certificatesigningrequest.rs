//! CertificateSigningRequests (`certificates.k8s.io/v1`): the `approval`
//! subresource, whose conditions are `Approved`, `Denied` or `Failed`,
//! and not both approved and denied.

use serde_json::Value;

use super::strategy::{KindStrategy, ServedSubresource, Subresource};

/// The CertificateSigningRequest kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct CertificateSigningRequest;

impl KindStrategy for CertificateSigningRequest {
    fn name(&self) -> &'static str {
        "CertificateSigningRequest"
    }

    fn subresources(&self) -> &'static [ServedSubresource] {
        &[ServedSubresource {
            name: "approval",
            kind: None,
            verbs: &["get", "patch", "update"],
        }]
    }

    fn check_subresource(&self, sub: Subresource, _old: &Value, new: &Value) -> Result<(), String> {
        if sub != Subresource::Approval {
            return Ok(());
        }
        let types: Vec<&str> = new["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| c["type"].as_str().unwrap_or_default())
            .collect();
        if let Some(t) = types
            .iter()
            .find(|t| !matches!(**t, "Approved" | "Denied" | "Failed"))
        {
            return Err(format!(
                "status.conditions[].type: Unsupported value: \"{t}\": supported values: \"Approved\", \"Denied\", \"Failed\""
            ));
        }
        if types.contains(&"Approved") && types.contains(&"Denied") {
            return Err(
                "status.conditions: Invalid value: Approved and Denied conditions are mutually exclusive".to_string(),
            );
        }
        Ok(())
    }
}
