//! ReplicationControllers (`v1`): one replica and their pod template's
//! defaults.

use serde_json::{Value, json};

use super::fill::{or, spec};
use super::strategy::KindStrategy;

/// The ReplicationController kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReplicationController;

impl KindStrategy for ReplicationController {
    fn name(&self) -> &'static str {
        "ReplicationController"
    }

    fn default(&self, obj: &mut Value) {
        spec(obj, |s| {
            or(s, "replicas", json!(1));
            super::pod::template(s);
        });
    }
}
