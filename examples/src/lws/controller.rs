//! The LWS controller: a `GuardedController` over LeaderWorkerSets owning
//! their leader StatefulSets, writing the StatefulSet, a headless Service
//! and status with server-side apply under one field manager (`lws`), and
//! creating and deleting ControllerRevisions.
//!
//! Every reconcile: the StatefulSet named like the LWS is read; the hash it
//! runs (its `template-revision-hash` label, or the LWS's own hash when it
//! does not exist) must have a revision of this LWS — if none does, one is
//! created with that hash ("missing revision for an existing
//! LeaderWorkerSet", upstream's path) — and so must the LWS's own hash; the
//! StatefulSet and Service are applied with the own hash; history is
//! truncated to that revision; status follows, its ready groups counted
//! from the children as the API shows them ([`super::readiness`]): the
//! controller watches its groups' leader pods and worker StatefulSets, so
//! a change in any of them updates the status. A revision name taken by a
//! revision of another LWS bumps `status.collisionCount`.
//!
//! It runs upstream's LeaderWorkerSet controller, not its pod controller
//! (which creates each group's worker StatefulSet when the leader pod
//! appears): where nothing creates those, a group of more than one pod is
//! never ready, and the status says so.
//!
//! Variants (`--mode`):
//! - `naive`: before upstream #733 — whatever StatefulSet has the name is
//!   taken as this LWS's, so a predecessor's hash gets a revision of the new
//!   LWS, and the apply goes over the predecessor;
//! - `upstream`: #733 — requeue while the StatefulSet has a deletionTimestamp
//!   (a predecessor the GC has not reached yet has none);
//! - `guarded`: [`AwaitDeletion`] as the controller's guard — wait while the
//!   StatefulSet is terminating OR its controller uid is not the live LWS's,
//!   woken by its DELETED event (no polling).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use ward_guards::await_deletion::AwaitDeletion;
use ward_runtime::{GuardedController, Readiness};

use super::model::{
    HASH_LABEL, LeaderWorkerSet, LeaderWorkerSetStatus, NAME_LABEL, WORKER_INDEX_LABEL, WRITTEN_FOR,
};
use super::{readiness, revision};
use crate::journal::Journal;
use crate::meta::controller_uid;

/// The field manager of every write.
pub const MANAGER: &str = "lws";

pub use crate::run::Mode;

