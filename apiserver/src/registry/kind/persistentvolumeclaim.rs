//! PersistentVolumeClaims (`v1`): volume mode default; the DELETE answers
//! the claim.

use serde_json::{Value, json};

use super::fill::{or, spec};
use super::strategy::KindStrategy;

/// The PersistentVolumeClaim kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct PersistentVolumeClaim;

impl KindStrategy for PersistentVolumeClaim {
    fn name(&self) -> &'static str {
        "PersistentVolumeClaim"
    }

    fn default(&self, obj: &mut Value) {
        spec(obj, |s| or(s, "volumeMode", json!("Filesystem")));
    }

    fn returns_deleted_object(&self) -> bool {
        true
    }
}
