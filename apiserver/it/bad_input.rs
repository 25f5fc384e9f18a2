//! Bad input never panics and never changes the store. Every test sends raw
//! requests through the in-process tower service, checks the real status
//! code and a `metav1.Status` body (kind Status, status Failure, reason,
//! message, code), and compares a snapshot of the store (resourceVersion and
//! the bytes of every object) taken before and after each request.

use crate::common::*;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::json;
use tower::ServiceExt;
use ward_apiserver::ServerConfig;

#[tokio::test]
async fn malformed_json_on_create() {
    let s = server().await;
    for body in [
        r#"{"metadata": {"name": "x""#,
        "{,}",
        "not json",
        "",
        "{\"a\":1}}",
    ] {
        rejected(&s, "POST", CMS, JSON, body, 400).await;
    }
}

#[tokio::test]
async fn malformed_yaml_on_create() {
    let s = server().await;
    let bodies = [
        "metadata:\n  name: [x\n",
        "metadata: {name: x\n",
        "a: b\n  c: d\n- e\n",
        "\t- :\n",
    ];
    for body in bodies {
        rejected(&s, "POST", CMS, YAML, body, 400).await;
    }
}

#[tokio::test]
async fn api_version_mismatch() {
    let s = server().await;
    let body = json!({"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
    let msg = rejected(&s, "POST", CMS, JSON, &body, 400).await;
    assert!(msg.contains("apps/v1"), "{msg}");
    let body = json!({"apiVersion": 7, "kind": "ConfigMap", "metadata": {"name": "x"}});
    rejected(&s, "POST", CMS, JSON, &body, 400).await;
    let body = json!({"apiVersion": "v2", "kind": "ConfigMap", "metadata": {"name": "cm"}});
    rejected(&s, "PUT", CM, JSON, &body, 400).await;
}

#[tokio::test]
async fn kind_mismatch() {
    let s = server().await;
    let body = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}});
    let msg = rejected(&s, "POST", CMS, JSON, &body, 400).await;
    assert!(msg.contains("Secret"), "{msg}");
    let body = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cm"}});
    rejected(&s, "PUT", CM, JSON, &body, 400).await;
}

#[tokio::test]
async fn invalid_name() {
    let s = server().await;
    for name in ["Bad_Name", "-x", "a..b", &"a".repeat(254)] {
        let msg = rejected(&s, "POST", CMS, JSON, &cm_named(name), 422).await;
        assert!(msg.contains("metadata.name"), "{msg}");
    }
    let body = json!({"metadata": {"generateName": "Bad_"}});
    rejected(&s, "POST", CMS, JSON, &body, 422).await;
    // Namespaces are DNS-1123 labels: no dots.
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a.b"}});
    rejected(&s, "POST", "/api/v1/namespaces", JSON, &ns, 422).await;
}

#[tokio::test]
async fn invalid_labels() {
    let s = server().await;
    for labels in [
        json!({"bad key!": "v"}),
        json!({"app": "-bad-"}),
        json!({"app": "x".repeat(64)}),
        json!({"Bad_Prefix/app": "v"}),
    ] {
        let body = json!({"metadata": {"name": "x", "labels": labels}});
        let msg = rejected(&s, "POST", CMS, JSON, &body, 422).await;
        assert!(msg.contains("metadata.labels"), "{msg}");
        let patch = json!({"metadata": {"labels": labels}});
        rejected(&s, "PATCH", CM, MERGE, &patch, 422).await;
    }
}