/// Errors of a reconcile.
#[derive(Debug, thiserror::Error)]
pub enum LwsError {
    /// An API call failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

struct Ctx {
    client: Client,
    mode: Mode,
    journal: Journal,
}

/// Run the controller over `namespace` until aborted (a restarted
/// controller starts from the server's state: it keeps nothing in memory).
pub async fn run(client: Client, namespace: &str, mode: Mode, journal: Journal) {
    run_until(
        client,
        namespace,
        mode,
        journal,
        None,
        std::future::pending(),
    )
    .await;
}

/// [`run`] as a deployed controller runs: readiness (if given) driven by
/// the controller's sync, and a graceful stop when `shutdown` completes
/// (reconciles in flight finish first).
pub async fn run_until(
    client: Client,
    namespace: &str,
    mode: Mode,
    journal: Journal,
    readiness: Option<Readiness>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    run_sharded(client, namespace, mode, journal, readiness, shutdown, None).await;
}

/// [`run_until`], as one replica of a sharded controller when `shard` is
/// given: it reconciles the LeaderWorkerSets whose uids hash to the
/// shard's active slots (their StatefulSets follow their controller
/// owner's uid).
pub async fn run_sharded(
    client: Client,
    namespace: &str,
    mode: Mode,
    journal: Journal,
    readiness: Option<Readiness>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
    shard: Option<ward_runtime::shard::Shard>,
) {
    // A sharded replica lists and watches its LeaderWorkerSets with the
    // shard's selector; reads in reconciles use the plain client.
    let listing = shard
        .as_ref()
        .map_or(client.clone(), |s| s.client(client.clone()));
    let lws: Api<LeaderWorkerSet> = Api::namespaced(listing, namespace);
    let sts: Api<StatefulSet> = Api::namespaced(client.clone(), namespace);
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    // A group's readiness lives in its leader pod and its worker
    // StatefulSet (controlled by the pod, not the LWS): both are watched by
    // the label naming their LWS, so a change in either updates the status.
    let leaders =
        watcher::Config::default().labels(&format!("{NAME_LABEL},{WORKER_INDEX_LABEL}=0"));
    let ours = watcher::Config::default().labels(NAME_LABEL);
    let mut ctl = GuardedController::new(lws, watcher::Config::default())
        .owns(sts.clone(), watcher::Config::default())
        .watches(sts, ours, group_of)
        .watches(pods, leaders, group_of)
        .graceful_shutdown_on(shutdown);
    if let Some(shard) = shard {
        ctl = ctl.shard(shard);
    }
    if let Some(r) = readiness {
        ctl = ctl.readiness(r);
    }
    if mode == Mode::Guarded {
        ctl = ctl.guard(AwaitDeletion::<LeaderWorkerSet, StatefulSet>::new(|l| {
            l.name_any()
        }));
    }
    let ctx = Arc::new(Ctx {
        client,
        mode,
        journal,
    });
    ctl.run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

/// The LWS a group's child belongs to, by the label naming it.
fn group_of<K: kube::Resource>(child: K) -> Option<ObjectRef<LeaderWorkerSet>> {
    let name = child.meta().labels.as_ref()?.get(NAME_LABEL)?.clone();
    let ns = child.meta().namespace.clone()?;
    Some(ObjectRef::new(&name).within(&ns))
}

fn error_policy(lws: Arc<LeaderWorkerSet>, e: &LwsError, ctx: Arc<Ctx>) -> Action {
    let why = match e {
        LwsError::Kube(kube::Error::Api(s)) => format!("{} ({})", s.message, s.code),
        e => e.to_string(),
    };
    ctx.journal.log(format!(
        "lws ({}): reconcile of {} failed: {why}",
        ctx.mode,
        lws.name_any()
    ));
    Action::requeue(Duration::from_secs(1))
}

async fn reconcile(lws: Arc<LeaderWorkerSet>, ctx: Arc<Ctx>) -> Result<Action, LwsError> {
    if lws.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let (name, ns) = (lws.name_any(), lws.namespace().unwrap_or_default());
    let uid = lws.uid().unwrap_or_default();
    let log = |what: String| {
        ctx.journal
            .log(format!("lws ({}): {name}: {what}", ctx.mode))
    };
    let client = &ctx.client;
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), &ns);
    let revs: Api<ControllerRevision> = Api::namespaced(client.clone(), &ns);
    let set = sets.get_opt(&name).await?;
    if ctx.mode == Mode::Upstream
        && set
            .as_ref()
            .is_some_and(|s| s.metadata.deletion_timestamp.is_some())
    {
        log("StatefulSet is terminating; requeue".into());
        return Ok(Action::requeue(Duration::from_secs(5)));
    }
    let status = lws.status.clone().unwrap_or_default();
    let collisions = status.collision_count.unwrap_or(0);
    let own = revision::hash(&lws.spec.leader_worker_template, collisions);
    // The hash the StatefulSet runs (the bug: whoever controls it).
    let running = set
        .as_ref()
        .and_then(|s| s.labels().get(HASH_LABEL).cloned())
        .unwrap_or_else(|| own.clone());
    let lp = ListParams::default().labels(&format!("{NAME_LABEL}={name}"));
    let mut mine: Vec<ControllerRevision> = revs
        .list(&lp)
        .await?
        .into_iter()
        .filter(|r| controller_uid(r.meta()) == uid)
        .collect();
    for hash in [running.clone(), own.clone()] {
        if mine
            .iter()
            .any(|r| r.labels().get(HASH_LABEL) == Some(&hash))
        {
            continue;
        }
        let rev = new_revision(&lws, &hash, revision::next_number(&mine));
        match revs.create(&PostParams::default(), &rev).await {
            Ok(r) => {
                let whose = set
                    .as_ref()
                    .filter(|_| hash == running && hash != own)
                    .map(|s| {
                        format!(
                            " (the hash of StatefulSet uid {})",
                            s.uid().unwrap_or_default()
                        )
                    })
                    .unwrap_or_default();
                log(format!(
                    "created revision {} #{}{whose}",
                    r.name_any(),
                    r.revision.unwrap_or_default()
                ));
                mine.push(r);
            }
            Err(kube::Error::Api(s)) if s.code == 409 && hash == own => {
                // The name is another LWS's revision: fold a collision in.
                log(format!(
                    "revision name {} is taken; collisionCount {}",
                    revision::name(&name, &hash),
                    collisions + 1
                ));
                let bumped = LeaderWorkerSetStatus {
                    collision_count: Some(collisions + 1),
                    ..status
                };
                apply_status(client, &lws, &bumped).await?;
                return Ok(Action::await_change());
            }
            Err(e) => return Err(e.into()),
        }
    }
    apply_children(&ctx, &lws, &own).await?;
    for old in revision::to_truncate(&mine, &own, &own) {
        revs.delete(&old.name_any(), &DeleteParams::default())
            .await?;
        log(format!("history: deleted revision {}", old.name_any()));
    }
    let current = revision::name(&name, &own);
    let replicas = lws.spec.replicas;
    let ready = ready_groups(client, &lws).await?;
    let want = LeaderWorkerSetStatus {
        replicas,
        ready_replicas: ready,
        current_revision: Some(current.clone()),
        update_revision: Some(current.clone()),
        collision_count: status.collision_count,
        conditions: readiness::conditions(ready, replicas),
    };
    if status != want {
        apply_status(client, &lws, &want).await?;
        if status.current_revision.as_deref() != Some(&current) {
            log(format!("status: current revision {current}"));
        }
        if status.ready_replicas != ready || status.conditions.is_empty() {
            log(format!("status: {ready} of {replicas} groups ready"));
        }
    }
    Ok(Action::await_change())
}

