//! Metadata-only answers: the `meta.k8s.io/v1` `PartialObjectMetadata`
//! (and `...List`) a client asks for with `Accept:
//! application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1` — what
//! kube-runtime's `metadata_watcher` and `Api::get_metadata` /
//! `list_metadata` send. The object's `metadata` only, under that kind.

use std::sync::Arc;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::storage::store::StoredObject;

/// Whether an Accept header asks for metadata only (the first media type
/// names `PartialObjectMetadata` or `PartialObjectMetadataList` of
/// `meta.k8s.io`).
#[must_use]
pub fn wants_partial(accept: &str) -> bool {
    let Some(first) = accept.split(',').next() else {
        return false;
    };
    let params: Vec<&str> = first.split(';').map(str::trim).collect();
    let has = |p: &str| params.iter().any(|x| x.eq_ignore_ascii_case(p));
    (has("as=PartialObjectMetadata") || has("as=PartialObjectMetadataList")) && has("g=meta.k8s.io")
}

/// The `PartialObjectMetadata` of a stored object: its `metadata` copied as
/// stored, byte for byte (no JSON tree is built).
#[must_use]
pub fn partial_of_one(obj: &StoredObject) -> Bytes {
    let mut out = Vec::with_capacity(obj.raw.len() + 64);
    write_partial(&mut out, obj);
    Bytes::from(out)
}

/// A `PartialObjectMetadataList` of `objs`, with the list's `metadata`
/// (resourceVersion, continue).
#[must_use]
pub fn partial_list(objs: &[Arc<StoredObject>], meta: &Value) -> Bytes {
    crate::storage::render::list_json(
        "PartialObjectMetadataList",
        "meta.k8s.io/v1",
        meta,
        objs,
        write_partial,
    )
}

/// Only the stored object's `metadata`, borrowed from its JSON (the other
/// fields are skipped, not parsed into values).
#[derive(Deserialize)]
struct OnlyMetadata<'a> {
    #[serde(borrow)]
    metadata: Option<&'a RawValue>,
}

fn write_partial(out: &mut Vec<u8>, obj: &StoredObject) {
    let parsed: OnlyMetadata<'_> =
        serde_json::from_slice(&obj.raw).expect("stored objects are valid JSON");
    let metadata = parsed.metadata.map_or("{}", RawValue::get);
    out.extend_from_slice(
        b"{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":",
    );
    out.extend_from_slice(metadata.as_bytes());
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn accept_headers() {
        for yes in [
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
            "application/json; as=PartialObjectMetadata; g=meta.k8s.io; v=v1, application/json",
        ] {
            assert!(wants_partial(yes), "{yes}");
        }
        for no in [
            "application/json",
            "application/json;as=Table;g=meta.k8s.io;v=v1",
            "application/json, application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
            "application/json;as=PartialObjectMetadata",
            "",
        ] {
            assert!(!wants_partial(no), "{no}");
        }
    }

    #[test]
    fn only_metadata_is_kept_as_stored() {
        let cm = StoredObject::from_value(
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "a", "uid": "u", "labels": {"x": "y"}, "resourceVersion": ""},
                "data": {"k": "v", "metadata": "not this one"}}),
            7,
        );
        let one: Value = serde_json::from_slice(&partial_of_one(&cm)).unwrap();
        let expected = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": {"name": "a", "uid": "u", "labels": {"x": "y"}, "resourceVersion": "7"}});
        assert_eq!(one, expected);
        let list = partial_list(
            &[cm.clone(), cm],
            &json!({"resourceVersion": "9", "continue": "tok"}),
        );
        let list: Value = serde_json::from_slice(&list).unwrap();
        assert_eq!(
            list,
            json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                "metadata": {"resourceVersion": "9", "continue": "tok"},
                "items": [expected.clone(), expected]})
        );
        let empty: Value = serde_json::from_slice(&partial_list(&[], &json!({}))).unwrap();
        assert_eq!(empty["items"], json!([]));
    }
}
