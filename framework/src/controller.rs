//! The guarded controller: `kube_runtime::Controller` with guards run
//! before every reconcile, UID-checked owner triggers, wake-ups driven by
//! watch events, per-object exponential backoff, a tracing span per
//! reconcile (object ref and uid) and metrics.
//!
//! It wraps kube-runtime's `Controller` rather than re-implementing it: the
//! scheduler, the reflector, `owns`/`watches`, concurrency, debounce and
//! graceful shutdown are kube-runtime's own.

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::sync::{Arc, Mutex};

use futures::Stream;
use futures::channel::mpsc;
use kube::api::Api;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::guard::{Guard, GuardContext, GuardError, Verdict, run_guards};

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

/// Per-object exponential backoff on errors: `base`, `2 base`, `4 base`, …
/// up to `max` (default 500 ms to 5 min); an object's count resets when it
/// reconciles successfully. Ward's one backoff arithmetic
/// ([`ward_base::Backoff`]), shared with the guards' retries.
pub type ErrorBackoff = ward_base::Backoff;

struct Shared<K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static> {
    guards: Vec<Arc<dyn Guard<K>>>,
    gctx: GuardContext,
    reader: Store<K>,
    wake_tx: mpsc::UnboundedSender<ObjectRef<K>>,
    waits: Mutex<HashMap<ObjectRef<K>, JoinHandle<()>>>,
    failures: Mutex<HashMap<ObjectRef<K>, u32>>,
    backoff: Option<ErrorBackoff>,
}

impl<K> Shared<K>
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    /// Update the queue-depth gauge, forgetting objects that left the cache
    /// (deleted while waiting or failing: kube-runtime never reconciles them again).
    fn queue_depth(&self) {
        let waiting = self
            .waits
            .lock()
            .map(|mut w| {
                w.retain(|k, h| {
                    let keep = self.reader.get(k).is_some() && !h.is_finished();
                    if !keep {
                        h.abort();
                    }
                    keep
                });
                w.len()
            })
            .unwrap_or(0);
        let failing = self
            .failures
            .lock()
            .map(|mut f| {
                f.retain(|k, _| self.reader.get(k).is_some());
                f.len()
            })
            .unwrap_or(0);
        metrics::gauge!("ward_queue_depth", "kind" => K::kind(&()).to_string())
            .set((waiting + failing) as f64);
    }

    /// Reconcile `oref` again when `wake` completes — if it is still the
    /// object (same uid) that waited.
    fn wait_for(
        &self,
        oref: ObjectRef<K>,
        uid: Option<String>,
        wake: futures::future::BoxFuture<'static, ()>,
    ) {
        let tx = self.wake_tx.clone();
        let reader = self.reader.clone();
        let key = oref.clone();
        let handle = tokio::spawn(async move {
            wake.await;
            match reader.get(&oref) {
                Some(live) if live.uid() == uid => {
                    let _ = tx.unbounded_send(oref);
                }
                // Gone from the cache: its own events drive what comes next.
                None => {}
                Some(_) => {
                    metrics::counter!("ward_stale_triggers_total", "source" => "wake").increment(1);
                }
            }
        });
        if let Ok(mut waits) = self.waits.lock()
            && let Some(old) = waits.insert(key, handle)
        {
            old.abort();
        }
        self.queue_depth();
    }

    fn stop_waiting(&self, oref: &ObjectRef<K>) {
        if let Ok(mut waits) = self.waits.lock()
            && let Some(h) = waits.remove(oref)
        {
            h.abort();
        }
    }
}

/// A kube-runtime `Controller` whose reconciles run behind guards.
///
/// ```no_run
/// use std::sync::Arc;
/// use futures::StreamExt;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::api::Api;
/// use kube::runtime::{controller::Action, watcher};
/// use ward::{GuardedController, Guard, GuardContext, GuardError, Verdict};
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
///     .run(reconcile, |_, _, _| Action::await_change(), Arc::new(()))
///     .for_each(|_| async {})
///     .await;
/// # }
/// ```
pub struct GuardedController<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    inner: Controller<K>,
    gctx: GuardContext,
    guards: Vec<Arc<dyn Guard<K>>>,
    backoff: Option<ErrorBackoff>,
    wake_tx: mpsc::UnboundedSender<ObjectRef<K>>,
}

