//! What the verbs answer with: JSON bodies, errors as `metav1.Status`, one
//! object rendered as the client asked (whole, metadata only, a Table).

use std::sync::Arc;

use axum::body::Body;
use bytes::Bytes;
use http::{Response, StatusCode, header};
use serde_json::Value;

use super::request::{Req, Target};
use crate::machinery::status::ApiError;
use crate::storage::store::StoredObject;
use crate::storage::table;

/// A response.
pub(super) type Resp = Response<Body>;

/// A JSON response of `body`.
pub(super) fn json_response(code: StatusCode, body: &Value) -> Resp {
    bytes_response(code, Bytes::from(body.to_string()))
}

/// A JSON response of bytes already serialized.
pub(super) fn bytes_response(code: StatusCode, body: Bytes) -> Resp {
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .expect("static response parts are valid")
}

/// What kube-apiserver answers for a path outside the API it serves (an
/// unknown top-level path, group or group version): Go's plain-text
/// `404 page not found`, not a `metav1.Status` — a client reading the
/// body as a Status finds none, there as here.
pub(super) fn page_not_found() -> Resp {
    Response::builder()
        .status(StatusCode::NOT_FOUND)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .header(header::X_CONTENT_TYPE_OPTIONS, "nosniff")
        .body(Body::from("404 page not found\n"))
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

/// `resp` with a `Warning: 299 - "text"` header for each warning (as
/// kube-apiserver sends them: code 299, agent `-`, the text quoted with
/// `\` and `"` escaped; control characters become spaces).
pub(super) fn with_warnings(mut resp: Resp, warnings: &[String]) -> Resp {
    for w in warnings {
        let mut v = String::with_capacity(w.len() + 10);
        v.push_str("299 - \"");
        for c in w.chars() {
            match c {
                '"' | '\\' => {
                    v.push('\\');
                    v.push(c);
                }
                c if c.is_control() => v.push(' '),
                c => v.push(c),
            }
        }
        v.push('"');
        if let Ok(h) = header::HeaderValue::from_bytes(v.as_bytes()) {
            resp.headers_mut().append(header::WARNING, h);
        }
    }
    resp
}

/// Marks a response whose body is a stream (a watch): never re-encoded.
#[derive(Debug, Clone, Copy)]
pub(super) struct Streamed;

/// Marks an answer whose objects are rendered as stored, for the
/// handler to convert into the version asked for by the resource's
/// conversion webhook ([`crate::conversion`]).
#[derive(Debug, Clone)]
pub(super) struct ConvertTo(
    pub(super) Arc<crate::conversion::Conversion>,
    pub(super) String,
);

/// `resp` marked [`ConvertTo`] when `t`'s resource converts by webhook.
pub(super) fn converting(t: &Target, mut resp: Resp) -> Resp {
    if let Some(c) = t.info.conversion.as_ref().filter(|c| c.by_webhook()) {
        resp.extensions_mut()
            .insert(ConvertTo(c.clone(), t.info.api_version()));
    }
    resp
}

/// One object as the client asked for it: metadata only, a Table row,
/// or the object at the resource's version.
pub(super) fn render(req: &Req<'_>, t: &Target, o: &StoredObject, code: StatusCode) -> Resp {
    if crate::storage::partial::wants_partial(req.header(header::ACCEPT)) {
        return bytes_response(code, crate::storage::partial::partial_of_one(o));
    }
    if table::wants_table(req.header(header::ACCEPT)) {
        let mut v = o.value();
        v["apiVersion"] = t.info.api_version().into();
        return json_response(code, &table::table_of_one(&t.info, &v));
    }
    converting(
        t,
        bytes_response(code, o.served_bytes(&t.info, &t.info.api_version())),
    )
}
