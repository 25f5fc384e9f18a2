//! Authentication and RBAC through kube-rs, in process, on the paused
//! clock: ServiceAccount tokens from TokenRequest authenticate their
//! account until they expire, their account or Pod is replaced, or they are
//! shown to another audience; a bad token is 401 with kube-apiserver's
//! body; RBAC decides from Roles and bindings as they change; the reviews
//! answer who and what.

use std::time::Duration;

use http::header::AUTHORIZATION;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, ServiceAccount};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, Error};
use serde_json::{Value, json};
use ward_apiserver::AuthorizationMode;
use ward_apiserver::{ApiServer, ServerConfig};

async fn rbac_server() -> ApiServer {
    ApiServer::start(ServerConfig::default().authorization_mode(AuthorizationMode::Rbac))
        .await
        .unwrap()
}

/// An in-process client whose requests carry `token`.
fn client_with_token(server: &ApiServer, token: &str) -> Client {
    let value = http::HeaderValue::from_str(&format!("Bearer {token}")).unwrap();
    let svc = tower::ServiceBuilder::new()
        .map_request(move |mut r: http::Request<kube::client::Body>| {
            r.headers_mut().insert(AUTHORIZATION, value.clone());
            r
        })
        .service(server.service());
    Client::new(svc, "default")
}

/// POST `body` to `path` as `client`; the answer as JSON.
async fn post(client: &Client, path: &str, body: Value) -> Result<Value, Error> {
    let req = http::Request::post(path)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).unwrap())
        .unwrap();
    client.request::<Value>(req).await
}

/// A token for ServiceAccount `default/name` from TokenRequest.
async fn token(client: &Client, name: &str, spec: Value) -> String {
    let path = format!("/api/v1/namespaces/default/serviceaccounts/{name}/token");
    let answer = post(client, &path, json!({"spec": spec})).await.unwrap();
    answer["status"]["token"].as_str().unwrap().to_string()
}

async fn service_account(client: &Client, name: &str) {
    let sas: Api<ServiceAccount> = Api::default_namespaced(client.clone());
    let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    sas.create(&PostParams::default(), &sa).await.unwrap();
}

fn code(e: Error) -> (u16, String) {
    match e {
        Error::Api(s) => (s.code, s.message),
        other => panic!("not an API error: {other}"),
    }
}

#[tokio::test(start_paused = true)]
async fn service_account_tokens_authenticate_until_expired_replaced_or_misdirected() {
    let server = rbac_server().await;
    let admin = server.client();
    service_account(&admin, "bot").await;
    let t = token(&admin, "bot", json!({"expirationSeconds": 600})).await;
    let bot = client_with_token(&server, &t);
    let cms: Api<ConfigMap> = Api::default_namespaced(bot.clone());
    // Authenticated, not yet authorized.
    let (status, message) = code(cms.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(status, 403);
    assert_eq!(
        message,
        r#"configmaps is forbidden: User "system:serviceaccount:default:bot" cannot list resource "configmaps" in API group "" in the namespace "default""#
    );
    // A Role and a RoleBinding: the next request is allowed.
    post(
        &admin,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
        json!({"metadata": {"name": "read"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]}),
    )
    .await
    .unwrap();
    post(
        &admin,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        json!({"metadata": {"name": "bot-reads"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read"},
            "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": "default"}]}),
    )
    .await
    .unwrap();
    cms.list(&ListParams::default()).await.unwrap();
    // Expired on the server's clock.
    tokio::time::advance(Duration::from_secs(601)).await;
    assert_eq!(
        code(cms.list(&ListParams::default()).await.unwrap_err()).0,
        401
    );

    // The ServiceAccount deleted and made again: its old token is dead.
    let t = token(&admin, "bot", json!({})).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client_with_token(&server, &t));
    cms.list(&ListParams::default()).await.unwrap();
    let sas: Api<ServiceAccount> = Api::default_namespaced(admin.clone());
    sas.delete("bot", &DeleteParams::default()).await.unwrap();
    service_account(&admin, "bot").await;
    let (status, message) = code(cms.list(&ListParams::default()).await.unwrap_err());
    assert_eq!((status, message.as_str()), (401, "Unauthorized"));

    // Bound to a Pod: dead once the Pod is gone.
    let pods: Api<Pod> = Api::default_namespaced(admin.clone());
    let pod: Pod = serde_json::from_value(
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
    )
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let t = token(
        &admin,
        "bot",
        json!({"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "p"}}),
    )
    .await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client_with_token(&server, &t));
    cms.list(&ListParams::default()).await.unwrap();
    pods.delete("p", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    assert_eq!(
        code(cms.list(&ListParams::default()).await.unwrap_err()).0,
        401
    );

    // For another audience: refused here, and TokenReview says so, and
    // for whom it is good.
    let t = token(&admin, "bot", json!({"audiences": ["vault"]})).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client_with_token(&server, &t));
    assert_eq!(
        code(cms.list(&ListParams::default()).await.unwrap_err()).0,
        401
    );
    let review = |audiences: Value| {
        let admin = admin.clone();
        let t = t.clone();
        async move {
            post(
                &admin,
                "/apis/authentication.k8s.io/v1/tokenreviews",
                json!({"spec": {"token": t, "audiences": audiences}}),
            )
            .await
            .unwrap()
        }
    };
    let no = review(json!([])).await;
    assert_eq!(no["status"]["authenticated"], Value::Null, "{no}");
    assert!(
        no["status"]["error"]
            .as_str()
            .unwrap()
            .contains("audiences"),
        "{no}"
    );
    let yes = review(json!(["vault"])).await;
    assert_eq!(yes["status"]["authenticated"], true, "{yes}");
    assert_eq!(
        yes["status"]["user"]["username"],
        "system:serviceaccount:default:bot"
    );
}

