//! The one request handler behind both transports (in-process tower
//! `Service` and HTTP): routing, body limits, and the verbs get, list,
//! watch, create, update, patch, delete and deletecollection.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderMap, Method, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};

use crate::filter::ObjectFilter;
use crate::patch::{self, PatchError, PatchKind};
use crate::resources::{Registry, ResourceInfo};
use crate::status::ApiError;
use crate::store::{DeleteSpec, Deleted, Store, StoredObject};
use crate::strategy::{self, Subresource};
use crate::watch::{self, WatchSpec};
use crate::{discovery, openapi, table};

/// Identifies the client a request came from: one per in-process service
/// handle or HTTP connection (or the `X-Ward-Client` header). Per-client
/// fault views hang off this.
pub type ClientId = u64;

/// Handler settings.
#[derive(Debug, Clone)]
pub struct HandlerConfig {
    /// Largest request body accepted (413 beyond).
    pub max_body_bytes: usize,
    /// How often watches that allow bookmarks get one.
    pub bookmark_interval: Duration,
    /// `host:port` advertised by `/api` (empty when there is no listener).
    pub server_address: String,
}

impl Default for HandlerConfig {
    fn default() -> Self {
        HandlerConfig {
            max_body_bytes: 3 * 1024 * 1024,
            bookmark_interval: Duration::from_secs(15),
            server_address: String::new(),
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
    names: Mutex<u64>,
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
            names: Mutex::new(seed),
        }
    }

    fn random_suffix(&self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut s = self.names.lock().unwrap_or_else(|e| e.into_inner());
        (0..5)
            .map(|_| {
                // splitmix64
                *s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = *s;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                z ^= z >> 31;
                ALPHABET[(z % ALPHABET.len() as u64) as usize] as char
            })
            .collect()
    }
}

type Resp = Response<Body>;

fn json_response(code: StatusCode, body: &Value) -> Resp {
    bytes_response(code, Bytes::from(body.to_string()))
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
    json_response(code, &e.to_status())
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
    let query: HashMap<String, String> = parts
        .uri
        .query()
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default();
    if let Some(e) = write_fault(&state, client, &parts.method, parts.uri.path()).await {
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
    match route(&req, parts.uri.path()) {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(code = e.code, reason = e.reason, message = %e.message, "request failed");
            error_response(&e)
        }
    }
}

/// The remote address of an HTTP request (absent in-process).
#[derive(Debug, Clone, Copy)]
pub struct PeerAddr(pub std::net::SocketAddr);

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
        Method::DELETE => faults.clear(),
        ref m => return Err(ApiError::method_not_allowed(m.as_str())),
    }
    let body =
        serde_json::to_value(faults.config()).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(json_response(StatusCode::OK, &body))
}

/// Apply the write faults that match this request: an error to answer
/// instead, or a latency to wait out first.
async fn write_fault(
    state: &State,
    client: ClientId,
    method: &Method,
    path: &str,
) -> Option<ApiError> {
    use crate::faults::{Verb, WriteAction};
    let verb = match *method {
        Method::POST => Verb::Create,
        Method::PUT => Verb::Update,
        Method::PATCH => Verb::Patch,
        Method::DELETE => Verb::Delete,
        _ => return None,
    };
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let rest = match segs.as_slice() {
        ["api", _, rest @ ..] | ["apis", _, _, rest @ ..] => rest,
        _ => return None,
    };
    let plural = match rest {
        ["namespaces", _, p, ..] => *p,
        [p, ..] => *p,
        [] => return None,
    };
    let name = match rest {
        ["namespaces", _, _, n, ..] | [_, n, ..] => *n,
        _ => "",
    };
    match state.faults.write_fault(verb, plural, client)? {
        WriteAction::Conflict => Some(ApiError::conflict_modified("", plural, name)),
        WriteAction::TooManyRequests => Some(ApiError::too_many_requests()),
        WriteAction::InternalError => Some(ApiError::internal("injected fault: internal error")),
        WriteAction::Latency(d) => {
            tokio::time::sleep(state.faults.draw(d)).await;
            None
        }
    }
}

