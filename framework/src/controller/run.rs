//! Running a guarded controller: the guards before every reconcile, guard
//! wake-ups, the error policy (or Ward's opt-in backoff), span and metrics.

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::channel::mpsc;
use futures::future::BoxFuture;
use futures::{Stream, StreamExt, TryFuture, TryFutureExt};
use kube::Resource;
use kube::runtime::controller::{self, Action};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;
use tracing::Instrument;

use super::stale::StaleTriggers;
use super::{Error, ErrorBackoff, GuardedController};
use crate::guard::{Guard, GuardContext, Verdict, run_guards_counted};
use crate::observe::catalog;
use crate::observe::readiness::RemoveOnDrop;
use crate::shard::Shard;

/// One item of [`GuardedController::run`]'s stream: the object and the
/// action taken, or kube-runtime's error wrapping Ward's [`Error`].
pub type RunResult<K, E> =
    Result<(ObjectRef<K>, Action), controller::Error<Error<E>, watcher::Error>>;

/// What every reconcile of one controller shares.
struct Shared<K: Resource + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    guards: Vec<Arc<dyn Guard<K>>>,
    gctx: GuardContext,
    reader: Store<K>,
    dyntype: K::DynamicType,
    metrics: catalog::ControllerMetrics,
    wake_tx: mpsc::UnboundedSender<ObjectRef<K>>,
    waits: Mutex<HashMap<ObjectRef<K>, JoinHandle<()>>>,
    failures: Mutex<HashMap<ObjectRef<K>, u32>>,
    /// Whether `waits` or `failures` may hold an object (the queue-depth
    /// gauge then needs refreshing after each reconcile).
    tracking: AtomicBool,
    backoff: Option<ErrorBackoff>,
    stale: Arc<StaleTriggers<K>>,
    shard: Option<Shard>,
}

impl<K> Shared<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    /// Update the queue-depth gauge, forgetting objects that left the cache
    /// (deleted while waiting or failing: kube-runtime never reconciles them again).
    fn queue_depth(&self) {
        // Both maps are held while the flag is set, so an insert either is
        // counted here or runs its own `queue_depth` after this one.
        let mut w = self.waits.lock().unwrap_or_else(|e| e.into_inner());
        let mut f = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        w.retain(|k, h| {
            let keep = self.reader.get(k).is_some() && !h.is_finished();
            if !keep {
                h.abort();
            }
            keep
        });
        f.retain(|k, _| self.reader.get(k).is_some());
        let depth = w.len() + f.len();
        self.tracking.store(depth > 0, Ordering::Relaxed);
        self.metrics.queue_depth.set(depth as f64);
    }

    /// Reconcile `oref` again when `wake` completes — if it is still the
    /// object (same uid) that waited.
    fn wait_for(&self, oref: ObjectRef<K>, uid: Option<String>, wake: BoxFuture<'static, ()>) {
        let tx = self.wake_tx.clone();
        let reader = self.reader.clone();
        let key = oref.clone();
        self.tracking.store(true, Ordering::Relaxed);
        let handle = tokio::spawn(async move {
            wake.await;
            match reader.get(&oref) {
                Some(live) if live.meta().uid == uid => {
                    let _ = tx.unbounded_send(oref);
                }
                // Gone from the cache: its own events drive what comes next.
                None => {}
                Some(_) => {
                    metrics::counter!("ward_stale_triggers_total", "source" => "wake").increment(1);
                }
            }
        });
        if let Some(old) = self
            .waits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, handle)
        {
            old.abort();
        }
        self.queue_depth();
    }

    fn stop_waiting(&self, oref: &ObjectRef<K>) {
        if !self.tracking.load(Ordering::Relaxed) {
            return;
        }
        if let Some(h) = self
            .waits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(oref)
        {
            h.abort();
        }
    }

    /// Count one more failure of `oref`; the delay Ward's backoff gives it.
    fn failed(&self, oref: ObjectRef<K>, backoff: ErrorBackoff) -> Action {
        self.tracking.store(true, Ordering::Relaxed);
        let n = {
            let mut f = self.failures.lock().unwrap_or_else(|e| e.into_inner());
            let n = f.entry(oref).or_insert(0);
            *n += 1;
            *n
        };
        self.queue_depth();
        Action::requeue(backoff.delay(n))
    }

    /// One reconcile, in its span: the guards, then (if they proceed) the
    /// reconciler's future.
    async fn guarded<Fut>(
        self: Arc<Self>,
        obj: Arc<K>,
        reconcile: Fut,
    ) -> Result<Action, Error<Fut::Error>>
    where
        Fut: TryFuture<Ok = Action>,
        Fut::Error: std::error::Error + 'static,
    {
        let oref = ObjectRef::from_obj_with(&*obj, self.dyntype.clone());
        let uid = obj.meta().uid.clone();
        let stale_trigger = self.stale.take(&oref);
        let span = tracing::info_span!("reconcile", object = %oref,
            uid = uid.as_deref().unwrap_or(""), stale_trigger);
        // A sharded controller's reconcile starts only on an active slot,
        // and is counted there until it ends (or is cancelled).
        let ticket = match &self.shard {
            None => None,
            Some(shard) => match shard.key().hash(obj.meta()).and_then(|h| shard.enter(h)) {
                Some(ticket) => Some(ticket),
                None => {
                    self.metrics.reconciled("unowned");
                    return Ok(Action::await_change());
                }
            },
        };
        let run = self.clone().judged(obj, reconcile, oref, uid);
        match ticket {
            None => run.instrument(span).await,
            Some(ticket) => {
                let cancelled = ticket.cancelled();
                tokio::select! {
                    biased;
                    () = cancelled => {
                        span.in_scope(|| tracing::warn!("reconcile cancelled: its slot was handed over"));
                        self.metrics.reconciled("cancelled");
                        Ok(Action::await_change())
                    }
                    result = run.instrument(span.clone()) => result,
                }
            }
        }
    }

    /// The guards' verdict and what follows from it: the reconcile, a wait,
    /// a skip or a guard error; then the metrics.
    async fn judged<Fut>(
        self: Arc<Self>,
        obj: Arc<K>,
        reconcile: Fut,
        oref: ObjectRef<K>,
        uid: Option<String>,
    ) -> Result<Action, Error<Fut::Error>>
    where
        Fut: TryFuture<Ok = Action>,
        Fut::Error: std::error::Error + 'static,
    {
        let started = tokio::time::Instant::now();
        self.stop_waiting(&oref);
        let counted = |i, v: &Verdict| self.metrics.verdict(i, v.label());
        let (result, outcome) = match run_guards_counted(&self.guards, &*obj, &self.gctx, counted)
            .await
        {
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
                    self.wait_for(oref.clone(), uid, wake);
                }
                (Ok(Action::requeue(w.fallback)), "waiting")
            }
            Ok((Verdict::Proceed, _)) => match TryFutureExt::into_future(reconcile).await {
                Ok(action) => {
                    if self.tracking.load(Ordering::Relaxed) {
                        self.failures
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .remove(&oref);
                    }
                    (Ok(action), "success")
                }
                Err(e) => {
                    tracing::warn!(error = %e, "reconcile failed");
                    (Err(Error::Reconcile(e)), "error")
                }
            },
        };
        self.metrics.reconciled(outcome);
        self.metrics
            .duration
            .record(started.elapsed().as_secs_f64());
        if self.tracking.load(Ordering::Relaxed) {
            self.queue_depth();
        }
        result
    }
}

