//! What real clients tripped on where ward-apiserver differed from
//! kube-apiserver (#46), each through kube-rs as a controller or a kubelet
//! would meet it.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event, finalizer};
use kube::runtime::{WatchStreamExt, conditions, predicates, wait, watcher};
use kube::{Resource, ResourceExt};
use serde_json::json;
use ward_apiserver::ApiServer;

const FINALIZER: &str = "ward.test/cleanup";
const PATIENCE: Duration = Duration::from_secs(20);

/// A controller that sees its objects only when their generation changes
/// (kube-runtime's `predicates::generation`, the filter most operators
/// put on their main stream; one reconcile at a time, through
/// kube-runtime's `finalizer()`) runs its finalizer when one is deleted:
/// kube-apiserver bumps the generation as it sets the deletionTimestamp.
#[tokio::test]
async fn a_generation_filtered_controller_sees_the_deletion_and_runs_its_finalizer() {
    let server = ApiServer::start_seeded(46).await;
    let api: Api<Deployment> = Api::default_namespaced(server.client());
    // The main stream of a controller: its objects, filtered on generation;
    // each one seen goes through kube-runtime's `finalizer()`.
    let seen = watcher(api.clone(), watcher::Config::default())
        .applied_objects()
        .predicate_filter(predicates::generation, Default::default());
    let (cleaned_tx, mut cleaned) = tokio::sync::mpsc::unbounded_channel();
    let reconciler = api.clone();
    let controller = seen.for_each(move |d| {
        let (api, cleaned) = (reconciler.clone(), cleaned_tx.clone());
        async move {
            let Ok(d) = d else { return };
            let _ = finalizer(&api, FINALIZER, Arc::new(d), |event| async move {
                if let Event::Cleanup(d) = event {
                    let _ = cleaned.send(d.name_any());
                }
                Ok::<_, Infallible>(Action::await_change())
            })
            .await;
        }
    });
    let running = tokio::spawn(controller);

    let web: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}))
    .unwrap();
    let created = api.create(&PostParams::default(), &web).await.unwrap();
    let uid = created.uid().unwrap();
    let has_finalizer = |d: Option<&Deployment>| d.is_some_and(|d| !d.finalizers().is_empty());
    tokio::time::timeout(
        PATIENCE,
        wait::await_condition(api.clone(), "web", has_finalizer),
    )
    .await
    .expect("the controller adds its finalizer")
    .unwrap();

    let deleting = api
        .delete("web", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("held by the finalizer");
    let generation = |d: &Deployment| d.meta().generation;
    assert_eq!(generation(&deleting), Some(2), "the deletion bumps it");
    tokio::time::timeout(
        PATIENCE,
        wait::await_condition(api.clone(), "web", conditions::is_deleted(&uid)),
    )
    .await
    .expect("the finalizer ran and the deployment is gone")
    .unwrap();
    assert_eq!(cleaned.recv().await.as_deref(), Some("web"));
    running.abort();
}

/// A kubelet registers its Node with its status (addresses, capacity,
/// conditions): kube-apiserver keeps it on create, unlike other kinds'.
#[tokio::test]
async fn a_node_registered_with_its_status_keeps_it() {
    let server = ApiServer::start_seeded(47).await;
    let nodes: Api<Node> = Api::all(server.client());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "worker-1"},
        "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.7"}],
            "capacity": {"cpu": "4", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}))
    .unwrap();
    let created = nodes.create(&PostParams::default(), &node).await.unwrap();
    let status = created.status.expect("status kept");
    assert_eq!(status.addresses.unwrap()[0].address, "10.0.0.7");
    let ready = &status.conditions.unwrap()[0];
    assert_eq!(
        (ready.type_.as_str(), ready.status.as_str()),
        ("Ready", "True")
    );
}

