//! Metadata-only answers: the `meta.k8s.io/v1` `PartialObjectMetadata`
//! (and `...List`) a client asks for with `Accept:
//! application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1` — what
//! kube-runtime's `metadata_watcher` and `Api::get_metadata` /
//! `list_metadata` send. The object's `metadata` only, under that kind.

use serde_json::{Value, json};

use crate::resources::ResourceInfo;

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

/// `obj` as a `PartialObjectMetadata`, in the signature of the watch's
/// per-watcher rendering.
#[must_use]
pub fn partial_of_one(_info: &ResourceInfo, obj: &Value) -> Value {
    partial_metadata(obj)
}

fn partial_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// A `PartialObjectMetadataList` of `objs`, with the list's `metadata`
/// (resourceVersion, continue).
#[must_use]
pub fn partial_list(objs: &[Value], meta: Value) -> Value {
    json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "items": objs.iter().map(partial_metadata).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
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
    fn only_metadata_is_kept() {
        let info = crate::resources::builtin_resources().remove(0);
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "uid": "u", "resourceVersion": "7"}, "data": {"k": "v"}});
        let p = partial_of_one(&info, &cm);
        assert_eq!(
            p,
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": {"name": "a", "uid": "u", "resourceVersion": "7"}})
        );
        let l = partial_list(&[cm], json!({"resourceVersion": "9", "continue": "tok"}));
        assert_eq!(l["kind"], "PartialObjectMetadataList");
        assert_eq!(
            l["metadata"],
            json!({"resourceVersion": "9", "continue": "tok"})
        );
        assert_eq!(l["items"][0], p);
    }
}
