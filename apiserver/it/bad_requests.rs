//! Requests that must be refused before anything is read or written: verbs
//! a path does not route (405) and malformed or invalid query parameters
//! (400 when they do not decode, 422 when they do not validate), each with
//! the status and `metav1.Status` body kube-apiserver gives, and each
//! leaving the store exactly as it was (same objects, same resourceVersion).

use crate::common::*;
use http::StatusCode;
use serde_json::{Value, json};
use ward_apiserver::ApiServer;

const ALL_CMS: &str = "/api/v1/configmaps";
const OTHER_CMS: &str = "/api/v1/namespaces/other/configmaps";

/// A server holding `default/cm` (labelled app=demo), `default/cm2`, the
/// namespace `other` with `other/cm`, and the Widget CRD with `default/w`.
async fn populated() -> ApiServer {
    let s = server_with_widgets().await;
    created(&s, CMS, &cm_named("cm2")).await;
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}});
    created(&s, "/api/v1/namespaces", &ns).await;
    created(&s, OTHER_CMS, &cm_named("cm")).await;
    s
}

/// The names of the objects a list answer holds, but for every
/// namespace's `kube-root-ca.crt`.
fn names(r: &Reply) -> Vec<String> {
    let list: Value = serde_json::from_slice(&r.body).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["metadata"]["name"] != "kube-root-ca.crt")
        .map(|o| {
            format!(
                "{}/{}",
                o["metadata"]["namespace"].as_str().unwrap_or_default(),
                o["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test]
async fn delete_on_the_all_namespaces_path_is_not_routed() {
    let s = populated().await;
    // Kubernetes registers only list and watch on /api/v1/configmaps.
    for method in ["DELETE", "POST", "PUT", "PATCH"] {
        let msg = rejected(&s, method, ALL_CMS, MERGE, &cm_named("x"), 405).await;
        assert!(msg.contains("does not allow this method"), "{msg}");
    }
    rejected(
        &s,
        "DELETE",
        "/apis/example.ward.dev/v1/widgets",
        "",
        "",
        405,
    )
    .await;
    // With selectors and options it is no different.
    let uri = format!("{ALL_CMS}?labelSelector=app%3Ddemo&propagationPolicy=Background");
    rejected(&s, "DELETE", &uri, "", "", 405).await;
    // Listing there still works, across namespaces.
    let r = send(&s, "GET", ALL_CMS, "", "").await;
    assert_eq!(r.code, StatusCode::OK);
    assert_eq!(names(&r), ["default/cm", "default/cm2", "other/cm"]);
}

#[tokio::test]
async fn verbs_a_path_does_not_serve_are_405() {
    let s = populated().await;
    let cases = [
        ("POST", CM),
        ("PUT", CMS),
        ("PATCH", CMS),
        ("HEAD", CMS),
        ("OPTIONS", CM),
        ("TRACE", CM),
        ("FROB", CMS),
        (
            "DELETE",
            "/apis/example.ward.dev/v1/namespaces/default/widgets/w/status",
        ),
        (
            "POST",
            "/apis/example.ward.dev/v1/namespaces/default/widgets/w/status",
        ),
        ("POST", "/api/v1/namespaces/default"),
        // Namespaces have no deletecollection in Kubernetes.
        ("DELETE", "/api/v1/namespaces"),
    ];
    for (method, uri) in cases {
        rejected(&s, method, uri, MERGE, &json!({}), 405).await;
    }
}

#[tokio::test]
async fn delete_collection_with_invalid_list_options_deletes_nothing() {
    let s = populated().await;
    let cases = [
        ("resourceVersion=abc", 400),
        ("resourceVersion=-1", 400),
        ("resourceVersion=1.5", 400),
        ("limit=abc", 400),
        ("limit=", 400),
        ("timeoutSeconds=abc", 400),
        ("continue=abc", 400),
        ("labelSelector=a%20in%20(", 400),
        ("fieldSelector=spec.nope%3Dx", 400),
        ("watch=true", 400),
        ("resourceVersionMatch=Exact", 422),
        ("resourceVersion=1&resourceVersionMatch=Sometimes", 422),
        ("sendInitialEvents=true", 422),
        ("gracePeriodSeconds=abc", 400),
        ("gracePeriodSeconds=", 400),
        ("propagationPolicy=Sideways", 422),
        ("propagationPolicy=Orphan&orphanDependents=true", 422),
        ("dryRun=Some", 422),
    ];
    for (query, code) in cases {
        rejected(&s, "DELETE", &format!("{CMS}?{query}"), "", "", code).await;
    }
    // Options in the body are checked too, after the list options.
    let bad_body = json!({"propagationPolicy": "Sideways"});
    rejected(&s, "DELETE", CMS, JSON, &bad_body, 422).await;
    rejected(
        &s,
        "DELETE",
        &format!("{CMS}?limit=x"),
        JSON,
        &json!({}),
        400,
    )
    .await;
}

#[tokio::test]
async fn delete_collection_deletes_what_its_valid_options_select() {
    let s = populated().await;
    // A limit deletes one page and answers the token of the next.
    let r = send(&s, "DELETE", &format!("{CMS}?limit=1"), "", "").await;
    assert_eq!(r.code, StatusCode::OK);
    assert_eq!(names(&r), ["default/cm"]);
    let page: Value = serde_json::from_slice(&r.body).unwrap();
    let token = page["metadata"]["continue"].as_str().unwrap().to_string();
    let r = send(&s, "DELETE", &format!("{CMS}?continue={token}"), "", "").await;
    assert_eq!(names(&r), ["default/cm2"]);
    // Other namespaces were never touched.
    let r = send(&s, "GET", ALL_CMS, "", "").await;
    assert_eq!(names(&r), ["other/cm"]);
}

#[tokio::test]
async fn list_and_watch_refuse_undecodable_parameters() {
    let s = populated().await;
    for query in [
        "timeoutSeconds=abc",
        "timeoutSeconds=",
        "limit=1.5",
        "resourceVersion=x",
        "watch=1&timeoutSeconds=abc",
        "watch=1&resourceVersion=1.5",
        "watch=1&limit=z",
    ] {
        rejected(&s, "GET", &format!("{CMS}?{query}"), "", "", 400).await;
    }
    for query in [
        "resourceVersionMatch=NotOlderThan",
        "watch=1&resourceVersionMatch=NotOlderThan",
        "watch=1&sendInitialEvents=true&resourceVersionMatch=Exact",
    ] {
        rejected(&s, "GET", &format!("{CMS}?{query}"), "", "", 422).await;
    }
    rejected(&s, "GET", &format!("{CM}?resourceVersion=-1"), "", "", 400).await;
}

#[tokio::test]
async fn force_on_a_non_apply_patch_is_invalid() {
    let s = populated().await;
    let patch = json!({"data": {"k": "forced"}});
    for force in ["true", "false", ""] {
        let uri = format!("{CM}?force={force}");
        let msg = rejected(&s, "PATCH", &uri, MERGE, &patch, 422).await;
        assert_eq!(
            msg,
            "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"
        );
        rejected(&s, "PATCH", &uri, STRATEGIC, &patch, 422).await;
        rejected(&s, "PATCH", &uri, JSON_PATCH, "[]", 422).await;
    }
    // On an apply patch force is what it is for.
    let apply = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cm"}, "data": {"k": "applied"}});
    let r = send(
        &s,
        "PATCH",
        &format!("{CM}?fieldManager=t&force=true"),
        APPLY,
        &apply,
    )
    .await;
    assert_eq!(r.code, StatusCode::OK, "{:?}", r.body);
}

#[tokio::test]
async fn field_manager_over_128_bytes_is_invalid() {
    let s = populated().await;
    let long = "m".repeat(129);
    let apply = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cm"}, "data": {"k": "applied"}});
    let put = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}});
    let cases = [
        ("POST", CMS.to_string(), JSON, cm_named("new")),
        ("PUT", CM.to_string(), JSON, put),
        ("PATCH", CM.to_string(), MERGE, json!({"data": {"k": "x"}})),
        ("PATCH", CM.to_string(), APPLY, apply.clone()),
    ];
    for (method, uri, ct, body) in &cases {
        let uri = format!("{uri}?fieldManager={long}");
        let msg = rejected(&s, method, &uri, ct, body, 422).await;
        assert!(
            msg.ends_with("fieldManager: Too long: may not be more than 128 bytes"),
            "{msg}"
        );
        // Control characters are refused as well.
        let uri = format!("{CM}?fieldManager=a%07b");
        rejected(&s, "PATCH", &uri, MERGE, &json!({}), 422).await;
    }
    // 128 bytes is the limit, not over it.
    let ok = "m".repeat(128);
    let uri = format!("{CM}?fieldManager={ok}&force=true");
    let r = send(&s, "PATCH", &uri, APPLY, &apply).await;
    assert_eq!(r.code, StatusCode::OK, "{:?}", r.body);
}

#[tokio::test]
async fn write_options_are_checked_on_every_write() {
    let s = populated().await;
    let writes = [
        ("POST", CMS, JSON, cm_named("new")),
        (
            "PUT",
            CM,
            JSON,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}),
        ),
        ("PATCH", CM, MERGE, json!({"data": {"k": "x"}})),
    ];
    for (method, uri, ct, body) in &writes {
        for (query, code) in [("dryRun=Everything", 422), ("fieldValidation=Loose", 422)] {
            rejected(&s, method, &format!("{uri}?{query}"), ct, body, code).await;
        }
    }
    // Delete reads its options from the query only when there is no body:
    // a query's dry run beside a body would be ignored by kube-apiserver
    // (a real delete), and is refused here.
    rejected(
        &s,
        "DELETE",
        &format!("{CM}?dryRun=All"),
        JSON,
        &json!({}),
        400,
    )
    .await;
}

#[tokio::test]
async fn paths_are_decoded_and_names_must_be_path_segments() {
    let s = populated().await;
    // Percent-encoded paths reach the same object.
    let r = send(
        &s,
        "GET",
        "/api/v1/namespaces/default/configmaps/c%6D2",
        "",
        "",
    )
    .await;
    assert_eq!(r.code, StatusCode::OK);
    for name in ["%2e", "%2E%2e", "a%25b", "%2525"] {
        let uri = format!("{CMS}/{name}");
        for method in ["GET", "DELETE"] {
            let msg = rejected(&s, method, &uri, "", "", 400).await;
            assert!(msg.starts_with("Name parameter invalid"), "{msg}");
        }
        let body = json!({"data": {"k": "x"}});
        rejected(&s, "PATCH", &uri, MERGE, &body, 400).await;
    }
    // An encoded slash separates segments, as on the real server.
    rejected(&s, "GET", &format!("{CMS}/cm%2Fx"), "", "", 404).await;
    rejected(&s, "GET", "/api/v1/namespaces/%ff/configmaps", "", "", 404).await;
}