#[tokio::test]
async fn two_controllers() {
    let s = server().await;
    let owner = |uid: &str, name: &str| json!({"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid, "controller": true});
    let body = json!({"metadata": {"name": "x",
        "ownerReferences": [owner("u1", "a"), owner("u2", "b")]}});
    let msg = rejected(&s, "POST", CMS, JSON, &body, 422).await;
    assert!(
        msg.contains("Only one reference can have Controller set to true")
            && msg.contains("Node/a and Node/b"),
        "{msg}"
    );
    // A merge patch adding a second controller to the stored one, too.
    let patch = json!({"metadata": {"ownerReferences": [owner("u1", "a"), owner("u2", "b")]}});
    rejected(&s, "PATCH", CM, MERGE, &patch, 422).await;
}

#[tokio::test]
async fn unknown_resource() {
    let s = server().await;
    for uri in [
        "/api/v1/namespaces/default/frobs",
        "/api/v1/frobs",
        "/api/v2/namespaces/default/configmaps",
    ] {
        rejected(&s, "POST", uri, JSON, &cm_named("x"), 404).await;
        rejected(&s, "GET", uri, "", "", 404).await;
    }
}

#[tokio::test]
async fn unknown_group() {
    let s = server().await;
    for uri in [
        "/apis/nope.example.com/v1/namespaces/default/things",
        "/apis/nope.example.com/v1/things",
        "/apis/nope.example.com/v1",
    ] {
        // As kube-apiserver answers a path outside the API it serves.
        let r = unchanged(&s, uri, send(&s, "POST", uri, JSON, &cm_named("x"))).await;
        assert!(is_page_not_found(&r), "POST {uri}: {} {:?}", r.code, r.body);
        let r = send(&s, "GET", uri, "", "").await;
        assert!(is_page_not_found(&r), "GET {uri}: {} {:?}", r.code, r.body);
    }
    // Below `/api`, and below a group version served, a Status.
    rejected(&s, "GET", "/api/v9/pods", "", "", 404).await;
    rejected(&s, "GET", "/apis/apps/v1/nothings", "", "", 404).await;
}

/// (protobuf is taken for built-in kinds: the `protobuf` module)
#[tokio::test]
async fn unsupported_content_type_on_create() {
    let s = server().await;
    for ct in ["text/plain", "application/cbor", MERGE] {
        rejected(&s, "POST", CMS, ct, &cm_named("x"), 415).await;
    }
}

#[tokio::test]
async fn unsupported_content_type_on_patch() {
    let s = server().await;
    let patch = json!({"data": {"k": "changed"}});
    for ct in ["text/plain", JSON, "application/apply-patch+cbor", ""] {
        rejected(&s, "PATCH", CM, ct, &patch, 415).await;
    }
}

#[tokio::test]
async fn strategic_merge_on_custom_resource() {
    let s = server_with_widgets().await;
    let patch = json!({"spec": {"size": 2}});
    let msg = rejected(&s, "PATCH", WIDGET, STRATEGIC, &patch, 415).await;
    assert!(!msg.contains("strategic-merge-patch"), "{msg}");
}

#[tokio::test]
async fn body_over_default_limit() {
    let s = server().await;
    let big = format!("{{\"data\":{{\"k\":\"{}\"}}}}", "x".repeat(3 * 1024 * 1024));
    rejected(&s, "POST", CMS, JSON, &big, 413).await;
    rejected(&s, "PATCH", CM, MERGE, &big, 413).await;
    // Announced by Content-Length: refused before the body is read.
    let req = Request::builder()
        .method("PUT")
        .uri(CM)
        .header("content-type", JSON)
        .header("content-length", big.len().to_string())
        .body(Full::new(Bytes::from(big)))
        .unwrap();
    let r = unchanged(&s, "PUT", call(&s, req)).await;
    assert_eq!(assert_status(&r, Some(413), "PUT")["reason"], reason(413));
}

#[tokio::test]
async fn body_over_configured_limit() {
    let s = server_with(ServerConfig::default().max_body_bytes(1024)).await;
    let pad = |n: usize| format!("{{\"x\":\"{}\"}}", "y".repeat(n - 8));
    assert_eq!(pad(1025).len(), 1025);
    let msg = rejected(&s, "POST", CMS, JSON, &pad(1025), 413).await;
    assert!(msg.contains("1024"), "{msg}");
    rejected(&s, "PATCH", CM, MERGE, &pad(4096), 413).await;
    // Exactly at the limit is read (and refused for what it says, not its size).
    let at_limit = format!("{}x", &pad(1024)[..1023]);
    rejected(&s, "POST", CMS, JSON, &at_limit, 400).await;
    // The limit does not refuse small bodies.
    created(&s, CMS, &json!({"metadata": {"name": "small"}})).await;
}

#[tokio::test]
async fn bad_label_selector() {
    let s = server().await;
    for sel in [
        "a%20in%20(",
        "!",
        "a%3D%3D%3Db",
        "bad%20key!%3Dv",
        "a,,b",
        "x%3E1a",
    ] {
        let uri = format!("{CMS}?labelSelector={sel}");
        rejected(&s, "GET", &uri, "", "", 400).await;
        // A delete-collection with a bad selector deletes nothing.
        rejected(&s, "DELETE", &uri, "", "", 400).await;
        rejected(&s, "GET", &format!("{uri}&watch=true"), "", "", 400).await;
    }
}

#[tokio::test]
async fn unsupported_field_selector() {
    let s = server().await;
    for sel in [
        "spec.foo%3Dbar",
        "status.phase%3DRunning",
        "metadata.name",
        "a%3Db%3Dc",
    ] {
        let uri = format!("{CMS}?fieldSelector={sel}");
        rejected(&s, "GET", &uri, "", "", 400).await;
        rejected(&s, "DELETE", &uri, "", "", 400).await;
        rejected(&s, "GET", &format!("{uri}&watch=true"), "", "", 400).await;
    }
}

#[tokio::test]
async fn json_patch_remove_missing_path() {
    let s = server().await;
    let patch = json!([{"op": "replace", "path": "/data/k", "value": "changed"},
                       {"op": "remove", "path": "/data/missing"}]);
    let msg = rejected(&s, "PATCH", CM, JSON_PATCH, &patch, 422).await;
    assert!(msg.contains("/data/missing"), "{msg}");
}

#[tokio::test]
async fn json_patch_failed_test_op() {
    let s = server().await;
    let patch = json!([{"op": "replace", "path": "/data/k", "value": "changed"},
                       {"op": "test", "path": "/data/k", "value": "something else"}]);
    // As kube-apiserver words it: no field, no detail.
    let msg = rejected(&s, "PATCH", CM, JSON_PATCH, &patch, 422).await;
    assert_eq!(
        msg,
        "the server rejected our request due to an error in our request"
    );
}

#[tokio::test]
async fn merge_patch_not_an_object() {
    let s = server().await;
    for body in ["[1]", "\"x\"", "null", "3", "{not json"] {
        rejected(&s, "PATCH", CM, MERGE, body, 400).await;
    }
    // Nor is a JSON patch that is not an array of operations.
    for body in ["{}", "[{\"op\": \"frobnicate\", \"path\": \"/a\"}]", "null"] {
        rejected(&s, "PATCH", CM, JSON_PATCH, body, 400).await;
    }
}

#[tokio::test]
async fn custom_resource_update_without_rv() {
    let s = server_with_widgets().await;
    let body = json!({"apiVersion": "example.ward.dev/v1", "kind": "Widget",
        "metadata": {"name": "w"}, "spec": {"size": 9}});
    let msg = rejected(&s, "PUT", WIDGET, JSON, &body, 422).await;
    assert!(msg.contains("metadata.resourceVersion"), "{msg}");
    let body = json!({"metadata": {"name": "w", "resourceVersion": ""}, "spec": {"size": 9}});
    rejected(&s, "PUT", WIDGET, JSON, &body, 422).await;
}

#[tokio::test]
async fn stale_resource_version_on_update() {
    let s = server().await;
    for rv in ["1", "999999"] {
        let body = json!({"metadata": {"name": "cm", "resourceVersion": rv}, "data": {"k": "n"}});
        assert_eq!(rejected(&s, "PUT", CM, JSON, &body, 409).await, MODIFIED);
    }
}

#[tokio::test]
async fn stale_resource_version_in_merge_patch() {
    let s = server().await;
    let patch = json!({"metadata": {"resourceVersion": "1"}, "data": {"k": "new"}});
    assert_eq!(
        rejected(&s, "PATCH", CM, MERGE, &patch, 409).await,
        MODIFIED
    );
    assert_eq!(
        rejected(&s, "PATCH", CM, STRATEGIC, &patch, 409).await,
        MODIFIED
    );
}

#[tokio::test]
async fn name_mismatch_on_update() {
    let s = server().await;
    let msg = rejected(&s, "PUT", CM, JSON, &cm_named("other"), 400).await;
    assert!(msg.contains("does not match"), "{msg}");
    let patch = json!({"metadata": {"name": "other"}});
    rejected(&s, "PATCH", CM, MERGE, &patch, 400).await;
}

#[tokio::test]
async fn namespace_mismatch() {
    let s = server().await;
    let body = json!({"metadata": {"name": "x", "namespace": "kube-system"}});
    rejected(&s, "POST", CMS, JSON, &body, 400).await;
    let body = json!({"metadata": {"name": "cm", "namespace": "kube-system"}});
    rejected(&s, "PUT", CM, JSON, &body, 400).await;
    let patch = json!({"metadata": {"namespace": "kube-system"}});
    rejected(&s, "PATCH", CM, MERGE, &patch, 400).await;
}

#[tokio::test]
async fn invalid_continue_token() {
    let s = server().await;
    // Odd length, not hex, not UTF-8, no separator, an empty name.
    for token in ["abc", "zz", "%ff%fe", "ff00", "c328", "6162", "00"] {
        let uri = format!("{CMS}?limit=1&continue={token}");
        let msg = rejected(&s, "GET", &uri, "", "", 400).await;
        assert!(msg.contains("continue"), "{msg}");
    }
    // As in Kubernetes, a limit that is not positive lists everything; one
    // that is not an integer is refused.
    let r = unchanged(
        &s,
        "limit=-1",
        send(&s, "GET", &format!("{CMS}?limit=-1"), "", ""),
    )
    .await;
    assert_eq!(r.code, StatusCode::OK);
    rejected(&s, "GET", &format!("{CMS}?limit=x"), "", "", 400).await;
}

#[tokio::test]
async fn invalid_watch_resource_version() {
    let s = server().await;
    for rv in ["abc", "-1", "1.5", "18446744073709551616"] {
        let uri = format!("{CMS}?watch=true&resourceVersion={rv}");
        rejected(&s, "GET", &uri, "", "", 400).await;
    }
    let uri = format!("{CMS}?watch=1&timeoutSeconds=soon");
    rejected(&s, "GET", &uri, "", "", 400).await;
}

#[tokio::test]
async fn huge_watch_timeout_keeps_the_watch_open() {
    let s = server().await;
    // Past int64 it is no number (400, as Kubernetes decodes it); up to it,
    // it is capped so that the deadline cannot overflow.
    let uri = format!("{CMS}?watch=true&timeoutSeconds={}", u64::MAX);
    rejected(&s, "GET", &uri, "", "", 400).await;
    let uri = format!("{CMS}?watch=true&timeoutSeconds={}", i64::MAX);
    let req = Request::builder()
        .uri(uri)
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = unchanged(&s, "watch", s.service().oneshot(req))
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    // The stream stays open: the watch task neither ended nor panicked.
    let collect = resp.into_body().collect();
    let waited = tokio::time::timeout(std::time::Duration::from_millis(300), collect).await;
    assert!(waited.is_err(), "the watch ended at once");
}

#[tokio::test]
async fn apply_without_field_manager() {
    let s = server().await;
    let body = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  k: applied\n";
    let msg = rejected(&s, "PATCH", CM, APPLY, body, 422).await;
    assert!(msg.contains("fieldManager"), "{msg}");
    // Nor does it create an absent object.
    rejected(&s, "PATCH", &format!("{CMS}/absent"), APPLY, body, 422).await;
}

#[tokio::test]
async fn delete_with_bad_propagation_policy() {
    let s = server().await;
    let body =
        json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Sideways"});
    let msg = rejected(&s, "DELETE", CM, JSON, &body, 422).await;
    assert!(msg.contains("Sideways"), "{msg}");
    rejected(&s, "DELETE", CMS, JSON, &body, 422).await;
    rejected(
        &s,
        "DELETE",
        &format!("{CM}?propagationPolicy=Sideways"),
        "",
        "",
        422,
    )
    .await;
    rejected(
        &s,
        "DELETE",
        &format!("{CMS}?propagationPolicy=Sideways"),
        "",
        "",
        422,
    )
    .await;
}

#[tokio::test]
async fn delete_with_mismatched_uid_precondition() {
    let s = server().await;
    let body = json!({"kind": "DeleteOptions", "apiVersion": "v1",
        "preconditions": {"uid": "not-the-uid"}});
    let msg = rejected(&s, "DELETE", CM, JSON, &body, 409).await;
    // kube-apiserver v1.37's wording (the differential corpus).
    let want = "Operation cannot be fulfilled on ConfigMap \"cm\": the UID in the precondition \
                (not-the-uid) does not match the UID in record (";
    assert!(msg.starts_with(want), "{msg}");
    // `default` may never be deleted: kube-apiserver's NamespaceLifecycle
    // admission refuses before any precondition is read.
    let msg = rejected(&s, "DELETE", "/api/v1/namespaces/default", JSON, &body, 403).await;
    assert_eq!(
        msg,
        "namespaces \"default\" is forbidden: this namespace may not be deleted"
    );
    let body = json!({"preconditions": {"resourceVersion": "1"}});
    rejected(&s, "DELETE", CM, JSON, &body, 409).await;
}

#[tokio::test]
async fn delete_with_malformed_options() {
    let s = server().await;
    let bodies = [
        json!({"kind": [], "apiVersion": {}}),
        json!({"preconditions": 5}),
        json!({"preconditions": {"uid": 5}}),
        json!({"preconditions": {"resourceVersion": 1}}),
        json!({"gracePeriodSeconds": "30"}),
        json!({"gracePeriodSeconds": 1.5}),
        json!({"propagationPolicy": 5}),
        json!({"orphanDependents": "yes"}),
        json!({"dryRun": "All"}),
    ];
    for body in &bodies {
        rejected(&s, "DELETE", CM, JSON, body, 400).await;
        rejected(&s, "DELETE", CMS, JSON, body, 400).await;
    }
    for body in ["{", "[]", "null", "{\"a\":1}}", "\u{0}"] {
        rejected(&s, "DELETE", CM, JSON, body, 400).await;
        rejected(&s, "DELETE", CMS, JSON, body, 400).await;
    }
    rejected(
        &s,
        "DELETE",
        &format!("{CM}?gracePeriodSeconds=soon"),
        "",
        "",
        400,
    )
    .await;
}

#[tokio::test]
async fn valid_json_that_is_not_an_object() {
    let s = server().await;
    for body in ["[1, 2]", "\"cm\"", "null", "3", "true", "[]"] {
        rejected(&s, "POST", CMS, JSON, body, 400).await;
        rejected(&s, "PUT", CM, JSON, body, 400).await;
    }
    for body in ["- a\n- b\n", "just a string\n", "~\n"] {
        rejected(&s, "POST", CMS, YAML, body, 400).await;
    }
}

#[tokio::test]
async fn deeply_nested_bodies() {
    let s = server().await;
    let arrays = "[".repeat(100_000);
    let objects = "{\"a\":".repeat(100_000);
    let in_data = format!("{{\"metadata\":{{\"name\":\"deep\"}},\"data\":{arrays}");
    for body in [&arrays, &objects, &in_data] {
        rejected(&s, "POST", CMS, JSON, body, 400).await;
        rejected(&s, "PUT", CM, JSON, body, 400).await;
        for ct in [MERGE, JSON_PATCH, STRATEGIC] {
            rejected(&s, "PATCH", CM, ct, body, 400).await;
        }
        rejected(&s, "DELETE", CM, JSON, body, 400).await;
    }
    let yaml_flow = "[".repeat(100_000);
    let yaml_block = "- ".repeat(100_000);
    let yaml_map = format!("metadata:\n  name: deep\ndata: {}", "{a: ".repeat(100_000));
    for body in [&yaml_flow, &yaml_block, &yaml_map] {
        rejected(&s, "POST", CMS, YAML, body, 400).await;
        rejected(
            &s,
            "PATCH",
            &format!("{CM}?fieldManager=t"),
            APPLY,
            body,
            400,
        )
        .await;
    }
}

#[tokio::test]
async fn garbage_paths_never_panic() {
    let s = server_with_widgets().await;
    let paths = "/api/v1/namespaces//configmaps/ /api/v1/namespaces//pods /apis/x /apis/x/y/z
        /api/v1/pods/a/b/c/d /api/v1/namespaces/default/configmaps/cm/status
        /api/v1/namespaces/default/configmaps/cm/a/b/c /api/v1/nodes/n/status/x
        /api/v1/namespaces/%00%ff/configmaps/%2e%2e /api/v1/namespaces/%zz/configmaps/x
        /api/v1/namespaces/default/configmaps/%2F%5C%00 /apis/%C3%28/v1/%E2%82/x
        /apis/example.ward.dev/v1/widgets/w /apis/example.ward.dev/v2/namespaces/default/widgets/w
        /%ff%fe / ////// /openapi/v3/apis/x/y /version/x";
    let body = json!({"data": {"k": "z"}});
    unchanged(&s, "garbage paths", async {
        for path in paths.split_whitespace() {
            for method in ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "FROB"] {
                let r = send(&s, method, path, MERGE, &body).await;
                assert_refused(&r, &format!("{method} {path}"));
            }
        }
    })
    .await;
}

#[tokio::test]
async fn garbage_bodies_never_panic() {
    let s = server_with_widgets().await;
    let unparsable: &[&[u8]] = &[
        b"\x00\xff\xfe\xfd",
        b"\xef\xbb\xbf",
        b"{\"data\":\"\xff\"}",
        b"{\"data\":{\"k\":\"\\ud800\"}}",
        b"{\"a\":1,\"a\":2,",
        b"1e999999",
        b"\"\\u0000\"",
        b"*anchor\n",
        b"a: &x [*x]\n",
    ];
    let ill_typed: &[&[u8]] = &[
        b"{\"metadata\": 5}",
        b"{\"metadata\":{\"name\":5}}",
        b"{\"metadata\":{\"labels\":[1]}}",
        b"{\"metadata\":{\"labels\":{\"a\":1}}}",
        b"{\"metadata\":{\"annotations\":{\"a\":1}}}",
        b"{\"metadata\":{\"finalizers\":\"x\"}}",
        b"{\"metadata\":{\"resourceVersion\":5}}",
        b"{\"kind\":[],\"apiVersion\":{}}",
    ];
    let apply_cm = "/api/v1/namespaces/default/configmaps/cm?fieldManager=t";
    let targets = [
        ("POST", CMS, JSON),
        ("POST", CMS, YAML),
        ("PUT", CM, JSON),
        ("PATCH", CM, MERGE),
        ("PATCH", CM, JSON_PATCH),
        ("PATCH", CM, STRATEGIC),
        ("PATCH", apply_cm, APPLY),
        ("POST", WIDGETS, JSON),
        ("PUT", WIDGET, JSON),
        ("PATCH", WIDGET, MERGE),
        ("POST", CRDS, JSON),
    ];
    // A status write keeps the old metadata, so only unparsable bodies fail there.
    let status = (
        "PATCH",
        "/apis/example.ward.dev/v1/namespaces/default/widgets/w/status",
        MERGE,
    );
    let all = targets.iter().chain([&status]);
    let cases = unparsable
        .iter()
        .flat_map(|b| all.clone().map(move |t| (b, t)));
    let cases = cases.chain(
        ill_typed
            .iter()
            .flat_map(|b| targets.iter().map(move |t| (b, t))),
    );
    unchanged(&s, "garbage bodies", async {
        for (body, (method, uri, ct)) in cases {
            let r = send(&s, method, uri, ct, *body).await;
            let what = format!("{method} {uri} {ct} {:?}", String::from_utf8_lossy(body));
            assert_refused(&r, &what);
        }
    })
    .await;
}
