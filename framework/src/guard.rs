//! The [`Guard`] trait: a check that runs before every reconcile and may
//! stop it — proceed, wait (woken by a watch event, with a fallback
//! requeue), skip, or fail.
//!
//! Guards compose in order and the first verdict other than
//! [`Verdict::Proceed`] wins; the reconciler runs only when every guard
//! proceeds.

use std::any::TypeId;
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};

/// Errors a guard reports (the reconcile is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    /// An API call failed.
    #[error("API call failed: {0}")]
    Kube(#[from] kube::Error),
    /// A read shared by several checks failed
    /// ([`GuardContext::get_fresh`], [`GuardContext::get_consistent`]).
    #[error("shared read failed: {0}")]
    SharedRead(#[source] std::sync::Arc<kube::Error>),
    /// The object cannot be judged (e.g. it has no name or uid); the
    /// guard's own error is the source.
    #[error("the object cannot be judged: {0}")]
    Invalid(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
}

impl GuardError {
    /// [`GuardError::Invalid`] with `cause` as its source.
    pub fn invalid(cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        GuardError::Invalid(Box::new(cause))
    }
}

/// What a guard decided.
pub enum Verdict {
    /// Go on (to the next guard, then the reconciler).
    Proceed,
    /// Not yet: reconcile again when `wake` completes (typically a watch
    /// event such as the child's DELETED), or after `fallback` at the latest.
    Wait(Wait),
    /// Do not reconcile this object (for this trigger).
    Skip {
        /// Why, for logs and metrics.
        reason: Cow<'static, str>,
    },
}

impl fmt::Debug for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Proceed => f.write_str("Proceed"),
            Verdict::Wait(w) => f
                .debug_struct("Wait")
                .field("reason", &w.reason)
                .field("wakes", &w.wake.is_some())
                .field("fallback", &w.fallback)
                .finish(),
            Verdict::Skip { reason } => f.debug_struct("Skip").field("reason", reason).finish(),
        }
    }
}

impl Verdict {
    /// Proceed.
    #[must_use]
    pub fn proceed() -> Self {
        Verdict::Proceed
    }

    /// Skip, with a reason.
    #[must_use]
    pub fn skip(reason: impl Into<Cow<'static, str>>) -> Self {
        Verdict::Skip {
            reason: reason.into(),
        }
    }

    /// Wait, with a reason; add the wake-up with [`Wait::until`].
    #[must_use]
    pub fn wait(reason: impl Into<Cow<'static, str>>) -> Wait {
        Wait {
            reason: reason.into(),
            wake: None,
            fallback: Wait::DEFAULT_FALLBACK,
        }
    }

    /// The label metrics use: `proceed`, `wait` or `skip`.
    #[must_use]
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Proceed => "proceed",
            Verdict::Wait(_) => "wait",
            Verdict::Skip { .. } => "skip",
        }
    }
}

/// A wait verdict: a reason, what wakes it, and a fallback requeue.
pub struct Wait {
    /// Why, for logs and metrics.
    pub reason: Cow<'static, str>,
    /// Completes when the object should be reconciled again.
    pub wake: Option<BoxFuture<'static, ()>>,
    /// Reconcile again after this long even if `wake` never completes.
    pub fallback: Duration,
}

impl Wait {
    /// The fallback requeue when none is given.
    pub const DEFAULT_FALLBACK: Duration = Duration::from_secs(300);

    /// Wake when `fut` completes (e.g. a watch for the blocking object's deletion).
    #[must_use]
    pub fn until(mut self, fut: impl std::future::Future<Output = ()> + Send + 'static) -> Self {
        self.wake = Some(Box::pin(fut));
        self
    }

    /// Requeue after `d` at the latest.
    #[must_use]
    pub fn fallback(mut self, d: Duration) -> Self {
        self.fallback = d;
        self
    }
}

impl From<Wait> for Verdict {
    fn from(w: Wait) -> Self {
        Verdict::Wait(w)
    }
}

/// How a guard reads an object it judges by. Every mode is as fresh as a
/// quorum GET sent when the check began; they differ in what they cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reads {
    /// From a watch cache that has caught up with the server's current
    /// resourceVersion, else a shared GET ([`GuardContext::get_consistent`]).
    #[default]
    Consistent,
    /// A quorum GET shared by concurrent checks of the same object
    /// ([`GuardContext::get_fresh`]).
    Shared,
    /// A quorum GET of its own per check.
    Get,
}

