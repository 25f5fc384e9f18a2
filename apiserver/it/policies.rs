//! ValidatingAdmissionPolicies as the Kubernetes documentation writes
//! them: the replicas <= 5 policy of the docs refuses a Deployment with
//! kube-apiserver's status; a policy reading its limit from a ConfigMap
//! param; Warn actions as Warning headers; failurePolicy on an expression
//! that fails; a binding whose params are missing; registration errors.
//! kubectl's view is in `kubectl/admission.rs`.

use http::StatusCode;
use serde_json::{Value, json};
use ward_apiserver::ApiServer;

use crate::common::{JSON, created, send};

pub const POLICIES: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
pub const BINDINGS: &str =
    "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";
const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";

/// The docs' policy: Deployments may have at most 5 replicas.
pub fn replicas_policy(name: &str, extra: Value) -> Value {
    let mut spec = json!({
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
        "validations": [{"expression": "object.spec.replicas <= 5"}],
    });
    for (k, v) in extra.as_object().into_iter().flatten() {
        spec[k] = v.clone();
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name}, "spec": spec})
}

pub fn binding(name: &str, policy: &str, actions: &[&str], extra: Value) -> Value {
    let mut spec = json!({"policyName": policy, "validationActions": actions});
    for (k, v) in extra.as_object().into_iter().flatten() {
        spec[k] = v.clone();
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name}, "spec": spec})
}

pub fn deployment(name: &str, replicas: u32) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
}

fn body(r: &crate::common::Reply) -> Value {
    serde_json::from_slice(&r.body).unwrap()
}

#[tokio::test]
async fn the_docs_replicas_policy_refuses_a_deployment_with_kubes_status() {
    let s = ApiServer::start_in_process().await;
    created(
        &s,
        POLICIES,
        &replicas_policy("demo-policy.example.com", json!({})),
    )
    .await;
    created(
        &s,
        BINDINGS,
        &binding(
            "demo-binding-test.example.com",
            "demo-policy.example.com",
            &["Deny"],
            json!({}),
        ),
    )
    .await;
    created(&s, DEPLOYMENTS, &deployment("small", 3)).await;
    let r = send(&s, "POST", DEPLOYMENTS, JSON, &deployment("nginx", 6)).await;
    assert_eq!(r.code, StatusCode::UNPROCESSABLE_ENTITY);
    let message = "ValidatingAdmissionPolicy 'demo-policy.example.com' with binding 'demo-binding-test.example.com' denied request: failed expression: object.spec.replicas <= 5";
    assert_eq!(
        body(&r),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("deployments.apps \"nginx\" is forbidden: {message}"),
            "reason": "Invalid", "code": 422,
            "details": {"name": "nginx", "group": "apps", "kind": "deployments",
                "causes": [{"message": message}]}})
    );
    let r = send(&s, "GET", &format!("{DEPLOYMENTS}/nginx"), JSON, "").await;
    assert_eq!(r.code, StatusCode::NOT_FOUND, "nothing stored");
    // An update is checked too.
    let r = send(
        &s,
        "PATCH",
        &format!("{DEPLOYMENTS}/small"),
        "application/merge-patch+json",
        &json!({"spec": {"replicas": 9}}),
    )
    .await;
    assert_eq!(r.code, StatusCode::UNPROCESSABLE_ENTITY, "{:?}", r.body);
    // Unbound, the policy does nothing.
    let r = send(
        &s,
        "DELETE",
        &format!("{BINDINGS}/demo-binding-test.example.com"),
        JSON,
        "",
    )
    .await;
    assert_eq!(r.code, StatusCode::OK);
    created(&s, DEPLOYMENTS, &deployment("nginx", 6)).await;
}

