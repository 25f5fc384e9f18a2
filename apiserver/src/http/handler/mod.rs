//! The one request handler behind both transports (in-process tower
//! `Service` and HTTP): routing, body limits, and the verbs get, list,
//! watch, create, update, patch, delete and deletecollection.
//!
//! One direction per layer: this file routes a request to a verb
//! (`read`, `write`, `delete`, `scale`, `act`); the verbs share what
//! sits below them — the request as they see it (`request`), its query
//! (`params`) and body (`body`), and the answers (`response`, with
//! [`crate::storage::partial`], [`crate::storage::table`] and [`crate::storage::render`] below it);
//! all of it reads and writes through the store. No verb imports another
//! verb or this file.

mod access;
mod act;
mod body;
mod delete;
mod params;
mod read;
mod request;
mod response;
mod review;
mod scale;
mod state;
mod write;

use std::sync::Arc;

use axum::body::Body;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::Value;

use crate::http::discovery;
use crate::machinery::status::ApiError;
use crate::registry::kind::Subresource;
use crate::registry::resources::ResourceInfo;
use request::{Action, Req, ResourcePath, Target};
use response::{Resp, Streamed, bytes_response, json_response, page_not_found};

pub use crate::faults::ClientId;
pub use response::error_response;
pub use state::{HandlerConfig, State};

/// Marks an HTTP request that named no client (no `X-Ward-Client`): once
/// authenticated, it is its user's client ([`crate::faults::user_client`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct UnnamedClient;

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
        .map_or(
            crate::machinery::proto::Wants::Json,
            crate::machinery::proto::wants,
        );
    if wants == (crate::machinery::proto::Wants::Protobuf { or_json: false })
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
    // An object or a collection in no media type it is served in: 406
    // before anything acts, in kube-apiserver's words (a subresource such
    // as a pod's log answers text of its own).
    if let Some(rp) = resource_path
        && rp.sub.is_none_or(|s| matches!(s, "status" | "scale"))
        && let Some(accept) = parts
            .headers
            .get(header::ACCEPT)
            .and_then(|a| a.to_str().ok())
        && !crate::machinery::proto::acceptable(accept)
    {
        let builtin = state
            .registry
            .get(rp.group, rp.version, rp.plural)
            .is_none_or(|info| info.builtin);
        let mut e = ApiError::not_acceptable(format!(
            "406: Not Acceptable\n\nAvailable representations: application/json, application/yaml{}",
            if builtin {
                ", application/vnd.kubernetes.protobuf"
            } else {
                ""
            }
        ));
        e.details = Some(serde_json::json!({}));
        return error_response(&e);
    }
    let user = match access::admit(
        &state,
        &parts.extensions,
        &parts.headers,
        &parts.method,
        &path,
        resource_path,
        &query,
    ) {
        Ok(user) => user,
        Err(e) => {
            tracing::debug!(code = e.code, message = %e.message, "request refused");
            return error_response(&e);
        }
    };
    // An HTTP request naming no client is its authenticated user's.
    let client = match parts.extensions.get::<UnnamedClient>() {
        Some(UnnamedClient) if !user.groups.iter().any(|g| g == "system:unauthenticated") => {
            crate::faults::user_client(&user.name)
        }
        _ => client,
    };
    if let Some(e) = write_fault(&state, client, &parts.method, resource_path).await {
        return error_response(&e);
    }
    let writes = !matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS);
    let hooks = writes
        .then(|| state.webhooks.current(&state.store))
        .flatten();
    let req = Req {
        state: &state,
        client,
        user,
        method: &parts.method,
        headers: &parts.headers,
        query,
        body,
        admission: crate::admission::Admission::new(hooks),
    };
    let resp = loop {
        let routed = route(&req, &path, resource_path);
        // A pass that stopped for admission webhooks: call them, run it again.
        if let Some(pending) = req.admission.take_pending() {
            if let Err(e) = admit_by_webhooks(&req, pending).await {
                tracing::debug!(code = e.code, reason = %e.reason, message = %e.message, "refused by admission");
                break error_response(&e);
            }
            continue;
        }
        break match routed {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(code = e.code, reason = %e.reason, message = %e.message, "request failed");
                error_response(&e)
            }
        };
    };
    let resp = response::with_warnings(resp, &req.admission.warnings());
    let resp = converted(&state, resp).await;
    drop(_enter);
    match wants {
        crate::machinery::proto::Wants::Protobuf { or_json } => {
            answer_as_asked(or_json, resp).await
        }
        crate::machinery::proto::Wants::Json => resp,
    }
}

