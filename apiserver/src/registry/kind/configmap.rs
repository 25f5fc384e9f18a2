//! ConfigMaps (`v1`): a Data column.

use serde_json::Value;

use super::strategy::{Column, KindStrategy};

/// The ConfigMap kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct ConfigMap;

/// How many keys `data` holds (ConfigMaps and Secrets print it).
pub const DATA: Column = Column {
    name: "Data",
    format: "",
    cell: |obj: &Value| obj["data"].as_object().map_or(0, |m| m.len()).into(),
};

impl KindStrategy for ConfigMap {
    fn name(&self) -> &'static str {
        "ConfigMap"
    }

    fn columns(&self) -> &'static [Column] {
        &[DATA]
    }
}
