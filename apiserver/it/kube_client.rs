//! kube-rs, unmodified, against ward-apiserver over the in-process Service:
//! typed CRUD on built-ins and a derived custom resource, watcher and
//! reflector, a kube-runtime Controller end to end, and a 410 forcing a relist.

use crate::common::without_root_ca;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, CustomResource, CustomResourceExt, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use ward_apiserver::{ApiServer, ServerConfig};

const WAIT: Duration = Duration::from_secs(20);

#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "example.ward.dev",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus"
)]
struct WidgetSpec {
    size: i32,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
struct WidgetStatus {
    observed: i32,
}

async fn install_widget_crd(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &Widget::crd())
        .await
        .unwrap();
    let established = await_condition(
        crds,
        "widgets.example.ward.dev",
        conditions::is_crd_established(),
    );
    tokio::time::timeout(WAIT, established)
        .await
        .unwrap()
        .unwrap();
}

fn cm(name: &str, data: &str) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"app": "demo"}}, "data": {"k": data}}),
    )
    .unwrap()
}

type Events =
    futures::stream::BoxStream<'static, Result<watcher::Event<ConfigMap>, watcher::Error>>;

/// The next watcher event (within `WAIT`).
async fn next_event(events: &mut Events) -> watcher::Event<ConfigMap> {
    let next = tokio::time::timeout(WAIT, events.try_next()).await;
    next.expect("an event in time")
        .expect("no watch error")
        .expect("the stream goes on")
}

/// Read events until `name` is applied.
async fn until_applied(events: &mut Events, name: &str) {
    loop {
        if let watcher::Event::Apply(c) = next_event(events).await
            && c.name_any() == name
        {
            return;
        }
    }
}