/// The resourceVersion a client's read is served at when its view is
/// frozen: reads that name a resourceVersion (informer lists, `rv=0`) are
/// stale, quorum reads (none named) only when the view says so.
fn stale_read_rv(req: &Req<'_>) -> Option<u64> {
    let view = req.state.faults.view(req.client);
    let frozen = view.frozen_at?;
    let names_rv = req.query.contains_key("resourceVersion");
    (names_rv || view.stale_quorum_reads).then_some(frozen)
}

struct Req<'a> {
    state: &'a Arc<State>,
    client: ClientId,
    method: &'a Method,
    headers: &'a HeaderMap,
    query: HashMap<String, String>,
    body: Bytes,
}

impl Req<'_> {
    fn q(&self, k: &str) -> Option<&str> {
        self.query
            .get(k)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }

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

    fn field_manager(&self) -> String {
        if let Some(m) = self.q("fieldManager") {
            return m.to_string();
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

fn route(req: &Req<'_>, path: &str) -> Result<Resp, ApiError> {
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
        ["api"] => found(Some(discovery::core_versions(&st.config.server_address))),
        ["apis"] => found(Some(discovery::group_list(reg))),
        ["api", v] => found(discovery::resource_list(reg, "", v)),
        ["apis", g] => found(discovery::group(reg, g)),
        ["apis", g, v] => found(discovery::resource_list(reg, g, v)),
        ["openapi", "v3"] => found(Some(openapi::index(reg))),
        ["openapi", "v3", "api", v] => found(openapi::document(reg, "", v)),
        ["openapi", "v3", "apis", g, v] => found(openapi::document(reg, g, v)),
        ["ward", "v1", "faults"] => faults_admin(req),
        ["api", v, rest @ ..] => resource(req, path, "", v, rest),
        ["apis", g, v, rest @ ..] => resource(req, path, g, v, rest),
        _ => Err(ApiError::no_route(path)),
    }
}

fn resource(
    req: &Req<'_>,
    path: &str,
    group: &str,
    version: &str,
    rest: &[&str],
) -> Result<Resp, ApiError> {
    let (namespace, rest) = match rest {
        ["namespaces", _, "status" | "finalize"] => (None, rest),
        ["namespaces", ns, tail @ ..] if !tail.is_empty() => (Some(ns.to_string()), tail),
        _ => (None, rest),
    };
    let (plural, name, sub) = match rest {
        [p] => (*p, None, None),
        [p, n] => (*p, Some(*n), None),
        [p, n, s] => (*p, Some(*n), Some(*s)),
        _ => return Err(ApiError::no_route(path)),
    };
    let info = req
        .state
        .registry
        .get(group, version, plural)
        .ok_or_else(|| ApiError::no_route(path))?;
    if namespace.is_some() && !info.namespaced {
        return Err(ApiError::no_route(path));
    }
    let sub = match sub {
        None => Subresource::Main,
        Some("status") if info.status_subresource => Subresource::Status,
        Some(_) => return Err(ApiError::no_route(path)),
    };
    if info.namespaced && namespace.is_none() && name.is_some() {
        return Err(ApiError::no_route(path));
    }
    let t = Target {
        info,
        namespace,
        name: name.map(String::from),
        sub,
    };
    match (req.method.clone(), t.name.is_some()) {
        (Method::GET, true) => get(req, &t),
        (Method::GET, false) => {
            if matches!(req.q("watch"), Some("true" | "1")) {
                watch(req, &t)
            } else {
                list(req, &t)
            }
        }
        (Method::POST, false) => create(req, &t),
        (Method::PUT, true) => update(req, &t),
        (Method::PATCH, true) => patch(req, &t),
        (Method::DELETE, true) => delete(req, &t),
        (Method::DELETE, false) => delete_collection(req, &t),
        (m, _) => Err(ApiError::method_not_allowed(m.as_str())),
    }
}

fn ns_of(t: &Target) -> &str {
    t.namespace.as_deref().unwrap_or("")
}

fn render(req: &Req<'_>, t: &Target, o: &StoredObject, code: StatusCode) -> Resp {
    if table::wants_table(req.header(header::ACCEPT)) {
        let mut v = o.value();
        v["apiVersion"] = t.info.api_version().into();
        return json_response(code, &table::table_of_one(&t.info, &v));
    }
    bytes_response(code, watch::object_bytes(&t.info, o))
}

/// A `resourceVersion` query parameter must be a number when present.
fn check_read_rv(req: &Req<'_>) -> Result<(), ApiError> {
    match req.q("resourceVersion") {
        Some(rv) if rv.parse::<u64>().is_err() => Err(ApiError::bad_request(format!(
            "invalid resource version: {rv}"
        ))),
        _ => Ok(()),
    }
}

fn get(req: &Req<'_>, t: &Target) -> Result<Resp, ApiError> {
    check_read_rv(req)?;
    let name = t.name.as_deref().unwrap_or_default();
    let key = t.info.storage_key();
    let o = match stale_read_rv(req) {
        Some(at) => req
            .state
            .store
            .list_at(at, &key, Some(ns_of(t)), None, None, |o| o.name == name)
            .map_err(|floor| {
                ApiError::expired(format!("too old resource version: {at} ({floor})"))
            })?
            .items
            .pop(),
        None => req.state.store.get(&key, ns_of(t), name),
    }
    .ok_or_else(|| ApiError::not_found(&t.info.group, &t.info.plural, name))?;
    Ok(render(req, t, &o, StatusCode::OK))
}

fn filter_of(req: &Req<'_>, t: &Target) -> Result<ObjectFilter, ApiError> {
    ObjectFilter::new(
        &t.info,
        t.namespace.clone(),
        req.q("labelSelector"),
        req.q("fieldSelector"),
    )
}

fn encode_continue(ns: &str, name: &str) -> String {
    let raw = format!("{ns}\u{0}{name}");
    raw.bytes().map(|b| format!("{b:02x}")).collect()
}

fn decode_continue(token: &str) -> Result<(String, String), ApiError> {
    let bad = || ApiError::bad_request(format!("continue key is not valid: {token}"));
    if !token.len().is_multiple_of(2) {
        return Err(bad());
    }
    let bytes = (0..token.len())
        .step_by(2)
        .map(|i| {
            token
                .get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(bad)?;
    let s = String::from_utf8(bytes).map_err(|_| bad())?;
    let (ns, name) = s.split_once('\u{0}').ok_or_else(bad)?;
    // Tokens name the last object of a page: never an empty name.
    if name.is_empty() {
        return Err(bad());
    }
    Ok((ns.to_string(), name.to_string()))
}

fn list(req: &Req<'_>, t: &Target) -> Result<Resp, ApiError> {
    check_read_rv(req)?;
    let filter = filter_of(req, t)?;
    let limit = match req.q("limit") {
        Some(l) => Some(
            l.parse::<usize>()
                .map_err(|_| ApiError::bad_request(format!("invalid limit: {l}")))?,
        ),
        None => None,
    };
    let after = req.q("continue").map(decode_continue).transpose()?;
    let page = match stale_read_rv(req) {
        Some(at) => req
            .state
            .store
            .list_at(
                at,
                &t.info.storage_key(),
                t.namespace.as_deref(),
                after.as_ref(),
                limit,
                |o| filter.matches(o),
            )
            .map_err(|floor| {
                ApiError::expired(format!("too old resource version: {at} ({floor})"))
            })?,
        None => req.state.store.list(
            &t.info.storage_key(),
            t.namespace.as_deref(),
            after.as_ref(),
            limit,
            |o| filter.matches(o),
        ),
    };
    let cont = page
        .continue_after
        .as_ref()
        .map(|(ns, n)| encode_continue(ns, n));
    if table::wants_table(req.header(header::ACCEPT)) {
        let objs: Vec<Value> = page
            .items
            .iter()
            .map(|o| {
                let mut v = o.value();
                v["apiVersion"] = t.info.api_version().into();
                v
            })
            .collect();
        return Ok(json_response(
            StatusCode::OK,
            &table::table(&t.info, &objs, &page.rv.to_string(), cont.as_deref()),
        ));
    }
    let mut meta = json!({"resourceVersion": page.rv.to_string()});
    if let Some(c) = cont {
        meta["continue"] = c.into();
    }
    let mut out =
        Vec::with_capacity(128 + page.items.iter().map(|o| o.raw.len() + 1).sum::<usize>());
    out.extend_from_slice(
        format!(
            "{{\"kind\":{},\"apiVersion\":{},\"metadata\":{},\"items\":[",
            Value::from(t.info.list_kind.as_str()),
            Value::from(t.info.api_version()),
            meta
        )
        .as_bytes(),
    );
    for (i, o) in page.items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&watch::object_bytes(&t.info, o));
    }
    out.extend_from_slice(b"]}");
    Ok(bytes_response(StatusCode::OK, Bytes::from(out)))
}

fn parse_bool(v: Option<&str>) -> bool {
    matches!(v, Some("true" | "1"))
}

/// Longest watch timeout honoured (about 100 years); longer ones are capped.
const MAX_WATCH_TIMEOUT_SECS: u64 = 100 * 366 * 24 * 3600;

fn watch(req: &Req<'_>, t: &Target) -> Result<Resp, ApiError> {
    let filter = filter_of(req, t)?;
    let from = match req.q("resourceVersion") {
        None => None,
        Some(rv) => Some(
            rv.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))?,
        ),
    };
    let timeout = match req.q("timeoutSeconds") {
        None => None,
        Some(s) => {
            let secs = s
                .parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds: {s}")))?;
            // Capped so that now + timeout cannot overflow an Instant.
            Some(Duration::from_secs(secs.min(MAX_WATCH_TIMEOUT_SECS)))
        }
    };
    let table = table::wants_table(req.header(header::ACCEPT));
    let spec = WatchSpec {
        info: t.info.clone(),
        filter,
        from,
        bookmarks: parse_bool(req.q("allowWatchBookmarks")),
        send_initial_events: parse_bool(req.q("sendInitialEvents")),
        timeout,
        bookmark_interval: req.state.config.bookmark_interval,
        render: table.then_some(table::table_of_one as fn(&ResourceInfo, &Value) -> Value),
        view: Some((req.state.faults.clone(), req.client)),
    };
    let rx = watch::start(&req.state.store, spec, req.state.shutdown.clone());
    let stream =
        tokio_stream::wrappers::ReceiverStream::new(rx).map(Ok::<_, std::convert::Infallible>);
    Ok(Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(stream))
        .expect("static response parts are valid"))
}

