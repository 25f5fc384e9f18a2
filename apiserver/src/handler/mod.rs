//! The one request handler behind both transports (in-process tower
//! `Service` and HTTP): routing, body limits, and the verbs get, list,
//! watch, create, update, patch, delete and deletecollection.

mod act;
mod delete;
mod params;
mod read;
mod scale;
mod write;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::Value;

use crate::resources::{Registry, ResourceInfo};
use crate::status::ApiError;
use crate::store::{Store, StoredObject};
use crate::strategy::Subresource;
use crate::{discovery, openapi, table};

pub use crate::faults::ClientId;

/// Handler settings.
#[derive(Debug, Clone)]
pub struct HandlerConfig {
    /// Largest request body accepted (413 beyond).
    pub max_body_bytes: usize,
    /// How often watches that allow bookmarks get one.
    pub bookmark_interval: Duration,
    /// `host:port` advertised by `/api` (empty when there is no listener).
    pub server_address: String,
    /// Serve `shardSelector` on lists and watches (KEP-5866's feature gate
    /// `ShardedListAndWatch`); off, the option is ignored.
    pub sharded_list_and_watch: bool,
}

impl Default for HandlerConfig {
    fn default() -> Self {
        HandlerConfig {
            max_body_bytes: 3 * 1024 * 1024,
            bookmark_interval: Duration::from_secs(15),
            server_address: String::new(),
            sharded_list_and_watch: false,
        }
    }
}

/// Everything a request needs: the store, the served kinds, settings.
#[derive(Debug)]
pub struct State {
    /// The object store.
    pub store: Arc<Store>,
    /// The served kinds.
    pub registry: Arc<Registry>,
    /// Settings.
    pub config: HandlerConfig,
    /// Flips to true when the server stops: open watches end.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// Fault settings: write faults and per-client views apply to requests.
    pub faults: crate::faults::Faults,
    /// State of the generateName suffix generator (seeded, deterministic).
    names: Mutex<crate::faults::Rng>,
}

impl State {
    /// Build the handler state.
    #[must_use]
    pub fn new(
        store: Arc<Store>,
        registry: Arc<Registry>,
        config: HandlerConfig,
        shutdown: tokio::sync::watch::Receiver<bool>,
        faults: crate::faults::Faults,
        seed: u64,
    ) -> Self {
        State {
            store,
            registry,
            config,
            shutdown,
            faults,
            names: Mutex::new(crate::faults::Rng::new(seed)),
        }
    }

    fn random_suffix(&self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut rng = self.names.lock().unwrap_or_else(|e| e.into_inner());
        (0..5)
            .map(|_| ALPHABET[(rng.next_u64() % ALPHABET.len() as u64) as usize] as char)
            .collect()
    }
}

type Resp = Response<Body>;

fn json_response(code: StatusCode, body: &Value) -> Resp {
    bytes_response(code, Bytes::from(body.to_string()))
}

/// A list's JSON: its `kind`, `apiVersion` and `metadata`, then `items`,
/// each written by `item` (the stored bytes, or a rendering of them).
pub(crate) fn list_json(
    kind: &str,
    api_version: &str,
    meta: &Value,
    items: &[Arc<StoredObject>],
    mut item: impl FnMut(&mut Vec<u8>, &StoredObject),
) -> Bytes {
    let mut out = Vec::with_capacity(128 + items.iter().map(|o| o.raw.len() + 1).sum::<usize>());
    out.extend_from_slice(
        format!(
            "{{\"kind\":{},\"apiVersion\":{},\"metadata\":{meta},\"items\":[",
            Value::from(kind),
            Value::from(api_version),
        )
        .as_bytes(),
    );
    for (i, o) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        item(&mut out, o);
    }
    out.extend_from_slice(b"]}");
    Bytes::from(out)
}

fn bytes_response(code: StatusCode, body: Bytes) -> Resp {
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .expect("static response parts are valid")
}

/// The response for an error: its status code and a `metav1.Status` body.
#[must_use]
pub fn error_response(e: &ApiError) -> Resp {
    let code = StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = json_response(code, &e.to_status());
    if let Some(secs) = e.retry_after_seconds() {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from(secs));
    }
    resp
}

