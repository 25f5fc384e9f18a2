//! Shared fixtures of the request-level tests: raw requests through the
//! in-process tower service, the Status checks, and a snapshot of the store
//! to prove a refused request changed nothing.

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use tower::ServiceExt;
use ward_apiserver::store::StorageKey;
use ward_apiserver::{ApiServer, ServerConfig};

pub const CMS: &str = "/api/v1/namespaces/default/configmaps";
pub const CM: &str = "/api/v1/namespaces/default/configmaps/cm";
pub const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
pub const WIDGETS: &str = "/apis/example.ward.dev/v1/namespaces/default/widgets";
pub const WIDGET: &str = "/apis/example.ward.dev/v1/namespaces/default/widgets/w";
pub const JSON: &str = "application/json";
pub const YAML: &str = "application/yaml";
pub const MERGE: &str = "application/merge-patch+json";
pub const JSON_PATCH: &str = "application/json-patch+json";
pub const STRATEGIC: &str = "application/strategic-merge-patch+json";
pub const APPLY: &str = "application/apply-patch+yaml";
pub const MODIFIED: &str = "Operation cannot be fulfilled on configmaps \"cm\": the object has \
    been modified; please apply your changes to the latest version and try again";

/// Every collection a test may touch, dumped by the snapshot.
pub const COLLECTIONS: &[(&str, &str)] = &[
    ("", "namespaces"),
    ("", "configmaps"),
    ("", "pods"),
    ("apiextensions.k8s.io", "customresourcedefinitions"),
    ("example.ward.dev", "widgets"),
];

/// Request bodies: text, bytes or JSON values.
pub trait IntoBody {
    fn into_body(self) -> Bytes;
}
impl IntoBody for &str {
    fn into_body(self) -> Bytes {
        Bytes::copy_from_slice(self.as_bytes())
    }
}
impl IntoBody for &String {
    fn into_body(self) -> Bytes {
        Bytes::copy_from_slice(self.as_bytes())
    }
}
impl IntoBody for &[u8] {
    fn into_body(self) -> Bytes {
        Bytes::copy_from_slice(self)
    }
}
impl IntoBody for &Value {
    fn into_body(self) -> Bytes {
        Bytes::from(self.to_string())
    }
}

pub struct Reply {
    pub code: StatusCode,
    pub headers: http::HeaderMap,
    pub content_type: String,
    pub body: Bytes,
}

/// Send one raw request through a fresh in-process service (`ct` "" sends no content type).
pub async fn send(s: &ApiServer, method: &str, uri: &str, ct: &str, body: impl IntoBody) -> Reply {
    let mut req = Request::builder().method(method).uri(uri);
    if !ct.is_empty() {
        req = req.header("content-type", ct);
    }
    call(s, req.body(Full::new(body.into_body())).unwrap()).await
}

pub async fn call(s: &ApiServer, req: Request<Full<Bytes>>) -> Reply {
    let (parts, body) = s.service().oneshot(req).await.unwrap().into_parts();
    let content_type = parts
        .headers
        .get("content-type")
        .map(|v| v.to_str().unwrap());
    Reply {
        code: parts.status,
        headers: parts.headers.clone(),
        content_type: content_type.unwrap_or_default().into(),
        body: body.collect().await.unwrap().to_bytes(),
    }
}

/// A 4xx (or exactly `code`, when given) with a well-formed `metav1.Status` body.
pub fn assert_status(r: &Reply, code: Option<u16>, what: &str) -> Value {
    let s: Value = serde_json::from_slice(&r.body)
        .unwrap_or_else(|e| panic!("{what}: {} body is not JSON ({e}): {:?}", r.code, r.body));
    match code {
        Some(code) => assert_eq!(r.code.as_u16(), code, "{what}: {s}"),
        None => assert!(r.code.is_client_error(), "{what}: got {} {s}", r.code),
    }
    assert_eq!(r.content_type, "application/json", "{what}: {s}");
    assert_eq!(s["kind"], "Status", "{what}: {s}");
    assert_eq!(s["apiVersion"], "v1", "{what}: {s}");
    assert_eq!(s["status"], "Failure", "{what}: {s}");
    assert_eq!(s["code"], r.code.as_u16(), "{what}: {s}");
    for k in ["reason", "message"] {
        assert!(s[k].as_str().is_some_and(|m| !m.is_empty()), "{what}: {s}");
    }
    s
}

