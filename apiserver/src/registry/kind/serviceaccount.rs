//! ServiceAccounts (`v1`): the `token` subresource (a TokenRequest); the
//! DELETE answers the account.

use super::strategy::{KindStrategy, ServedSubresource};

/// The ServiceAccount kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct ServiceAccount;

impl KindStrategy for ServiceAccount {
    fn name(&self) -> &'static str {
        "ServiceAccount"
    }

    fn subresources(&self) -> &'static [ServedSubresource] {
        &[ServedSubresource {
            name: "token",
            kind: Some(("authentication.k8s.io", "v1", "TokenRequest")),
            verbs: &["create"],
        }]
    }

    fn returns_deleted_object(&self) -> bool {
        true
    }
}
