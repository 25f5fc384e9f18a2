//! `application/vnd.kubernetes.protobuf` for the built-in kinds: request
//! bodies decoded to the JSON objects the rest of the server handles, and
//! answers encoded for clients that prefer protobuf (kubectl 1.32+'s typed
//! clients send `Accept: application/vnd.kubernetes.protobuf,application/json`).
//!
//! A body is `k8s\0` then a `runtime.Unknown` whose `typeMeta` names the
//! kind and whose `raw` is the kind's message. The messages' fields come
//! from a table, `schema.rs`, that `apiserver/proto/generate.py` writes
//! from pinned inputs its header names: k8s-pb 0.9.0 (tags and types,
//! Kubernetes v1.35.0's protos: a superset of the served 1.33 with the same
//! tags), k8s-openapi 0.29.0's `v1_33` module, then `v1_35` for the fields
//! 1.33 lacks (JSON names), and two committed, reviewed data files for
//! what neither crate says. The codec walks it, so every GA kind and the
//! apimachinery types are covered without a hand-written conversion per
//! kind. A test recomputes the digest in the table's header, so an edit by
//! hand fails `cargo test`; `generate.py --check` (in `.ci/run`)
//! regenerates and compares. Custom resources have no protobuf form (as in
//! Kubernetes): their bodies get 415, and their answers JSON.
//!
//! Why a table and not k8s-pb's prost structs, which hold the same tags:
//! a prost struct knows its tags only inside its generated encode and
//! decode code (no reflection without prost-reflect and descriptors, which
//! k8s-pb does not ship), has no serde, so no JSON names, and nests Go's
//! embedded structs that JSON inlines. Using them would mean decoding into
//! one typed struct per kind, then a hand-written conversion to JSON for
//! each of them — the per-kind code the table avoids — and a 39,000-line
//! crate as a dependency of the server rather than of its tests (which
//! check the codec against k8s-pb's encoding).
//!
//! Zero values follow Go: a plain scalar field with `omitempty` (Go
//! marshals it to protobuf even when zero; its JSON omits it) is dropped
//! when zero, a pointer's zero (`replicas: 0`) is kept — so a protobuf
//! body yields the JSON object a JSON client sends for the same Go value.
//! Which fields are which comes from the Go types of k8s.io/api and
//! k8s.io/apimachinery at Kubernetes v1.33.0 (v1.35.0 for the fields 1.33
//! lacks), kept in `apiserver/proto/go_omitempty.txt`; the apiextensions
//! and apiregistration messages, whose Go types it does not read, keep
//! their zeros.

mod codec;
mod docs;
pub mod openapi_v2;
// Generated, one line per field: left as the generator writes it.
#[rustfmt::skip]
mod schema;
mod schema_types;

pub use codec::{decode_object, encode_object};
pub(crate) use docs::{atomic, doc};
// The field table, for the field checks (`crate::registry::fields`).
pub(crate) use schema_types::{Field, Message, Ty, all_messages, message, message_of_kind};

/// The media type.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Why a body could not be decoded or an object encoded.
#[derive(Debug, thiserror::Error)]
pub enum ProtoError {
    /// The body does not start with `k8s\0`.
    #[error("a protobuf body starts with the bytes \"k8s\\x00\"")]
    NoMagic,
    /// The wire data ends inside a field.
    #[error("the protobuf data is truncated")]
    Truncated,
    /// The wire data is malformed.
    #[error("malformed protobuf: {0}")]
    Wire(String),
    /// A string field is not UTF-8.
    #[error("a protobuf string is not UTF-8")]
    NotUtf8,
    /// Nested deeper than any real object.
    #[error("the protobuf data nests too deeply")]
    TooDeep,
    /// The envelope names a kind with no protobuf form here.
    #[error("no protobuf form for {kind} in {api_version}")]
    UnknownKind {
        /// The envelope's apiVersion.
        api_version: String,
        /// The envelope's kind.
        kind: String,
    },
    /// The envelope's raw bytes are compressed or not protobuf.
    #[error("unsupported content encoding {0:?}")]
    Encoding(String),
    /// A JSON value does not fit its protobuf field.
    #[error("cannot encode as protobuf: {0}")]
    Type(String),
    /// The schema lacks a message it refers to.
    #[error("no protobuf schema for {0}")]
    NoSchema(String),
}

impl From<prost::DecodeError> for ProtoError {
    fn from(e: prost::DecodeError) -> Self {
        ProtoError::Wire(e.to_string())
    }
}

/// What an `Accept` header asks for, by its first media range this server
/// can produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wants {
    /// JSON (or anything: `*/*`, no header).
    Json,
    /// Protobuf first; `or_json` if a later range takes JSON too.
    Protobuf {
        /// JSON is acceptable when protobuf is not possible.
        or_json: bool,
    },
}

/// Whether an `Accept` header takes anything an object is served in:
/// JSON, YAML or protobuf (with parameters or not), or any type.
#[must_use]
pub fn acceptable(accept: &str) -> bool {
    accept.split(',').any(|r| {
        let essence = r.split(';').next().unwrap_or("").trim();
        essence.is_empty()
            || [
                "application/json",
                "application/yaml",
                MEDIA_TYPE,
                "*/*",
                "application/*",
            ]
            .iter()
            .any(|t| essence.eq_ignore_ascii_case(t))
    })
}

/// Read an `Accept` header (`application/vnd.kubernetes.protobuf,application/json`).
#[must_use]
pub fn wants(accept: &str) -> Wants {
    let mut ranges = accept.split(',').map(|r| {
        // A range with parameters asks for something else (a Table, a
        // watch stream, aggregated discovery): not the plain object.
        (r.split(';').next().unwrap_or("").trim(), !r.contains(';'))
    });
    let json_like = |e: &str| {
        ["application/json", "*/*", "application/*"]
            .iter()
            .any(|j| e.eq_ignore_ascii_case(j))
    };
    match ranges.next() {
        Some((e, true)) if e.eq_ignore_ascii_case(MEDIA_TYPE) => Wants::Protobuf {
            or_json: ranges.any(|(e, _)| json_like(e)),
        },
        _ => Wants::Json,
    }
}