/// A limit from a ConfigMap param, a message expression, a reason; a Warn
/// binding's warning; a binding limited to labelled namespaces.
#[tokio::test]
async fn params_messages_warnings_and_namespace_selectors() {
    let s = ApiServer::start_in_process().await;
    created(
        &s,
        "/api/v1/namespaces/default/configmaps",
        &json!({"metadata": {"name": "limits"}, "data": {"max": "2"}}),
    )
    .await;
    created(
        &s,
        POLICIES,
        &replicas_policy(
            "limit.example.com",
            json!({
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "variables": [{"name": "max", "expression": "int(params.data.max)"}],
                "validations": [{"expression": "object.spec.replicas <= variables.max",
                    "messageExpression": "'replicas must be no greater than ' + string(variables.max)",
                    "reason": "Forbidden"}],
            }),
        ),
    )
    .await;
    created(
        &s,
        BINDINGS,
        &binding(
            "limit-binding",
            "limit.example.com",
            &["Deny"],
            json!({"paramRef": {"name": "limits", "parameterNotFoundAction": "Deny"}}),
        ),
    )
    .await;
    let r = send(&s, "POST", DEPLOYMENTS, JSON, &deployment("three", 3)).await;
    assert_eq!(r.code, StatusCode::FORBIDDEN, "{:?}", r.body);
    assert_eq!(
        body(&r)["message"],
        "deployments.apps \"three\" is forbidden: ValidatingAdmissionPolicy 'limit.example.com' with binding 'limit-binding' denied request: replicas must be no greater than 2"
    );
    created(&s, DEPLOYMENTS, &deployment("two", 2)).await;

    // The param gone: Deny says so.
    let r = send(
        &s,
        "DELETE",
        "/api/v1/namespaces/default/configmaps/limits",
        JSON,
        "",
    )
    .await;
    assert_eq!(r.code, StatusCode::OK);
    let r = send(&s, "POST", DEPLOYMENTS, JSON, &deployment("one", 1)).await;
    assert_eq!(r.code, StatusCode::UNPROCESSABLE_ENTITY, "{:?}", r.body);
    assert_eq!(
        body(&r)["details"]["causes"][0]["message"],
        "ValidatingAdmissionPolicy 'limit.example.com' with binding 'limit-binding' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
    );

    // Warn, only in namespaces labelled environment=test.
    created(
        &s,
        POLICIES,
        &replicas_policy("demo-policy.example.com", json!({})),
    )
    .await;
    created(
        &s,
        BINDINGS,
        &binding(
            "warn-test",
            "demo-policy.example.com",
            &["Warn"],
            json!({"matchResources": {"namespaceSelector": {"matchLabels": {"environment": "test"}}}}),
        ),
    )
    .await;
    created(
        &s,
        "/api/v1/namespaces",
        &json!({"metadata": {"name": "test", "labels": {"environment": "test"}}}),
    )
    .await;
    let r = send(&s, "DELETE", &format!("{BINDINGS}/limit-binding"), JSON, "").await;
    assert_eq!(r.code, StatusCode::OK);
    let r = send(
        &s,
        "POST",
        "/apis/apps/v1/namespaces/test/deployments",
        JSON,
        &deployment("big", 7),
    )
    .await;
    assert_eq!(r.code, StatusCode::CREATED);
    let warnings: Vec<&str> = r
        .headers
        .get_all(http::header::WARNING)
        .iter()
        .map(|h| h.to_str().unwrap())
        .collect();
    assert_eq!(
        warnings,
        [
            "299 - \"Validation failed for ValidatingAdmissionPolicy 'demo-policy.example.com' with binding 'warn-test': failed expression: object.spec.replicas <= 5\""
        ]
    );
    let r = send(&s, "POST", DEPLOYMENTS, JSON, &deployment("big", 7)).await;
    assert_eq!(r.code, StatusCode::CREATED);
    assert!(
        r.headers.get(http::header::WARNING).is_none(),
        "default is not labelled"
    );
}

/// An expression that fails at run time: Fail refuses with kube's
/// message, Ignore lets the write through.
#[tokio::test]
async fn failure_policy_decides_an_expression_that_fails() {
    let s = ApiServer::start_in_process().await;
    for (policy, failure) in [
        ("fail.example.com", "Fail"),
        ("ignore.example.com", "Ignore"),
    ] {
        created(
            &s,
            POLICIES,
            &replicas_policy(
                policy,
                json!({"failurePolicy": failure,
                    "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                        "operations": ["CREATE"], "resources": ["configmaps"]}]},
                    "validations": [{"expression": "object.data.missing == 'x'"}]}),
            ),
        )
        .await;
    }
    created(
        &s,
        BINDINGS,
        &binding("ignore-b", "ignore.example.com", &["Deny"], json!({})),
    )
    .await;
    let cm = json!({"metadata": {"name": "a"}, "data": {"k": "v"}});
    created(&s, "/api/v1/namespaces/default/configmaps", &cm).await;
    created(
        &s,
        BINDINGS,
        &binding("fail-b", "fail.example.com", &["Deny"], json!({})),
    )
    .await;
    let cm = json!({"metadata": {"name": "b"}, "data": {"k": "v"}});
    let r = send(
        &s,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        JSON,
        &cm,
    )
    .await;
    assert_eq!(r.code, StatusCode::UNPROCESSABLE_ENTITY, "{:?}", r.body);
    let m = body(&r)["message"].as_str().unwrap().to_string();
    assert!(
        m.starts_with("configmaps \"b\" is forbidden: ValidatingAdmissionPolicy 'fail.example.com' with binding 'fail-b' denied request: expression 'object.data.missing == 'x'' resulted in error: "),
        "{m}"
    );
}

/// Registration refuses what kube-apiserver refuses, in its words; nothing
/// is stored.
#[tokio::test]
async fn registration_refuses_bad_policies_and_bindings() {
    let s = ApiServer::start_in_process().await;
    let bad = replicas_policy(
        "bad.example.com",
        json!({"validations": [{"expression": "object.spec.replicas <="}]}),
    );
    let r = send(&s, "POST", POLICIES, JSON, &bad).await;
    assert_eq!(r.code, StatusCode::UNPROCESSABLE_ENTITY);
    let m = body(&r)["message"].as_str().unwrap().to_string();
    assert!(
        m.starts_with("ValidatingAdmissionPolicy.admissionregistration.k8s.io \"bad.example.com\" is invalid: spec.validations[0].expression: Invalid value: \"object.spec.replicas <=\": compilation failed: ERROR: <input>:1:"),
        "{m}"
    );
    let r = send(
        &s,
        "POST",
        BINDINGS,
        JSON,
        &binding("b", "p", &["Deny", "Warn"], json!({})),
    )
    .await;
    assert_eq!(r.code, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        body(&r)["message"]
            .as_str()
            .unwrap()
            .contains("must not contain both Deny and Warn"),
        "{:?}",
        r.body
    );
    let r = send(&s, "GET", POLICIES, JSON, "").await;
    assert_eq!(body(&r)["items"], json!([]));
}
