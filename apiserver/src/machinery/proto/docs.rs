//! What the Go types say of the messages in the field table beyond their
//! fields, at the served release (written by `generate.py --extract-go`):
//! each type's and field's swagger doc (`apiserver/proto/go_docs.txt`),
//! as kube-apiserver publishes it in its OpenAPI documents and its
//! Tables' column definitions; and which structs are atomic
//! (`go_atomic.txt`, `+structType=atomic`), which its field manager owns
//! whole.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

/// The atomic structs, parsed once.
static ATOMIC: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    include_str!("../../../proto/go_atomic.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect()
});

/// Whether the message `message` (k8s-pb's name) is an atomic struct.
#[must_use]
pub(crate) fn atomic(message: &str) -> bool {
    ATOMIC.contains(message)
}

/// message → (JSON field, `""` for the type) → text, parsed once.
static DOCS: LazyLock<HashMap<String, HashMap<String, String>>> = LazyLock::new(|| {
    let mut out: HashMap<String, HashMap<String, String>> = HashMap::new();
    for line in include_str!("../../../proto/go_docs.txt").lines() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (message, field, text): (String, String, String) =
            serde_json::from_str(line).expect("go_docs.txt holds [message, field, text] lines");
        out.entry(message).or_default().insert(field, text);
    }
    out
});

/// The documentation of `field` of the message `message` (k8s-pb's name,
/// `api.core.v1.PodSpec`); `""` for the message itself.
#[must_use]
pub(crate) fn doc(message: &str, field: &str) -> Option<&'static str> {
    DOCS.get(message)?.get(field).map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_and_fields_are_documented() {
        let meta = "apimachinery.pkg.apis.meta.v1.ObjectMeta";
        assert!(doc(meta, "").unwrap().starts_with("ObjectMeta is metadata"));
        assert!(
            doc(meta, "name")
                .unwrap()
                .starts_with("Name must be unique")
        );
        assert!(doc("api.apps.v1.DeploymentSpec", "replicas").is_some());
        assert_eq!(doc(meta, "nothing"), None);
        assert_eq!(doc("api.nothing.v1.X", ""), None);
    }

    #[test]
    fn atomic_structs_are_known() {
        assert!(atomic("apimachinery.pkg.apis.meta.v1.LabelSelector"));
        assert!(atomic("api.rbac.v1.RoleRef"));
        assert!(!atomic("api.apps.v1.DeploymentSpec"));
    }
}
