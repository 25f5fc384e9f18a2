//! CertificateSigningRequests (`certificates.k8s.io/v1`): the `approval`
//! subresource, whose conditions are validated as kube-apiserver does:
//! each has a type, at most once; `Approved`, `Denied` and `Failed` are
//! `True`, any other type (a signer's own) `True`, `False` or `Unknown`;
//! not both approved and denied.

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
        let conditions = new["status"]["conditions"].as_array();
        let (mut errors, mut seen) = (Vec::new(), Vec::new());
        for (i, c) in conditions.into_iter().flatten().enumerate() {
            let (kind, status) = (
                c["type"].as_str().unwrap_or_default(),
                c["status"].as_str().unwrap_or_default(),
            );
            let at = format!("status.conditions[{i}]");
            if kind.is_empty() {
                errors.push(format!("{at}.type: Required value"));
            }
            // The three conditions kube acts on must be True; any other
            // type is the signer's own, True, False or Unknown.
            let allowed: &[&str] = match kind {
                "Approved" | "Denied" | "Failed" => &["True"],
                _ => &["True", "False", "Unknown"],
            };
            if !allowed.contains(&status) {
                let supported: Vec<String> = allowed.iter().map(|s| format!("{s:?}")).collect();
                errors.push(format!(
                    "{at}.status: Unsupported value: {status:?}: supported values: {}",
                    supported.join(", ")
                ));
            }
            if seen.contains(&kind) {
                errors.push(format!("{at}.type: Duplicate value: {kind:?}"));
            }
            seen.push(kind);
        }
        if seen.contains(&"Approved") && seen.contains(&"Denied") {
            errors.push(
                "status.conditions: Invalid value: Approved and Denied conditions are mutually exclusive".to_string(),
            );
        }
        match errors.as_slice() {
            [] => {}
            [one] => return Err(one.clone()),
            many => return Err(format!("[{}]", many.join(", "))),
        }
        Ok(())
    }
}