impl<K> GuardedController<K>
where
    K: Clone + Resource + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Debug + Unpin + Send + Sync,
{
    /// Run, as kube-runtime's `Controller::run`: every reconcile passes the
    /// guards first; the stream yields each reconcile's outcome.
    ///
    /// The same bounds and meaning as kube-runtime, with two differences:
    /// - the reconciler's future is built for every scheduled reconcile but
    ///   polled only if the guards proceed (an `async` reconciler does
    ///   nothing until polled; code in the closure *before* its `async`
    ///   block runs either way);
    /// - errors are [`Error`]: the reconciler's own, or a guard's.
    ///
    /// `error_policy`'s [`Action`] is honoured, as in kube-runtime, unless
    /// [`error_backoff`](Self::error_backoff) opted into Ward's per-object
    /// backoff (then the policy still runs, e.g. to log, and the backoff
    /// decides the delay). A guard's failure never reaches `error_policy`
    /// (its type is the reconciler's error): it is requeued after the
    /// opted-in backoff, or [`ErrorBackoff::default`].
    pub fn run<ReconcilerFut, Ctx>(
        self,
        mut reconciler: impl FnMut(Arc<K>, Arc<Ctx>) -> ReconcilerFut,
        error_policy: impl Fn(Arc<K>, &ReconcilerFut::Error, Arc<Ctx>) -> Action,
        context: Arc<Ctx>,
    ) -> impl Stream<Item = RunResult<K, ReconcilerFut::Error>>
    where
        ReconcilerFut: TryFuture<Ok = Action> + Send + 'static,
        ReconcilerFut::Error: std::error::Error + Send + 'static,
    {
        let kind = K::kind(&self.dyntype).into_owned();
        let names: Vec<_> = self.guards.iter().map(|g| g.name()).collect();
        let metrics = catalog::register_controller(&kind, &names);
        let ready = self.readiness.map(|r| {
            let check = r.check(format!("synced/{kind}"));
            self.synced.pass_when_synced(check.clone());
            RemoveOnDrop(check)
        });
        let shared = Arc::new(Shared {
            guards: self.guards,
            gctx: self.gctx,
            reader: self.inner.store(),
            metrics,
            dyntype: self.dyntype,
            wake_tx: self.wake_tx,
            waits: Mutex::new(HashMap::new()),
            failures: Mutex::new(HashMap::new()),
            tracking: AtomicBool::new(false),
            backoff: self.backoff,
            stale: self.stale,
            shard: self.shard.get().cloned(),
        });
        let on_error = shared.clone();
        // The guards prepare when the stream is first polled (inside the
        // runtime), alongside the controller's first list.
        let prepare = {
            let shared = shared.clone();
            futures::stream::once(async move {
                for g in &shared.guards {
                    g.prepare(&shared.gctx);
                }
            })
            .filter_map(|()| futures::future::ready(None))
        };
        prepare.chain(self.inner.run(
            move |obj: Arc<K>, ctx: Arc<Ctx>| {
                // The readiness check lives (and passes, once synced) as
                // long as the run's stream, which owns this closure.
                let _alive = &ready;
                // Only the reconciler's own call here: this closure runs on
                // the controller's one task, which every reconcile passes
                // through; the rest runs on the reconcile's spawned task.
                let fut = reconciler(obj.clone(), ctx);
                shared.clone().guarded(obj, fut)
            },
            move |obj: Arc<K>, err: &Error<ReconcilerFut::Error>, ctx: Arc<Ctx>| {
                let oref = ObjectRef::from_obj_with(&*obj, on_error.dyntype.clone());
                match (err, on_error.backoff) {
                    (Error::Reconcile(e), None) => error_policy(obj, e, ctx),
                    (Error::Reconcile(e), Some(backoff)) => {
                        error_policy(obj, e, ctx);
                        on_error.failed(oref, backoff)
                    }
                    (Error::Guard { .. }, backoff) => {
                        on_error.failed(oref, backoff.unwrap_or_default())
                    }
                }
            },
            context,
        ))
    }
}