#[tokio::test]
async fn typed_crud_on_builtins() {
    let server = ApiServer::start_in_process().await;
    let client = server.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());

    let created = cms
        .create(&PostParams::default(), &cm("a", "1"))
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some());
    assert_eq!(created.metadata.generation, None, "no spec, no generation");
    assert!(created.metadata.creation_timestamp.is_some());

    let err = cms
        .create(&PostParams::default(), &cm("a", "1"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.reason == "AlreadyExists"),
        "{err:?}"
    );

    // Update with the current rv succeeds; replaying the stale object conflicts.
    let mut next = created.clone();
    next.data = Some([("k".to_string(), "2".to_string())].into());
    let updated = cms
        .replace("a", &PostParams::default(), &next)
        .await
        .unwrap();
    assert_ne!(updated.resource_version(), created.resource_version());
    let err = cms
        .replace("a", &PostParams::default(), &next)
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert!(
                s.message.contains("the object has been modified"),
                "{}",
                s.message
            );
        }
        e => panic!("unexpected {e:?}"),
    }

    // Merge patch, JSON patch (a failed test op is 422), strategic merge.
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"m": "x"}})),
    )
    .await
    .unwrap();
    let bad: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/data/k", "value": "nope"}]))
            .unwrap();
    let err = cms
        .patch("a", &PatchParams::default(), &Patch::Json::<()>(bad))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 422),
        "{err:?}"
    );
    let got = cms.get("a").await.unwrap();
    assert_eq!(got.data.as_ref().unwrap()["m"], "x");

    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "a", "image": "busybox", "env": [{"name": "X", "value": "1"}]}]}}))
    .unwrap();
    let p = pods.create(&PostParams::default(), &pod).await.unwrap();
    assert_eq!(p.status.unwrap().phase.as_deref(), Some("Pending"));
    // Merged by name: the image changes (all a pod update may change of a
    // container), the env stays; a container added is refused, as by
    // kube-apiserver.
    let p = pods
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"containers": [
            {"name": "a", "image": "busybox:2"}]}})),
        )
        .await
        .unwrap();
    let spec = p.spec.unwrap();
    assert_eq!(spec.containers.len(), 1);
    assert_eq!(spec.containers[0].image.as_deref(), Some("busybox:2"));
    assert_eq!(spec.containers[0].env.as_ref().unwrap().len(), 1);
    let added =
        Patch::Strategic(json!({"spec": {"containers": [{"name": "b", "image": "nginx"}]}}));
    let err = pods
        .patch("p", &PatchParams::default(), &added)
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 422
            && s.message.ends_with("pod updates may not add or remove containers")),
        "{err:?}"
    );

    // Status subresource isolation.
    let p = pods
        .patch_status(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running"}, "spec": {"nodeName": "n1"}})),
        )
        .await
        .unwrap();
    assert_eq!(p.status.as_ref().unwrap().phase.as_deref(), Some("Running"));
    assert_eq!(p.spec.as_ref().unwrap().node_name, None);
    let p = pods
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Failed"}})),
        )
        .await
        .unwrap();
    assert_eq!(p.status.unwrap().phase.as_deref(), Some("Running"));

    // Field selectors on pods.
    let running = pods
        .list(&ListParams::default().fields("status.phase=Running"))
        .await
        .unwrap();
    assert_eq!(running.items.len(), 1);
    let pending = pods
        .list(&ListParams::default().fields("status.phase=Pending"))
        .await
        .unwrap();
    assert!(pending.items.is_empty());

    // Server-side apply creates, then merges and records the manager.
    let sts: Api<StatefulSet> = Api::default_namespaced(client.clone());
    let ss = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    let applied = sts
        .patch("web", &PatchParams::apply("ward-test"), &Patch::Apply(&ss))
        .await
        .unwrap();
    assert_eq!(applied.spec.replicas, Some(2));
    let mf = applied.metadata.managed_fields.unwrap();
    assert!(
        mf.iter().any(|m| m.manager.as_deref() == Some("ward-test")
            && m.operation.as_deref() == Some("Apply"))
    );
    let gen1 = applied.metadata.generation.unwrap();
    let mut ss2 = ss.clone();
    ss2["spec"]["replicas"] = json!(3);
    let applied = sts
        .patch("web", &PatchParams::apply("ward-test"), &Patch::Apply(&ss2))
        .await
        .unwrap();
    assert_eq!(applied.spec.replicas, Some(3));
    assert_eq!(applied.metadata.generation, Some(gen1 + 1));

    // Delete emits the object back; a second delete is 404.
    cms.delete("a", &DeleteParams::default()).await.unwrap();
    let err = cms.delete("a", &DeleteParams::default()).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404),
        "{err:?}"
    );

    // A namespaced object in a missing namespace is 404.
    let other: Api<ConfigMap> = Api::namespaced(client.clone(), "nope");
    let err = other
        .create(&PostParams::default(), &cm("x", "1"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404),
        "{err:?}"
    );

    // Initial namespaces exist; list across namespaces works.
    let nss: Api<Namespace> = Api::all(client.clone());
    let names: Vec<String> = nss
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|n| n.name_any())
        .collect();
    for n in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(names.contains(&n.to_string()), "{names:?}");
    }
    let all: Api<Pod> = Api::all(client);
    assert_eq!(
        all.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
}

