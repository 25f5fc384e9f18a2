//! kube's client features that depend on API semantics beyond plain CRUD,
//! run unmodified against ward-apiserver: kube-runtime's `finalizer()` (a
//! JSON patch that tests `/metadata/finalizers` against `null` before
//! adding the first finalizer), server-side apply of a body that names no
//! object (the name comes from the URL), DELETE's Status for a removal,
//! and metadata-only reads and watches.

use crate::common::without_root_ca;
use std::convert::Infallible;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event, finalizer};
use serde_json::json;
use ward_apiserver::ApiServer;

const FINALIZER: &str = "ward.test/cleanup";

/// A one-container pod, on `node` when given.
fn pod(name: &str, node: Option<&str>) -> Pod {
    let mut spec = json!({"containers": [{"name": "c", "image": "nginx"}]});
    if let Some(node) = node {
        spec["nodeName"] = node.into();
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

/// One reconcile through `finalizer()`; returns which event the body saw.
async fn reconcile(api: &Api<ConfigMap>, name: &str) -> Option<&'static str> {
    let cm = api.get(name).await.unwrap();
    let mut seen = None;
    finalizer(api, FINALIZER, Arc::new(cm), |event| {
        seen = Some(match event {
            Event::Apply(_) => "apply",
            Event::Cleanup(_) => "cleanup",
        });
        async { Ok::<_, Infallible>(Action::await_change()) }
    })
    .await
    .unwrap();
    seen
}

#[tokio::test]
async fn kube_runtime_finalizer_adds_runs_and_removes_its_finalizer() {
    let server = ApiServer::start_seeded(1).await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("guarded".into());
    api.create(&PostParams::default(), &cm).await.unwrap();

    // First reconcile: the finalizer is added (test null, add), the body
    // is not run yet.
    assert_eq!(reconcile(&api, "guarded").await, None);
    assert_eq!(api.get("guarded").await.unwrap().finalizers(), [FINALIZER]);
    // Then the body runs on every reconcile.
    assert_eq!(reconcile(&api, "guarded").await, Some("apply"));

    // Deleted: it lingers for the cleanup, which removes the finalizer.
    api.delete("guarded", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        api.get("guarded")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    assert_eq!(reconcile(&api, "guarded").await, Some("cleanup"));
    assert!(api.get_opt("guarded").await.unwrap().is_none(), "gone");
}

#[tokio::test]
async fn server_side_apply_takes_the_name_from_the_url() {
    let server = ApiServer::start_seeded(2).await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let pp = PatchParams::apply("kube").force();
    // No metadata at all: created as the URL names it.
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "1"}});
    let cm = api.patch("baz", &pp, &Patch::Apply(&body)).await.unwrap();
    assert_eq!(cm.name_any(), "baz");
    assert_eq!(cm.namespace().as_deref(), Some("default"));
    // Metadata without a name: updated in place.
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"labels": {"x": "y"}}, "data": {"a": "2"}});
    let cm = api.patch("baz", &pp, &Patch::Apply(&body)).await.unwrap();
    assert_eq!(cm.labels().get("x").map(String::as_str), Some("y"));
    assert_eq!(cm.data.unwrap()["a"], "2");
    // A name that contradicts the URL is still refused.
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other"}});
    let err = api
        .patch("baz", &pp, &Patch::Apply(&body))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 400),
        "{err:?}"
    );
}