/// How many of `lws`'s groups are ready, from its leader StatefulSet, its
/// leader pods and its worker StatefulSets as the API lists them now.
async fn ready_groups(client: &Client, lws: &LeaderWorkerSet) -> Result<i32, LwsError> {
    let (name, ns) = (lws.name_any(), lws.namespace().unwrap_or_default());
    let ours = ListParams::default().labels(&format!("{NAME_LABEL}={name}"));
    let leaders =
        ListParams::default().labels(&format!("{NAME_LABEL}={name},{WORKER_INDEX_LABEL}=0"));
    let sets = Api::<StatefulSet>::namespaced(client.clone(), &ns)
        .list(&ours)
        .await?
        .items;
    let pods = Api::<Pod>::namespaced(client.clone(), &ns)
        .list(&leaders)
        .await?
        .items;
    let leader = sets.iter().find(|s| s.name_any() == name);
    Ok(readiness::ready_groups(lws, leader, &pods, &sets))
}

/// Apply the whole status (server-side apply under [`MANAGER`]: a field the
/// manager leaves out of an apply is removed, so every apply carries all of
/// it).
async fn apply_status(
    client: &Client,
    lws: &LeaderWorkerSet,
    status: &LeaderWorkerSetStatus,
) -> Result<(), LwsError> {
    let body = json!({
        "apiVersion": LeaderWorkerSet::api_version(&()), "kind": LeaderWorkerSet::kind(&()),
        "status": status});
    Api::<LeaderWorkerSet>::namespaced(client.clone(), &lws.namespace().unwrap_or_default())
        .patch_status(
            &lws.name_any(),
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(body),
        )
        .await?;
    Ok(())
}

fn new_revision(lws: &LeaderWorkerSet, hash: &str, number: i64) -> ControllerRevision {
    let name = lws.name_any();
    let mut r = ControllerRevision {
        revision: Some(number),
        data: k8s_openapi::apimachinery::pkg::runtime::RawExtension(revision::patch(
            &lws.spec.leader_worker_template,
        )),
        ..Default::default()
    };
    r.metadata.name = Some(revision::name(&name, hash));
    r.metadata.labels = Some(
        [
            (NAME_LABEL.to_string(), name),
            (HASH_LABEL.to_string(), hash.to_string()),
        ]
        .into(),
    );
    r.metadata.owner_references = lws.controller_owner_ref(&()).map(|r| vec![r]);
    r
}

/// Apply the leader StatefulSet and the headless Service with hash `own`.
async fn apply_children(ctx: &Ctx, lws: &LeaderWorkerSet, own: &str) -> Result<(), LwsError> {
    let (name, ns) = (lws.name_any(), lws.namespace().unwrap_or_default());
    let uid = lws.uid().unwrap_or_default();
    let owner = lws.controller_owner_ref(&()).map(|mut r| {
        r.block_owner_deletion = Some(true);
        r
    });
    let t = &lws.spec.leader_worker_template;
    let pod = t
        .leader_template
        .clone()
        .unwrap_or_else(|| t.worker_template.clone());
    let pp = PatchParams::apply(MANAGER).force();
    let set = json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "labels": {NAME_LABEL: name, HASH_LABEL: own},
                     "annotations": {WRITTEN_FOR: uid}, "ownerReferences": [owner]},
        "spec": {"replicas": lws.spec.replicas, "serviceName": name,
                 "selector": {"matchLabels": {NAME_LABEL: name, WORKER_INDEX_LABEL: "0"}},
                 "template": {"metadata": {"labels": {NAME_LABEL: name, HASH_LABEL: own,
                                                      WORKER_INDEX_LABEL: "0"}},
                              "spec": pod["spec"]}}});
    Api::<StatefulSet>::namespaced(ctx.client.clone(), &ns)
        .patch(&name, &pp, &Patch::Apply(set))
        .await?;
    let svc = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "ownerReferences": [owner]},
        "spec": {"clusterIP": "None", "selector": {NAME_LABEL: name}}});
    Api::<Service>::namespaced(ctx.client.clone(), &ns)
        .patch(&name, &pp, &Patch::Apply(svc))
        .await?;
    Ok(())
}
