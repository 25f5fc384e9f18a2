//! Fault injection against ward-apiserver with kube::Client, under tokio's
//! paused clock: GC delay and pause, per-client views (delay, freeze,
//! coalescing), write faults, pod stages — and the three race windows the
//! seed bugs need, each replayed 50 times per seed with the same outcome.

use crate::common::without_root_ca;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::watcher;
use serde_json::json;
use tokio::time::Instant;
use ward_apiserver::{ApiServer, ClientView, Delay, PodLifecycle, Verb, WriteAction, WriteFault};

const WAIT: Duration = Duration::from_secs(300);

fn cm(name: &str, owner: Option<&ConfigMap>) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    c.metadata.owner_references = owner.map(|o| {
        vec![OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: o.name_any(),
            uid: o.uid().unwrap(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]
    });
    c
}

async fn wait_deleted<K>(api: &Api<K>, name: &str, uid: &str)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let cond = await_condition(api.clone(), name, conditions::is_deleted(uid));
    tokio::time::timeout(WAIT, cond)
        .await
        .expect("deleted in time")
        .unwrap();
}

/// The next watcher event that is not a (re)list marker.
async fn next_change<K>(
    events: &mut (impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Unpin),
) -> watcher::Event<K> {
    loop {
        let e = tokio::time::timeout(WAIT, events.try_next())
            .await
            .expect("an event")
            .unwrap()
            .unwrap();
        if !matches!(e, watcher::Event::Init | watcher::Event::InitDone) {
            return e;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn gc_delay_and_pause_hold_dependents_exactly_that_long() {
    let server = ApiServer::start_seeded(1).await;
    let (c, _) = server.client_and_id();
    let api: Api<ConfigMap> = Api::default_namespaced(c);
    let owner = api
        .create(&PostParams::default(), &cm("owner", None))
        .await
        .unwrap();
    let dep = api
        .create(&PostParams::default(), &cm("dep", Some(&owner)))
        .await
        .unwrap();
    server
        .faults()
        .set_gc_delay(Delay::fixed(Duration::from_secs(5)));
    let t0 = Instant::now();
    api.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    wait_deleted(&api, "dep", &dep.uid().unwrap()).await;
    assert_eq!(t0.elapsed(), Duration::from_secs(5));

    // Paused: nothing is collected however long we wait; resumed: it goes.
    let owner = api
        .create(&PostParams::default(), &cm("owner", None))
        .await
        .unwrap();
    let dep = api
        .create(&PostParams::default(), &cm("dep", Some(&owner)))
        .await
        .unwrap();
    server.faults().set_gc_delay(Delay::default());
    server.faults().pause_gc();
    api.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(api.get("dep").await.unwrap().uid(), dep.uid());
    server.faults().resume_gc();
    wait_deleted(&api, "dep", &dep.uid().unwrap()).await;
}

#[tokio::test(start_paused = true)]
async fn a_delayed_client_sees_events_late_and_others_on_time() {
    let server = ApiServer::start_seeded(2).await;
    let (fast, _) = server.client_and_id();
    let (slow, slow_id) = server.client_and_id();
    server.faults().set_view(
        slow_id,
        ClientView {
            watch_delay: Delay::fixed(Duration::from_secs(2)),
            ..ClientView::default()
        },
    );
    let mut fast_events = watcher(
        Api::<ConfigMap>::default_namespaced(fast.clone()),
        watcher::Config::default(),
    )
    .boxed();
    let mut slow_events = watcher(
        Api::<ConfigMap>::default_namespaced(slow.clone()),
        watcher::Config::default(),
    )
    .boxed();
    // Both watches are open once their (empty) initial lists are in.
    while !matches!(
        fast_events.try_next().await.unwrap().unwrap(),
        watcher::Event::InitDone
    ) {}
    while !matches!(
        slow_events.try_next().await.unwrap().unwrap(),
        watcher::Event::InitDone
    ) {}
    let api: Api<ConfigMap> = Api::default_namespaced(fast);
    api.create(&PostParams::default(), &cm("probe", None))
        .await
        .unwrap();
    let t0 = Instant::now();
    assert!(matches!(
        next_change(&mut fast_events).await,
        watcher::Event::Apply(_)
    ));
    let fast_at = t0.elapsed();
    assert!(matches!(
        next_change(&mut slow_events).await,
        watcher::Event::Apply(_)
    ));
    let slow_at = t0.elapsed();
    assert_eq!(fast_at, Duration::ZERO);
    assert_eq!(slow_at, Duration::from_secs(2));
}

#[tokio::test(start_paused = true)]
async fn a_frozen_client_lists_and_watches_the_past_but_quorum_reads_stay_fresh() {
    let server = ApiServer::start_seeded(3).await;
    without_root_ca(&server, "default").await;
    let (writer, _) = server.client_and_id();
    let (frozen, frozen_id) = server.client_and_id();
    let w: Api<ConfigMap> = Api::default_namespaced(writer);
    let f: Api<ConfigMap> = Api::default_namespaced(frozen);
    w.create(&PostParams::default(), &cm("a", None))
        .await
        .unwrap();
    let at = server.store().current_rv();
    server.faults().set_view(
        frozen_id,
        ClientView {
            frozen_at: Some(at),
            ..ClientView::default()
        },
    );
    w.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "new"}})),
    )
    .await
    .unwrap();
    w.create(&PostParams::default(), &cm("b", None))
        .await
        .unwrap();
    // Informer-style list (resourceVersion=0): the past.
    let stale = f.list(&ListParams::default().match_any()).await.unwrap();
    assert_eq!(stale.metadata.resource_version, Some(at.to_string()));
    assert_eq!(stale.items.len(), 1);
    assert!(stale.items[0].data.is_none());
    // Quorum read: fresh.
    assert_eq!(f.get("a").await.unwrap().data.unwrap()["k"], "new");
    assert!(f.get_opt("b").await.unwrap().is_some());
    // An informer listing from the cache (rv=0; kube sends it only without a
    // page size) sees the past, and its watch holds everything newer than
    // the freeze until it thaws.
    let cache_list = watcher::Config {
        page_size: None,
        ..watcher::Config::default().any_semantic()
    };
    let mut events = watcher(f.clone(), cache_list).boxed();
    let mut initial = Vec::new();
    loop {
        match tokio::time::timeout(WAIT, events.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            watcher::Event::InitApply(c) => initial.push(c.name_any()),
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(initial, ["a"]);
    let held = tokio::time::timeout(Duration::from_secs(60), events.try_next()).await;
    assert!(held.is_err(), "nothing is delivered while frozen");
    server.faults().set_view(frozen_id, ClientView::default());
    let mut thawed = Vec::new();
    while thawed.len() < 2 {
        if let watcher::Event::Apply(c) = next_change(&mut events).await {
            thawed.push((c.name_any(), c.data.and_then(|d| d.get("k").cloned())));
        }
    }
    assert_eq!(
        thawed,
        [
            ("a".to_string(), Some("new".to_string())),
            ("b".to_string(), None)
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_coalescing_client_never_sees_intermediate_states() {
    let server = ApiServer::start_seeded(4).await;
    let (writer, _) = server.client_and_id();
    let (reader, reader_id) = server.client_and_id();
    server.faults().set_view(
        reader_id,
        ClientView {
            watch_delay: Delay::fixed(Duration::from_secs(1)),
            coalesce: true,
            ..ClientView::default()
        },
    );
    let w: Api<ConfigMap> = Api::default_namespaced(writer);
    let mut events = watcher(
        Api::<ConfigMap>::default_namespaced(reader),
        watcher::Config::default(),
    )
    .boxed();
    while !matches!(
        events.try_next().await.unwrap().unwrap(),
        watcher::Event::InitDone
    ) {}
    w.create(&PostParams::default(), &cm("x", None))
        .await
        .unwrap();
    for v in ["1", "2", "3"] {
        w.patch(
            "x",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"v": v}})),
        )
        .await
        .unwrap();
    }
    // Created and deleted within the window: never seen at all.
    w.create(&PostParams::default(), &cm("ghost", None))
        .await
        .unwrap();
    w.delete("ghost", &DeleteParams::default()).await.unwrap();
    w.create(&PostParams::default(), &cm("marker", None))
        .await
        .unwrap();
    let mut seen = Vec::new();
    loop {
        if let watcher::Event::Apply(c) = next_change(&mut events).await {
            let name = c.name_any();
            seen.push((name.clone(), c.data.and_then(|d| d.get("v").cloned())));
            if name == "marker" {
                break;
            }
        }
    }
    assert_eq!(
        seen,
        [
            ("x".to_string(), Some("3".to_string())),
            ("marker".to_string(), None)
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn write_faults_answer_conflict_500_and_latency() {
    let server = ApiServer::start_seeded(5).await;
    let (c, id) = server.client_and_id();
    let (other, _) = server.client_and_id();
    let api: Api<ConfigMap> = Api::default_namespaced(c);
    let api_other: Api<ConfigMap> = Api::default_namespaced(other);
    api.create(&PostParams::default(), &cm("a", None))
        .await
        .unwrap();
    let patch = Patch::Merge(json!({"data": {"k": "v"}}));
    server
        .faults()
        .add_write_fault(
            WriteFault::next(2, WriteAction::Conflict)
                .verbs(&[Verb::Patch])
                .resource("configmaps")
                .client(id),
        )
        .unwrap();
    let rv = server.store().current_rv();
    for _ in 0..2 {
        let err = api
            .patch("a", &PatchParams::default(), &patch)
            .await
            .unwrap_err();
        assert!(
            matches!(err, kube::Error::Api(ref s) if s.code == 409),
            "{err:?}"
        );
    }
    assert_eq!(
        server.store().current_rv(),
        rv,
        "faulted writes change nothing"
    );
    // Another client is unaffected; the fault is spent after two shots.
    api_other
        .patch("a", &PatchParams::default(), &patch)
        .await
        .unwrap();
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "w"}})),
    )
    .await
    .unwrap();

    server
        .faults()
        .add_write_fault(WriteFault::next(1, WriteAction::InternalError))
        .unwrap();
    let err = api
        .create(&PostParams::default(), &cm("b", None))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 500),
        "{err:?}"
    );

    // 429 (a kube::Client built with Client::new over a bare service has no
    // retry layer, so the caller sees it).
    server
        .faults()
        .add_write_fault(WriteFault::next(1, WriteAction::TooManyRequests))
        .unwrap();
    let err = api
        .create(&PostParams::default(), &cm("throttled", None))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 429 && s.reason == "TooManyRequests"
            && s.details.as_ref().is_some_and(|d| d.retry_after_seconds == 1)),
        "{err:?}"
    );

    server
        .faults()
        .add_write_fault(WriteFault::next(
            1,
            WriteAction::Latency(Delay::fixed(Duration::from_millis(1500))),
        ))
        .unwrap();
    let t0 = Instant::now();
    api.create(&PostParams::default(), &cm("b", None))
        .await
        .unwrap();
    assert_eq!(t0.elapsed(), Duration::from_millis(1500));

    // By kind, a slow 409: the latency first, then the status.
    server
        .faults()
        .add_write_fault(
            WriteFault::next(1, WriteAction::Conflict)
                .kind::<Pod>()
                .latency(Delay::fixed(Duration::from_secs(2))),
        )
        .unwrap()
        .add_write_fault(WriteFault::next(1, WriteAction::Conflict).kind::<ConfigMap>())
        .unwrap();
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let pod = serde_json::from_value(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}
    }))
    .unwrap();
    let t0 = Instant::now();
    let err = pods.create(&PostParams::default(), &pod).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409),
        "{err:?}"
    );
    assert_eq!(t0.elapsed(), Duration::from_secs(2));
    let err = api
        .create(&PostParams::default(), &cm("c", None))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409),
        "{err:?}"
    );
    assert!(server.faults().config().writes.is_empty(), "both spent");
}