/// Parse a request body as a JSON (or, for `application/yaml`, YAML) object.
fn parse_body(req: &Req<'_>) -> Result<Value, ApiError> {
    let ct = req.header(header::CONTENT_TYPE);
    let essence = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let v: Value = match essence.as_str() {
        "" | "application/json" | "*/*" => serde_json::from_slice(&req.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding JSON body: {e}")))?,
        "application/yaml" => {
            let s = std::str::from_utf8(&req.body)
                .map_err(|_| ApiError::bad_request("error decoding YAML body: not UTF-8"))?;
            serde_saphyr::from_str(s)
                .map_err(|e| ApiError::bad_request(format!("error decoding YAML body: {e}")))?
        }
        other => {
            return Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got {other})"
            )));
        }
    };
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request must be a JSON object",
        ));
    }
    Ok(v)
}

/// Check apiVersion/kind against the URL (filling them in when absent),
/// and metadata's shape, name and namespace.
fn check_identity(t: &Target, obj: &mut Value, url_name: Option<&str>) -> Result<(), ApiError> {
    let want_av = t.info.api_version();
    match obj.get("apiVersion") {
        None | Some(Value::Null) => obj["apiVersion"] = want_av.clone().into(),
        Some(Value::String(av)) if *av == want_av => {}
        Some(av) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({}) does not match the expected API version ({want_av})",
                av.as_str().unwrap_or("<not a string>")
            )));
        }
    }
    match obj.get("kind") {
        None | Some(Value::Null) => obj["kind"] = t.info.kind.clone().into(),
        Some(Value::String(k)) if *k == t.info.kind => {}
        Some(k) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({}) does not match the expected kind ({})",
                k.as_str().unwrap_or("<not a string>"),
                t.info.kind
            )));
        }
    }
    match obj.get("metadata") {
        None | Some(Value::Null) => obj["metadata"] = json!({}),
        Some(Value::Object(_)) => {}
        Some(_) => return Err(ApiError::bad_request("metadata must be an object")),
    }
    for k in [
        "name",
        "namespace",
        "generateName",
        "resourceVersion",
        "uid",
    ] {
        if let Some(v) = obj["metadata"].get(k)
            && !v.is_string()
            && !v.is_null()
        {
            return Err(ApiError::bad_request(format!(
                "metadata.{k} must be a string"
            )));
        }
    }
    let meta = obj["metadata"].as_object_mut().expect("checked above");
    if let Some(url_name) = url_name {
        match meta.get("name").and_then(Value::as_str) {
            Some(n) if n != url_name => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({url_name})"
                )));
            }
            Some(_) => {}
            None => {
                meta.insert("name".into(), url_name.into());
            }
        }
    }
    if t.info.namespaced {
        let url_ns = t.namespace.clone().unwrap_or_default();
        match meta.get("namespace").and_then(Value::as_str) {
            Some(n) if !n.is_empty() && n != url_ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {
                meta.insert("namespace".into(), url_ns.into());
            }
        }
    } else {
        meta.remove("namespace");
    }
    Ok(())
}