/// Whether `r` is kube-apiserver's plain-text `404 page not found`, its
/// answer for a path outside the API it serves.
pub fn is_page_not_found(r: &Reply) -> bool {
    r.code == StatusCode::NOT_FOUND
        && r.content_type == "text/plain; charset=utf-8"
        && r.body == "404 page not found\n"
}

/// A refusal: a 4xx with a `metav1.Status` body ([`assert_status`]), or
/// the plain-text 404 of a path outside the API ([`is_page_not_found`]).
pub fn assert_refused(r: &Reply, what: &str) {
    if !is_page_not_found(r) {
        assert_status(r, None, what);
    }
}

/// The reason the real server gives with each code these tests expect.
pub fn reason(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        409 => "Conflict",
        413 => "RequestEntityTooLarge",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        _ => panic!("no reason known for {code}"),
    }
}

/// The store's resourceVersion and the bytes of every object it holds.
pub fn snapshot(s: &ApiServer) -> (u64, String) {
    let store = s.store();
    let rv = store.current_rv();
    let mut dump = String::new();
    for (group, plural) in COLLECTIONS {
        let key = StorageKey {
            group: (*group).into(),
            plural: (*plural).into(),
        };
        dump.push_str(&format!("== {group}/{plural}\n"));
        for o in store.list(&key, None, None, None, |_| true).items {
            dump.push_str(std::str::from_utf8(&o.raw).unwrap());
            dump.push('\n');
        }
    }
    (rv, dump)
}

/// Run `f` and assert it left the store exactly as it was.
pub async fn unchanged<T>(s: &ApiServer, what: &str, f: impl Future<Output = T>) -> T {
    let (rv, dump) = snapshot(s);
    let out = f.await;
    let (rv_after, dump_after) = snapshot(s);
    assert_eq!(rv_after, rv, "{what}: the store's resourceVersion moved");
    assert!(
        dump_after == dump,
        "{what}: the store changed:\n{dump}\n---\n{dump_after}"
    );
    out
}

/// Send a bad request: it is refused with `code` (and its reason) and a
/// Status body, and the store is unchanged. Returns the Status message.
pub async fn rejected(
    s: &ApiServer,
    method: &str,
    uri: &str,
    ct: &str,
    body: impl IntoBody,
    code: u16,
) -> String {
    let what = format!("{method} {uri} ({ct})");
    let r = unchanged(s, &what, send(s, method, uri, ct, body)).await;
    let st = assert_status(&r, Some(code), &what);
    assert_eq!(st["reason"], reason(code), "{what}: {st}");
    st["message"].as_str().unwrap().to_string()
}

pub async fn created(s: &ApiServer, uri: &str, body: &Value) {
    let r = send(s, "POST", uri, JSON, body).await;
    assert_eq!(r.code, StatusCode::CREATED, "{:?}", r.body);
}

/// A server holding configmap `default/cm`.
pub async fn server_with(config: ServerConfig) -> ApiServer {
    let s = ApiServer::start(config).await.unwrap();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cm", "labels": {"app": "demo"}}, "data": {"k": "v"}});
    created(&s, CMS, &cm).await;
    s
}

pub async fn server() -> ApiServer {
    server_with(ServerConfig::default()).await
}

/// A server holding configmap `default/cm`, the Widget CRD and widget `default/w`.
pub async fn server_with_widgets() -> ApiServer {
    let s = server().await;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.ward.dev"},
        "spec": {"group": "example.ward.dev", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}}}]}});
    created(&s, CRDS, &crd).await;
    let w = json!({"apiVersion": "example.ward.dev/v1", "kind": "Widget",
        "metadata": {"name": "w"}, "spec": {"size": 1}});
    created(&s, WIDGETS, &w).await;
    s
}

pub fn cm_named(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "b"}})
}

/// Delete namespace `ns`'s `kube-root-ca.crt` ConfigMap (every namespace
/// holds one from its creation, as on a cluster), for a test that counts
/// the ConfigMaps it wrote there.
pub async fn without_root_ca(s: &ApiServer, ns: &str) {
    let uri = format!("/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt");
    let r = send(s, "DELETE", &uri, "", "").await;
    assert_eq!(r.code, 200, "{uri}: {:?}", r.body);
}