#[tokio::test]
async fn delete_answers_a_status_for_a_removal_and_the_object_otherwise() {
    let server = ApiServer::start_seeded(3).await;
    let client = server.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("gone".into());
    let created = cms.create(&PostParams::default(), &cm).await.unwrap();
    // Removed at once: Status{Success} naming it, as kube-apiserver answers.
    let status = cms
        .delete("gone", &DeleteParams::default())
        .await
        .unwrap()
        .right()
        .expect("a Status");
    assert_eq!(
        status.status,
        Some(kube::core::response::StatusSummary::Success)
    );
    let details = status.details.expect("details");
    assert_eq!(details.name, "gone");
    assert_eq!(
        details.kind, "configmaps",
        "kube-apiserver puts the resource there"
    );
    assert_eq!(details.uid, created.uid().unwrap());

    // Lingering behind a finalizer: the object, marked for deletion.
    cm.metadata.name = Some("held".into());
    cm.metadata.finalizers = Some(vec![FINALIZER.into()]);
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let held = cms
        .delete("held", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("the object");
    assert!(held.metadata.deletion_timestamp.is_some());

    // Pods are among the resources that answer with the removed object.
    let pods: Api<Pod> = Api::default_namespaced(client);
    pods.create(&PostParams::default(), &pod("p", None))
        .await
        .unwrap();
    let removed = pods
        .delete("p", &DeleteParams::default().grace_period(0))
        .await
        .unwrap()
        .left()
        .expect("the pod");
    assert_eq!(removed.name_any(), "p");
}

#[tokio::test]
async fn metadata_reads_and_the_metadata_watcher_get_metadata_only() {
    use futures::StreamExt;
    use kube::core::PartialObjectMeta;
    use kube::runtime::{WatchStreamExt, watcher};

    let server = ApiServer::start_seeded(4).await;
    without_root_ca(&server, "default").await;
    let client = server.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("a".into());
    cm.data = Some([("k".to_string(), "v".to_string())].into());
    cms.create(&PostParams::default(), &cm).await.unwrap();

    // kube's metadata calls decode; the raw answers carry metadata only.
    assert_eq!(cms.get_metadata("a").await.unwrap().name_any(), "a");
    let listed = cms.list_metadata(&Default::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    let raw = |path: &str, accept: &str| {
        let req = http::Request::get(path)
            .header(http::header::ACCEPT, accept)
            .body(Vec::new())
            .unwrap();
        let client = client.clone();
        async move {
            let text = client.request_text(req).await.unwrap();
            serde_json::from_str::<serde_json::Value>(&text).unwrap()
        }
    };
    let one = raw(
        "/api/v1/namespaces/default/configmaps/a",
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
    )
    .await;
    assert_eq!(one["kind"], "PartialObjectMetadata");
    assert_eq!(one["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(one["metadata"]["name"], "a");
    assert!(one.get("data").is_none(), "{one}");
    let list = raw(
        "/api/v1/namespaces/default/configmaps",
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
    )
    .await;
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert!(list["metadata"]["resourceVersion"].is_string());
    assert_eq!(list["items"][0]["kind"], "PartialObjectMetadata");
    assert!(list["items"][0].get("data").is_none());

    // kube-runtime's metadata watch (kube 5's form of `metadata_watcher`:
    // a watcher over `Api<PartialObjectMeta<K>>`) sees the list, then a
    // new object.
    let metas: Api<PartialObjectMeta<ConfigMap>> = Api::default_namespaced(client.clone());
    let mut seen = watcher(metas, watcher::Config::default())
        .applied_objects()
        .boxed();
    let first = seen.next().await.unwrap().unwrap();
    assert_eq!(first.name_any(), "a");
    cm.metadata.name = Some("b".into());
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let next = tokio::time::timeout(std::time::Duration::from_secs(10), seen.next())
        .await
        .expect("the watch event in time")
        .unwrap()
        .unwrap();
    assert_eq!(next.name_any(), "b");

    // The watch itself sends metadata only.
    let rv = first.metadata.resource_version.unwrap();
    let req = http::Request::get(format!(
        "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}"
    ))
    .header(
        http::header::ACCEPT,
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
    )
    .body(Vec::new())
    .unwrap();
    // The first line of the open stream, not the body of a closed one.
    let mut line = String::new();
    let mut lines = client.request_stream(req).await.unwrap();
    let read = futures::AsyncBufReadExt::read_line(&mut lines, &mut line);
    tokio::time::timeout(std::time::Duration::from_secs(10), read)
        .await
        .expect("the event in time")
        .unwrap();
    let event: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(event["type"], "ADDED");
    assert_eq!(event["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(event["object"]["metadata"]["name"], "b");
    assert!(event["object"].get("data").is_none(), "{event}");
}

#[tokio::test]
async fn nodes_select_on_spec_unschedulable() {
    use k8s_openapi::api::core::v1::Node;
    use kube::api::ListParams;

    let server = ApiServer::start_seeded(5).await;
    let nodes: Api<Node> = Api::all(server.client());
    for (name, spec) in [
        ("cordoned", json!({"unschedulable": true})),
        ("open", json!({})),
        ("explicit", json!({"unschedulable": false})),
    ] {
        let node =
            serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
    }
    let names = |lp: ListParams| {
        let nodes = nodes.clone();
        async move {
            let mut n: Vec<String> = nodes
                .list(&lp)
                .await
                .unwrap()
                .items
                .iter()
                .map(ResourceExt::name_any)
                .collect();
            n.sort();
            n
        }
    };
    let cordoned = names(ListParams::default().fields("spec.unschedulable=true")).await;
    assert_eq!(cordoned, ["cordoned"]);
    let open = names(ListParams::default().fields("spec.unschedulable=false")).await;
    assert_eq!(open, ["explicit", "open"]);
    let not_cordoned = names(ListParams::default().fields("spec.unschedulable!=true")).await;
    assert_eq!(not_cordoned, ["explicit", "open"]);
}

#[tokio::test]
async fn only_kinds_with_a_spec_carry_a_generation() {
    use k8s_openapi::api::apps::v1::StatefulSet;

    let server = ApiServer::start_seeded(6).await;
    let client = server.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("plain".into());
    let created = cms.create(&PostParams::default(), &cm).await.unwrap();
    assert_eq!(created.metadata.generation, None);
    let patched = cms
        .patch(
            "plain",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": "1"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.metadata.generation, None);

    let sts: Api<StatefulSet> = Api::default_namespaced(client);
    let set: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "i"}]}}}
    }))
    .unwrap();
    assert_eq!(
        sts.create(&PostParams::default(), &set)
            .await
            .unwrap()
            .metadata
            .generation,
        Some(1)
    );
    let scaled = sts
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(scaled.metadata.generation, Some(2));
}