impl<K> GuardedController<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// A controller for the `K`s of `api`, like `Controller::new`.
    #[must_use]
    pub fn new(api: Api<K>, wc: watcher::Config) -> Self {
        let gctx = GuardContext::new(api.clone().into_client());
        let (wake_tx, wake_rx) = mpsc::unbounded();
        // Wake-ups re-enter through kube-runtime's scheduler (feature
        // `unstable-runtime-reconcile-on` of kube-runtime 5).
        let inner = Controller::new(api, wc).reconcile_on(wake_rx);
        GuardedController {
            inner,
            gctx,
            guards: Vec::new(),
            backoff: Some(ErrorBackoff::default()),
            wake_tx,
        }
    }

    /// Add a guard; guards run in the order added.
    #[must_use]
    pub fn guard(mut self, guard: impl Guard<K>) -> Self {
        self.guards.push(Arc::new(guard));
        self
    }

    /// Per-object backoff on errors (default 500 ms doubling to 5 min);
    /// `None` uses the error policy's own `Action`.
    #[must_use]
    pub fn error_backoff(mut self, backoff: Option<ErrorBackoff>) -> Self {
        self.backoff = backoff;
        self
    }

    /// kube-runtime's concurrency and debounce settings.
    #[must_use]
    pub fn with_config(mut self, config: controller::Config) -> Self {
        self.inner = self.inner.with_config(config);
        self
    }

    /// Stop taking new work when `trigger` completes, finishing reconciles in flight.
    #[must_use]
    pub fn graceful_shutdown_on(
        mut self,
        trigger: impl Future<Output = ()> + Send + Sync + 'static,
    ) -> Self {
        self.inner = self.inner.graceful_shutdown_on(trigger);
        self
    }

    /// Reconcile the owner when a `Child` it owns changes — but only if the
    /// owner reference's uid is the cached owner's uid: a child of a
    /// deleted owner never triggers the same-named owner that replaced it.
    #[must_use]
    pub fn owns<Child>(mut self, api: Api<Child>, wc: watcher::Config) -> Self
    where
        Child: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + 'static,
    {
        let reader = self.inner.store();
        self.inner = self.inner.watches(api, wc, move |child: Child| {
            owner_triggers::<K, Child>(&reader, &child)
        });
        self
    }

    /// Reconcile the `K`s `mapper` names when an `Other` changes (as kube-runtime's `watches`).
    #[must_use]
    pub fn watches<Other, I>(
        mut self,
        api: Api<Other>,
        wc: watcher::Config,
        mapper: impl Fn(Other) -> I + Sync + Send + 'static,
    ) -> Self
    where
        Other: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + 'static,
        I: 'static + IntoIterator<Item = ObjectRef<K>>,
        I::IntoIter: Send,
    {
        self.inner = self.inner.watches(api, wc, mapper);
        self
    }

    /// The controller's cache of `K`.
    #[must_use]
    pub fn store(&self) -> Store<K> {
        self.inner.store()
    }

    /// Run: every reconcile passes the guards first; the stream yields each
    /// reconcile's outcome, as kube-runtime's `Controller::run`.
    ///
    /// Unlike kube-runtime, `reconciler` is `Fn` (it is called only once the
    /// guards proceed). With the default [`ErrorBackoff`], a failed object is
    /// requeued after its backoff whatever `error_policy` returns (the
    /// policy still runs, e.g. to log); a guard failure requeues likewise.
    pub fn run<Fut, Ctx, E>(
        self,
        reconciler: impl Fn(Arc<K>, Arc<Ctx>) -> Fut + Send + Sync + 'static,
        error_policy: impl Fn(Arc<K>, &E, Arc<Ctx>) -> Action + Send + Sync + 'static,
        context: Arc<Ctx>,
    ) -> impl Stream<Item = Result<(ObjectRef<K>, Action), controller::Error<Error<E>, watcher::Error>>>
    where
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
        Ctx: Send + Sync + 'static,
    {
        let shared = Arc::new(Shared {
            guards: self.guards,
            gctx: self.gctx,
            reader: self.inner.store(),
            wake_tx: self.wake_tx,
            waits: Mutex::new(HashMap::new()),
            failures: Mutex::new(HashMap::new()),
            backoff: self.backoff,
        });
        let reconciler = Arc::new(reconciler);
        let on_error = shared.clone();
        self.inner.run(
            move |obj: Arc<K>, ctx: Arc<Ctx>| {
                let shared = shared.clone();
                let reconciler = reconciler.clone();
                let oref = ObjectRef::from_obj(&*obj);
                let uid = obj.uid();
                let span = tracing::info_span!("reconcile", object = %oref, uid = uid.as_deref().unwrap_or(""));
                async move { guarded(shared, reconciler, obj, ctx, oref, uid).await }.instrument(span)
            },
            move |obj: Arc<K>, err: &Error<E>, ctx: Arc<Ctx>| {
                let oref = ObjectRef::from_obj(&*obj);
                let policy = match err {
                    Error::Reconcile(e) => error_policy(obj, e, ctx),
                    Error::Guard { .. } => Action::requeue(ErrorBackoff::default().base),
                };
                let Some(backoff) = on_error.backoff else {
                    return policy;
                };
                let n = {
                    let mut f = on_error.failures.lock().unwrap_or_else(|e| e.into_inner());
                    let n = f.entry(oref).or_insert(0);
                    *n += 1;
                    *n
                };
                on_error.queue_depth();
                Action::requeue(backoff.delay(n))
            },
            context,
        )
    }
}