/// What a guard gets besides the object: a client for fresh (quorum) reads
/// and watches; [`get_fresh`](Self::get_fresh), a quorum read shared with
/// the controller's other checks of the same object; and
/// [`get_consistent`](Self::get_consistent), an object's metadata as fresh
/// as a GET, from a watch cache when it can prove it is current.
#[derive(Clone)]
pub struct GuardContext {
    client: Client,
    clock: crate::clock::Clock,
    reads: crate::fresh::FreshReads,
    caches: crate::consistent::WatchCaches,
    apis: Arc<Mutex<DynamicApis>>,
}

/// [`GuardContext::dynamic_api`]'s handles, by resource type and namespace.
type DynamicApis = HashMap<(TypeId, Option<String>), Arc<Api<DynamicObject>>>;

impl fmt::Debug for GuardContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardContext").finish_non_exhaustive()
    }
}

impl GuardContext {
    /// A context over `client`.
    #[must_use]
    pub fn new(client: Client) -> Self {
        GuardContext {
            client,
            clock: crate::clock::Clock::new(),
            reads: crate::fresh::FreshReads::default(),
            caches: crate::consistent::WatchCaches::default(),
            apis: Arc::default(),
        }
    }

    /// The same context, its consistent reads waiting at most `catch_up`
    /// for their watch cache before they read with a GET
    /// (default [`DEFAULT_CATCH_UP`](crate::consistent::DEFAULT_CATCH_UP)).
    #[must_use]
    pub fn catch_up(mut self, catch_up: Duration) -> Self {
        self.caches = self.caches.catch_up(catch_up);
        self
    }

    /// The metadata of `name` as it is now — as fresh as a quorum GET —
    /// read from a watch cache of its kind when the cache has caught up
    /// with the server's current resourceVersion, else with a shared GET
    /// (see [`crate::consistent`]). `None` when it does not exist.
    pub async fn get_consistent<T>(
        &self,
        api: &kube::Api<T>,
        name: &str,
    ) -> Result<Option<std::sync::Arc<ObjectMeta>>, GuardError>
    where
        T: crate::fresh::Readable,
    {
        self.caches
            .get(&self.reads, api, name)
            .await
            .map_err(GuardError::SharedRead)
    }

    /// Start the watch cache [`get_consistent`](Self::get_consistent)
    /// reads `api`'s kind from, if it has not started (it otherwise starts
    /// at the first read, which then waits for its list).
    pub fn warm_consistent<T>(&self, api: &kube::Api<T>)
    where
        T: crate::fresh::Readable,
    {
        self.caches.start(api);
    }

    /// The object `name` as it is now: a quorum GET that concurrent checks
    /// of the same object share, joining only a read not yet sent when they
    /// began (so it is as fresh as a GET of their own; see
    /// [`crate::fresh`]). `None` when it does not exist.
    pub async fn get_fresh<T>(
        &self,
        api: &kube::Api<T>,
        name: &str,
    ) -> Result<Option<std::sync::Arc<T>>, GuardError>
    where
        T: crate::fresh::Readable,
    {
        self.reads
            .get(api, name)
            .await
            .map_err(GuardError::SharedRead)
    }

    /// The metadata of `name` as it is now, read the way `reads` says.
    /// `None` when it does not exist.
    pub async fn read_metadata<T>(
        &self,
        reads: Reads,
        api: &kube::Api<T>,
        name: &str,
    ) -> Result<Option<std::sync::Arc<ObjectMeta>>, GuardError>
    where
        T: crate::fresh::Readable,
    {
        let meta = |o: &T| std::sync::Arc::new(o.meta().clone());
        // The other modes' futures are boxed: inline, a GET's (over a
        // kilobyte) would be moved into every check's boxed future.
        Ok(match reads {
            Reads::Consistent => self.get_consistent(api, name).await?,
            Reads::Shared => Box::pin(self.get_fresh(api, name))
                .await?
                .as_deref()
                .map(meta),
            Reads::Get => Box::pin(api.get_opt(name)).await?.as_ref().map(meta),
        })
    }

