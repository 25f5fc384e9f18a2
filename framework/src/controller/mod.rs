//! The guarded controller: kube-runtime's `Controller` with guards run
//! before every reconcile, wake-ups driven by watch events, owner triggers
//! from replaced owners made visible, an opt-in per-object error backoff, a
//! tracing span per reconcile (object ref and uid) and metrics.
//!
//! It wraps kube-runtime's `Controller` rather than re-implementing it: the
//! scheduler, the reflector, every `for_*`/`owns*`/`watches*` trigger,
//! `reconcile_on`, concurrency, debounce, trigger backoff and shutdown are
//! kube-runtime's own, with the same meaning. Each builder here says only
//! what Ward adds.

mod run;
pub use run::RunResult;
mod stale;
mod sync;
pub use sync::Synced;

use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, OnceLock};

use futures::channel::mpsc;
use futures::{Stream, StreamExt, TryStreamExt};
use kube::api::Api;
use kube::runtime::controller::{self, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use crate::guard::{Guard, GuardContext, GuardError};
use crate::observe::Readiness;
use crate::shard::Shard;
use stale::StaleTriggers;

/// Why a guarded reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error<E: std::error::Error + 'static> {
    /// A guard could not judge the object.
    #[error("guard {guard} failed: {source}")]
    Guard {
        /// The guard's name.
        guard: &'static str,
        /// What went wrong.
        #[source]
        source: GuardError,
    },
    /// The reconciler failed.
    #[error(transparent)]
    Reconcile(E),
}

/// Ward's opt-in per-object exponential backoff on errors: `base`,
/// `2 base`, `4 base`, … up to `max` (default 500 ms to 5 min); an object's
/// count resets when it reconciles successfully. Ward's one backoff
/// arithmetic ([`ward_base::Backoff`]), shared with the guards' retries.
pub type ErrorBackoff = ward_base::Backoff;

/// A kube-runtime `Controller` whose reconciles run behind guards.
///
/// Every constructor and builder of kube-runtime 5's `Controller` is here
/// with the same name, bounds and meaning; the `for_stream*` constructors
/// also take the [`Client`] the guards read through.
///
/// ```no_run
/// use std::sync::Arc;
/// use futures::StreamExt;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::api::Api;
/// use kube::runtime::{controller::Action, watcher};
/// use ward_runtime::{GuardedController, Guard, GuardContext, GuardError, Verdict};
///
/// struct NotTerminating;
/// #[async_trait::async_trait]
/// impl Guard<ConfigMap> for NotTerminating {
///     fn name(&self) -> &'static str { "not-terminating" }
///     async fn check(&self, cm: &ConfigMap, _: &GuardContext) -> Result<Verdict, GuardError> {
///         Ok(if cm.metadata.deletion_timestamp.is_some() { Verdict::skip("terminating") } else { Verdict::proceed() })
///     }
/// }
///
/// # async fn demo(client: kube::Client) {
/// async fn reconcile(cm: Arc<ConfigMap>, _: Arc<()>) -> Result<Action, kube::Error> {
///     Ok(Action::await_change())
/// }
/// GuardedController::new(Api::<ConfigMap>::all(client), watcher::Config::default())
///     .guard(NotTerminating)
///     .shutdown_on_signal()
///     .run(reconcile, |_, _, _| Action::await_change(), Arc::new(()))
///     .for_each(|_| async {})
///     .await;
/// # }
/// ```
pub struct GuardedController<K>
where
    K: Clone + Resource + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    inner: Controller<K>,
    dyntype: K::DynamicType,
    gctx: GuardContext,
    guards: Vec<Arc<dyn Guard<K>>>,
    backoff: Option<ErrorBackoff>,
    wake_tx: mpsc::UnboundedSender<ObjectRef<K>>,
    stale: Arc<StaleTriggers<K>>,
    synced: Synced,
    readiness: Option<Readiness>,
    /// Set by [`shard`](Self::shard); read by the trigger streams when
    /// they start, and by every reconcile.
    shard: Arc<OnceLock<Shard>>,
}

