//! The OpenAPI documents, built once per change of the served resources
//! (they are large: every definition a kind refers to) and shared by the
//! requests until the next change.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use serde_json::Value;

use crate::registry::resources::Registry;

/// The documents of one registry generation (see
/// [`Registry::generation`]).
#[derive(Debug, Default)]
pub struct Cache {
    built: Mutex<Option<Arc<Built>>>,
}

/// What one generation's documents are; the v2 document and its
/// protobuf form are built on first use.
#[derive(Debug)]
struct Built {
    generation: u64,
    /// The v3 documents by (group, version), as JSON text.
    v3: BTreeMap<(String, String), Bytes>,
    /// The v3 index, with each document's hash, as JSON text.
    index: Bytes,
    /// The v2 document and its JSON text.
    v2: OnceLock<(Arc<Value>, Bytes)>,
    v2_protobuf: OnceLock<Result<Bytes, String>>,
}

impl Cache {
    /// The documents for the registry as it is now: the cached ones when
    /// nothing changed since they were built.
    fn current(&self, registry: &Registry) -> Arc<Built> {
        // Read before the table: a change after it shows as a newer
        // generation next time, so the cache is at worst rebuilt.
        let generation = registry.generation();
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = built.as_ref().filter(|b| b.generation == generation) {
            return b.clone();
        }
        let v3: BTreeMap<_, _> = super::group_versions(registry)
            .into_iter()
            .filter_map(|(g, v)| {
                let doc = super::document(registry, &g, &v)?;
                Some(((g, v), Bytes::from(doc.to_string())))
            })
            .collect();
        let hashes = v3.iter().map(|(gv, d)| (gv.clone(), ward_base::fnv1a(d)));
        let b = Arc::new(Built {
            generation,
            index: Bytes::from(super::index_of(hashes).to_string()),
            v3,
            v2: OnceLock::new(),
            v2_protobuf: OnceLock::new(),
        });
        *built = Some(b.clone());
        b
    }

    /// `/openapi/v3`: the index ([`super::index`]), as JSON text.
    #[must_use]
    pub fn index(&self, registry: &Registry) -> Bytes {
        self.current(registry).index.clone()
    }

    /// A group-version's v3 document ([`super::document`]) as JSON text;
    /// None when nothing of it is served.
    #[must_use]
    pub fn document(&self, registry: &Registry, group: &str, version: &str) -> Option<Bytes> {
        self.current(registry)
            .v3
            .get(&(group.to_string(), version.to_string()))
            .cloned()
    }

    /// `/openapi/v2` as JSON text ([`super::v2`]).
    #[must_use]
    pub fn v2(&self, registry: &Registry) -> Bytes {
        let b = self.current(registry);
        b.v2.get_or_init(|| v2(registry)).1.clone()
    }

    /// `/openapi/v2` as gnostic protobuf
    /// ([`crate::machinery::proto::openapi_v2::encode`]).
    ///
    /// # Errors
    /// The document has a key the encoder does not know (a bug, kept
    /// as the encoder's message).
    pub fn v2_protobuf(&self, registry: &Registry) -> Result<Bytes, String> {
        let b = self.current(registry);
        b.v2_protobuf
            .get_or_init(|| {
                let (doc, _) = b.v2.get_or_init(|| v2(registry));
                crate::machinery::proto::openapi_v2::encode(doc)
                    .map(Bytes::from)
                    .map_err(|e| e.to_string())
            })
            .clone()
    }
}

/// The v2 document and its JSON text.
fn v2(registry: &Registry) -> (Arc<Value>, Bytes) {
    let doc = super::v2(registry);
    let text = Bytes::from(doc.to_string());
    (Arc::new(doc), text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_once_per_change_and_rebuilt_after_one() {
        let reg = Registry::with_builtins();
        let cache = Cache::default();
        let a = cache.document(&reg, "apps", "v1").unwrap();
        let b = cache.document(&reg, "apps", "v1").unwrap();
        assert_eq!(a.as_ptr(), b.as_ptr());
        let index = cache.index(&reg);
        assert!(cache.document(&reg, "example.ward.dev", "v1").is_none());

        let mut w = super::super::custom::tests::widgets(None);
        w.version = "v1".into();
        reg.insert(w);
        let c = cache.document(&reg, "apps", "v1").unwrap();
        assert_ne!(a.as_ptr(), c.as_ptr());
        assert!(cache.document(&reg, "example.ward.dev", "v1").is_some());
        let after = cache.index(&reg);
        assert_ne!(index, after);
        assert_eq!(cache.index(&reg), super::super::index(&reg).to_string());
        assert!(cache.v2_protobuf(&reg).is_ok());
    }
}
