//! Deletion lifecycle and garbage collection against ward-apiserver with
//! kube::Client: finalizers, preconditions, the three propagation policies
//! over owner chains of depth 3, GC by UID, pod grace periods.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::json;
use ward_apiserver::ApiServer;

const WAIT: Duration = Duration::from_secs(120);

fn owner_ref(owner: &ConfigMap, block: bool) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: owner.name_any(),
        uid: owner.uid().unwrap(),
        controller: Some(true),
        block_owner_deletion: Some(block),
    }
}

async fn make(api: &Api<ConfigMap>, name: &str, owner: Option<&ConfigMap>) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.owner_references = owner.map(|o| vec![owner_ref(o, true)]);
    api.create(&PostParams::default(), &cm).await.unwrap()
}

async fn gone(api: &Api<ConfigMap>, cm: &ConfigMap) {
    let (name, uid) = (cm.name_any(), cm.uid().unwrap());
    let cond = await_condition(api.clone(), &name, conditions::is_deleted(&uid));
    tokio::time::timeout(WAIT, cond)
        .await
        .unwrap_or_else(|_| panic!("{} was not deleted", cm.name_any()))
        .unwrap();
}

/// A chain grand <- parent <- child (each blockOwnerDeletion).
async fn chain(api: &Api<ConfigMap>) -> (ConfigMap, ConfigMap, ConfigMap) {
    let grand = make(api, "grand", None).await;
    let parent = make(api, "parent", Some(&grand)).await;
    let child = make(api, "child", Some(&parent)).await;
    (grand, parent, child)
}

fn setup(server: &ApiServer) -> (Client, Api<ConfigMap>) {
    let client = server.client();
    let api = Api::default_namespaced(client.clone());
    (client, api)
}

#[tokio::test(start_paused = true)]
async fn finalizers_hold_an_object_until_removed() {
    let server = ApiServer::start_in_process().await;
    let (_, api) = setup(&server);
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("held".into());
    cm.metadata.finalizers = Some(vec!["ward.dev/hold".into()]);
    let cm = api.create(&PostParams::default(), &cm).await.unwrap();
    let res = api.delete("held", &DeleteParams::default()).await.unwrap();
    let terminating = res.left().expect("a held object is returned, not a Status");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    // deletionTimestamp cannot be unset; no finalizer can be added.
    let p = api
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"deletionTimestamp": null}})),
        )
        .await
        .unwrap();
    assert_eq!(
        p.metadata.deletion_timestamp,
        terminating.metadata.deletion_timestamp
    );
    let err = api
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["ward.dev/hold", "x.dev/new"]}})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 422),
        "{err:?}"
    );
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    gone(&api, &cm).await;
}

#[tokio::test(start_paused = true)]
async fn delete_preconditions_conflict_with_the_real_message() {
    let server = ApiServer::start_in_process().await;
    let (_, api) = setup(&server);
    let cm = make(&api, "a", None).await;
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("not-the-uid".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let err = api.delete("a", &dp).await.unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert_eq!(
                s.message,
                format!(
                    "Operation cannot be fulfilled on ConfigMap \"a\": the UID in the \
                     precondition (not-the-uid) does not match the UID in record ({}). The object \
                     might have been deleted and then recreated",
                    cm.uid().unwrap()
                )
            );
        }
        e => panic!("{e:?}"),
    }
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: cm.uid(),
            resource_version: cm.resource_version(),
        }),
        ..DeleteParams::default()
    };
    api.delete("a", &dp).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn background_deletion_collects_a_chain_of_depth_3() {
    let server = ApiServer::start_in_process().await;
    let (_, api) = setup(&server);
    let (grand, parent, child) = chain(&api).await;
    api.delete("grand", &DeleteParams::background())
        .await
        .unwrap();
    assert!(
        api.get_opt("grand").await.unwrap().is_none(),
        "background: the owner goes at once"
    );
    gone(&api, &parent).await;
    gone(&api, &child).await;
    let _ = grand;
}

#[tokio::test(start_paused = true)]
async fn foreground_deletion_removes_dependents_first() {
    let server = ApiServer::start_in_process().await;
    let (_, api) = setup(&server);
    let (grand, _parent, _child) = chain(&api).await;
    let mut events = watcher(api.clone(), watcher::Config::default()).boxed();
    while !matches!(
        events.try_next().await.unwrap().unwrap(),
        watcher::Event::InitDone
    ) {}
    let res = api
        .delete("grand", &DeleteParams::foreground())
        .await
        .unwrap();
    let g = res.left().expect("the owner stays while dependents go");
    assert!(g.finalizers().contains(&"foregroundDeletion".to_string()));
    let mut order = Vec::new();
    while order.len() < 3 {
        if let watcher::Event::Delete(cm) = tokio::time::timeout(WAIT, events.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            order.push(cm.name_any());
        }
    }
    assert_eq!(order, ["child", "parent", "grand"]);
    let _ = grand;
}

