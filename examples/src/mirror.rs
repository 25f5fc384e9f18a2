//! Mirror: the smallest owner + same-named child controller, and the race
//! every such controller meets.
//!
//! A `Mirror` (`ward.dev/v1`, namespaced) asks for a ConfigMap of the same
//! name holding its `spec.data`, controlled by the Mirror (ownerReference
//! with its uid). The reconciler finds the ConfigMap by name and writes its
//! data, or creates it — the shape of most hand-written controllers, and of
//! the LWS bug:
//!
//! ```text
//! 1. Mirror "m" (uid M1) -> reconcile creates ConfigMap "m" (controller M1)
//! 2. DELETE Mirror m (background); the GC lags: ConfigMap m stays, no
//!    deletionTimestamp, controller still M1
//! 3. CREATE Mirror "m" -> uid M2
//! 4. reconcile(M2): GET ConfigMap m -> M1's child; writes M2's data into it
//! 5. the GC deletes ConfigMap m (its controller M1 is gone) -> DELETED
//! 6. M2 must be reconciled again to recreate its child: the DELETED child
//!    names M1, yet it is M2 that needs the wake-up
//! ```
//!
//! [`Variant::Naive`] runs it on a [`GuardedController`] with `owns` and no
//! guard: step 4 writes into the old child (the bug), and step 6 works as in
//! kube-runtime (the child's event wakes the live owner of that name, even
//! though its ownerReference names the replaced one). [`Variant::Bare`] runs
//! the same reconciler on kube-runtime's own `Controller`, to show the two
//! agree. [`Variant::Guarded`] adds
//! [`AwaitDeletion`]: M2's
//! reconcile waits at step 4 and is woken by step 5's DELETED event; the
//! old child is never written.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::watcher;
use kube::{Client, CustomResource, CustomResourceExt, Resource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use ward_apiserver::ApiServer;
use ward_guards::await_deletion::AwaitDeletion;
use ward_runtime::GuardedController;

use crate::meta::controller_uid;

/// What a Mirror asks for: a same-named ConfigMap holding `data`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(group = "ward.dev", version = "v1", kind = "Mirror", namespaced)]
pub struct MirrorSpec {
    /// The data the ConfigMap must hold.
    pub data: BTreeMap<String, String>,
}

/// The annotation a reconcile stamps on the ConfigMap it writes: the uid of
/// the Mirror it wrote for.
pub const WRITTEN_FOR: &str = "ward.dev/written-for";

/// Which controller runs the reconciler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// kube-runtime's own `Controller` with `owns`.
    Bare,
    /// `GuardedController` with `owns` and no guard.
    Naive,
    /// `GuardedController` with `owns` and `AwaitDeletion`.
    Guarded,
}

/// Errors of the example.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    /// An API call failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// Waiting on a watch failed.
    #[error(transparent)]
    Wait(#[from] kube::runtime::wait::Error),
    /// The runtime could not be built.
    #[error("building the runtime")]
    Runtime(#[source] std::io::Error),
    /// A step did not happen within its (simulated) time.
    #[error("timed out waiting for {0}")]
    Timeout(&'static str),
}

/// The reconciler: find ConfigMap `<mirror>` by name; write the Mirror's
/// data into it, or create it controlled by the Mirror.
pub async fn reconcile(mirror: Arc<Mirror>, client: Arc<Client>) -> Result<Action, MirrorError> {
    let ns = mirror.namespace().unwrap_or_default();
    let maps: Api<ConfigMap> = Api::namespaced((*client).clone(), &ns);
    let name = mirror.name_any();
    let uid = mirror.uid().unwrap_or_default();
    if maps.get_opt(&name).await?.is_some() {
        let patch =
            json!({"metadata": {"annotations": {WRITTEN_FOR: uid}}, "data": mirror.spec.data});
        maps.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
    } else {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name);
        cm.metadata.annotations = Some([(WRITTEN_FOR.to_string(), uid)].into());
        cm.metadata.owner_references = mirror.controller_owner_ref(&()).map(|r| vec![r]);
        cm.data = Some(mirror.spec.data.clone());
        maps.create(&PostParams::default(), &cm).await?;
    }
    Ok(Action::await_change())
}

/// One write the ConfigMap showed: its uid, its controller's uid, and the
/// Mirror uid the write was for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// The ConfigMap's uid.
    pub child: String,
    /// Its controller ownerReference's uid.
    pub controller: String,
    /// The Mirror it was written for.
    pub written_for: String,
}

/// What one run of the race showed.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The first Mirror's uid.
    pub m1: String,
    /// The second Mirror's uid (same name).
    pub m2: String,
    /// Every version of ConfigMap `m` the watch saw.
    pub writes: Vec<Write>,
    /// The ConfigMap at the end: controlled by M2 and holding its data.
    pub ends_with_own_child: bool,
    /// Simulated time from the GC resuming to M2's own ConfigMap existing.
    pub recreated_after: Duration,
}