/// Handle one request.
pub async fn handle<B>(state: Arc<State>, client: ClientId, req: Request<B>) -> Resp
where
    B: http_body::Body<Data = Bytes> + Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (parts, body) = req.into_parts();
    if parts.uri.path().starts_with("/ward/")
        && parts
            .extensions
            .get::<PeerAddr>()
            .is_some_and(|p| !p.0.ip().is_loopback())
    {
        return error_response(&ApiError::forbidden(
            "the fault admin endpoint answers loopback clients only",
        ));
    }
    let limit = state.config.max_body_bytes;
    if let Some(len) = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        && len > limit
    {
        return error_response(&ApiError::too_large(limit));
    }
    let body = match http_body_util::Limited::new(body, limit).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                return error_response(&ApiError::too_large(limit));
            }
            return error_response(&ApiError::bad_request(format!("reading request body: {e}")));
        }
    };
    let span =
        tracing::debug_span!("request", client, method = %parts.method, path = %parts.uri.path());
    let _enter = span.enter();
    // Routed on the decoded path, as Go's server hands kube-apiserver
    // `URL.Path` (so an encoded `/` separates segments there too).
    let Ok(path) = percent_encoding::percent_decode_str(parts.uri.path()).decode_utf8() else {
        return error_response(&ApiError::no_route(parts.uri.path()));
    };
    let raw_query = parts.extensions.get::<RawQuery>().map(|q| q.0.as_str());
    let query = params::Query::parse(raw_query.or(parts.uri.query()));
    // Split once: write faults and routing read the same parts.
    let resource_path = ResourcePath::parse(&path);
    // Negotiated once, before anything acts: a client that takes only
    // protobuf cannot be answered for a custom resource, so it is refused
    // before a write happens, as kube-apiserver negotiates first.
    let wants = parts
        .headers
        .get(header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .map_or(crate::proto::Wants::Json, crate::proto::wants);
    if wants == (crate::proto::Wants::Protobuf { or_json: false })
        && let Some(rp) = resource_path
        && state
            .registry
            .get(rp.group, rp.version, rp.plural)
            .is_some_and(|info| !info.builtin)
    {
        return error_response(&ApiError::not_acceptable(
            "only the following media types are accepted: application/json, application/yaml (custom resources have no protobuf form)",
        ));
    }
    if let Some(e) = write_fault(&state, client, &parts.method, resource_path).await {
        return error_response(&e);
    }
    let req = Req {
        state: &state,
        client,
        method: &parts.method,
        headers: &parts.headers,
        query,
        body,
    };
    let resp = match route(&req, &path, resource_path) {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(code = e.code, reason = e.reason, message = %e.message, "request failed");
            error_response(&e)
        }
    };
    drop(_enter);
    match wants {
        crate::proto::Wants::Protobuf { or_json } => answer_as_asked(or_json, resp).await,
        crate::proto::Wants::Json => resp,
    }
}

/// Marks a response whose body is a stream (a watch): never re-encoded.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Streamed;

/// For a client that prefers protobuf: a JSON answer re-encoded as
/// protobuf when its kind has a protobuf form; kept as JSON when the client also takes JSON
/// (a custom resource, a Table), 406 when it takes protobuf only. Watches
/// stay JSON (a protobuf watch stream is not served).
async fn answer_as_asked(or_json: bool, resp: Resp) -> Resp {
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|ct| ct == "application/json");
    if !is_json || resp.extensions().get::<Streamed>().is_some() {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let Ok(bytes) = body.collect().await.map(|b| b.to_bytes()) else {
        return error_response(&ApiError::internal("reading a response body"));
    };
    let encoded = serde_json::from_slice::<Value>(&bytes)
        .map_err(|e| crate::proto::ProtoError::Type(e.to_string()))
        .and_then(|v| crate::proto::encode_object(&v));
    match encoded {
        Ok(pb) => {
            parts.headers.insert(
                header::CONTENT_TYPE,
                http::HeaderValue::from_static(crate::proto::MEDIA_TYPE),
            );
            Response::from_parts(parts, Body::from(pb))
        }
        Err(_) if or_json => Response::from_parts(parts, Body::from(bytes)),
        Err(e) => error_response(&ApiError::not_acceptable(format!(
            "only the following media types are accepted: application/json, application/yaml ({e})"
        ))),
    }
}

/// The remote address of an HTTP request (absent in-process).
#[derive(Debug, Clone, Copy)]
pub struct PeerAddr(pub std::net::SocketAddr);