impl<K> GuardedController<K>
where
    K: Clone + Resource + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    /// A controller for the `K`s of `api`, as `Controller::new`.
    #[must_use]
    pub fn new(api: Api<K>, wc: watcher::Config) -> Self
    where
        K::DynamicType: Default,
    {
        Self::new_with(api, wc, Default::default())
    }

    /// A controller for a dynamic type, as `Controller::new_with`.
    #[must_use]
    pub fn new_with(api: Api<K>, wc: watcher::Config, dyntype: K::DynamicType) -> Self {
        let client = api.clone().into_client();
        // What `Controller::new_with` builds, with the watch's sync tracked
        // after the reflector has applied it.
        let writer = reflector::store::Writer::<K>::new(dyntype.clone());
        let reader = writer.as_reader();
        let synced = Synced::new();
        let shard = Arc::new(OnceLock::<Shard>::new());
        // Which watch runs is decided when the stream is first polled,
        // after every builder (`shard` among them) has run.
        let trigger = {
            let (shard, synced, store) = (shard.clone(), synced.clone(), reader.clone());
            futures::stream::once(async move {
                match shard.get() {
                    None => synced
                        .track(reflector::reflector(writer, watcher::watcher(api, wc)))
                        .applied_objects()
                        .boxed(),
                    Some(shard) => {
                        let gained = crate::shard::GainedOnly::default();
                        let watch = crate::shard::watch(
                            api,
                            wc,
                            shard.clone(),
                            store.clone(),
                            gained.clone(),
                        );
                        crate::shard::applied_once_listed(
                            synced.track(reflector::reflector(writer, watch)),
                            store,
                            gained,
                        )
                        .boxed()
                    }
                }
            })
            .flatten()
        };
        let inner = Controller::for_stream_with(trigger, reader, dyntype.clone());
        let mut this = Self::wrap(inner, dyntype, client, synced);
        this.gctx = this.gctx.in_shard(shard.clone());
        this.shard = shard;
        this
    }

    /// A controller driven by `trigger`, whose objects `reader` caches, as
    /// `Controller::for_stream`; guards read through `client`.
    #[must_use]
    pub fn for_stream(
        trigger: impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
        reader: Store<K>,
        client: Client,
    ) -> Self
    where
        K::DynamicType: Default,
    {
        Self::for_stream_with(trigger, reader, Default::default(), client)
    }

    /// [`for_stream`](Self::for_stream) for a dynamic type.
    #[must_use]
    pub fn for_stream_with(
        trigger: impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
        reader: Store<K>,
        dyntype: K::DynamicType,
        client: Client,
    ) -> Self {
        let inner = Controller::for_stream_with(trigger, reader, dyntype.clone());
        Self::wrap(inner, dyntype, client, Synced::unseen())
    }

    /// A controller driven by a shared stream, as
    /// `Controller::for_shared_stream`; guards read through `client`.
    #[must_use]
    pub fn for_shared_stream(
        trigger: impl Stream<Item = Arc<K>> + Send + 'static,
        reader: Store<K>,
        client: Client,
    ) -> Self
    where
        K::DynamicType: Default,
    {
        Self::for_shared_stream_with(trigger, reader, Default::default(), client)
    }

    /// [`for_shared_stream`](Self::for_shared_stream) for a dynamic type.
    #[must_use]
    pub fn for_shared_stream_with(
        trigger: impl Stream<Item = Arc<K>> + Send + 'static,
        reader: Store<K>,
        dyntype: K::DynamicType,
        client: Client,
    ) -> Self {
        let inner = Controller::for_shared_stream_with(trigger, reader, dyntype.clone());
        Self::wrap(inner, dyntype, client, Synced::unseen())
    }

    fn wrap(inner: Controller<K>, dyntype: K::DynamicType, client: Client, synced: Synced) -> Self {
        let (wake_tx, wake_rx) = mpsc::unbounded();
        let stale = StaleTriggers::new(inner.store(), dyntype.clone());
        // Guard wake-ups re-enter through kube-runtime's scheduler.
        let inner = inner.reconcile_on(wake_rx);
        let shard = Arc::default();
        GuardedController {
            inner,
            dyntype,
            gctx: GuardContext::new(client).in_shard(Arc::clone(&shard)),
            guards: Vec::new(),
            backoff: None,
            wake_tx,
            stale,
            synced,
            readiness: None,
            shard,
        }
    }

    /// Make this a sharded controller (see [`crate::shard`]): it
    /// reconciles only objects in `shard`'s active slots, each reconcile
    /// counted by the shard (drained or cancelled before its slot is
    /// handed over) — the reconciler's future is built for every
    /// scheduled object, as with guards, and polled only when admitted; its watch (from [`new`](Self::new)) restarts with
    /// the slots' `shardSelector` whenever they change, and is filtered
    /// client-side too; children from [`owns`](Self::owns) are kept when
    /// their controller owner hashes to an active slot (by uid) or their
    /// namespace does (by namespace); [`watches`](Self::watches) triggers
    /// naming an object outside this controller's cache are dropped
    /// (kube-runtime would report each as `ObjectNotFound`). A controller
    /// from `for_stream*` is gated the same way, but its objects are
    /// whatever the stream passed in holds. Set once: a second call is
    /// ignored.
    #[must_use]
    pub fn shard(self, shard: Shard) -> Self {
        let _ = self.shard.set(shard);
        self
    }

    /// Add a guard; guards run in the order added, before every reconcile.
    #[must_use]
    pub fn guard(mut self, guard: impl Guard<K>) -> Self {
        self.guards.push(Arc::new(guard));
        self
    }

    /// Opt into Ward's per-object backoff on errors: a failed object is
    /// requeued after `backoff.delay(n)` for its `n`th failure in a row,
    /// whatever `error_policy` returns. Without it (the default) the error
    /// policy's `Action` is honoured, as in kube-runtime.
    #[must_use]
    pub fn error_backoff(mut self, backoff: ErrorBackoff) -> Self {
        self.backoff = Some(backoff);
        self
    }

    /// kube-runtime's concurrency and debounce settings (`Controller::with_config`).
    #[must_use]
    pub fn with_config(mut self, config: controller::Config) -> Self {
        self.inner = self.inner.with_config(config);
        self
    }

    /// How to back off when a trigger stream fails (`Controller::trigger_backoff`).
    #[must_use]
    pub fn trigger_backoff(
        mut self,
        backoff: impl kube::runtime::utils::Backoff + 'static,
    ) -> Self {
        self.inner = self.inner.trigger_backoff(backoff);
        self
    }

    /// The controller's cache of `K`.
    ///
    /// Do not await its `wait_until_ready` while the controller runs:
    /// kube-runtime's store wakes only the last of concurrent waiters, and
    /// the controller is one, so either may hang. Await
    /// [`synced`](Self::synced) instead.
    #[must_use]
    pub fn store(&self) -> Store<K> {
        self.inner.store()
    }

    /// Whether the watches this controller opened (its own from
    /// [`new`](Self::new), and each [`owns`](Self::owns) and
    /// [`watches`](Self::watches)) have delivered their initial lists, so
    /// [`store`](Self::store) holds every object. Safe to await from any
    /// number of tasks while the controller runs (the watches sync only
    /// then). Ward cannot see a stream passed in: a `*_stream` trigger is
    /// not counted, and a controller built with `for_stream*` — whose
    /// objects come from a reflector you run — never counts as synced
    /// (rather than claim a sync it cannot know); learn that one from your
    /// own watcher's `InitDone`.
    #[must_use]
    pub fn synced(&self) -> Synced {
        self.synced.clone()
    }

    /// Drive a readiness check named `synced/<Kind>` from this controller:
    /// failing from [`run`](Self::run) until [`synced`](Self::synced), then
    /// passing while the run's stream lives (removed once the stream is
    /// dropped, e.g. after shutdown or lost leadership). Register it on the
    /// [`Observability`](crate::Observability) endpoint's
    /// [`Readiness`] so `/readyz` says "ready once the
    /// cache is synced". Two controllers of one kind in a process share the
    /// name: the one run last owns the check. A controller built from a
    /// stream (`for_stream*`) never passes it: Ward cannot see that
    /// stream's initial list (see [`synced`](Self::synced)).
    #[must_use]
    pub fn readiness(mut self, readiness: Readiness) -> Self {
        self.readiness = Some(readiness);
        self
    }

    /// Reconcile the owner when a `Child` it owns changes, as
    /// `Controller::owns`: a metadata-only watch, owners found by name.
    ///
    /// A child whose owner reference names a replaced owner (same name,
    /// another uid) still triggers the live owner, as in kube-runtime —
    /// that event may be the one that frees the name (the GC deleting the
    /// old child) — and the guards decide what its reconcile may do. Ward
    /// counts it (`ward_stale_triggers_total{source="owner"}`) and marks the
    /// reconcile's span `stale_trigger = true`.
    #[must_use]
    pub fn owns<Child>(self, api: Api<Child>, wc: watcher::Config) -> Self
    where
        Child: Clone + Resource<DynamicType = ()> + DeserializeOwned + Debug + Send + 'static,
    {
        self.owns_with(api, (), wc)
    }

    /// [`owns`](Self::owns) for a dynamic child type.
    #[must_use]
    pub fn owns_with<Child>(
        self,
        api: Api<Child>,
        dyntype: Child::DynamicType,
        wc: watcher::Config,
    ) -> Self
    where
        Child: Clone + Resource + DeserializeOwned + Debug + Send + 'static,
        Child::DynamicType: Debug + Eq + Hash + Clone,
    {
        // kube-runtime's own `owns_with` does the same: an `Api<Child>`
        // cannot become an `Api<PartialObjectMeta<Child>>` keeping its scope.
        #[allow(deprecated)]
        let children = self
            .synced
            .track(kube::runtime::metadata_watcher(api, wc))
            .touched_objects();
        self.owns_stream_with(children, dyntype)
    }

    /// Owner triggers from a stream of children (`Controller::owns_stream`).
    #[must_use]
    pub fn owns_stream<Child>(
        self,
        trigger: impl Stream<Item = Result<Child, watcher::Error>> + Send + 'static,
    ) -> Self
    where
        Child: Resource<DynamicType = ()> + Send + 'static,
    {
        self.owns_stream_with(trigger, ())
    }

    /// [`owns_stream`](Self::owns_stream) for a dynamic child type.
    #[must_use]
    pub fn owns_stream_with<Child>(
        mut self,
        trigger: impl Stream<Item = Result<Child, watcher::Error>> + Send + 'static,
        dyntype: Child::DynamicType,
    ) -> Self
    where
        Child: Resource + Send + 'static,
        Child::DynamicType: Debug + Eq + Hash + Clone,
    {
        let stale = self.stale.clone();
        let shard = self.shard.clone();
        let seen = trigger
            .inspect_ok(move |c| stale.observe(c.meta()))
            .try_filter(move |c| futures::future::ready(child_in_shard(&shard, c.meta())));
        self.inner = self.inner.owns_stream_with(seen, dyntype);
        self
    }

    /// Owner triggers from a shared stream of children
    /// (`Controller::owns_shared_stream`).
    #[must_use]
    pub fn owns_shared_stream<Child>(
        self,
        trigger: impl Stream<Item = Arc<Child>> + Send + 'static,
    ) -> Self
    where
        Child: Resource<DynamicType = ()> + Send + 'static,
    {
        self.owns_shared_stream_with(trigger, ())
    }

    /// [`owns_shared_stream`](Self::owns_shared_stream) with its child type
    /// spelled out (kube-runtime 5 admits only static child types here).
    #[must_use]
    pub fn owns_shared_stream_with<Child>(
        mut self,
        trigger: impl Stream<Item = Arc<Child>> + Send + 'static,
        dyntype: Child::DynamicType,
    ) -> Self
    where
        Child: Resource<DynamicType = ()> + Send + 'static,
    {
        let stale = self.stale.clone();
        let shard = self.shard.clone();
        let seen = KeepIf {
            inner: Box::pin(trigger.inspect(move |c| stale.observe(c.meta()))),
            keep: move |c: &Arc<Child>| child_in_shard(&shard, c.meta()),
        };
        self.inner = self.inner.owns_shared_stream_with(seen, dyntype);
        self
    }

    /// Reconcile the `K`s `mapper` names when an `Other` changes (`Controller::watches`).
    #[must_use]
    pub fn watches<Other, I>(
        self,
        api: Api<Other>,
        wc: watcher::Config,
        mapper: impl Fn(Other) -> I + Sync + Send + 'static,
    ) -> Self
    where
        Other: Clone + Resource + DeserializeOwned + Debug + Send + 'static,
        Other::DynamicType: Default + Debug + Clone + Eq + Hash,
        I: 'static + IntoIterator<Item = ObjectRef<K>>,
        I::IntoIter: Send,
    {
        self.watches_with(api, Default::default(), wc, mapper)
    }

    /// [`watches`](Self::watches) for a dynamic type (`Controller::watches_with`).
    #[must_use]
    pub fn watches_with<Other, I>(
        self,
        api: Api<Other>,
        dyntype: Other::DynamicType,
        wc: watcher::Config,
        mapper: impl Fn(Other) -> I + Sync + Send + 'static,
    ) -> Self
    where
        Other: Clone + Resource + DeserializeOwned + Debug + Send + 'static,
        Other::DynamicType: Debug + Clone + Eq + Hash,
        I: 'static + IntoIterator<Item = ObjectRef<K>>,
        I::IntoIter: Send,
    {
        let others = self
            .synced
            .track(watcher::watcher(api, wc))
            .touched_objects();
        self.watches_stream_with(others, mapper, dyntype)
    }

    /// Mapped triggers from a stream (`Controller::watches_stream`).
    #[must_use]
    pub fn watches_stream<Other, I>(
        self,
        trigger: impl Stream<Item = Result<Other, watcher::Error>> + Send + 'static,
        mapper: impl Fn(Other) -> I + Sync + Send + 'static,
    ) -> Self
    where
        Other: Clone + Resource + DeserializeOwned + Debug + Send + 'static,
        Other::DynamicType: Default + Debug + Clone,
        I: 'static + IntoIterator<Item = ObjectRef<K>>,
        I::IntoIter: Send,
    {
        self.watches_stream_with(trigger, mapper, Default::default())
    }

    /// [`watches_stream`](Self::watches_stream) for a dynamic type.
    #[must_use]
    pub fn watches_stream_with<Other, I>(
        mut self,
        trigger: impl Stream<Item = Result<Other, watcher::Error>> + Send + 'static,
        mapper: impl Fn(Other) -> I + Sync + Send + 'static,
        dyntype: Other::DynamicType,
    ) -> Self
    where
        Other: Clone + Resource + DeserializeOwned + Debug + Send + 'static,
        Other::DynamicType: Debug + Clone,
        I: 'static + IntoIterator<Item = ObjectRef<K>>,
        I::IntoIter: Send,
    {
        let mapper = self.cached_only(mapper);
        self.inner = self.inner.watches_stream_with(trigger, mapper, dyntype);
        self
    }

    /// Mapped triggers from a shared stream (`Controller::watches_shared_stream`).
    #[must_use]
    pub fn watches_shared_stream<Other, I>(
        self,
        trigger: impl Stream<Item = Arc<Other>> + Send + 'static,
        mapper: impl Fn(Arc<Other>) -> I + Sync + Send + 'static,
    ) -> Self
    where
        Other: Clone + Resource + DeserializeOwned + Debug + Send + 'static,
        Other::DynamicType: Default + Debug + Clone,
        I: 'static + IntoIterator<Item = ObjectRef<K>>,
        I::IntoIter: Send,
    {
        self.watches_shared_stream_with(trigger, mapper, Default::default())
    }

    /// [`watches_shared_stream`](Self::watches_shared_stream) for a dynamic type.
    #[must_use]
    pub fn watches_shared_stream_with<Other, I>(
        mut self,
        trigger: impl Stream<Item = Arc<Other>> + Send + 'static,
        mapper: impl Fn(Arc<Other>) -> I + Sync + Send + 'static,
        dyntype: Other::DynamicType,
    ) -> Self
    where
        Other: Clone + Resource + DeserializeOwned + Debug + Send + 'static,
        Other::DynamicType: Debug + Clone,
        I: 'static + IntoIterator<Item = ObjectRef<K>>,
        I::IntoIter: Send,
    {
        let mapper = self.cached_only(mapper);
        self.inner = self
            .inner
            .watches_shared_stream_with(trigger, mapper, dyntype);
        self
    }

    /// `mapper`, dropping (once sharded) the objects this controller's
    /// cache does not hold: another replica's. Unsharded, its refs pass
    /// as they are (no copy, no lookup).
    fn cached_only<T, I>(
        &self,
        mapper: impl Fn(T) -> I + Sync + Send + 'static,
    ) -> impl Fn(T) -> InCache<I::IntoIter, K> + Sync + Send + 'static
    where
        I: IntoIterator<Item = ObjectRef<K>>,
    {
        let (shard, store) = (self.shard.clone(), self.inner.store());
        move |other| InCache {
            refs: mapper(other).into_iter(),
            store: shard.get().map(|_| store.clone()),
        }
    }

    /// Reconcile the named object whenever `trigger` emits
    /// (`Controller::reconcile_on`); the guards still run first.
    #[must_use]
    pub fn reconcile_on(
        mut self,
        trigger: impl Stream<Item = ObjectRef<K>> + Send + 'static,
    ) -> Self {
        self.inner = self.inner.reconcile_on(trigger);
        self
    }

    /// Reconcile every cached object whenever `trigger` emits
    /// (`Controller::reconcile_all_on`).
    #[must_use]
    pub fn reconcile_all_on(mut self, trigger: impl Stream<Item = ()> + Send + 'static) -> Self {
        self.inner = self.inner.reconcile_all_on(trigger);
        self
    }

    /// Stop taking new work when `trigger` completes, finishing reconciles
    /// in flight (`Controller::graceful_shutdown_on`).
    #[must_use]
    pub fn graceful_shutdown_on(
        mut self,
        trigger: impl Future<Output = ()> + Send + Sync + 'static,
    ) -> Self {
        self.inner = self.inner.graceful_shutdown_on(trigger);
        self
    }

    /// Shut down gracefully on SIGINT or SIGTERM, forcefully on a second
    /// one (`Controller::shutdown_on_signal`).
    #[must_use]
    pub fn shutdown_on_signal(mut self) -> Self {
        self.inner = self.inner.shutdown_on_signal();
        self
    }
}

