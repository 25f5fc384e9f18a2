//! The `/scale` subresource: an `autoscaling/v1` Scale over a workload's
//! replicas (Deployments, StatefulSets, ReplicaSets, ReplicationControllers)
//! and over a custom resource whose CRD declares `subresources.scale`;
//! listed in both discovery documents; written through GET/PUT/PATCH with
//! kube-apiserver's checks; driven by kube-rs's own scale calls.

use crate::common::*;
use http::StatusCode;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use ward_apiserver::ApiServer;

const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";
const SCALE: &str = "/apis/apps/v1/namespaces/default/deployments/web/scale";

fn body(r: &Reply) -> Value {
    serde_json::from_slice(&r.body).unwrap()
}

async fn with_deployment() -> ApiServer {
    let s = server().await;
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 2,
            "selector": {"matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
            "template": {"metadata": {"labels": {"app": "web", "tier": "a"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    created(&s, DEPLOYS, &d).await;
    s
}

#[tokio::test]
async fn a_deployment_scales_through_its_scale() {
    let s = with_deployment().await;
    let scale = body(&send(&s, "GET", SCALE, "", "").await);
    let d = body(&send(&s, "GET", &format!("{DEPLOYS}/web"), "", "").await);
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["apiVersion"], "autoscaling/v1");
    assert_eq!(scale["metadata"]["name"], "web");
    assert_eq!(scale["metadata"]["namespace"], "default");
    assert_eq!(scale["metadata"]["uid"], d["metadata"]["uid"]);
    assert_eq!(
        scale["metadata"]["resourceVersion"],
        d["metadata"]["resourceVersion"]
    );
    assert_eq!(scale["spec"]["replicas"], 2);
    assert_eq!(scale["status"]["replicas"], 0);
    assert_eq!(scale["status"]["selector"], "app=web,tier in (a,b)");

    // A merge patch, as kubectl scale sends it.
    let r = send(&s, "PATCH", SCALE, MERGE, &json!({"spec": {"replicas": 5}})).await;
    assert_eq!(r.code, StatusCode::OK, "{:?}", r.body);
    assert_eq!(body(&r)["spec"]["replicas"], 5);
    let d = body(&send(&s, "GET", &format!("{DEPLOYS}/web"), "", "").await);
    assert_eq!(d["spec"]["replicas"], 5);
    assert_eq!(d["metadata"]["generation"], 2);
    let entries = d["metadata"]["managedFields"].as_array().unwrap();
    assert!(
        entries.iter().any(|e| e["subresource"] == "scale"),
        "the scale write is recorded under its subresource: {entries:?}"
    );

    // A PUT of a Scale at the current version; then the same again, stale.
    let mut scale = body(&send(&s, "GET", SCALE, "", "").await);
    scale["spec"]["replicas"] = 3.into();
    let r = send(&s, "PUT", SCALE, JSON, &scale).await;
    assert_eq!(r.code, StatusCode::OK, "{:?}", r.body);
    assert_eq!(body(&r)["spec"]["replicas"], 3);
    scale["spec"]["replicas"] = 7.into();
    let st = rejected(&s, "PUT", SCALE, JSON, &scale, 409).await;
    assert!(st.contains("the object has been modified"), "{st}");
    // A JSON patch with a test op is a precondition too.
    let ops = json!([{"op": "test", "path": "/spec/replicas", "value": 1},
        {"op": "replace", "path": "/spec/replicas", "value": 9}]);
    rejected(&s, "PATCH", SCALE, JSON_PATCH, &ops, 422).await;
}

#[tokio::test]
async fn bad_scales_are_refused_and_change_nothing() {
    let s = with_deployment().await;
    for replicas in [json!(-1), json!("three"), json!(1.5)] {
        let st = rejected(
            &s,
            "PATCH",
            SCALE,
            MERGE,
            &json!({"spec": {"replicas": replicas}}),
            422,
        )
        .await;
        assert!(
            st.starts_with("Scale.autoscaling \"web\" is invalid: spec.replicas"),
            "{st}"
        );
    }
    let other = json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {"name": "other"}, "spec": {"replicas": 1}});
    rejected(&s, "PUT", SCALE, JSON, &other, 400).await;
    // An apply names its field manager, to /scale too.
    rejected(
        &s,
        "PATCH",
        SCALE,
        APPLY,
        &json!({"spec": {"replicas": 1}}),
        422,
    )
    .await;
    rejected(&s, "POST", SCALE, JSON, &json!({}), 405).await;
    rejected(&s, "DELETE", SCALE, "", "", 405).await;
    let missing = "/apis/apps/v1/namespaces/default/deployments/none/scale";
    rejected(
        &s,
        "PATCH",
        missing,
        MERGE,
        &json!({"spec": {"replicas": 1}}),
        404,
    )
    .await;
    // Kinds without replicas have no /scale.
    rejected(&s, "GET", &format!("{CM}/scale"), "", "", 404).await;
    // A dry run answers the Scale it would make and stores nothing.
    let dry = format!("{SCALE}?dryRun=All");
    let r = unchanged(
        &s,
        "dry-run scale",
        send(&s, "PATCH", &dry, MERGE, &json!({"spec": {"replicas": 8}})),
    )
    .await;
    assert_eq!(body(&r)["spec"]["replicas"], 8);
}

#[tokio::test]
async fn a_custom_resource_scales_by_its_crds_paths_and_discovery_lists_scales() {
    let s = server().await;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "pools.example.ward.dev"},
        "spec": {"group": "example.ward.dev", "scope": "Namespaced",
            "names": {"plural": "pools", "singular": "pool", "kind": "Pool"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}, "scale": {
                    "specReplicasPath": ".spec.size", "statusReplicasPath": ".status.ready",
                    "labelSelectorPath": ".status.selector"}}}]}});
    created(&s, CRDS, &crd).await;
    let pools = "/apis/example.ward.dev/v1/namespaces/default/pools";
    let pool = json!({"apiVersion": "example.ward.dev/v1", "kind": "Pool",
        "metadata": {"name": "p"}, "spec": {"size": 1}});
    created(&s, pools, &pool).await;
    let st = json!({"status": {"ready": 1, "selector": "pool=p"}});
    let r = send(&s, "PATCH", &format!("{pools}/p/status"), MERGE, &st).await;
    assert_eq!(r.code, StatusCode::OK);

    let scale_uri = format!("{pools}/p/scale");
    let scale = body(&send(&s, "GET", &scale_uri, "", "").await);
    assert_eq!(scale["spec"]["replicas"], 1);
    assert_eq!(
        scale["status"],
        json!({"replicas": 1, "selector": "pool=p"})
    );
    let r = send(
        &s,
        "PATCH",
        &scale_uri,
        MERGE,
        &json!({"spec": {"replicas": 4}}),
    )
    .await;
    assert_eq!(r.code, StatusCode::OK);
    let p = body(&send(&s, "GET", &format!("{pools}/p"), "", "").await);
    assert_eq!(p["spec"]["size"], 4);
    assert_eq!(p["status"]["ready"], 1, "a scale write leaves status alone");

    let legacy = body(&send(&s, "GET", "/apis/example.ward.dev/v1", "", "").await);
    let names: Vec<&str> = legacy["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert!(names.contains(&"pools/scale"), "{names:?}");
    let apps = body(&send(&s, "GET", "/apis/apps/v1", "", "").await);
    let scale = apps["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "deployments/scale")
        .expect("deployments/scale is listed")
        .clone();
    assert_eq!(scale["group"], "autoscaling");
    assert_eq!(scale["kind"], "Scale");
}

/// kube-rs's own calls (`get_scale`, `patch_scale`, `replace_scale`).
#[tokio::test]
async fn kube_rs_scales_a_deployment() {
    let s = with_deployment().await;
    let api: Api<Deployment> = Api::default_namespaced(s.client());
    let scale = api.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(2));
    let patched = api
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 6}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.spec.unwrap().replicas, Some(6));
    let mut scale = api.get_scale("web").await.unwrap();
    scale.spec.as_mut().unwrap().replicas = Some(0);
    let replaced = api
        .replace_scale("web", &PostParams::default(), &scale)
        .await
        .unwrap();
    assert_eq!(replaced.spec.unwrap().replicas, Some(0));
    assert_eq!(api.get("web").await.unwrap().spec.replicas, Some(0));
}