#[tokio::test(start_paused = true)]
async fn orphan_deletion_strips_owner_references() {
    let server = ApiServer::start_in_process().await;
    let (_, api) = setup(&server);
    let (grand, _parent, _child) = chain(&api).await;
    api.delete("grand", &DeleteParams::orphan()).await.unwrap();
    gone(&api, &grand).await;
    let parent = api.get("parent").await.unwrap();
    assert!(
        parent.owner_references().is_empty(),
        "{:?}",
        parent.owner_references()
    );
    let child = api.get("child").await.unwrap();
    assert_eq!(
        child.owner_references()[0].name,
        "parent",
        "deeper references are untouched"
    );
    assert!(parent.metadata.deletion_timestamp.is_none());
}

#[tokio::test(start_paused = true)]
async fn gc_goes_by_uid_when_the_owner_is_recreated_under_the_same_name() {
    let server = ApiServer::start_in_process().await;
    let (_, api) = setup(&server);
    let old_owner = make(&api, "owner", None).await;
    let old_dep = make(&api, "dep-old", Some(&old_owner)).await;
    server.faults().pause_gc();
    api.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    let new_owner = make(&api, "owner", None).await;
    assert_ne!(new_owner.uid(), old_owner.uid());
    let new_dep = make(&api, "dep-new", Some(&new_owner)).await;
    server.faults().resume_gc();
    gone(&api, &old_dep).await;
    // The dependent of the live owner stays, whatever the GC does next.
    let mut events = watcher(api.clone(), watcher::Config::default()).boxed();
    while !matches!(
        events.try_next().await.unwrap().unwrap(),
        watcher::Event::InitDone
    ) {}
    let survivor = api.get("dep-new").await.unwrap();
    assert_eq!(survivor.uid(), new_dep.uid());
}

#[tokio::test(start_paused = true)]
async fn a_dependent_with_another_live_owner_survives_and_loses_the_dangling_reference() {
    let server = ApiServer::start_in_process().await;
    let (_, api) = setup(&server);
    let a = make(&api, "a", None).await;
    let b = make(&api, "b", None).await;
    let mut dep = ConfigMap::default();
    dep.metadata.name = Some("dep".into());
    dep.metadata.owner_references = Some(vec![
        owner_ref(&a, false),
        OwnerReference {
            controller: None,
            ..owner_ref(&b, false)
        },
    ]);
    api.create(&PostParams::default(), &dep).await.unwrap();
    api.delete("a", &DeleteParams::background()).await.unwrap();
    let stripped = await_condition(api.clone(), "dep", |c: Option<&ConfigMap>| {
        c.is_some_and(|c| c.owner_references().len() == 1)
    });
    let dep = tokio::time::timeout(WAIT, stripped)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(dep.owner_references()[0].uid, b.uid().unwrap());
}

#[tokio::test(start_paused = true)]
async fn scheduled_pods_linger_for_their_grace_period() {
    let server = ApiServer::start_in_process().await;
    let client = server.client();
    let pods: Api<Pod> = Api::default_namespaced(client);
    let pod = |name: &str, node: Option<&str>| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 10, "containers": [{"name": "c", "image": "i"}]}}))
        .unwrap()
    };
    let unscheduled = pods
        .create(&PostParams::default(), &pod("loose", None))
        .await
        .unwrap();
    pods.delete("loose", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        pods.get_opt("loose").await.unwrap().is_none(),
        "a pod never scheduled goes at once"
    );
    let _ = unscheduled;

    let p = pods
        .create(&PostParams::default(), &pod("bound", Some("n1")))
        .await
        .unwrap();
    let t0 = tokio::time::Instant::now();
    let res = pods
        .delete("bound", &DeleteParams::default())
        .await
        .unwrap();
    let t = res.left().expect("terminating pod returned");
    assert_eq!(t.metadata.deletion_grace_period_seconds, Some(10));
    assert!(t.metadata.deletion_timestamp.is_some());
    let uid = p.uid().unwrap();
    let cond = await_condition(pods.clone(), "bound", conditions::is_deleted(&uid));
    tokio::time::timeout(WAIT, cond).await.unwrap().unwrap();
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_secs(10) && waited < Duration::from_secs(11),
        "{waited:?}"
    );

    // A later delete may shorten the grace period to zero.
    let p = pods
        .create(&PostParams::default(), &pod("bound", Some("n1")))
        .await
        .unwrap();
    pods.delete("bound", &DeleteParams::default())
        .await
        .unwrap();
    pods.delete(
        "bound",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        },
    )
    .await
    .unwrap();
    let again = pods.get_opt("bound").await.unwrap();
    assert!(again.is_none_or(|a| a.uid() != p.uid()));
}
