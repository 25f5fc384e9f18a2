//! What the guard tests share.

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

/// A bare pod `name` in `default`.
pub fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}
    }))
    .unwrap()
}