#[tokio::test(start_paused = true)]
async fn a_fraction_of_writes_fail_the_same_way_for_the_same_seed() {
    async fn run(seed: u64) -> Vec<bool> {
        let server = ApiServer::start_seeded(seed).await;
        let (c, _) = server.client_and_id();
        let api: Api<ConfigMap> = Api::default_namespaced(c);
        server
            .faults()
            .add_write_fault(
                WriteFault::fraction(0.4, WriteAction::InternalError).verbs(&[Verb::Create]),
            )
            .unwrap();
        let mut out = Vec::new();
        for i in 0..40 {
            out.push(
                api.create(&PostParams::default(), &cm(&format!("c{i}"), None))
                    .await
                    .is_ok(),
            );
        }
        out
    }
    let a = run(11).await;
    assert_eq!(a, run(11).await);
    assert_ne!(a, run(12).await);
    let ok = a.iter().filter(|x| **x).count();
    assert!(
        (10..=34).contains(&ok),
        "{ok} of 40 succeeded at a 40% failure rate"
    );
}

#[tokio::test(start_paused = true)]
async fn pods_move_through_the_kwok_stages() {
    let server = ApiServer::start_seeded(6).await;
    let (c, _) = server.client_and_id();
    server.faults().set_pod_lifecycle(PodLifecycle {
        enabled: true,
        schedule: Delay::fixed(Duration::from_secs(1)),
        run: Delay::fixed(Duration::from_secs(2)),
        nodes: vec!["node-a".into()],
    });
    let pods: Api<Pod> = Api::default_namespaced(c);
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "web-0"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})).unwrap();
    let t0 = Instant::now();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let scheduled = await_condition(pods.clone(), "web-0", |p: Option<&Pod>| {
        p.and_then(|p| p.spec.as_ref())
            .and_then(|s| s.node_name.as_deref())
            == Some("node-a")
    });
    tokio::time::timeout(WAIT, scheduled)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(t0.elapsed(), Duration::from_secs(1));
    let running = await_condition(pods.clone(), "web-0", conditions::is_pod_running());
    let p = tokio::time::timeout(WAIT, running)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(t0.elapsed(), Duration::from_secs(3));
    assert!(
        p.status
            .unwrap()
            .pod_ip
            .is_some_and(|ip| ip.starts_with("10.244."))
    );
}