/// The query of a request whose target was too long for a `Uri` (the
/// listener moves it here); it replaces the URI's own query.
#[derive(Debug, Clone)]
pub struct RawQuery(pub String);

/// `/openapi/v2`: the Swagger 2.0 document, as gnostic protobuf when the
/// client asks for it (kubectl 1.27 and 1.28 do), else JSON.
fn openapi_v2(req: &Req<'_>, reg: &crate::resources::Registry) -> Result<Resp, ApiError> {
    req.only_get()?;
    let doc = openapi::v2(reg);
    if !crate::proto::openapi_v2::wanted(req.header(header::ACCEPT)) {
        return Ok(json_response(StatusCode::OK, &doc));
    }
    let body = crate::proto::openapi_v2::encode(&doc)
        .map_err(|e| ApiError::internal(format!("encoding /openapi/v2: {e}")))?;
    Ok(Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, crate::proto::openapi_v2::CONTENT_TYPE)
        .header(header::VARY, "Accept")
        .body(Body::from(body))
        .expect("static response parts are valid"))
}

/// `/ward/v1/faults`: GET shows the fault configuration, PUT replaces it,
/// DELETE clears it. The body is [`crate::faults::FaultConfig`] as JSON.
fn faults_admin(req: &Req<'_>) -> Result<Resp, ApiError> {
    let faults = &req.state.faults;
    match *req.method {
        Method::GET => {}
        Method::PUT => {
            let config: crate::faults::FaultConfig = serde_json::from_slice(&req.body)
                .map_err(|e| ApiError::bad_request(format!("invalid fault configuration: {e}")))?;
            faults.set_config(config).map_err(|e| {
                ApiError::unprocessable(format!("invalid fault configuration: {e}"))
            })?;
        }
        Method::DELETE => {
            faults.clear();
        }
        ref m => return Err(ApiError::method_not_allowed(m.as_str())),
    }
    let body =
        serde_json::to_value(faults.config()).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(json_response(StatusCode::OK, &body))
}

/// Apply the write fault that matches this request: wait out its latency,
/// then an error to answer instead (or, for a latency action, none).
async fn write_fault(
    state: &State,
    client: ClientId,
    method: &Method,
    path: Option<ResourcePath<'_>>,
) -> Option<ApiError> {
    use crate::faults::{Verb, WriteAction};
    let verb = match *method {
        Method::POST => Verb::Create,
        Method::PUT => Verb::Update,
        Method::PATCH => Verb::Patch,
        Method::DELETE => Verb::Delete,
        _ => return None,
    };
    let p = path?;
    let (plural, name) = (p.plural, p.name.unwrap_or_default());
    let fired = state.faults.write_fault(verb, p.group, plural, client)?;
    if let Some(d) = fired.latency {
        tokio::time::sleep(state.faults.draw(d)).await;
    }
    match fired.action {
        WriteAction::Conflict => Some(ApiError::conflict_modified("", plural, name)),
        WriteAction::TooManyRequests => Some(ApiError::too_many_requests()),
        WriteAction::InternalError => Some(ApiError::internal("injected fault: internal error")),
        WriteAction::Latency(d) => {
            tokio::time::sleep(state.faults.draw(d)).await;
            None
        }
    }
}

/// The parts of a resource path (`/api/{v}/...` or `/apis/{g}/{v}/...`),
/// before any lookup: what routing and write faults both read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ResourcePath<'a> {
    group: &'a str,
    version: &'a str,
    namespace: Option<&'a str>,
    plural: &'a str,
    name: Option<&'a str>,
    sub: Option<&'a str>,
}

impl<'a> ResourcePath<'a> {
    /// Split a decoded path; None when it is not a resource path.
    fn parse(path: &'a str) -> Option<Self> {
        let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let (group, version, rest) = match segs.as_slice() {
            ["api", v, rest @ ..] => ("", *v, rest),
            ["apis", g, v, rest @ ..] => (*g, *v, rest),
            _ => return None,
        };
        let (namespace, rest) = match rest {
            // A namespace's own subresources.
            ["namespaces", _, "status" | "finalize"] => (None, rest),
            ["namespaces", ns, tail @ ..] if !tail.is_empty() => (Some(*ns), tail),
            _ => (None, rest),
        };
        let (plural, name, sub) = match rest {
            [p] => (*p, None, None),
            [p, n] => (*p, Some(*n), None),
            [p, n, s] => (*p, Some(*n), Some(*s)),
            _ => return None,
        };
        Some(ResourcePath {
            group,
            version,
            namespace,
            plural,
            name,
            sub,
        })
    }
}

