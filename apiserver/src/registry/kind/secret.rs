//! Secrets (`v1`): `stringData` written into `data` (and never stored),
//! `type: Opaque` by default, and a Data column.

use serde_json::{Value, json};

use super::configmap::config_keys;
use super::fill::or;
use super::strategy::{Column, ColumnDoc, KindStrategy, Subresource};
use crate::machinery::status::ApiError;

/// The Secret kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct Secret;

impl KindStrategy for Secret {
    fn name(&self) -> &'static str {
        "Secret"
    }

    fn validate(&self, obj: &Value) -> Result<(), ApiError> {
        config_keys(obj, "Secret", &["data", "stringData"])
    }

    /// A Secret's `type` never changes (kube-apiserver's
    /// `ValidateSecretUpdate`); the update's is as defaulted.
    fn check_subresource(&self, sub: Subresource, old: &Value, new: &Value) -> Result<(), String> {
        let ty = |v: &Value| v["type"].as_str().unwrap_or("Opaque").to_string();
        if sub == Subresource::Main && ty(old) != ty(new) {
            return Err(format!(
                "type: Invalid value: {:?}: field is immutable",
                ty(new)
            ));
        }
        Ok(())
    }

    /// Besides the type, kube's conversion of a v1 Secret: each
    /// `stringData` entry overwrites `data`'s, base64-encoded, and
    /// `stringData` itself is dropped (it is write-only).
    fn default(&self, obj: &mut Value) {
        use base64::Engine as _;
        if let Some(Value::Object(strings)) =
            obj.as_object_mut().and_then(|o| o.remove("stringData"))
        {
            let data = &mut obj["data"];
            if !data.is_object() {
                *data = json!({});
            }
            for (k, v) in strings {
                let text = match v {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                data[k] = Value::String(base64::engine::general_purpose::STANDARD.encode(text));
            }
        }
        or(obj, "type", json!("Opaque"));
    }

    fn columns(&self) -> &'static [Column] {
        &[Column {
            doc: ColumnDoc::Field("api.core.v1.Secret", "data"),
            ..super::configmap::DATA
        }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_data_overwrites_data_and_is_not_stored() {
        let mut o =
            json!({"data": {"a": "eA==", "b": "eQ=="}, "stringData": {"b": "bar", "c": "eggs"}});
        Secret.default(&mut o);
        assert_eq!(
            o,
            json!({"data": {"a": "eA==", "b": "YmFy", "c": "ZWdncw=="}, "type": "Opaque"})
        );
        let mut o = json!({"stringData": {"k": "v"}, "type": "kubernetes.io/tls"});
        Secret.default(&mut o);
        assert_eq!(
            o,
            json!({"data": {"k": "dg=="}, "type": "kubernetes.io/tls"})
        );
    }
}
