//! The controllers under test: the reconcile body they share (the probe
//! records what it saw), and how each variant is started on its own client.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use ward_apiserver::ApiServer;
use ward_guards::owner_uid::OwnerUid;
use ward_runtime::{GuardedController, Reads};

use super::config::Variant;
use crate::bench::objects::{NAMESPACE, now_micros};

/// What the reconcile body reports to the benchmark.
#[derive(Debug, Default)]
pub struct Probe {
    pub(super) reconciles: AtomicU64,
    /// Whether the reconcile awaits once before its work ([`Variant::BareAwait`]).
    pub(super) awaits: bool,
    /// The reconcile count that completes the sync.
    pub(super) sync_target: AtomicU64,
    /// `now_micros` at the first reconcile and at the one completing the sync (0: not yet).
    pub(super) first_at: AtomicU64,
    pub(super) synced_at: AtomicU64,
    pub(super) churn_start: AtomicU64,
    pub(super) owner_reads: Arc<AtomicU64>,
    pub(super) latencies: Mutex<Vec<u64>>,
    /// Notified at every reconcile (a permit kept when nobody waits).
    pub(super) done: tokio::sync::Notify,
}

impl Probe {
    pub(super) fn new(awaits: bool) -> Arc<Self> {
        Arc::new(Probe {
            awaits,
            churn_start: AtomicU64::new(u64::MAX),
            ..Probe::default()
        })
    }

    /// A probe that only counts (no latencies, no sync target).
    #[must_use]
    pub fn counting() -> Arc<Self> {
        Probe::new(false)
    }

    /// Reconciles so far.
    #[must_use]
    pub fn reconciles(&self) -> u64 {
        self.reconciles.load(Ordering::Relaxed)
    }

    /// Requests for Nodes so far.
    #[must_use]
    pub fn owner_reads(&self) -> u64 {
        self.owner_reads.load(Ordering::Relaxed)
    }

    /// Until the next reconcile (or at once, if one came since the last
    /// call).
    pub async fn reconciled(&self) {
        self.done.notified().await;
    }
}

/// The reconcile body both controllers run: read the stamp, hash the
/// data (the "work"), record the event-to-reconcile latency.
pub async fn reconcile(cm: Arc<ConfigMap>, probe: Arc<Probe>) -> Result<Action, Infallible> {
    if probe.awaits {
        tokio::task::yield_now().await;
    }
    let now = now_micros();
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut stamp = None;
    for (k, v) in cm.data.iter().flatten() {
        if k == "stamp" {
            stamp = v.parse::<u64>().ok();
        }
        for b in k.bytes().chain(v.bytes()) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    std::hint::black_box(h);
    let done = probe.reconciles.fetch_add(1, Ordering::Relaxed) + 1;
    probe.done.notify_one();
    if done == 1 {
        probe.first_at.store(now, Ordering::Relaxed);
    }
    if done == probe.sync_target.load(Ordering::Relaxed) {
        probe.synced_at.store(now_micros(), Ordering::Relaxed);
    }
    if let Some(s) = stamp
        && s >= probe.churn_start.load(Ordering::Relaxed)
    {
        probe
            .latencies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(now.saturating_sub(s));
    }
    Ok(Action::await_change())
}

fn error_policy(_: Arc<ConfigMap>, _: &Infallible, _: Arc<Probe>) -> Action {
    Action::requeue(Duration::from_secs(1))
}

/// A client of `server` that counts the requests for Nodes (the owners).
fn counting_client(server: &ApiServer, owner_reads: Arc<AtomicU64>) -> kube::Client {
    let svc = tower::ServiceBuilder::new()
        .map_request(move |req: http::Request<kube::client::Body>| {
            if req.uri().path().contains("/nodes") {
                owner_reads.fetch_add(1, Ordering::Relaxed);
            }
            req
        })
        .service(server.service());
    kube::Client::new(svc, NAMESPACE)
}

/// Start `variant` over the ConfigMaps of `server`, reporting to `probe`,
/// until `stop`.
pub(crate) fn spawn_controller(
    server: &ApiServer,
    variant: Variant,
    probe: Arc<Probe>,
    stop: tokio::sync::oneshot::Receiver<()>,
) -> tokio::task::JoinHandle<()> {
    let client = counting_client(server, probe.owner_reads.clone());
    let api: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);
    let stop = async move {
        let _ = stop.await;
    };
    match variant {
        Variant::Bare | Variant::BareAwait => tokio::spawn(
            Controller::new(api, watcher::Config::default())
                .graceful_shutdown_on(stop)
                .run(reconcile, error_policy, probe)
                .for_each(|_| async {}),
        ),
        Variant::Unguarded => tokio::spawn(
            GuardedController::new(api, watcher::Config::default())
                .graceful_shutdown_on(stop)
                .run(reconcile, error_policy, probe)
                .for_each(|_| async {}),
        ),
        Variant::Guarded | Variant::GuardedShared | Variant::GuardedGet => tokio::spawn(
            GuardedController::new(api, watcher::Config::default())
                .guard(OwnerUid::<Node>::new().reads(match variant {
                    Variant::GuardedShared => Reads::Shared,
                    Variant::GuardedGet => Reads::Get,
                    _ => Reads::Consistent,
                }))
                .graceful_shutdown_on(stop)
                .run(reconcile, error_policy, probe)
                .for_each(|_| async {}),
        ),
    }
}
