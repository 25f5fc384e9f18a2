//! The store's API: what a test, a campaign or an invariant reads from
//! the server's objects without a request (and what a benchmark writes
//! through it).
//!
//! [`ApiServer::store`](crate::ApiServer::store) hands out the server's
//! [`Store`]: one linearizable map of objects keyed by [`StorageKey`] (a
//! resource) and namespace/name, the global resourceVersion, and the
//! event history watches resume from.
//! [`Store::snapshot_all_and_subscribe`] is the history's start and every
//! [`Event`] after it; [`Store::get`] and [`Store::list`] read the current
//! state. A [`ResourceInfo`] says how a resource is stored and served
//! ([`builtin_resources`] lists the built-in ones).

pub use crate::registry::resources::{ResourceInfo, StorageKey, builtin_resources};
pub use crate::storage::store::{
    Commit, DeleteSpec, Deleted, Event, EventType, Keyed, ListPage, OwnerRef, RefUid, Renderings,
    Rules, Store, StoreConfig, StoredObject, Uid, namespaces_key,
};
pub use crate::storage::strategy::KindRules;