fn reject_dry_run(req: &Req<'_>) -> Result<(), ApiError> {
    match req.q("dryRun") {
        None => Ok(()),
        Some(v) => Err(ApiError::bad_request(format!(
            "dryRun={v} is not supported by ward-apiserver"
        ))),
    }
}

fn field_validation(req: &Req<'_>) -> Result<(), ApiError> {
    match req.q("fieldValidation") {
        None | Some("Strict" | "Warn" | "Ignore") => Ok(()),
        Some(v) => Err(ApiError::bad_request(format!(
            "fieldValidation parameter unsupported: {v}, must be one of Ignore, Warn or Strict"
        ))),
    }
}

/// Serve a CRD's resources, or stop serving them when it is gone.
fn sync_crd(state: &State, crd: &Value) {
    if let Ok(infos) = strategy::crd_resources(crd) {
        if let Some(first) = infos.first() {
            state
                .registry
                .remove_group_resource(&first.group, &first.plural);
        }
        for i in infos {
            state.registry.insert(i);
        }
    }
}

fn is_crd(info: &ResourceInfo) -> bool {
    info.group == "apiextensions.k8s.io" && info.plural == "customresourcedefinitions"
}

fn create(req: &Req<'_>, t: &Target) -> Result<Resp, ApiError> {
    reject_dry_run(req)?;
    field_validation(req)?;
    if t.info.namespaced && t.namespace.is_none() {
        return Err(ApiError::no_route(&format!("POST {}", t.info.plural)));
    }
    let mut obj = parse_body(req)?;
    let stored = create_object(req, t, &mut obj, None)?;
    Ok(render(req, t, &stored, StatusCode::CREATED))
}

