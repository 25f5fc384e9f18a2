//! ConfigMaps (`v1`): a Data column.

use serde_json::Value;

use super::strategy::{Column, ColumnDoc, KindStrategy, invalid};
use crate::machinery::status::ApiError;

/// The ConfigMap kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct ConfigMap;

/// How many keys `data` holds (ConfigMaps and Secrets print it).
pub const DATA: Column = Column {
    name: "Data",
    format: "",
    doc: ColumnDoc::Field("api.core.v1.ConfigMap", "data"),
    cell: |obj: &Value| obj["data"].as_object().map_or(0, |m| m.len()).into(),
};

impl KindStrategy for ConfigMap {
    fn name(&self) -> &'static str {
        "ConfigMap"
    }

    fn validate(&self, obj: &Value) -> Result<(), ApiError> {
        config_keys(obj, "ConfigMap", &["data", "binaryData"])
    }

    fn columns(&self) -> &'static [Column] {
        &[DATA]
    }
}

/// The keys of `obj`'s `fields` (a ConfigMap's `data` and `binaryData`, a
/// Secret's `data`) as kube-apiserver's `IsConfigMapKey` checks them: 422
/// naming each bad one.
pub fn config_keys(obj: &Value, kind: &str, fields: &[&str]) -> Result<(), ApiError> {
    let mut errs = Vec::new();
    for f in fields {
        for k in obj[*f].as_object().into_iter().flat_map(|m| m.keys()) {
            let why = if k.is_empty() {
                "must be non-empty"
            } else if k.len() > 253 {
                "must be no more than 253 characters"
            } else if !k
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
            {
                "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
            } else if k == "." {
                "must not be '.'"
            } else if k == ".." {
                "must not be '..'"
            } else if k.starts_with("..") {
                "must not start with '..'"
            } else {
                continue;
            };
            errs.push(format!("{f}[{k}]: Invalid value: {k:?}: {why}"));
        }
    }
    invalid(kind, obj, errs)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn config_keys_are_checked_as_kube_checks_them() {
        let ok =
            json!({"metadata": {"name": "c"}, "data": {"a.b-c_D": "x"}, "binaryData": {"k": ""}});
        assert!(ConfigMap.validate(&ok).is_ok());
        let bad = json!({"metadata": {"name": "c"}, "data": {"a b": "x", "..x": "y", ".": "z"}});
        let e = ConfigMap.validate(&bad).unwrap_err().to_status();
        let causes: Vec<&str> = e["details"]["causes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["field"].as_str().unwrap())
            .collect();
        assert_eq!(causes, ["data[.]", "data[..x]", "data[a b]"], "{e}");
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .contains("must not start with '..'"),
            "{e}"
        );
    }
}