/// The resourceVersion a client's read is served at when its view is
/// frozen: reads that name a resourceVersion (informer lists, `rv=0`) are
/// stale, quorum reads (none named) only when the view says so.
fn stale_read_rv(req: &Req<'_>, names_rv: bool) -> Option<u64> {
    let view = req.state.faults.view(req.client);
    let frozen = view.frozen_at?;
    (names_rv || view.stale_quorum_reads).then_some(frozen)
}

struct Req<'a> {
    state: &'a Arc<State>,
    client: ClientId,
    method: &'a Method,
    headers: &'a HeaderMap,
    query: params::Query,
    body: Bytes,
}

impl Req<'_> {
    fn header(&self, h: header::HeaderName) -> &str {
        self.headers
            .get(h)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    fn only_get(&self) -> Result<(), ApiError> {
        if self.method == Method::GET {
            Ok(())
        } else {
            Err(ApiError::method_not_allowed(self.method.as_str()))
        }
    }

    /// The manager a write is recorded under: `fieldManager`, else the
    /// user agent's first segment (as the real server defaults it).
    fn field_manager(&self, opts: &params::WriteOptions) -> String {
        if let Some(m) = &opts.field_manager {
            return m.clone();
        }
        let ua = self.header(header::USER_AGENT);
        let m: String = ua
            .split('/')
            .next()
            .unwrap_or("")
            .chars()
            .take(128)
            .collect();
        if m.is_empty() { "unknown".into() } else { m }
    }
}

/// A request aimed at a served resource.
struct Target {
    info: Arc<ResourceInfo>,
    namespace: Option<String>,
    name: Option<String>,
    sub: Subresource,
}

fn route(
    req: &Req<'_>,
    path: &str,
    resource_path: Option<ResourcePath<'_>>,
) -> Result<Resp, ApiError> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let st = req.state;
    let reg = &st.registry;
    // A path nobody serves is 404 whatever the method; a served one is GET only.
    let found = |v: Option<Value>| {
        let v = v.ok_or_else(|| ApiError::no_route(path))?;
        req.only_get()?;
        Ok(json_response(StatusCode::OK, &v))
    };
    match segs.as_slice() {
        ["version"] => {
            req.only_get()?;
            Ok(json_response(StatusCode::OK, &discovery::version()))
        }
        ["healthz" | "livez" | "readyz"] => Ok(Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "text/plain")
            .body(Body::from("ok"))
            .expect("static response")),
        ["api" | "apis"] if discovery::wants_aggregated(req.header(header::ACCEPT)) => {
            req.only_get()?;
            let doc = if segs[0] == "api" {
                discovery::aggregated_core(reg)
            } else {
                discovery::aggregated_groups(reg)
            };
            Ok(Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, discovery::AGGREGATED_V2)
                .header(header::VARY, "Accept")
                .body(Body::from(doc.to_string()))
                .expect("static response parts are valid"))
        }
        ["api"] => found(Some(discovery::core_versions(&st.config.server_address))),
        ["apis"] => found(Some(discovery::group_list(reg))),
        ["api", v] => found(discovery::resource_list(reg, "", v)),
        ["apis", g] => found(discovery::group(reg, g)),
        ["apis", g, v] => found(discovery::resource_list(reg, g, v)),
        ["openapi", "v2"] => openapi_v2(req, reg),
        ["openapi", "v3"] => found(Some(openapi::index(reg))),
        ["openapi", "v3", "api", v] => found(openapi::document(reg, "", v)),
        ["openapi", "v3", "apis", g, v] => found(openapi::document(reg, g, v)),
        ["ward", "v1", "faults"] => faults_admin(req),
        ["api", ..] | ["apis", _, _, ..] => {
            let p = resource_path.ok_or_else(|| ApiError::no_route(path))?;
            resource(req, path, p)
        }
        _ => Err(ApiError::no_route(path)),
    }
}