/// Race window (a): the owner is deleted while GC is paused and recreated
/// under the same name; the old dependent is still visible, pointing at the
/// old owner's UID. Returns what was observed.
async fn window_a(seed: u64) -> Vec<String> {
    let server = ApiServer::start_seeded(seed).await;
    let (c, _) = server.client_and_id();
    let api: Api<ConfigMap> = Api::default_namespaced(c);
    let old = api
        .create(&PostParams::default(), &cm("lws", None))
        .await
        .unwrap();
    let dep = api
        .create(&PostParams::default(), &cm("lws-sts", Some(&old)))
        .await
        .unwrap();
    server.faults().pause_gc();
    api.delete("lws", &DeleteParams::background())
        .await
        .unwrap();
    let new = api
        .create(&PostParams::default(), &cm("lws", None))
        .await
        .unwrap();
    let seen = api.get("lws-sts").await.unwrap();
    let ref_uid = seen.owner_references()[0].uid.clone();
    assert_eq!(
        ref_uid,
        old.uid().unwrap(),
        "the window: the dependent still names the old owner"
    );
    assert_ne!(ref_uid, new.uid().unwrap());
    assert!(
        seen.metadata.deletion_timestamp.is_none(),
        "and nothing marks it terminating"
    );
    server.faults().resume_gc();
    wait_deleted(&api, "lws-sts", &dep.uid().unwrap()).await;
    vec![
        old.uid().unwrap(),
        new.uid().unwrap(),
        ref_uid,
        format!("{:?}", Instant::now()),
    ]
}

