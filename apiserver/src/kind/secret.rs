//! Secrets (`v1`): `type: Opaque` by default, and a Data column.

use serde_json::{Value, json};

use super::fill::or;
use super::strategy::{Column, KindStrategy};

/// The Secret kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct Secret;

impl KindStrategy for Secret {
    fn name(&self) -> &'static str {
        "Secret"
    }

    fn default(&self, obj: &mut Value) {
        or(obj, "type", json!("Opaque"));
    }

    fn columns(&self) -> &'static [Column] {
        &[super::configmap::DATA]
    }
}