fn create_object(
    req: &Req<'_>,
    t: &Target,
    obj: &mut Value,
    url_name: Option<&str>,
) -> Result<Arc<StoredObject>, ApiError> {
    check_identity(t, obj, url_name)?;
    let meta = &mut obj["metadata"];
    if meta["name"].as_str().is_none_or(str::is_empty) {
        match meta["generateName"].as_str() {
            Some(prefix) if !prefix.is_empty() => {
                let name = format!("{prefix}{}", req.state.random_suffix());
                meta["name"] = name.into();
            }
            _ => {
                return Err(ApiError::invalid(
                    &t.info.kind,
                    "",
                    "metadata.name: Required value: name or generateName is required",
                ));
            }
        }
    }
    strategy::validate(&t.info, obj)?;
    let now = req.state.store.clock().rfc3339();
    strategy::prepare_create(&t.info, obj, &now);
    let manager = req.field_manager();
    if obj["metadata"].get("managedFields").is_none() {
        patch::record_update(None, obj, &manager, &now, &t.info.api_version(), None);
    }
    let stored = req.state.store.create(&t.info, obj.take())?;
    if is_crd(&t.info) {
        sync_crd(req.state, &stored.value());
    }
    Ok(stored)
}

fn update(req: &Req<'_>, t: &Target) -> Result<Resp, ApiError> {
    reject_dry_run(req)?;
    field_validation(req)?;
    let name = t.name.as_deref().unwrap_or_default();
    let mut body = parse_body(req)?;
    check_identity(t, &mut body, Some(name))?;
    let has_rv = body["metadata"]["resourceVersion"]
        .as_str()
        .is_some_and(|s| !s.is_empty());
    if !has_rv && !t.info.builtin {
        return Err(ApiError::invalid(
            &t.info.kind,
            name,
            "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
        ));
    }
    if t.sub == Subresource::Main {
        strategy::validate(&t.info, &body)?;
    }
    let manager = req.field_manager();
    let now = req.state.store.clock().rfc3339();
    let av = t.info.api_version();
    let stored = req.state.store.update(&t.info, ns_of(t), name, |old| {
        let mut new = strategy::prepare_update(&t.info, t.sub, old, body);
        if new["metadata"].get("managedFields").is_none()
            && let Some(mf) = old["metadata"].get("managedFields")
        {
            new["metadata"]["managedFields"] = mf.clone();
        }
        let sub = (t.sub == Subresource::Status).then_some("status");
        patch::record_update(Some(old), &mut new, &manager, &now, &av, sub);
        Ok(new)
    })?;
    if is_crd(&t.info) {
        sync_crd(req.state, &stored.value());
    }
    Ok(render(req, t, &stored, StatusCode::OK))
}