/// What a request asks of a served resource, decided from its method and
/// the shape of its path before any parameter is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// GET of one object (or its status).
    Get,
    /// GET of a collection: a list, or a watch when `watch` is set.
    List,
    /// POST to a namespace's (or a cluster-scoped kind's) collection.
    Create,
    /// PUT of one object (or its status).
    Update,
    /// PATCH of one object (or its status).
    Patch,
    /// DELETE of one object.
    Delete,
    /// DELETE of a namespace's (or a cluster-scoped kind's) collection.
    DeleteCollection,
}

impl Action {
    /// The discovery verb that must be served for this action (`list` also
    /// covers `watch`).
    fn verb(self) -> &'static str {
        match self {
            Action::Get => "get",
            Action::List => "list",
            Action::Create => "create",
            Action::Update => "update",
            Action::Patch => "patch",
            Action::Delete => "delete",
            Action::DeleteCollection => "deletecollection",
        }
    }
}

/// The action a method asks for on a path of this shape, or 405: the
/// routes Kubernetes registers for a resource are
/// - `/<plural>` of a namespaced kind (all namespaces): list and watch only;
/// - `/namespaces/<ns>/<plural>` (or `/<plural>` of a cluster-scoped kind):
///   list, watch, create, deletecollection;
/// - `.../<plural>/<name>`: get, update, patch, delete;
/// - `.../<plural>/<name>/status`: get, update, patch.
fn action(method: &Method, t: &Target) -> Result<Action, ApiError> {
    let all_namespaces = t.info.namespaced && t.namespace.is_none();
    let action = match (method, t.name.is_some(), t.sub) {
        (&Method::GET, false, _) => Some(Action::List),
        (&Method::POST, false, _) if !all_namespaces => Some(Action::Create),
        (&Method::DELETE, false, _) if !all_namespaces => Some(Action::DeleteCollection),
        (&Method::GET, true, _) => Some(Action::Get),
        (&Method::PUT, true, _) => Some(Action::Update),
        (&Method::PATCH, true, _) => Some(Action::Patch),
        (&Method::DELETE, true, Subresource::Main) => Some(Action::Delete),
        _ => None,
    };
    action
        .filter(|a| t.info.verbs().contains(&a.verb()))
        .ok_or_else(|| ApiError::method_not_allowed(method.as_str()))
}

fn resource(req: &Req<'_>, path: &str, p: ResourcePath<'_>) -> Result<Resp, ApiError> {
    let ResourcePath {
        namespace, name, ..
    } = p;
    let info = req
        .state
        .registry
        .get(p.group, p.version, p.plural)
        .ok_or_else(|| ApiError::no_route(path))?;
    if namespace.is_some() && !info.namespaced {
        return Err(ApiError::no_route(path));
    }
    let sub = match p.sub {
        None => Subresource::Main,
        Some(sub @ ("log" | "exec" | "attach" | "portforward" | "proxy"))
            if info.group.is_empty() && info.plural == "pods" =>
        {
            let (Some(ns), Some(name)) = (namespace, name) else {
                return Err(ApiError::no_route(path));
            };
            return Err(needs_kubelet(req, &info, ns, name, sub));
        }
        Some(sub) if !info.subresources().iter().any(|s| s.name == sub) => {
            return Err(ApiError::no_route(path));
        }
        Some(sub) => match Subresource::from_name(sub) {
            Some(object_part) => object_part,
            // The rest act (POST): eviction, binding, token.
            None => {
                let (Some(ns), Some(name)) = (namespace, name) else {
                    return Err(ApiError::no_route(path));
                };
                check_path_segment_name(name)?;
                return act::serve(req, &info, ns, name, sub);
            }
        },
    };
    if info.namespaced && namespace.is_none() && name.is_some() {
        return Err(ApiError::no_route(path));
    }
    let t = Target {
        info,
        namespace: namespace.map(String::from),
        name: name.map(String::from),
        sub,
    };
    let action = action(req.method, &t)?;
    if let Some(name) = &t.name {
        check_path_segment_name(name)?;
    }
    if t.sub == Subresource::Scale {
        return scale::serve(req, &t, action);
    }
    // Every option is decoded and validated before the store is touched.
    let q = &req.query;
    match action {
        Action::Get => read::get(req, &t, &params::GetOptions::from_query(q)?),
        Action::List => {
            let opts = params::ListOptions::from_query(q)?;
            if opts.watch {
                read::watch(req, &t, opts)
            } else {
                read::list(req, &t, &opts)
            }
        }
        Action::Create => write::create(req, &t),
        Action::Update => write::update(req, &t),
        Action::Patch => write::patch(req, &t),
        Action::Delete => delete::delete(req, &t),
        Action::DeleteCollection => delete::delete_collection(req, &t),
    }
}