#[tokio::test]
async fn derived_custom_resource_crud_and_status() {
    let server = ApiServer::start_in_process().await;
    let client = server.client();
    install_widget_crd(&client).await;
    let widgets: Api<Widget> = Api::default_namespaced(client.clone());
    let w = widgets
        .create(
            &PostParams::default(),
            &Widget::new("w1", WidgetSpec { size: 1 }),
        )
        .await
        .unwrap();
    assert_eq!(w.spec.size, 1);
    let w = widgets
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"observed": 1}})),
        )
        .await
        .unwrap();
    assert_eq!(w.status.unwrap().observed, 1);
    assert_eq!(
        w.metadata.generation,
        Some(1),
        "status writes do not bump generation"
    );
    let w = widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 5}})),
        )
        .await
        .unwrap();
    assert_eq!(w.metadata.generation, Some(2));
    // Strategic merge is not served for custom resources.
    let err = widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"size": 6}})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 415),
        "{err:?}"
    );
    // Deleting the CRD stops serving the kind and removes its objects.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.delete("widgets.example.ward.dev", &DeleteParams::default())
        .await
        .unwrap();
    let err = widgets.list(&ListParams::default()).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404),
        "{err:?}"
    );
    // Recreated, it serves again, empty.
    install_widget_crd(&client).await;
    assert!(
        widgets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn list_pagination_and_label_selectors() {
    let server = ApiServer::start_in_process().await;
    without_root_ca(&server, "default").await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    for i in 0..7 {
        let mut c = cm(&format!("c{i}"), "v");
        c.metadata.labels = Some(
            [(
                "tier".to_string(),
                if i % 2 == 0 { "even" } else { "odd" }.to_string(),
            )]
            .into(),
        );
        cms.create(&PostParams::default(), &c).await.unwrap();
    }
    let mut names = Vec::new();
    let mut lp = ListParams::default().limit(3);
    loop {
        let page = cms.list(&lp).await.unwrap();
        assert!(page.items.len() <= 3);
        names.extend(page.items.iter().map(|c| c.name_any()));
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    assert_eq!(names, (0..7).map(|i| format!("c{i}")).collect::<Vec<_>>());
    let even = cms
        .list(&ListParams::default().labels("tier=even"))
        .await
        .unwrap();
    assert_eq!(even.items.len(), 4);
    let set = cms
        .list(&ListParams::default().labels("tier in (odd),tier notin (even)"))
        .await
        .unwrap();
    assert_eq!(set.items.len(), 3);
    let none = cms
        .list(&ListParams::default().labels("!tier"))
        .await
        .unwrap();
    assert!(none.items.is_empty());
}

#[tokio::test]
async fn watcher_and_reflector_reach_the_listed_state() {
    let server = ApiServer::start_in_process().await;
    let client = server.client();
    let cms: Api<ConfigMap> = Api::all(client.clone());
    let (reader, writer) = reflector::store::<ConfigMap>();
    let stream =
        reflector(writer, watcher(cms.clone(), watcher::Config::default())).applied_objects();
    let driver = tokio::spawn(async move { stream.try_for_each(|_| async { Ok(()) }).await });
    tokio::time::timeout(WAIT, reader.wait_until_ready())
        .await
        .unwrap()
        .unwrap();

    let ns_api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    for i in 0..20 {
        ns_api
            .create(&PostParams::default(), &cm(&format!("r{i}"), "0"))
            .await
            .unwrap();
    }
    for i in 0..20 {
        if i % 3 == 0 {
            ns_api
                .delete(&format!("r{i}"), &DeleteParams::default())
                .await
                .unwrap();
        } else {
            ns_api
                .patch(
                    &format!("r{i}"),
                    &PatchParams::default(),
                    &Patch::Merge(json!({"data": {"k": "1"}})),
                )
                .await
                .unwrap();
        }
    }
    let listed = cms.list(&ListParams::default()).await.unwrap();
    let want: Vec<(String, String)> = listed
        .items
        .iter()
        .map(|c| (c.name_any(), c.resource_version().unwrap()))
        .collect();
    let converged = async {
        loop {
            let mut have: Vec<(String, String)> = reader
                .state()
                .iter()
                .map(|c| (c.name_any(), c.resource_version().unwrap()))
                .collect();
            have.sort();
            let mut w = want.clone();
            w.sort();
            if have == w {
                return;
            }
            reader.wait_until_ready().await.unwrap();
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(WAIT, converged)
        .await
        .expect("reflector converges to the list");
    driver.abort();
}

#[tokio::test]
async fn watch_from_a_compacted_rv_is_410_in_stream() {
    let server = ApiServer::start(ServerConfig::default().watch_history(5))
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    for i in 0..10 {
        cms.create(&PostParams::default(), &cm(&format!("h{i}"), "v"))
            .await
            .unwrap();
    }
    let mut stream = cms
        .watch(&WatchParams::default(), "1")
        .await
        .unwrap()
        .boxed();
    let first = tokio::time::timeout(WAIT, stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    match first {
        WatchEvent::Error(e) => {
            assert_eq!(e.code, 410);
            assert_eq!(e.reason, "Expired");
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
}

#[tokio::test]
async fn a_410_makes_the_kube_runtime_watcher_relist() {
    // A watcher that falls more than `watch_buffer` events behind is cut off
    // with an in-stream 410, and kube-runtime's watcher answers by relisting.
    let server = ApiServer::start(ServerConfig::default().watch_buffer(16))
        .await
        .unwrap();
    without_root_ca(&server, "default").await;
    let client = server.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    cms.create(&PostParams::default(), &cm("seed", "v"))
        .await
        .unwrap();
    let mut events = watcher(cms.clone(), watcher::Config::default()).boxed();
    // Initial list: Init, InitApply(seed), InitDone.
    let mut inits = 0;
    loop {
        match next_event(&mut events).await {
            watcher::Event::Init => inits += 1,
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(inits, 1);
    // Make sure the watch is live: see one event through it.
    cms.create(&PostParams::default(), &cm("live", "v"))
        .await
        .unwrap();
    until_applied(&mut events, "live").await;
    // Write far more than the watcher's buffer while nobody polls it.
    for i in 0..300 {
        cms.create(&PostParams::default(), &cm(&format!("x{i}"), "v"))
            .await
            .unwrap();
    }
    let relisted = async {
        loop {
            match events.try_next().await {
                Ok(Some(watcher::Event::Init)) => return,
                Ok(Some(_)) => {}
                Ok(None) => panic!("watcher ended"),
                // The 410 surfaces as an error item before the relist.
                Err(_) => {}
            }
        }
    };
    tokio::time::timeout(WAIT, relisted)
        .await
        .expect("the watcher relists after a 410");
    // After the relist the watcher holds everything.
    let mut seen = 0;
    loop {
        match tokio::time::timeout(WAIT, events.try_next()).await.unwrap() {
            Ok(Some(watcher::Event::InitApply(_))) => seen += 1,
            Ok(Some(watcher::Event::InitDone)) => break,
            _ => {}
        }
    }
    assert_eq!(seen, 302);
}

#[tokio::test]
async fn controller_reconciles_a_custom_resource_end_to_end() {
    let server = ApiServer::start_in_process().await;
    let client = server.client();
    install_widget_crd(&client).await;
    let widgets: Api<Widget> = Api::all(client.clone());

    async fn reconcile(w: Arc<Widget>, client: Arc<Client>) -> Result<Action, kube::Error> {
        let api: Api<Widget> = Api::namespaced((*client).clone(), &w.namespace().unwrap());
        let status = json!({"status": {"observed": w.spec.size}});
        api.patch_status(
            &w.name_any(),
            &PatchParams::default(),
            &Patch::Merge(status),
        )
        .await?;
        Ok(Action::await_change())
    }
    fn error_policy(_: Arc<Widget>, _: &kube::Error, _: Arc<Client>) -> Action {
        Action::requeue(Duration::from_millis(100))
    }
    let ctl = Controller::new(widgets.clone(), watcher::Config::default())
        .run(reconcile, error_policy, Arc::new(client.clone()))
        .for_each(|_| async {});
    let ctl = tokio::spawn(ctl);

    let ns: Api<Widget> = Api::default_namespaced(client.clone());
    ns.create(
        &PostParams::default(),
        &Widget::new("w", WidgetSpec { size: 7 }),
    )
    .await
    .unwrap();
    let observed = await_condition(ns.clone(), "w", |w: Option<&Widget>| {
        w.and_then(|w| w.status.as_ref())
            .is_some_and(|s| s.observed == 7)
    });
    tokio::time::timeout(WAIT, observed).await.unwrap().unwrap();
    ns.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": 9}})),
    )
    .await
    .unwrap();
    let observed = await_condition(ns, "w", |w: Option<&Widget>| {
        w.and_then(|w| w.status.as_ref())
            .is_some_and(|s| s.observed == 9)
    });
    tokio::time::timeout(WAIT, observed).await.unwrap().unwrap();
    ctl.abort();
}

#[tokio::test]
async fn kube_client_over_http_and_clean_shutdown_with_an_open_watch() {
    let server = ApiServer::start(ServerConfig::default().listen("127.0.0.1:0".parse().unwrap()))
        .await
        .unwrap();
    let addr = server.addr().unwrap();
    assert!(addr.ip().is_loopback());
    assert_ne!(addr.port(), 0, "the bound port is reported, not 0");
    let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
    let client = Client::try_from(config).unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let mut events = watcher(cms.clone(), watcher::Config::default()).boxed();
    while !matches!(next_event(&mut events).await, watcher::Event::InitDone) {}
    cms.create(&PostParams::default(), &cm("over-http", "1"))
        .await
        .unwrap();
    until_applied(&mut events, "over-http").await;
    let v = client.apiserver_version().await.unwrap();
    assert_eq!(v.major, "1");
    // Shutdown completes although a watch is open.
    tokio::time::timeout(WAIT, server.shutdown())
        .await
        .expect("shutdown does not hang on open watches");
    assert!(cms.get("over-http").await.is_err(), "the listener is gone");
}