/// Race window (b): a StatefulSet-like dependent lingers terminating behind
/// a finalizer while its owner is recreated.
async fn window_b(seed: u64) -> Vec<String> {
    let server = ApiServer::start_seeded(seed).await;
    let (c, _) = server.client_and_id();
    let owners: Api<ConfigMap> = Api::default_namespaced(c.clone());
    let sets: Api<StatefulSet> = Api::default_namespaced(c);
    server.faults().set_gc_delay(Delay::jittered(
        Duration::from_millis(200),
        Duration::from_millis(800),
    ));
    let old = owners
        .create(&PostParams::default(), &cm("test", None))
        .await
        .unwrap();
    let sts: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "test", "finalizers": ["ward.dev/hold"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "test", "uid": old.uid().unwrap(),
                                 "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"serviceName": "test", "selector": {"matchLabels": {"app": "t"}},
                 "template": {"metadata": {"labels": {"app": "t"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}))
    .unwrap();
    let sts = sets.create(&PostParams::default(), &sts).await.unwrap();
    let t0 = Instant::now();
    owners
        .delete("test", &DeleteParams::background())
        .await
        .unwrap();
    let terminating = await_condition(sets.clone(), "test", |s: Option<&StatefulSet>| {
        s.is_some_and(|s| s.metadata.deletion_timestamp.is_some())
    });
    tokio::time::timeout(WAIT, terminating)
        .await
        .unwrap()
        .unwrap();
    let gc_after = t0.elapsed();
    let new = owners
        .create(&PostParams::default(), &cm("test", None))
        .await
        .unwrap();
    let seen = sets.get("test").await.unwrap();
    assert!(
        seen.metadata.deletion_timestamp.is_some(),
        "the window: terminating..."
    );
    assert_eq!(
        seen.owner_references()[0].uid,
        old.uid().unwrap(),
        "...and owned by the old owner"
    );
    assert_ne!(seen.owner_references()[0].uid, new.uid().unwrap());
    sets.patch(
        "test",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    wait_deleted(&sets, "test", &sts.uid().unwrap()).await;
    vec![
        old.uid().unwrap(),
        new.uid().unwrap(),
        format!("{gc_after:?}"),
    ]
}

/// Race window (c): a watcher behind by a delay still sees the pod Pending
/// after a quorum GET already shows it Running.
async fn window_c(seed: u64) -> Vec<String> {
    let server = ApiServer::start_seeded(seed).await;
    let (writer, _) = server.client_and_id();
    let (lagging, lagging_id) = server.client_and_id();
    server.faults().set_view(
        lagging_id,
        ClientView {
            watch_delay: Delay::jittered(Duration::from_millis(500), Duration::from_millis(1500)),
            ..ClientView::default()
        },
    );
    let w: Api<Pod> = Api::default_namespaced(writer);
    let l: Api<Pod> = Api::default_namespaced(lagging);
    let mut events = watcher(l.clone(), watcher::Config::default()).boxed();
    while !matches!(
        events.try_next().await.unwrap().unwrap(),
        watcher::Event::InitDone
    ) {}
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "web-2"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})).unwrap();
    let t0 = Instant::now();
    w.create(&PostParams::default(), &pod).await.unwrap();
    w.patch_status(
        "web-2",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running", "podIP": "10.128.40.47"}})),
    )
    .await
    .unwrap();
    let fresh = l.get("web-2").await.unwrap();
    assert_eq!(
        fresh.status.unwrap().phase.as_deref(),
        Some("Running"),
        "the quorum GET is fresh"
    );
    let mut phases = Vec::new();
    while phases.len() < 2 {
        if let watcher::Event::Apply(p) = next_change(&mut events).await {
            phases.push((p.status.unwrap().phase.unwrap(), t0.elapsed()));
        }
    }
    assert_eq!(
        phases[0].0, "Pending",
        "the window: the lagging watcher still sees Pending"
    );
    assert_eq!(phases[1].0, "Running");
    assert!(phases[0].1 >= Duration::from_millis(500));
    phases.iter().map(|p| format!("{p:?}")).collect()
}

