//! ComponentStatuses (`v1`): read-only (the real server computes them on
//! read).

use super::strategy::KindStrategy;

/// The ComponentStatus kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct ComponentStatus;

impl KindStrategy for ComponentStatus {
    fn name(&self) -> &'static str {
        "ComponentStatus"
    }

    fn verbs(&self) -> &'static [&'static str] {
        &["get", "list"]
    }
}
