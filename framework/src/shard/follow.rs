//! A sharded controller's watch: kube-runtime's watcher, restarted with
//! the shard's selector whenever its active slots change, filtered
//! client-side whatever the server did.
//!
//! A restart begins with a fresh LIST, so the reflector's store is
//! rebuilt (kube-runtime's `Init` … `InitDone`) with exactly the objects
//! of the new slots: objects of a slot gained are listed (and reconciled),
//! those of a slot lost leave the cache. When the restart only gained
//! slots — none was deactivated since the last start, so no reconcile was
//! cancelled — the objects it lists unchanged (same uid, same
//! resourceVersion as in the cache before) are not triggered again: a
//! hand-over reconciles what moved, not everything the replica held.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use kube::Resource;
use kube::api::Api;
use kube::runtime::reflector::Store;
use kube::runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;

use super::gate::ActiveWatch;
use super::{Shard, Slots, query};

struct State<K: 'static> {
    api: Api<K>,
    wc: watcher::Config,
    shard: Shard,
    /// The slots the running watch was started for.
    slots: Slots,
    /// What restarts it.
    active: ActiveWatch,
    inner: Option<BoxStream<'static, watcher::Result<Event<K>>>>,
    probed: bool,
    gained: GainedOnly,
}

/// Set by [`watch`] when it restarts having only gained slots; taken by
/// [`applied_once_listed`] at that restart's `Init`.
#[derive(Clone, Default)]
pub(crate) struct GainedOnly(Arc<AtomicBool>);

/// The objects of `api` in `shard`'s active slots, as a watcher's events.
pub(crate) fn watch<K>(
    api: Api<K>,
    wc: watcher::Config,
    shard: Shard,
    gained: GainedOnly,
) -> impl Stream<Item = watcher::Result<Event<K>>> + Send
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    shard.register(api.resource_url());
    let state = State {
        api,
        wc,
        active: shard.watch_active(),
        shard,
        slots: Slots::NONE,
        inner: None,
        probed: false,
        gained,
    };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            if st.inner.is_none() {
                st.start().await;
            }
            let inner = st.inner.as_mut().expect("started above");
            tokio::select! {
                biased;
                () = st.active.changed() => st.inner = None,
                event = inner.next() => match event {
                    None => return None,
                    Some(Ok(event)) => {
                        if let Some(event) = st.keep(event) {
                            return Some((Ok(event), st));
                        }
                    }
                    Some(Err(e)) => return Some((Err(e), st)),
                },
            }
        }
    })
}

impl<K> State<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// (Re)start the watch for the slots active now.
    async fn start(&mut self) {
        let (before, epoch) = self.active.seen();
        self.slots = self.active.take();
        let only_gained = !before.is_empty()
            && before.minus(self.slots).is_empty()
            && self.active.seen().1 == epoch;
        self.gained.0.store(only_gained, Ordering::Relaxed);
        if self.slots.is_empty() {
            // Nothing to watch: empty the cache, then wait for a slot.
            self.inner = Some(
                futures::stream::iter([Ok(Event::Init), Ok(Event::InitDone)])
                    .chain(futures::stream::pending())
                    .boxed(),
            );
            return;
        }
        if !self.probed {
            self.probed = true;
            let client = self.api.clone().into_client();
            let server = query::server_filters(&client, self.api.resource_url()).await;
            let labels = [
                ("ring", self.shard.ring().to_string()),
                ("identity", self.shard.identity().to_string()),
            ];
            metrics::gauge!("ward_shard_server_filtering", &labels).set(if server {
                1.0
            } else {
                0.0
            });
            if !server {
                tracing::info!(ring = %self.shard.ring(), path = %self.api.resource_url(),
                    "the server does not apply shardSelector here: filtering client-side");
            }
        }
        self.inner = Some(watcher::watcher(self.api.clone(), self.wc.clone()).boxed());
    }

    /// An event, unless it carries an object outside the watch's slots.
    fn keep(&self, event: Event<K>) -> Option<Event<K>> {
        let key = self.shard.key();
        let inside = |k: &K| {
            key.hash(k.meta())
                .is_some_and(|h| self.slots.contains_hash(h))
        };
        match &event {
            Event::Apply(k) | Event::InitApply(k) if !inside(k) => None,
            _ => Some(event),
        }
    }
}

/// The objects a sharded watch applied, as triggers — like kube-runtime's
/// `applied_objects`, except that a relist's objects are held back until
/// its `InitDone`, when the reflector's store holds them. kube-runtime
/// looks each trigger up in the store: an object of a slot just gained,
/// triggered while its relist is still paging, would not be found there
/// (`ObjectNotFound`) and never reconciled. (kube-runtime's own relists
/// have the same gap only for objects created meanwhile.) After a restart
/// that only gained slots ([`GainedOnly`]), objects `store` held unchanged
/// before it are not triggered again (see the module docs).
pub(crate) fn applied_once_listed<K>(
    events: impl Stream<Item = watcher::Result<Event<K>>> + Send,
    store: Store<K>,
    gained: GainedOnly,
) -> impl Stream<Item = watcher::Result<K>> + Send
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    let mut held: Vec<K> = Vec::new();
    // What the store held before a gain-only restart (shared, not copied).
    let mut before: Option<Vec<Arc<K>>> = None;
    events.flat_map(move |event| {
        let out: Vec<watcher::Result<K>> = match event {
            Err(e) => vec![Err(e)],
            Ok(Event::Apply(k)) => vec![Ok(k)],
            Ok(Event::InitApply(k)) => {
                held.push(k);
                Vec::new()
            }
            Ok(Event::InitDone) => {
                // uid -> resourceVersion of what the store held before.
                let listed = before.take().unwrap_or_default();
                let before: HashMap<&str, &str> = listed
                    .iter()
                    .filter_map(|k| {
                        let m = k.meta();
                        Some((m.uid.as_deref()?, m.resource_version.as_deref()?))
                    })
                    .collect();
                let unchanged = |k: &K| {
                    let m = k.meta();
                    matches!((m.uid.as_deref(), m.resource_version.as_deref()),
                        (Some(uid), Some(rv)) if before.get(uid) == Some(&rv))
                };
                std::mem::take(&mut held)
                    .into_iter()
                    .filter(|k| !unchanged(k))
                    .map(Ok)
                    .collect()
            }
            Ok(Event::Init) => {
                held.clear();
                // The reflector swaps its store at InitDone: it still
                // holds what the last watch listed.
                before = gained
                    .0
                    .swap(false, Ordering::Relaxed)
                    .then(|| store.state());
                Vec::new()
            }
            Ok(Event::Delete(_)) => Vec::new(),
        };
        futures::stream::iter(out)
    })
}