#[tokio::test(start_paused = true)]
async fn bad_tokens_are_401_and_no_token_is_anonymous() {
    let server = rbac_server().await;
    for bad in ["nope", "a.b.c", "eyJhbGciOiJub25lIn0.e30."] {
        let cms: Api<ConfigMap> = Api::default_namespaced(client_with_token(&server, bad));
        let Error::Api(s) = cms.list(&ListParams::default()).await.unwrap_err() else {
            panic!("not an API error")
        };
        assert_eq!(
            (s.code, s.reason.as_str(), s.message.as_str()),
            (401, "Unauthorized", "Unauthorized"),
            "{bad}"
        );
    }
    // The admin token, and a static token from a token file.
    let users = ward_apiserver::parse_token_file("s3cret,alice,u-1,\"dev\"\n").unwrap();
    let server = ApiServer::start(
        ServerConfig::default()
            .authorization_mode(AuthorizationMode::Rbac)
            .static_tokens(users),
    )
    .await
    .unwrap();
    let admin = client_with_token(&server, server.admin_token());
    let cms: Api<ConfigMap> = Api::default_namespaced(admin);
    cms.list(&ListParams::default()).await.unwrap();
    let alice = client_with_token(&server, "s3cret");
    let me = post(
        &alice,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        json!({}),
    )
    .await
    .unwrap();
    assert_eq!(me["status"]["userInfo"]["username"], "alice", "{me}");
    assert_eq!(
        me["status"]["userInfo"]["groups"],
        json!(["dev", "system:authenticated"])
    );
    let cms: Api<ConfigMap> = Api::default_namespaced(alice.clone());
    let (status, message) = code(cms.get("x").await.unwrap_err());
    assert_eq!(status, 403);
    assert_eq!(
        message,
        r#"configmaps "x" is forbidden: User "alice" cannot get resource "configmaps" in API group "" in the namespace "default""#
    );
}