/// A Job without a selector gets the one kube-apiserver generates: its
/// uid, labelled on its pod template with its name (what the Job
/// controller and `kubectl logs job/x` select pods by); a template label
/// or selector that contradicts them is refused, unless `manualSelector`.
#[tokio::test]
async fn a_job_without_a_selector_selects_its_own_uid() {
    let server = ApiServer::start_seeded(48).await;
    let jobs: Api<Job> = Api::default_namespaced(server.client());
    let job = |name: &str, extra: serde_json::Value| -> Job {
        let mut spec = json!({"template": {"metadata": {"labels": {"app": "pi"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}});
        json_patch::merge(&mut spec, &extra);
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
    };
    let created = jobs
        .create(&PostParams::default(), &job("pi", json!({})))
        .await
        .unwrap();
    let (uid, spec) = (created.uid().unwrap(), created.spec.unwrap());
    let selector = spec.selector.unwrap().match_labels.unwrap();
    assert_eq!(
        selector.into_iter().collect::<Vec<_>>(),
        [(
            "batch.kubernetes.io/controller-uid".to_string(),
            uid.clone()
        )]
    );
    let labels = spec.template.metadata.unwrap().labels.unwrap();
    let label = |k: &str| labels.get(k).map(String::as_str);
    assert_eq!(label("app"), Some("pi"), "the client's label is kept");
    assert_eq!(label("job-name"), Some("pi"));
    assert_eq!(label("batch.kubernetes.io/job-name"), Some("pi"));
    assert_eq!(label("controller-uid"), Some(uid.as_str()));
    assert_eq!(
        label("batch.kubernetes.io/controller-uid"),
        Some(uid.as_str())
    );

    let refused = |name: &'static str, extra: serde_json::Value| {
        let (jobs, job) = (jobs.clone(), job(name, extra));
        async move {
            match jobs.create(&PostParams::default(), &job).await.unwrap_err() {
                kube::Error::Api(s) if s.code == 422 => s.message,
                other => panic!("{other:?}"),
            }
        }
    };
    let message = refused(
        "mislabelled",
        json!({"template": {"metadata": {"labels": {"job-name": "other"}}}}),
    )
    .await;
    assert!(
        message.starts_with("Job.batch \"mislabelled\" is invalid: spec.template.metadata.labels[job-name]: Invalid value: map[string]string{")
            && message.contains(": must be 'mislabelled'"),
        "{message}"
    );
    let message = refused(
        "chosen",
        json!({"selector": {"matchLabels": {"app": "other"}}}),
    )
    .await;
    assert!(
        message.ends_with(": `selector` not auto-generated"),
        "{message}"
    );

    // manualSelector: the client's selector, nothing generated; and one
    // it must give.
    let manual = json!({"manualSelector": true, "selector": {"matchLabels": {"app": "pi"}}});
    let created = jobs
        .create(&PostParams::default(), &job("manual", manual))
        .await
        .unwrap();
    let spec = created.spec.unwrap();
    let labels = spec.template.metadata.unwrap().labels.unwrap();
    assert_eq!(labels.len(), 1, "{labels:?}");
    let message = refused("unselected", json!({"manualSelector": true})).await;
    assert_eq!(
        message,
        "Job.batch \"unselected\" is invalid: spec.selector: Required value"
    );
}

/// Empty labels and annotations are not stored (Go's `omitempty`): what a
/// client sends as `{}` reads back without them, as from kube-apiserver.
#[tokio::test]
async fn empty_labels_and_annotations_read_back_absent() {
    let server = ApiServer::start_seeded(49).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("bare".into());
    cm.metadata.labels = Some(Default::default());
    cm.metadata.annotations = Some(Default::default());
    let created = cms.create(&PostParams::default(), &cm).await.unwrap();
    assert_eq!(
        (created.metadata.labels, created.metadata.annotations),
        (None, None)
    );
    let patch = json!({"metadata": {"labels": {"a": "b"}}});
    let patched = cms
        .patch("bare", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(patched.labels().len(), 1);
    let emptied = json!({"metadata": {"labels": {"a": null}}});
    let patched = cms
        .patch("bare", &PatchParams::default(), &Patch::Merge(&emptied))
        .await
        .unwrap();
    assert_eq!(patched.metadata.labels, None);
    // Sending `{}` again changes nothing: no new resourceVersion.
    let again = cms
        .patch(
            "bare",
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"labels": {}}})),
        )
        .await
        .unwrap();
    assert_eq!(again.resource_version(), patched.resource_version());
}