impl Outcome {
    /// Writes for M2 that landed on a ConfigMap controlled by M1.
    #[must_use]
    pub fn writes_to_the_old_child(&self) -> usize {
        self.writes
            .iter()
            .filter(|w| w.written_for == self.m2 && w.controller == self.m1)
            .count()
    }
}

fn mirror(data: &[(&str, &str)]) -> Mirror {
    let data = data
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Mirror::new("m", MirrorSpec { data })
}

async fn within<T>(what: &'static str, fut: impl Future<Output = T>) -> Result<T, MirrorError> {
    tokio::time::timeout(Duration::from_secs(600), fut)
        .await
        .map_err(|_| MirrorError::Timeout(what))
}

/// Run the race once on an in-process ward-apiserver (call it on tokio's
/// paused clock: the GC lag is a minute of simulated time).
pub async fn run(variant: Variant) -> Result<Outcome, MirrorError> {
    let server = ApiServer::start_in_process().await;
    let client = server.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &Mirror::crd()).await?;
    within(
        "the Mirror CRD",
        await_condition(crds, "mirrors.ward.dev", conditions::is_crd_established()),
    )
    .await??;
    let mirrors: Api<Mirror> = Api::default_namespaced(client.clone());
    let maps: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let writes: Arc<Mutex<Vec<Write>>> = Arc::default();
    let recorder = tokio::spawn(record(maps.clone(), writes.clone()));

    let ctx = Arc::new(client.clone());
    let policy =
        |_: Arc<Mirror>, _: &MirrorError, _: Arc<Client>| Action::requeue(Duration::from_secs(5));
    let wc = watcher::Config::default;
    let controller = match variant {
        Variant::Bare => tokio::spawn(
            Controller::new(mirrors.clone(), wc())
                .owns(maps.clone(), wc())
                .run(reconcile, policy, ctx)
                .for_each(|_| async {}),
        ),
        Variant::Naive | Variant::Guarded => {
            let mut ctl = GuardedController::new(mirrors.clone(), wc()).owns(maps.clone(), wc());
            if variant == Variant::Guarded {
                ctl = ctl.guard(AwaitDeletion::<Mirror, ConfigMap>::new(|m| m.name_any()));
            }
            tokio::spawn(ctl.run(reconcile, policy, ctx).for_each(|_| async {}))
        }
    };

    let m1 = mirrors
        .create(&PostParams::default(), &mirror(&[("a", "1"), ("b", "1")]))
        .await?
        .uid()
        .unwrap_or_default();
    let first = await_condition(maps.clone(), "m", |c: Option<&ConfigMap>| c.is_some());
    within("M1's ConfigMap", first).await??;

    // The window: the GC lags; the Mirror is deleted and recreated.
    server.faults().pause_gc();
    mirrors.delete("m", &DeleteParams::background()).await?;
    let m2 = mirrors
        .create(&PostParams::default(), &mirror(&[("a", "2")]))
        .await?
        .uid()
        .unwrap_or_default();
    tokio::time::sleep(Duration::from_secs(60)).await;
    server.faults().resume_gc();
    let gone = tokio::time::Instant::now();
    let own = m2.clone();
    let owned = await_condition(maps.clone(), "m", move |c: Option<&ConfigMap>| {
        c.is_some_and(|c| controller_uid(&c.metadata) == own)
    });
    within("M2's own ConfigMap", owned).await??;
    let recreated_after = gone.elapsed();
    let end = maps.get("m").await?;
    controller.abort();
    recorder.abort();
    let writes = writes.lock().unwrap_or_else(|e| e.into_inner()).clone();
    Ok(Outcome {
        ends_with_own_child: controller_uid(&end.metadata) == m2
            && end.data == Some([("a".to_string(), "2".to_string())].into()),
        m1,
        m2,
        writes,
        recreated_after,
    })
}

async fn record(maps: Api<ConfigMap>, writes: Arc<Mutex<Vec<Write>>>) {
    let mut events = watcher(maps, watcher::Config::default()).boxed();
    while let Ok(Some(e)) = events.try_next().await {
        if let watcher::Event::Apply(c) | watcher::Event::InitApply(c) = e {
            let w = Write {
                child: c.uid().unwrap_or_default(),
                controller: controller_uid(&c.metadata),
                written_for: c
                    .annotations()
                    .get(WRITTEN_FOR)
                    .cloned()
                    .unwrap_or_default(),
            };
            writes.lock().unwrap_or_else(|e| e.into_inner()).push(w);
        }
    }
}

/// Run [`run`] on its own single-threaded runtime with tokio's clock
/// paused (simulated time), for a binary.
pub fn run_simulated(variant: Variant) -> Result<Outcome, MirrorError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .map_err(MirrorError::Runtime)?;
    rt.block_on(run(variant))
}
