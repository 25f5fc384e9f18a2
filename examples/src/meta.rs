//! Reading an object's controller ownerReference, as every example does.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// The controller ownerReference of an object, if any.
#[must_use]
pub fn controller_ref(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
}

/// The uid its controller ownerReference names ("" without one).
#[must_use]
pub fn controller_uid(meta: &ObjectMeta) -> String {
    controller_ref(meta)
        .map(|r| r.uid.clone())
        .unwrap_or_default()
}