/// The owners of `child` to reconcile: references to a `K` whose uid is the
/// cached `K`'s uid (or that are not cached yet, and so cannot be stale).
fn owner_triggers<K, Child>(reader: &Store<K>, child: &Child) -> Vec<ObjectRef<K>>
where
    K: Resource<DynamicType = ()> + Clone,
    Child: Resource<DynamicType = ()>,
{
    let (kind, api_version) = (K::kind(&()), K::api_version(&()));
    let ns = child.meta().namespace.clone();
    child
        .meta()
        .owner_references
        .iter()
        .flatten()
        .filter(|r| r.kind == kind && r.api_version == api_version)
        .filter_map(|r| {
            let mut oref = ObjectRef::<K>::new(&r.name);
            if let Some(ns) = &ns {
                oref = oref.within(ns);
            }
            match reader.get(&oref).and_then(|o| o.uid()) {
                Some(live) if live != r.uid => {
                    metrics::counter!("ward_stale_triggers_total", "source" => "owner").increment(1);
                    tracing::debug!(owner = %oref, stale_uid = %r.uid, live_uid = %live, "dropping a trigger for a replaced owner");
                    None
                }
                _ => Some(oref),
            }
        })
        .collect()
}

async fn guarded<K, Ctx, Fut, E>(
    shared: Arc<Shared<K>>,
    reconciler: Arc<impl Fn(Arc<K>, Arc<Ctx>) -> Fut + Send + Sync + 'static>,
    obj: Arc<K>,
    ctx: Arc<Ctx>,
    oref: ObjectRef<K>,
    uid: Option<String>,
) -> Result<Action, Error<E>>
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    let started = tokio::time::Instant::now();
    let kind = K::kind(&()).to_string();
    shared.stop_waiting(&oref);
    let (result, outcome) = match run_guards(&shared.guards, &*obj, &shared.gctx).await {
        Err((source, guard)) => {
            tracing::warn!(guard, error = %source, "guard failed");
            (Err(Error::Guard { guard, source }), "guard_error")
        }
        Ok((Verdict::Skip { reason }, guard)) => {
            tracing::info!(guard = guard.unwrap_or(""), %reason, "guard skipped the reconcile");
            (Ok(Action::await_change()), "skipped")
        }
        Ok((Verdict::Wait(w), guard)) => {
            tracing::info!(guard = guard.unwrap_or(""), reason = %w.reason, "guard made the reconcile wait");
            if let Some(wake) = w.wake {
                shared.wait_for(oref.clone(), uid.clone(), wake);
            }
            (Ok(Action::requeue(w.fallback)), "waiting")
        }
        Ok((Verdict::Proceed, _)) => match reconciler(obj.clone(), ctx).await {
            Ok(action) => {
                if let Ok(mut f) = shared.failures.lock() {
                    f.remove(&oref);
                }
                (Ok(action), "success")
            }
            Err(e) => {
                tracing::warn!(error = %e, "reconcile failed");
                (Err(Error::Reconcile(e)), "error")
            }
        },
    };
    metrics::counter!("ward_reconciles_total", "kind" => kind.clone(), "result" => outcome)
        .increment(1);
    metrics::histogram!("ward_reconcile_duration_seconds", "kind" => kind)
        .record(started.elapsed().as_secs_f64());
    shared.queue_depth();
    result
}
