//! The LWS race against ward-apiserver: an owner deleted in the background
//! while GC lags, recreated under the same name. The same controller
//! without the guard writes its new revision over the old owner's
//! StatefulSet; with `AwaitDeletion` it waits, is woken by the DELETED
//! event, and creates a fresh StatefulSet for the new owner.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::wait::await_condition;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::time::Instant;
use ward_apiserver::ApiServer;
use ward_guards::await_deletion::AwaitDeletion;
use ward_runtime::GuardedController;

const WAIT: Duration = Duration::from_secs(600);
const REVISION: &str = "ward.dev/revision-of";

/// The reconciler of an LWS-like owner (a ConfigMap labelled app=lws): make
/// sure StatefulSet `<owner>` exists, labelled with the owner's revision.
/// Like the buggy controller, it finds the StatefulSet by name and applies
/// over whatever it finds.
async fn reconcile(owner: Arc<ConfigMap>, client: Arc<Client>) -> Result<Action, kube::Error> {
    let sets: Api<StatefulSet> = Api::namespaced((*client).clone(), &owner.namespace().unwrap());
    let name = owner.name_any();
    let uid = owner.uid().unwrap();
    match sets.get_opt(&name).await? {
        Some(_) => {
            let patch = json!({"metadata": {"annotations": {REVISION: uid}}});
            sets.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await?;
        }
        None => {
            let sts: StatefulSet = serde_json::from_value(json!({
                "metadata": {"name": name, "annotations": {REVISION: uid},
                    "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": uid,
                                         "controller": true, "blockOwnerDeletion": true}]},
                "spec": {"serviceName": name, "selector": {"matchLabels": {"app": name}},
                         "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}))
            .unwrap();
            sets.create(&PostParams::default(), &sts).await?;
        }
    }
    Ok(Action::await_change())
}

/// Every (StatefulSet uid, controller owner uid, revision annotation) the
/// StatefulSets of the namespace ever showed.
type Seen = Arc<Mutex<Vec<(String, String, String)>>>;

fn record_statefulsets(client: &Client) -> (Seen, tokio::task::JoinHandle<()>) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let sets: Api<StatefulSet> = Api::default_namespaced(client.clone());
    let task = tokio::spawn(async move {
        let mut events = watcher(sets, watcher::Config::default()).boxed();
        while let Ok(Some(e)) = events.try_next().await {
            if let watcher::Event::Apply(sts) | watcher::Event::InitApply(sts) = e {
                let owner = sts
                    .owner_references()
                    .first()
                    .map(|r| r.uid.clone())
                    .unwrap_or_default();
                let rev = sts.annotations().get(REVISION).cloned().unwrap_or_default();
                s.lock().unwrap().push((sts.uid().unwrap(), owner, rev));
            }
        }
    });
    (seen, task)
}

/// What a run showed.
struct Outcome {
    /// Every (StatefulSet uid, owner uid, revision) observed.
    seen: Vec<(String, String, String)>,
    l1: String,
    l2: String,
    /// The StatefulSet created for L1.
    old_sts: String,
    /// How long after GC resumed a StatefulSet for L2 appeared (guarded runs).
    woken_after: Option<Duration>,
}

async fn scenario(guarded: bool) -> Outcome {
    let server = ApiServer::start_in_process().await;
    let client = server.client();
    let owners: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let sets: Api<StatefulSet> = Api::default_namespaced(client.clone());
    let (seen, recorder) = record_statefulsets(&client);
    let mut ctl =
        GuardedController::new(owners.clone(), watcher::Config::default().labels("app=lws"));
    if guarded {
        ctl = ctl.guard(AwaitDeletion::<ConfigMap, StatefulSet>::new(|o| {
            o.name_any()
        }));
    }
    let controller = tokio::spawn(
        ctl.run(
            reconcile,
            |_, _, _| Action::requeue(Duration::from_secs(5)),
            Arc::new(client.clone()),
        )
        .for_each(|_| async {}),
    );
    let mut owner = ConfigMap::default();
    owner.metadata.name = Some("test".into());
    owner.metadata.labels = Some([("app".to_string(), "lws".to_string())].into());
    let l1 = owners
        .create(&PostParams::default(), &owner)
        .await
        .unwrap()
        .uid()
        .unwrap();
    let first = await_condition(sets.clone(), "test", |s: Option<&StatefulSet>| s.is_some());
    let old_sts = tokio::time::timeout(WAIT, first)
        .await
        .unwrap()
        .unwrap()
        .unwrap()
        .uid()
        .unwrap();

    // The window: GC lags; the owner is deleted (background) and recreated.
    server.faults().pause_gc();
    owners
        .delete("test", &DeleteParams::background())
        .await
        .unwrap();
    let l2 = owners
        .create(&PostParams::default(), &owner)
        .await
        .unwrap()
        .uid()
        .unwrap();
    // A minute of simulated time inside the window.
    tokio::time::sleep(Duration::from_secs(60)).await;
    let mut woken_after = None;
    if guarded {
        server.faults().resume_gc();
        let t0 = Instant::now();
        let l2 = l2.clone();
        let owned_by_l2 = await_condition(sets.clone(), "test", move |s: Option<&StatefulSet>| {
            s.is_some_and(|s| s.owner_references().first().is_some_and(|r| r.uid == l2))
        });
        tokio::time::timeout(WAIT, owned_by_l2)
            .await
            .expect("a StatefulSet for the new owner")
            .unwrap();
        woken_after = Some(t0.elapsed());
    }
    controller.abort();
    recorder.abort();
    let seen = seen.lock().unwrap().clone();
    Outcome {
        seen,
        l1,
        l2,
        old_sts,
        woken_after,
    }
}

#[tokio::test(start_paused = true)]
async fn without_the_guard_the_new_owner_writes_over_the_old_owners_statefulset() {
    let o = scenario(false).await;
    assert!(
        o.seen
            .iter()
            .any(|(uid, owner, rev)| *uid == o.old_sts && *owner == o.l1 && *rev == o.l2),
        "the bug: L1's StatefulSet carried L2's revision; seen {:#?}",
        o.seen
    );
}

#[tokio::test(start_paused = true)]
async fn with_await_deletion_the_new_owner_waits_for_the_old_statefulset_to_go() {
    let o = scenario(true).await;
    assert!(
        !o.seen
            .iter()
            .any(|(uid, _, rev)| *uid == o.old_sts && *rev == o.l2),
        "L1's StatefulSet is never written for L2; seen {:#?}",
        o.seen
    );
    assert!(
        o.seen
            .iter()
            .any(|(uid, owner, rev)| *uid != o.old_sts && *owner == o.l2 && *rev == o.l2)
    );
    // Woken by the DELETED event, not by the 5-minute fallback.
    let woken = o.woken_after.unwrap();
    assert!(woken < Duration::from_secs(1), "woken after {woken:?}");
}
