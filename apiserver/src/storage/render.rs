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