#[tokio::test(start_paused = true)]
async fn race_window_a_is_deterministic() {
    let first = window_a(42).await;
    for _ in 1..50 {
        assert_eq!(window_a(42).await, first);
    }
}

#[tokio::test(start_paused = true)]
async fn race_window_b_is_deterministic() {
    let first = window_b(42).await;
    for _ in 1..50 {
        assert_eq!(window_b(42).await, first);
    }
    assert_ne!(
        window_b(43).await[2],
        first[2],
        "another seed draws another GC delay"
    );
}

#[tokio::test(start_paused = true)]
async fn race_window_c_is_deterministic() {
    let first = window_c(42).await;
    for _ in 1..50 {
        assert_eq!(window_c(42).await, first);
    }
}

async fn admin(
    server: &ApiServer,
    method: &str,
    body: &str,
    peer: Option<&str>,
) -> (u16, serde_json::Value) {
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    let mut req = http::Request::builder()
        .method(method)
        .uri("/ward/v1/faults")
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(bytes::Bytes::from(
            body.to_string(),
        )))
        .unwrap();
    if let Some(p) = peer {
        req.extensions_mut()
            .insert(ward_apiserver::internals::PeerAddr(p.parse().unwrap()));
    }
    let resp = server.service().oneshot(req).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test(start_paused = true)]
async fn the_admin_endpoint_shows_sets_and_clears_faults_for_loopback_only() {
    let server = ApiServer::start_seeded(7).await;
    let (code, body) = admin(&server, "GET", "", None).await;
    assert_eq!(code, 200);
    assert_eq!(body["gc"]["paused"], false);
    let (code, body) = admin(
        &server,
        "PUT",
        r#"{"gc": {"paused": true, "delay": {"base_ms": 250}}, "writes": [{"action": "conflict", "trigger": {"next": 1}, "resource": "pods"}]}"#,
        Some("127.0.0.1:5555"),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert!(server.faults().gc().paused);
    assert_eq!(server.faults().gc().delay.base_ms, 250);
    assert_eq!(server.faults().config().writes.len(), 1);
    // Bad configurations are refused and change nothing.
    let before = server.faults().config();
    let (code, body) = admin(
        &server,
        "PUT",
        r#"{"writes": [{"action": "conflict", "trigger": {"fraction": 2.0}}]}"#,
        None,
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(body["kind"], "Status");
    let (code, _) = admin(&server, "PUT", "{not json", None).await;
    assert_eq!(code, 400);
    assert_eq!(server.faults().config(), before);
    // Not from loopback: forbidden.
    let (code, body) = admin(&server, "DELETE", "", Some("10.1.2.3:5555")).await;
    assert_eq!(code, 403, "{body}");
    assert!(server.faults().gc().paused);
    let (code, _) = admin(&server, "DELETE", "", Some("[::1]:5555")).await;
    assert_eq!(code, 200);
    assert_eq!(
        server.faults().config(),
        ward_apiserver::FaultConfig::default()
    );
}