/// Whether a child's trigger reaches this replica: always when unsharded;
/// else when its routing hash (see [`ShardKey::child_hash`](crate::shard::ShardKey::child_hash))
/// falls in an active slot.
fn child_in_shard(
    shard: &OnceLock<Shard>,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> bool {
    shard.get().is_none_or(|s| {
        s.key()
            .child_hash(meta)
            .is_some_and(|h| s.slots().contains_hash(h))
    })
}

/// The items of `inner` that `keep` accepts; unlike `StreamExt::filter` it
/// holds no item between polls (a shared stream's `Arc<Child>` need not be
/// `Send`).
struct KeepIf<S, F> {
    inner: std::pin::Pin<Box<S>>,
    keep: F,
}

impl<S: Stream, F: FnMut(&S::Item) -> bool + Unpin> Stream for KeepIf<S, F> {
    type Item = S::Item;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<S::Item>> {
        loop {
            match futures::ready!(self.inner.as_mut().poll_next(cx)) {
                Some(item) if !(self.keep)(&item) => {}
                other => return std::task::Poll::Ready(other),
            }
        }
    }
}

/// The refs of `refs` that `store` holds (all of them without a store).
struct InCache<It, K: Resource + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    refs: It,
    store: Option<Store<K>>,
}

impl<It, K> Iterator for InCache<It, K>
where
    It: Iterator<Item = ObjectRef<K>>,
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    type Item = ObjectRef<K>;

    fn next(&mut self) -> Option<ObjectRef<K>> {
        let store = self.store.as_ref();
        self.refs
            .by_ref()
            .find(|r| store.is_none_or(|s| s.get(r).is_some()))
    }
}
