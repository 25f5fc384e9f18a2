//! PersistentVolumes (`v1`): reclaim policy and volume mode defaults; the
//! DELETE answers the volume.

use serde_json::{Value, json};

use super::fill::{or, spec};
use super::strategy::KindStrategy;

/// The PersistentVolume kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct PersistentVolume;

impl KindStrategy for PersistentVolume {
    fn name(&self) -> &'static str {
        "PersistentVolume"
    }

    fn default(&self, obj: &mut Value) {
        spec(obj, |s| {
            or(s, "persistentVolumeReclaimPolicy", json!("Retain"));
            or(s, "volumeMode", json!("Filesystem"));
        });
    }

    fn returns_deleted_object(&self) -> bool {
        true
    }
}
