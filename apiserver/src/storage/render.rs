//! A list's JSON, written around its items' stored bytes (or a rendering
//! of them) without building a JSON tree: what a LIST, a metadata-only
//! LIST and a Table share, below the handler and the watch.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

use crate::storage::store::StoredObject;

/// A list's JSON: its `kind`, `apiVersion` and `metadata`, then `items`,
/// each written by `item` (the stored bytes, or a rendering of them).
pub fn list_json(
    kind: &str,
    api_version: &str,
    meta: &Value,
    items: &[Arc<StoredObject>],
    mut item: impl FnMut(&mut Vec<u8>, &StoredObject),
) -> Bytes {
    let mut out = Vec::with_capacity(128 + items.iter().map(|o| o.raw.len() + 1).sum::<usize>());
    out.extend_from_slice(
        format!(
            "{{\"kind\":{},\"apiVersion\":{},\"metadata\":{meta},\"items\":[",
            Value::from(kind),
            Value::from(api_version),
        )
        .as_bytes(),
    );
    for (i, o) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        item(&mut out, o);
    }
    out.extend_from_slice(b"]}");
    Bytes::from(out)
}

/// `object` (a stored object's JSON) written to `out` without its
/// `apiVersion` and `kind`: how kube-apiserver writes the items of a
/// built-in kind's list (a custom resource's keep theirs). Only the top
/// level is read, its values copied as they are; bytes that are not a
/// JSON object are copied unchanged.
pub fn write_without_type_meta(out: &mut Vec<u8>, object: &[u8]) {
    match serde_json::from_slice::<TopLevel<'_>>(object) {
        Ok(TopLevel(fields)) => {
            out.push(b'{');
            let kept = fields
                .iter()
                .filter(|(k, _)| !matches!(k.as_ref(), "apiVersion" | "kind"));
            for (i, (key, value)) in kept.enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, key.as_ref()).expect("a string serializes");
                out.push(b':');
                out.extend_from_slice(value.get().as_bytes());
            }
            out.push(b'}');
        }
        Err(_) => out.extend_from_slice(object),
    }
}

/// A JSON object's top-level fields, in order, their values unparsed.
struct TopLevel<'a>(Vec<(std::borrow::Cow<'a, str>, &'a serde_json::value::RawValue)>);

impl<'de> serde::Deserialize<'de> for TopLevel<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = TopLevel<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut fields = Vec::new();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    fields.push((key, map.next_value()?));
                }
                Ok(TopLevel(fields))
            }
        }
        d.deserialize_map(Fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_meta_goes_and_everything_else_stays_in_order() {
        let mut out = Vec::new();
        let object = br#"{"apiVersion":"v1","data":{"k":"v \"q\""},"kind":"ConfigMap","metadata":{"name":"a"}}"#;
        write_without_type_meta(&mut out, object);
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"data":{"k":"v \"q\""},"metadata":{"name":"a"}}"#
        );
        out.clear();
        write_without_type_meta(&mut out, b"[1]");
        assert_eq!(out, b"[1]");
    }
}