fn patch_error(t: &Target, name: &str, e: PatchError) -> ApiError {
    match e {
        PatchError::Malformed(m) => ApiError::bad_request(m),
        PatchError::TestFailed(m) | PatchError::Invalid(m) => {
            ApiError::invalid(&t.info.kind, name, m)
        }
        PatchError::Conflict(m) => ApiError::conflict(m),
    }
}

fn patch(req: &Req<'_>, t: &Target) -> Result<Resp, ApiError> {
    reject_dry_run(req)?;
    field_validation(req)?;
    let name = t.name.as_deref().unwrap_or_default().to_string();
    let ct = req.header(header::CONTENT_TYPE);
    let kind = PatchKind::from_content_type(ct).ok_or_else(|| {
        ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml{} (got {ct:?})",
            if t.info.builtin { ", application/strategic-merge-patch+json" } else { "" }
        ))
    })?;
    if kind == PatchKind::Strategic && !t.info.builtin {
        return Err(ApiError::unsupported_media_type(
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
        ));
    }
    let now = req.state.store.clock().rfc3339();
    let av = t.info.api_version();
    let sub = (t.sub == Subresource::Status).then_some("status");
    if kind == PatchKind::Apply {
        return apply(req, t, &name, &now);
    }
    let manager = req.field_manager();
    let stored = req.state.store.update(&t.info, ns_of(t), &name, |old| {
        let mut new = old.clone();
        let res = match kind {
            PatchKind::Json => patch::apply_json_patch(&mut new, &req.body),
            PatchKind::Merge => patch::apply_merge_patch(&mut new, &req.body),
            PatchKind::Strategic => {
                patch::apply_strategic_merge_patch(&mut new, &req.body, &t.info.kind)
            }
            PatchKind::Apply => unreachable!("handled above"),
        };
        res.map_err(|e| patch_error(t, &name, e))?;
        if !new.is_object() {
            return Err(ApiError::unprocessable(
                "the patch did not produce an object",
            ));
        }
        check_identity(t, &mut new, Some(&name))?;
        if t.sub == Subresource::Main {
            strategy::validate(&t.info, &new)?;
        }
        let mut new = strategy::prepare_update(&t.info, t.sub, old, new);
        patch::record_update(Some(old), &mut new, &manager, &now, &av, sub);
        Ok(new)
    })?;
    if is_crd(&t.info) {
        sync_crd(req.state, &stored.value());
    }
    Ok(render(req, t, &stored, StatusCode::OK))
}