#[tokio::test(start_paused = true)]
async fn access_reviews_answer_for_the_caller_and_for_others() {
    let server = rbac_server().await;
    let admin = server.client();
    let ssar = |client: Client, attrs: Value| async move {
        post(
            &client,
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            json!({"spec": attrs}),
        )
        .await
        .unwrap()["status"]["allowed"]
            .clone()
    };
    let get_secrets = json!({"resourceAttributes": {"verb": "get", "resource": "secrets", "namespace": "default"}});
    assert_eq!(ssar(admin.clone(), get_secrets.clone()).await, true);
    // For another user: alice may nothing until bound to view.
    let sar = |attrs: Value| {
        let admin = admin.clone();
        async move {
            let mut spec = attrs;
            spec["user"] = "alice".into();
            spec["groups"] = json!(["system:authenticated"]);
            post(
                &admin,
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                json!({"spec": spec}),
            )
            .await
            .unwrap()["status"]["allowed"]
                .clone()
        }
    };
    let list_pods =
        json!({"resourceAttributes": {"verb": "list", "resource": "pods", "namespace": "default"}});
    assert_eq!(sar(list_pods.clone()).await, false);
    post(
        &admin,
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        json!({"metadata": {"name": "alice-views"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]}),
    )
    .await
    .unwrap();
    assert_eq!(sar(list_pods).await, true);
    // view reads no Secrets; every authenticated user may ask about itself.
    assert_eq!(sar(get_secrets).await, false);
    let healthz = json!({"nonResourceAttributes": {"verb": "get", "path": "/healthz"}});
    assert_eq!(sar(healthz).await, true);
    // Neither or both attribute kinds: 422.
    let bad = post(
        &admin,
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        json!({"spec": {}}),
    )
    .await
    .unwrap_err();
    assert_eq!(code(bad).0, 422);
    // Nothing was stored: reviews are answered, not kept.
    let listed = admin
        .request_text(
            http::Request::get("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap_err();
    assert_eq!(code(listed).0, 405);
}

/// Nobody grants what they do not hold: a Role with more than its writer
/// has is 403 (kube-apiserver's wording), as is a binding to a role it
/// does not hold or a missing one, unless the writer may `escalate` or
/// `bind`; nothing is stored.
#[tokio::test(start_paused = true)]
async fn writing_roles_and_bindings_cannot_escalate() {
    let users = ward_apiserver::parse_token_file("t,alice,u-1\n").unwrap();
    let server = ApiServer::start(
        ServerConfig::default()
            .authorization_mode(AuthorizationMode::Rbac)
            .static_tokens(users),
    )
    .await
    .unwrap();
    let admin = server.client();
    let roles = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles";
    let bindings = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings";
    let role = |name: &str, verbs: Value| {
        json!({"metadata": {"name": name},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}]})
    };
    let binding = |name: &str, kind: &str, role: &str| {
        json!({"metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
            "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]})
    };
    // alice may read ConfigMaps and write Roles and RoleBindings.
    post(
        &admin,
        roles,
        json!({"metadata": {"name": "alice"}, "rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]},
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["create"]}]}),
    )
    .await
    .unwrap();
    post(&admin, bindings, binding("alice", "Role", "alice"))
        .await
        .unwrap();
    let alice = client_with_token(&server, "t");
    post(&alice, roles, role("readers", json!(["get"])))
        .await
        .unwrap();
    let (status, message) = code(
        post(&alice, roles, role("deleters", json!(["get", "delete"])))
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 403);
    assert_eq!(
        message,
        "roles.rbac.authorization.k8s.io \"deleters\" is forbidden: user \"alice\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"delete\"]}"
    );
    // Binding a role alice holds all of is fine; edit is not hers to give,
    // nor is a role that does not exist.
    post(&alice, bindings, binding("b1", "Role", "readers"))
        .await
        .unwrap();
    let (status, message) = code(
        post(&alice, bindings, binding("b2", "ClusterRole", "edit"))
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 403, "{message}");
    assert!(
        message.contains("is attempting to grant RBAC permissions not currently held"),
        "{message}"
    );
    let (status, message) = code(
        post(&alice, bindings, binding("b3", "Role", "nope"))
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 403);
    assert!(
        message.ends_with("roles.rbac.authorization.k8s.io \"nope\" not found"),
        "{message}"
    );
    // With `bind` on edit, she may.
    post(
        &admin,
        roles,
        json!({"metadata": {"name": "binder"}, "rules": [{"apiGroups": ["rbac.authorization.k8s.io"],
            "resources": ["clusterroles"], "verbs": ["bind"], "resourceNames": ["edit"]}]}),
    )
    .await
    .unwrap();
    post(&admin, bindings, binding("alice-binds", "Role", "binder"))
        .await
        .unwrap();
    post(&alice, bindings, binding("b2", "ClusterRole", "edit"))
        .await
        .unwrap();
    // What was refused was not stored.
    let list = admin
        .request::<Value>(http::Request::get(roles).body(Vec::new()).unwrap())
        .await
        .unwrap();
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["alice", "binder", "readers"]);
}

/// A kube-rs client whose kubeconfig names its user by a client
/// certificate (`ApiServer::client_kubeconfig`) is that certificate's user
/// over HTTPS: SelfSubjectReview says so, RBAC refuses it what no binding
/// grants, and a bearer token does not override the certificate (as in
/// kube-apiserver, whose x509 authenticator runs first). Real sockets:
/// not on the paused clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_names_a_kube_rs_client() {
    let server = ApiServer::start(
        ServerConfig::default()
            .listen(([127, 0, 0, 1], 0).into())
            .tls(true)
            .authorization_mode(AuthorizationMode::Rbac),
    )
    .await
    .unwrap();
    let client_of = |text: String| async move {
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&text).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        Client::try_from(config).unwrap()
    };
    let jane = client_of(
        server
            .client_kubeconfig("jane", Some("team"))
            .unwrap()
            .unwrap(),
    )
    .await;
    let me = post(
        &jane,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
    )
    .await
    .unwrap();
    assert_eq!(
        me["status"]["userInfo"],
        json!({"username": "jane", "groups": ["team", "system:authenticated"]})
    );
    let refused = Api::<ConfigMap>::namespaced(jane, "default")
        .list(&ListParams::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, Error::Api(s) if s.code == 403 && s.message.contains(r#"User "jane" cannot list"#)),
        "{refused}"
    );
    // With the admin's token beside the certificate: still jane.
    let both = server
        .client_kubeconfig("jane", Some("team"))
        .unwrap()
        .unwrap()
        + &format!("    token: {}\n", server.admin_token());
    let still = post(
        &client_of(both).await,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
    )
    .await
    .unwrap();
    assert_eq!(still["status"]["userInfo"]["username"], "jane");
    // Without TLS there is no certificate to present.
    let plain = ApiServer::start(ServerConfig::default().listen(([127, 0, 0, 1], 0).into()))
        .await
        .unwrap();
    assert!(plain.client_kubeconfig("jane", None).unwrap().is_none());
    plain.shutdown().await;
    server.shutdown().await;
}