    /// An `Api` over `T`'s resource (as [`DynamicObject`]s) through the
    /// context's client: in `namespace`, or all namespaces (or a
    /// cluster-scoped kind) for `None`. Built once per context and shared,
    /// so a guard's check builds none.
    #[must_use]
    pub fn dynamic_api<T>(&self, namespace: Option<&str>) -> Arc<Api<DynamicObject>>
    where
        T: kube::Resource<DynamicType = ()> + 'static,
    {
        let key = (TypeId::of::<T>(), namespace.map(str::to_string));
        let mut apis = self.apis.lock().unwrap_or_else(|e| e.into_inner());
        apis.entry(key)
            .or_insert_with(|| {
                let ar = ApiResource::erase::<T>(&());
                Arc::new(match namespace {
                    Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
                    None => Api::all_with(self.client.clone(), &ar),
                })
            })
            .clone()
    }

    /// The same context in a controller sharded by `shard` (once set):
    /// its consistent reads of a collection the shard filters follow the
    /// shard's slots (see [`crate::consistent`]).
    pub(crate) fn in_shard(mut self, shard: Arc<std::sync::OnceLock<crate::shard::Shard>>) -> Self {
        self.caches = self.caches.in_shard(shard);
        self
    }

    /// The client (reads through it are quorum reads, never a cache).
    #[must_use]
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The current time (follows tokio's clock, so paused-time tests see it move).
    #[must_use]
    pub fn now(&self) -> jiff::Timestamp {
        self.clock.now()
    }
}

/// A check run before every reconcile of a `K`.
///
/// ```
/// use ward_runtime::{Guard, GuardContext, GuardError, Verdict};
/// use k8s_openapi::api::core::v1::ConfigMap;
///
/// /// Never reconcile a ConfigMap that is being deleted.
/// struct NotTerminating;
///
/// #[async_trait::async_trait]
/// impl Guard<ConfigMap> for NotTerminating {
///     fn name(&self) -> &'static str {
///         "not-terminating"
///     }
///     async fn check(&self, cm: &ConfigMap, _: &GuardContext) -> Result<Verdict, GuardError> {
///         Ok(if cm.metadata.deletion_timestamp.is_some() {
///             Verdict::skip("terminating")
///         } else {
///             Verdict::proceed()
///         })
///     }
/// }
/// ```
#[async_trait::async_trait]
pub trait Guard<K>: Send + Sync + 'static {
    /// A short stable name (a metrics label).
    fn name(&self) -> &'static str;

    /// Judge `obj`.
    async fn check(&self, obj: &K, ctx: &GuardContext) -> Result<Verdict, GuardError>;

    /// Called once when the controller's stream is first polled, before
    /// any check: start what the checks will need (e.g. a watch cache with
    /// [`GuardContext::warm_consistent`]) so that the first ones do not
    /// wait for it. Must not block. By default, nothing.
    fn prepare(&self, _ctx: &GuardContext) {}
}

/// Run `guards` in order on `obj`: the first verdict other than proceed
/// wins, and is returned with the guard's name. Each verdict is counted in
/// `ward_guard_verdicts_total` (looked up by its labels on every call;
/// [`GuardedController`](crate::GuardedController) counts through handles
/// registered once).
pub async fn run_guards<K: Send + Sync + 'static>(
    guards: &[std::sync::Arc<dyn Guard<K>>],
    obj: &K,
    ctx: &GuardContext,
) -> Result<(Verdict, Option<&'static str>), (GuardError, &'static str)> {
    run_guards_counted(guards, obj, ctx, |i, v| {
        metrics::counter!("ward_guard_verdicts_total", "guard" => guards[i].name(), "verdict" => v.label())
            .increment(1);
    })
    .await
}

/// [`run_guards`], counting each verdict through `count(guard index, verdict)`.
pub(crate) async fn run_guards_counted<K: Send + Sync + 'static>(
    guards: &[std::sync::Arc<dyn Guard<K>>],
    obj: &K,
    ctx: &GuardContext,
    count: impl Fn(usize, &Verdict),
) -> Result<(Verdict, Option<&'static str>), (GuardError, &'static str)> {
    for (i, g) in guards.iter().enumerate() {
        let v = g.check(obj, ctx).await.map_err(|e| (e, g.name()))?;
        count(i, &v);
        if !matches!(v, Verdict::Proceed) {
            return Ok((v, Some(g.name())));
        }
    }
    Ok((Verdict::Proceed, None))
}