#[tokio::test]
async fn kubelet_subresources_fail_at_once_as_without_a_reachable_kubelet() {
    use kube::api::LogParams;

    let server = ApiServer::start_seeded(7).await;
    let client = server.client();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let code_and_message = |e: kube::Error| match e {
        kube::Error::Api(s) => (s.code, s.reason, s.message),
        other => panic!("{other:?}"),
    };
    let err = pods
        .logs("missing", &LogParams::default())
        .await
        .unwrap_err();
    assert_eq!(code_and_message(err).0, 404);

    pods.create(&PostParams::default(), &pod("pending", None))
        .await
        .unwrap();
    let (code, _, message) = code_and_message(
        pods.logs("pending", &LogParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 400);
    assert_eq!(message, "pod pending does not have a host assigned");

    pods.create(&PostParams::default(), &pod("placed", Some("node-a")))
        .await
        .unwrap();
    let logs = || async {
        code_and_message(
            pods.logs("placed", &LogParams::default())
                .await
                .unwrap_err(),
        )
    };
    // As kube-apiserver answers when it cannot reach the kubelet: at once,
    // and nothing kube-client retries (it retries a 503 for minutes).
    let (code, _, message) = logs().await;
    assert_eq!(
        (code, message.as_str()),
        (404, "nodes \"node-a\" not found")
    );
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "node-a"}})).unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let (code, _, message) = logs().await;
    assert_eq!(
        (code, message.as_str()),
        (500, "no preferred addresses found; known addresses: []")
    );
    let addresses =
        json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.7"}]}});
    nodes
        .patch_status("node-a", &PatchParams::default(), &Patch::Merge(&addresses))
        .await
        .unwrap();
    let (code, reason, message) = logs().await;
    assert_eq!((code, reason.as_str()), (500, ""));
    assert!(
        message.starts_with(
            "error dialing backend: dial tcp 10.0.0.7:10250: connect: connection refused"
        ),
        "{message}"
    );
    let paths = ["exec?command=ls", "attach", "portforward", "proxy"]
        .map(|sub| format!("/api/v1/namespaces/default/pods/placed/{sub}"));
    for path in paths
        .iter()
        .map(String::as_str)
        .chain(["/api/v1/nodes/node-a/proxy"])
    {
        let req = http::Request::get(path).body(Vec::new()).unwrap();
        let err = client.request_text(req).await.unwrap_err();
        assert_eq!(code_and_message(err).0, 500, "{path}");
    }
}

#[tokio::test]
async fn aggregated_discovery_serves_what_legacy_discovery_does() {
    use kube::discovery::{Discovery, Scope};

    let server = ApiServer::start_seeded(8).await;
    let client = server.client();
    let aggregated = Discovery::new(client.clone())
        .run_aggregated()
        .await
        .unwrap();
    let legacy = Discovery::new(client.clone()).run().await.unwrap();
    let resources = |d: &Discovery| {
        let mut out: Vec<(String, String, String, bool)> = d
            .groups()
            .flat_map(|g| {
                g.recommended_resources().into_iter().map(|(ar, caps)| {
                    (
                        ar.group,
                        ar.version,
                        ar.plural,
                        caps.scope == Scope::Namespaced,
                    )
                })
            })
            .collect();
        out.sort();
        out
    };
    let listed = resources(&aggregated);
    assert_eq!(listed, resources(&legacy));
    assert!(listed.contains(&("".into(), "v1".into(), "pods".into(), true)));
    assert!(listed.contains(&("apps".into(), "v1".into(), "statefulsets".into(), true)));
    assert!(listed.contains(&("".into(), "v1".into(), "namespaces".into(), false)));

    // The answer says what it is; a client asking only for JSON gets the
    // legacy document.
    let req = http::Request::get("/apis")
        .header(
            http::header::ACCEPT,
            ward_apiserver::internals::AGGREGATED_V2,
        )
        .body(Vec::new())
        .unwrap();
    let doc: serde_json::Value =
        serde_json::from_str(&client.request_text(req).await.unwrap()).unwrap();
    assert_eq!(doc["kind"], "APIGroupDiscoveryList");
    assert_eq!(doc["apiVersion"], "apidiscovery.k8s.io/v2");
    let req = http::Request::get("/apis").body(Vec::new()).unwrap();
    let doc: serde_json::Value =
        serde_json::from_str(&client.request_text(req).await.unwrap()).unwrap();
    assert_eq!(doc["kind"], "APIGroupList");
}