/// An object name in a path must be a usable path segment (apimachinery's
/// `IsPathSegmentName`, checked by the real server's storage keys): 400.
fn check_path_segment_name(name: &str) -> Result<(), ApiError> {
    let mut msgs = Vec::new();
    match name {
        "." => msgs.push("may not be '.'"),
        ".." => msgs.push("may not be '..'"),
        _ => {}
    }
    if name.contains('/') {
        msgs.push("may not contain '/'");
    }
    if name.contains('%') {
        msgs.push("may not contain '%'");
    }
    if msgs.is_empty() {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "Name parameter invalid: {name:?}: {}",
            msgs.join(";")
        )))
    }
}

/// After every committed write: a CRD's served resources follow the store.
fn committed(req: &Req<'_>, t: &Target, obj: &StoredObject) {
    if crate::crd::is_crd(&t.info) {
        crate::crd::settle(&req.state.registry, &req.state.store, &obj.value());
    }
}

/// The answer to a pod subresource only a kubelet serves (`log`, `exec`,
/// `attach`, `portforward`, `proxy`): 404 for a missing pod, kube-apiserver's
/// 400 for a pod not yet on a node, else 503 saying there is no kubelet.
fn needs_kubelet(req: &Req<'_>, info: &ResourceInfo, ns: &str, name: &str, sub: &str) -> ApiError {
    let Some(pod) = req.state.store.get(&info.storage_key(), ns, name) else {
        return ApiError::not_found("", "pods", name);
    };
    let pod = pod.value();
    match pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
        None => ApiError::bad_request(format!("pod {name} does not have a host assigned")),
        Some(node) => ApiError::service_unavailable(format!(
            "ward-apiserver runs no kubelet: pods/{sub} of pod {name} on node {node} cannot be served (its containers do not run)"
        )),
    }
}

fn ns_of(t: &Target) -> &str {
    t.namespace.as_deref().unwrap_or("")
}

fn render(req: &Req<'_>, t: &Target, o: &StoredObject, code: StatusCode) -> Resp {
    if crate::partial::wants_partial(req.header(header::ACCEPT)) {
        return bytes_response(code, crate::partial::partial_of_one(o));
    }
    if table::wants_table(req.header(header::ACCEPT)) {
        let mut v = o.value();
        v["apiVersion"] = t.info.api_version().into();
        return json_response(code, &table::table_of_one(&t.info, &v));
    }
    bytes_response(code, o.bytes_at(&t.info.api_version()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_paths_split_one_way_for_routing_and_faults() {
        let rp = |group, version, namespace, plural, name, sub| ResourcePath {
            group,
            version,
            namespace,
            plural,
            name,
            sub,
        };
        let cases = [
            ("/api/v1/pods", Some(rp("", "v1", None, "pods", None, None))),
            (
                "/api/v1/namespaces/d/configmaps",
                Some(rp("", "v1", Some("d"), "configmaps", None, None)),
            ),
            (
                "/api/v1/namespaces/d/configmaps/c",
                Some(rp("", "v1", Some("d"), "configmaps", Some("c"), None)),
            ),
            (
                "/apis/apps/v1/namespaces/d/statefulsets/s/status",
                Some(rp(
                    "apps",
                    "v1",
                    Some("d"),
                    "statefulsets",
                    Some("s"),
                    Some("status"),
                )),
            ),
            // A namespace itself, and its own subresources.
            (
                "/api/v1/namespaces/d",
                Some(rp("", "v1", None, "namespaces", Some("d"), None)),
            ),
            (
                "/api/v1/namespaces/d/status",
                Some(rp("", "v1", None, "namespaces", Some("d"), Some("status"))),
            ),
            ("/api/v1/namespaces/d/configmaps/c/status/x", None),
            ("/version", None),
            ("/apis/apps", None),
        ];
        for (path, want) in cases {
            assert_eq!(ResourcePath::parse(path), want, "{path}");
        }
    }
}
