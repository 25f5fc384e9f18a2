//! [`ShardKey`]: what an object is hashed by, and so which slot, and which
//! member, it belongs to.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// What an object is hashed by (KEP-5866's two fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ShardKey {
    /// `metadata.uid`: objects spread evenly whatever their namespaces.
    #[default]
    Uid,
    /// `metadata.namespace`: a namespace's objects stay together (and a
    /// cluster-scoped kind all lands on one replica).
    Namespace,
}

impl ShardKey {
    /// The field as a `shardSelector` names it.
    #[must_use]
    pub fn field(self) -> &'static str {
        match self {
            ShardKey::Uid => "object.metadata.uid",
            ShardKey::Namespace => "object.metadata.namespace",
        }
    }

    /// The hash of an object's field (`None`: an object without a uid).
    #[must_use]
    pub fn hash(self, meta: &ObjectMeta) -> Option<u64> {
        let value = match self {
            ShardKey::Uid => meta.uid.as_deref()?,
            ShardKey::Namespace => meta.namespace.as_deref().unwrap_or(""),
        };
        Some(ward_base::fnv1a(value.as_bytes()))
    }

    /// The hash a child is routed by: its controller owner's uid (by uid),
    /// or its namespace. `None`: a child without a controller owner.
    #[must_use]
    pub fn child_hash(self, meta: &ObjectMeta) -> Option<u64> {
        match self {
            ShardKey::Uid => meta
                .owner_references
                .as_ref()?
                .iter()
                .find(|o| o.controller == Some(true))
                .map(|o| ward_base::fnv1a(o.uid.as_bytes())),
            ShardKey::Namespace => self.hash(meta),
        }
    }
}