/// A CRD's `selectableFields` are validated as kube-apiserver validates
/// them and served: lists and watches (the streaming watch-list too)
/// select custom resources on them.
#[tokio::test]
async fn crd_selectable_fields_are_validated_and_select_on_lists_and_watches() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};

    let server = ApiServer::start_seeded(50).await;
    let client = server.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = |fields: serde_json::Value| -> CustomResourceDefinition {
        serde_json::from_value(json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "selectableFields": fields,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {
                            "color": {"type": "string"}, "size": {"type": "integer"},
                            "parts": {"type": "array", "items": {"type": "string"}}}}}}}}]}}))
        .unwrap()
    };
    let refused = |fields: serde_json::Value, want: &'static str| {
        let crds = crds.clone();
        async move {
            let err = crds
                .create(&PostParams::default(), &crd(fields))
                .await
                .unwrap_err();
            let kube::Error::Api(s) = err else {
                panic!("{err:?}")
            };
            assert_eq!(s.code, 422, "{}", s.message);
            assert!(s.message.contains(want), "{}", s.message);
        }
    };
    refused(
        json!([{"jsonPath": "spec.color"}]),
        "spec.versions[0].selectableFields[0].jsonPath: Invalid value: \"spec.color\": is an invalid path: expected [ or . but got: spec",
    )
    .await;
    refused(
        json!([{"jsonPath": ".spec.nope"}]),
        "Invalid value: \".spec.nope\": is an invalid path: does not refer to a valid field",
    )
    .await;
    refused(
        json!([{"jsonPath": ".spec.parts"}]),
        "must point to a field of type string, boolean or integer",
    )
    .await;
    refused(
        json!([{"jsonPath": ".spec.color"}, {"jsonPath": ".spec.color"}]),
        "spec.versions[0].selectableFields[1].jsonPath: Duplicate value: \".spec.color\"",
    )
    .await;
    let fields = json!([{"jsonPath": ".spec.color"}, {"jsonPath": ".spec.size"}]);
    crds.create(&PostParams::default(), &crd(fields))
        .await
        .unwrap();

    let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    let widgets: Api<DynamicObject> =
        Api::default_namespaced_with(client, &ApiResource::from_gvk(&gvk));
    let create = |name: &str, color: &str, size: i64| {
        let (widgets, name, color) = (widgets.clone(), name.to_string(), color.to_string());
        async move {
            let w: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": name}, "spec": {"color": color, "size": size}}))
            .unwrap();
            widgets.create(&PostParams::default(), &w).await.unwrap();
        }
    };
    create("a", "red", 1).await;
    create("b", "blue", 3).await;
    create("c", "red", 3).await;
    let names = |selector: &'static str| {
        let widgets = widgets.clone();
        async move {
            let list = widgets
                .list(&ListParams::default().fields(selector))
                .await
                .unwrap();
            list.items
                .iter()
                .map(ResourceExt::name_any)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(names("spec.color=red").await, ["a", "c"]);
    assert_eq!(names("spec.color!=red,spec.size=3").await, ["b"]);
    assert_eq!(names("spec.size=3,metadata.name=c").await, ["c"]);
    let err = widgets
        .list(&ListParams::default().fields("spec.shape=round"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 400 && s.message == "field label not supported: spec.shape"),
        "{err:?}"
    );

    // The streaming watch-list: the red ones, then only red changes.
    let config = watcher::Config::default()
        .fields("spec.color=red")
        .streaming_lists();
    let mut events = Box::pin(watcher(widgets.clone(), config));
    let mut initial = Vec::new();
    loop {
        let event = tokio::time::timeout(PATIENCE, events.next())
            .await
            .expect("the watch-list answers")
            .unwrap()
            .unwrap();
        match event {
            watcher::Event::InitApply(w) => initial.push(w.name_any()),
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    initial.sort();
    assert_eq!(initial, ["a", "c"]);
    create("d", "blue", 1).await;
    create("e", "red", 2).await;
    let next = tokio::time::timeout(PATIENCE, events.next())
        .await
        .expect("a change")
        .unwrap()
        .unwrap();
    let watcher::Event::Apply(w) = next else {
        panic!("{next:?}")
    };
    assert_eq!(w.name_any(), "e", "the blue one is not seen");
}

/// `kubectl get componentstatuses` (and the events code that looks one
/// up) finds the components a healthy cluster reports.
#[tokio::test]
async fn component_statuses_report_a_healthy_control_plane() {
    use k8s_openapi::api::core::v1::ComponentStatus;

    let server = ApiServer::start_seeded(51).await;
    let statuses: Api<ComponentStatus> = Api::all(server.client());
    let mut names: Vec<String> = (statuses.list(&Default::default()).await.unwrap().items)
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    names.sort();
    assert_eq!(names, ["controller-manager", "etcd-0", "scheduler"]);
    let scheduler = statuses.get("scheduler").await.unwrap();
    let healthy = &scheduler.conditions.unwrap()[0];
    assert_eq!(
        (healthy.type_.as_str(), healthy.status.as_str()),
        ("Healthy", "True")
    );
}