/// An answer of a resource whose versions a webhook converts, with the
/// objects it holds (one, or a list's items) in the version asked for:
/// they are rendered as stored, and converted here in one review.
async fn converted(state: &State, resp: Resp) -> Resp {
    let Some(response::ConvertTo(conversion, desired)) = resp.extensions().get().cloned() else {
        return resp;
    };
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|ct| ct == "application/json");
    if !resp.status().is_success() || !is_json || resp.extensions().get::<Streamed>().is_some() {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let Ok(bytes) = body.collect().await.map(|b| b.to_bytes()) else {
        return error_response(&ApiError::internal("reading a response body"));
    };
    let Ok(mut v) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    let list = v.get("items").is_some_and(Value::is_array);
    let objects: Vec<Value> = if list {
        v["items"].as_array().cloned().unwrap_or_default()
    } else if v["kind"] != "Status" {
        vec![v.clone()]
    } else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    match conversion
        .convert(objects, &desired, &state.store, &state.faults)
        .await
    {
        Ok(done) if list => v["items"] = Value::Array(done),
        Ok(mut done) => v = done.pop().unwrap_or_default(),
        Err(e) => return error_response(&e),
    }
    Response::from_parts(parts, Body::from(v.to_string()))
}

/// Calls the admission webhooks a pass stopped for, with the request's
/// user, dry-run flag and options (the query's, or a delete's body).
async fn admit_by_webhooks(
    req: &Req<'_>,
    pending: crate::admission::Pending,
) -> Result<(), ApiError> {
    let dry_run = !req.query.dry_run().is_empty();
    let delete = matches!(&pending, crate::admission::Pending::Admit(a) if a.operation == crate::admission::Operation::Delete);
    let options = if delete {
        serde_json::from_slice::<Value>(&req.body)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| serde_json::json!({}))
    } else {
        let mut o = serde_json::Map::new();
        if dry_run {
            o.insert("dryRun".into(), serde_json::json!(["All"]));
        }
        for k in ["fieldManager", "fieldValidation"] {
            if let Some(v) = req.query.first(k) {
                o.insert(k.into(), v.into());
            }
        }
        if let Some(f) = req.query.first("force") {
            o.insert("force".into(), (f == "true").into());
        }
        Value::Object(o)
    };
    let ctx = crate::admission::Context {
        store: &req.state.store,
        registry: &req.state.registry,
        faults: &req.state.faults,
        user: &req.user,
        dry_run,
        options,
    };
    match pending {
        crate::admission::Pending::Admit(ask) => req.admission.answer(ask, &ctx).await,
        crate::admission::Pending::Convert(conversion, obj, desired) => {
            req.admission
                .answer_conversion(&conversion, obj, desired, &ctx)
                .await
        }
    }
}

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
        .map_err(|e| crate::machinery::proto::ProtoError::Type(e.to_string()))
        .and_then(|v| crate::machinery::proto::encode_object(&v));
    match encoded {
        Ok(pb) => {
            parts.headers.insert(
                header::CONTENT_TYPE,
                http::HeaderValue::from_static(crate::machinery::proto::MEDIA_TYPE),
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
fn openapi_v2(req: &Req<'_>, st: &State) -> Result<Resp, ApiError> {
    req.only_get()?;
    let reg = &st.registry;
    if !crate::machinery::proto::openapi_v2::wanted(req.header(header::ACCEPT)) {
        return Ok(bytes_response(StatusCode::OK, st.openapi.v2(reg)));
    }
    let body = st
        .openapi
        .v2_protobuf(reg)
        .map_err(|e| ApiError::internal(format!("encoding /openapi/v2: {e}")))?;
    Ok(Response::builder()
        .status(StatusCode::OK)
        .header(
            header::CONTENT_TYPE,
            crate::machinery::proto::openapi_v2::CONTENT_TYPE,
        )
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
    // A cached document's JSON text, shared.
    let shared = |v: Option<Bytes>| {
        let v = v.ok_or_else(|| ApiError::no_route(path))?;
        req.only_get()?;
        Ok(bytes_response(StatusCode::OK, v))
    };
    match segs.as_slice() {
        ["version"] => {
            req.only_get()?;
            Ok(json_response(StatusCode::OK, &discovery::version()))
        }
        // Each answers as kube-apiserver's does (its `ping` check too).
        ["healthz" | "livez" | "readyz"] | ["healthz" | "livez" | "readyz", "ping"] => {
            Ok(Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
                .body(Body::from("ok"))
                .expect("static response"))
        }
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
        ["apis", g] => {
            discovery::group(reg, g).map_or_else(|| Ok(page_not_found()), |d| found(Some(d)))
        }
        ["apis", g, v] => discovery::resource_list(reg, g, v)
            .map_or_else(|| Ok(page_not_found()), |d| found(Some(d))),
        ["openapi", "v2"] => openapi_v2(req, st),
        ["openapi", "v3"] => shared(Some(st.openapi.index(reg))),
        ["openapi", "v3", "api", v] => shared(st.openapi.document(reg, "", v)),
        ["openapi", "v3", "apis", g, v] => shared(st.openapi.document(reg, g, v)),
        ["ward", "v1", "faults"] => faults_admin(req),
        ["apis", "authentication.k8s.io", "v1", "tokenreviews"] => review::token(req),
        ["apis", "authentication.k8s.io", "v1", "selfsubjectreviews"] => review::whoami(req),
        [
            "apis",
            "authorization.k8s.io",
            "v1",
            "selfsubjectaccessreviews",
        ] => review::access(req, review::Access::SelfSubject),
        ["apis", "authorization.k8s.io", "v1", "subjectaccessreviews"] => {
            review::access(req, review::Access::Subject)
        }
        [
            "apis",
            "authorization.k8s.io",
            "v1",
            "namespaces",
            ns,
            "localsubjectaccessreviews",
        ] => review::access(req, review::Access::Local(ns)),
        [
            "apis",
            "authorization.k8s.io",
            "v1",
            "selfsubjectrulesreviews",
        ] => review::rules(req),
        // Below a group version nobody serves, Go's text 404 answers (below
        // `/api`, kube's legacy handler answers a Status).
        ["apis", g, v, ..] if !discovery::serves(reg, g, v) => Ok(page_not_found()),
        ["api", ..] | ["apis", _, _, ..] => {
            let p = resource_path.ok_or_else(|| ApiError::no_route(path))?;
            resource(req, path, p)
        }
        _ => Ok(page_not_found()),
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
    // A subresource's own verbs (`namespaces/finalize`: update only).
    let verbs = match t.sub.name() {
        None => t.info.verbs(),
        Some(name) => t
            .info
            .subresources()
            .into_iter()
            .find(|s| s.name == name)
            .map_or(&[][..], |s| s.verbs),
    };
    action
        .filter(|a| verbs.contains(&a.verb()))
        .ok_or_else(|| ApiError::method_not_allowed(method.as_str()))
}

fn resource(req: &Req<'_>, path: &str, p: ResourcePath<'_>) -> Result<Resp, ApiError> {
    let info = req
        .state
        .registry
        .get(p.group, p.version, p.plural)
        .ok_or_else(|| ApiError::no_route(path))?;
    // A deprecated CRD version's warning, on every answer it serves.
    let warning = info.deprecation.clone();
    let resp = served(req, path, p, info)?;
    Ok(match warning {
        Some(w) => response::with_warnings(resp, &[w]),
        None => resp,
    })
}

fn served(
    req: &Req<'_>,
    path: &str,
    p: ResourcePath<'_>,
    info: std::sync::Arc<ResourceInfo>,
) -> Result<Resp, ApiError> {
    let ResourcePath {
        namespace, name, ..
    } = p;
    if namespace.is_some() && !info.namespaced {
        return Err(ApiError::no_route(path));
    }
    let sub = match p.sub {
        None => Subresource::Main,
        Some(sub) if info.strategy.kubelet_subresources().contains(&sub) => {
            let (Some(name), true) = (name, namespace.is_some() == info.namespaced) else {
                return Err(ApiError::no_route(path));
            };
            return Err(needs_kubelet(
                req,
                &info,
                namespace.unwrap_or_default(),
                name,
            ));
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

/// The answer to a subresource only a kubelet serves (a pod's `log`,
/// `exec`, `attach`, `portforward`, `proxy`; `nodes/proxy`), as
/// kube-apiserver answers when it cannot reach the kubelet, at once
/// (kube-client retries a 503, for minutes; not these): 404 for a missing
/// pod, 400 for a pod not yet on a node, 404 for a node that does not
/// exist, 500 for a node without an address, and 500 with the dial error
/// kube-apiserver would meet for the node's address and kubelet port
/// (ward-apiserver runs no kubelet).
fn needs_kubelet(req: &Req<'_>, info: &ResourceInfo, ns: &str, name: &str) -> ApiError {
    let Some(object) = req.state.store.get(&info.storage_key(), ns, name) else {
        return ApiError::not_found(&info.group, &info.plural, name);
    };
    let node = if info.plural == "nodes" {
        // `nodes/proxy`: the node's own kubelet.
        object.value()
    } else {
        let pod = object.value();
        let Some(node) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) else {
            return ApiError::bad_request(format!("pod {name} does not have a host assigned"));
        };
        let nodes = crate::registry::resources::StorageKey {
            group: String::new(),
            plural: "nodes".into(),
        };
        let Some(found) = req.state.store.get(&nodes, "", node) else {
            return ApiError::not_found("", "nodes", node);
        };
        found.value()
    };
    let Some(address) = kubelet_address(&node) else {
        // Go's %v of the node's addresses.
        let known: Vec<String> = (node["status"]["addresses"].as_array().into_iter().flatten())
            .map(|a| {
                format!(
                    "{{{} {}}}",
                    a["type"].as_str().unwrap_or_default(),
                    a["address"].as_str().unwrap_or_default()
                )
            })
            .collect();
        return ApiError::unknown(format!(
            "no preferred addresses found; known addresses: [{}]",
            known.join(" ")
        ));
    };
    let port = node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
        .as_u64()
        .filter(|p| *p > 0)
        .unwrap_or(10250);
    ApiError::unknown(format!(
        "error dialing backend: dial tcp {address}:{port}: connect: connection refused (ward-apiserver runs no kubelet)"
    ))
}

/// The address kube-apiserver dials a node's kubelet at: the first of its
/// addresses of the first type in kube-apiserver's default preference
/// (`--kubelet-preferred-address-types`), the `kubernetes.io/hostname`
/// label standing in for a missing Hostname address.
fn kubelet_address(node: &Value) -> Option<String> {
    let addresses = node["status"]["addresses"].as_array();
    let of_type = |t: &str| {
        addresses
            .into_iter()
            .flatten()
            .find(|a| a["type"] == t)
            .and_then(|a| a["address"].as_str())
            .filter(|a| !a.is_empty())
            .map(String::from)
    };
    let hostname = || {
        of_type("Hostname").or_else(|| {
            let label = &node["metadata"]["labels"]["kubernetes.io/hostname"];
            label.as_str().filter(|h| !h.is_empty()).map(String::from)
        })
    };
    hostname().or_else(|| {
        ["InternalDNS", "InternalIP", "ExternalDNS", "ExternalIP"]
            .into_iter()
            .find_map(of_type)
    })
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