fn apply(req: &Req<'_>, t: &Target, name: &str, now: &str) -> Result<Resp, ApiError> {
    let Some(manager) = req.q("fieldManager").map(String::from) else {
        return Err(ApiError::invalid(
            "PatchOptions.meta.k8s.io",
            "",
            "fieldManager: Required value: is required for apply patch",
        ));
    };
    let force = parse_bool(req.q("force"));
    let av = t.info.api_version();
    let sub = (t.sub == Subresource::Status).then_some("status");
    // Update if present, create if absent; a create that loses a race with
    // another create retries as an update.
    for _ in 0..3 {
        let res = req.state.store.update(&t.info, ns_of(t), name, |old| {
            let merged = patch::server_side_apply(
                Some(old),
                &req.body,
                &manager,
                force,
                now,
                &av,
                &t.info.kind,
                sub,
            )
            .map_err(|e| patch_error(t, name, e))?;
            let mut merged = merged;
            check_identity(t, &mut merged, Some(name))?;
            if t.sub == Subresource::Main {
                strategy::validate(&t.info, &merged)?;
            }
            Ok(strategy::prepare_update(&t.info, t.sub, old, merged))
        });
        match res {
            Ok(stored) => {
                if is_crd(&t.info) {
                    sync_crd(req.state, &stored.value());
                }
                return Ok(render(req, t, &stored, StatusCode::OK));
            }
            Err(e) if e.code == 404 && e.reason == "NotFound" && t.sub == Subresource::Main => {
                let mut obj = patch::server_side_apply(
                    None,
                    &req.body,
                    &manager,
                    force,
                    now,
                    &av,
                    &t.info.kind,
                    None,
                )
                .map_err(|e| patch_error(t, name, e))?;
                match create_object(req, t, &mut obj, Some(name)) {
                    Ok(stored) => return Ok(render(req, t, &stored, StatusCode::CREATED)),
                    Err(e) if e.reason == "AlreadyExists" => continue,
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        }
    }
    Err(ApiError::conflict_modified(
        &t.info.group,
        &t.info.plural,
        name,
    ))
}

/// DeleteOptions from the body (if any) and the query.
fn delete_spec(req: &Req<'_>) -> Result<DeleteSpec, ApiError> {
    let body: Value = if req.body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice(&req.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?
    };
    check_delete_options(&body)?;
    let pre = &body["preconditions"];
    let orphan_dependents = match (&body["orphanDependents"], req.q("orphanDependents")) {
        (Value::Bool(b), _) => Some(*b),
        (_, Some(s)) => Some(s == "true"),
        _ => None,
    };
    let policy = body["propagationPolicy"]
        .as_str()
        .map(String::from)
        .or_else(|| req.q("propagationPolicy").map(String::from));
    if policy.is_some() && orphan_dependents.is_some() {
        return Err(ApiError::unprocessable(
            "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Invalid value: \"\": orphanDependents and deletionPropagation cannot be both set",
        ));
    }
    let add_finalizers = match (policy.as_deref(), orphan_dependents) {
        (Some("Foreground"), _) => vec![crate::gc::FOREGROUND.to_string()],
        (Some("Orphan"), _) | (None, Some(true)) => vec![crate::gc::ORPHAN.to_string()],
        _ => Vec::new(),
    };
    match policy.as_deref() {
        None | Some("Background" | "Foreground" | "Orphan") => {}
        Some(p) => {
            return Err(ApiError::unprocessable(format!(
                "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"{p}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
            )));
        }
    }
    let grace = match (&body["gracePeriodSeconds"], req.q("gracePeriodSeconds")) {
        (Value::Number(n), _) => n.as_i64(),
        (_, Some(s)) => Some(
            s.parse::<i64>()
                .map_err(|_| ApiError::bad_request(format!("invalid gracePeriodSeconds: {s}")))?,
        ),
        _ => None,
    };
    Ok(DeleteSpec {
        uid: pre["uid"].as_str().map(String::from),
        resource_version: pre["resourceVersion"].as_str().map(String::from),
        add_finalizers,
        grace_period_seconds: grace.map(|g| g.max(0)),
    })
}

/// DeleteOptions must be an object whose known fields have the types the
/// real server decodes (400 otherwise, before anything is deleted); a dry
/// run in the body is refused like one in the query.
fn check_delete_options(body: &Value) -> Result<(), ApiError> {
    if !body.is_object() {
        return Err(ApiError::bad_request("DeleteOptions must be a JSON object"));
    }
    type HasType = fn(&Value) -> bool;
    let strings: HasType = |v| v.as_array().is_some_and(|a| a.iter().all(Value::is_string));
    let fields: [(&str, HasType, &str); 9] = [
        ("/kind", Value::is_string, "string"),
        ("/apiVersion", Value::is_string, "string"),
        ("/propagationPolicy", Value::is_string, "string"),
        ("/gracePeriodSeconds", Value::is_i64, "int64"),
        ("/orphanDependents", Value::is_boolean, "bool"),
        ("/dryRun", strings, "[]string"),
        ("/preconditions", Value::is_object, "Preconditions"),
        ("/preconditions/uid", Value::is_string, "string"),
        ("/preconditions/resourceVersion", Value::is_string, "string"),
    ];
    for (path, ok, ty) in fields {
        if let Some(v) = body.pointer(path)
            && !v.is_null()
            && !ok(v)
        {
            let field = path[1..].replace('/', ".");
            return Err(ApiError::bad_request(format!(
                "error decoding DeleteOptions: {field} must be of type {ty}"
            )));
        }
    }
    if body["dryRun"].as_array().is_some_and(|a| !a.is_empty()) {
        return Err(ApiError::bad_request(
            "dryRun is not supported by ward-apiserver",
        ));
    }
    Ok(())
}

fn delete(req: &Req<'_>, t: &Target) -> Result<Resp, ApiError> {
    reject_dry_run(req)?;
    let name = t.name.as_deref().unwrap_or_default();
    if t.sub != Subresource::Main {
        return Err(ApiError::method_not_allowed("DELETE"));
    }
    let spec = delete_spec(req)?;
    let st = req.state;
    let res = if t.info.group.is_empty() && t.info.plural == "namespaces" {
        st.store.delete_namespace(&st.registry, name, &spec)?
    } else {
        st.store.delete(&t.info, ns_of(t), name, &spec)?
    };
    let obj = match res {
        Deleted::Removed(o) => {
            if is_crd(&t.info) {
                crd_gone(st, &o.value());
            }
            o
        }
        Deleted::Terminating(o) => o,
    };
    Ok(render(req, t, &obj, StatusCode::OK))
}

/// A CRD is gone: stop serving its resources and drop their objects.
pub fn crd_gone(state: &State, crd: &Value) {
    let group = crd["spec"]["group"].as_str().unwrap_or_default();
    let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or_default();
    if group.is_empty() || plural.is_empty() {
        return;
    }
    state.registry.remove_group_resource(group, plural);
    state.store.drop_collection(&crate::resources::StorageKey {
        group: group.into(),
        plural: plural.into(),
    });
}

fn delete_collection(req: &Req<'_>, t: &Target) -> Result<Resp, ApiError> {
    reject_dry_run(req)?;
    let spec = delete_spec(req)?;
    let filter = filter_of(req, t)?;
    let st = req.state;
    let page = st.store.list(
        &t.info.storage_key(),
        t.namespace.as_deref(),
        None,
        None,
        |o| filter.matches(o),
    );
    let mut items = Vec::new();
    for o in page.items {
        let res = if t.info.group.is_empty() && t.info.plural == "namespaces" {
            st.store.delete_namespace(&st.registry, &o.name, &spec)
        } else {
            st.store.delete(&t.info, &o.namespace, &o.name, &spec)
        };
        match res {
            Ok(Deleted::Removed(o)) => {
                if is_crd(&t.info) {
                    crd_gone(st, &o.value());
                }
                items.push(o);
            }
            Ok(Deleted::Terminating(o)) => items.push(o),
            // Deleted concurrently: nothing to do.
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let items: Vec<Value> = items.iter().map(|o| o.value()).collect();
    Ok(json_response(
        StatusCode::OK,
        &json!({"kind": t.info.list_kind, "apiVersion": t.info.api_version(),
                "metadata": {"resourceVersion": st.store.current_rv().to_string()}, "items": items}),
    ))
}
