//! PodTemplates (`v1`): their pod template's defaults, held at the top
//! level rather than in a spec.

use serde_json::Value;

use super::strategy::KindStrategy;

/// The PodTemplate kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct PodTemplate;

impl KindStrategy for PodTemplate {
    fn name(&self) -> &'static str {
        "PodTemplate"
    }

    fn default(&self, obj: &mut Value) {
        super::pod::template(obj);
    }
}
