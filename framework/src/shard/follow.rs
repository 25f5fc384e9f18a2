//! A sharded controller's watch: kube-runtime's watcher for the shard's
//! active slots, filtered client-side whatever the server did, with
//! watches added beside it for the slots gained since it started.
//!
//! While the active slots change without a reconcile being cancelled, the
//! watch follows them in place. A slot gained is listed and watched by an
//! added watch (`added.rs`) whose objects reach the reflector's store, and
//! the reconciler, as their pages arrive; a slot lost has its objects
//! deleted from the store and filtered from every watch from then on. A
//! hand-over thus reconciles what moved and relists nothing the replica
//! kept. The watch restarts with a fresh LIST of every active slot — the
//! reflector's store rebuilt (kube-runtime's `Init` … `InitDone`) with
//! exactly their objects — when a reconcile was cancelled (a lost Lease:
//! its objects must be reconciled again), when slots change before the
//! first LIST has landed, after a few added watches, or when one of them
//! loses track or ends (then the running watch has resumed with a
//! selector covering its slots too). If that restart only gained slots, the objects it lists
//! unchanged (same uid, same resourceVersion as in the cache before) are
//! not triggered again.

use std::collections::{HashMap, VecDeque};
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::stream::{BoxStream, SelectAll};
use futures::{Stream, StreamExt};
use kube::Resource;
use kube::api::Api;
use kube::runtime::reflector::Store;
use kube::runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;

use super::added::{self, Step};
use super::gate::ActiveWatch;
use super::{Shard, ShardKey, Slots, query};

/// Added watches beside the first before a restart folds them into one.
const MAX_ADDED: usize = 4;

struct State<K: Resource + 'static>
where
    K::DynamicType: std::hash::Hash + Eq,
{
    api: Api<K>,
    wc: watcher::Config,
    shard: Shard,
    /// What the reflector holds: objects of slots lost are deleted from it.
    store: Store<K>,
    /// The slots whose events the running watch passes on: those it was
    /// started for, less those lost since.
    slots: Slots,
    /// The slots watched — the running watch's and the added watches' —
    /// and the deactivation epoch when they were taken.
    watched: (Slots, u64),
    /// What restarts it.
    active: ActiveWatch,
    inner: Option<BoxStream<'static, watcher::Result<Event<K>>>>,
    /// The running watch has listed (passed its `InitDone`): before then,
    /// what an added watch puts in the store would be dropped when the
    /// list lands.
    listed: bool,
    /// The added watches' steps, tagged with their index in `added_slots`:
    /// the slots each passes on (those it was added for, less those lost).
    added: SelectAll<BoxStream<'static, (usize, watcher::Result<Step<K>>)>>,
    added_slots: Vec<Slots>,
    /// Events to yield before anything else (deletions of a lost slot's objects).
    pending: VecDeque<Event<K>>,
    probed: bool,
    gained: GainedOnly,
}

/// Set by [`watch`] when it restarts having only gained slots; taken by
/// [`applied_once_listed`] at that restart's `Init`.
#[derive(Clone, Default)]
pub(crate) struct GainedOnly(Arc<AtomicBool>);

/// The objects of `api` in `shard`'s active slots, as a watcher's events
/// for the reflector whose store is `store`.
pub(crate) fn watch<K>(
    api: Api<K>,
    wc: watcher::Config,
    shard: Shard,
    store: Store<K>,
    gained: GainedOnly,
) -> impl Stream<Item = watcher::Result<Event<K>>> + Send
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    shard.register(api.resource_url());
    let state = State {
        api,
        wc,
        active: shard.watch_active(),
        shard,
        store,
        slots: Slots::NONE,
        watched: (Slots::NONE, u64::MAX),
        inner: None,
        listed: false,
        added: SelectAll::new(),
        added_slots: Vec::new(),
        pending: VecDeque::new(),
        probed: false,
        gained,
    };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(event) = st.pending.pop_front() {
                return Some((Ok(event), st));
            }
            if st.inner.is_none() {
                st.start().await;
            }
            let inner = st.inner.as_mut().expect("started above");
            tokio::select! {
                biased;
                () = st.active.changed() => st.slots_changed(),
                event = inner.next() => match event {
                    None => return None,
                    // A relist (its watch expired) would drop from the
                    // store what the added watches put there: start over.
                    Some(Ok(Event::Init)) if !st.added_slots.is_empty() => st.inner = None,
                    Some(Ok(event)) => {
                        match event {
                            Event::Init => st.listed = false,
                            Event::InitDone => st.listed = true,
                            _ => {}
                        }
                        if let Some(event) = kept(st.shard.key(), st.slots, event) {
                            return Some((Ok(event), st));
                        }
                    }
                    Some(Err(e)) => return Some((Err(e), st)),
                },
                step = st.added.next(), if !st.added_slots.is_empty() => match step {
                    Some((i, Ok(Step::Event(event)))) => {
                        if let Some(event) = kept(st.shard.key(), st.added_slots[i], event) {
                            return Some((Ok(event), st));
                        }
                    }
                    Some((_, Ok(Step::Restart))) => st.inner = None,
                    Some((_, Err(e))) => return Some((Err(e), st)),
                    None => {}
                },
            }
        }
    })
}

impl<K> State<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    /// (Re)start the watch for the slots active now.
    async fn start(&mut self) {
        let (before, epoch) = self.watched;
        self.slots = self.active.take();
        let now = self.active.seen();
        let only_gained =
            !before.is_empty() && before.minus(self.slots).is_empty() && now.1 == epoch;
        self.gained.0.store(only_gained, Ordering::Relaxed);
        self.watched = now;
        self.added = SelectAll::new();
        self.added_slots.clear();
        self.listed = false;
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

    /// The active slots changed: follow them in place (see the module
    /// docs), or restart.
    fn slots_changed(&mut self) {
        let (watched, epoch) = self.watched;
        let now = self.active.take();
        let now_epoch = self.active.seen().1;
        let (gained, lost) = (now.minus(watched), watched.minus(now));
        let in_place = now_epoch == epoch
            && self.listed
            && !watched.is_empty()
            && (gained.is_empty() || self.added_slots.len() < MAX_ADDED);
        if !in_place {
            self.inner = None;
            return;
        }
        let key = self.shard.key();
        if !lost.is_empty() {
            self.slots = self.slots.minus(lost);
            for slots in &mut self.added_slots {
                *slots = slots.minus(lost);
            }
            let inside = |k: &K| key.hash(k.meta()).is_some_and(|h| lost.contains_hash(h));
            self.pending.extend(
                self.store
                    .state()
                    .into_iter()
                    .filter(|k| inside(k))
                    .map(|k| Event::Delete(K::clone(&k))),
            );
        }
        if let Some(selector) = gained.selector(key.field()) {
            tracing::debug!(ring = %self.shard.ring(), path = %self.api.resource_url(),
                slots = gained.len(), "watching gained slots beside the running watch");
            let i = self.added_slots.len();
            self.added_slots.push(gained);
            let steps = added::watch(&self.api, &self.wc, selector).map(move |step| (i, step));
            self.added.push(steps.boxed());
        }
        self.watched = (now, now_epoch);
    }
}

/// `event`, unless it carries an object outside `slots`: each object is
/// another watch's business, or none's.
fn kept<K: Resource>(key: ShardKey, slots: Slots, event: Event<K>) -> Option<Event<K>> {
    let inside = |k: &K| key.hash(k.meta()).is_some_and(|h| slots.contains_hash(h));
    match &event {
        Event::Apply(k) | Event::InitApply(k) | Event::Delete(k) if !inside(k) => None,
        _ => Some(event),
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
