//! Request bodies every verb reads the same way: the object (JSON, YAML
//! or protobuf), DeleteOptions (in the body or the query), and a failed
//! patch as the API error it answers.

use http::header;
use serde_json::{Value, json};

use super::params::{self, DeleteOptions};
use super::request::{Req, Target};
use crate::machinery::patch::PatchError;
use crate::machinery::status::ApiError;
use crate::registry::fields::{self, FieldValidation};
use crate::storage::store::DeleteSpec;

/// Parse a request body as a JSON object: JSON, YAML (`application/yaml`)
/// or, for a built-in kind, protobuf (`application/vnd.kubernetes.protobuf`).
pub(super) fn parse_body(req: &Req<'_>) -> Result<Value, ApiError> {
    parse_body_of(req, true)
}

/// 415 for a body in a media type nobody decodes, listing those that are
/// (protobuf for a built-in kind only), as kube-apiserver words it.
fn unknown_format(protobuf: bool) -> ApiError {
    ApiError::unsupported_media_type(format!(
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml{}",
        if protobuf {
            ", application/vnd.kubernetes.protobuf"
        } else {
            ""
        }
    ))
}

/// [`parse_body`] for a kind with a protobuf form (`protobuf`) or not.
fn parse_body_of(req: &Req<'_>, protobuf: bool) -> Result<Value, ApiError> {
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
        crate::machinery::proto::MEDIA_TYPE => crate::machinery::proto::decode_object(&req.body)
            .map_err(|e| match e {
                // As kube-apiserver answers a protobuf body for a custom resource.
                crate::machinery::proto::ProtoError::UnknownKind { .. } => unknown_format(false),
                e => ApiError::bad_request(format!("error decoding protobuf body: {e}")),
            })?,
        "application/yaml" => {
            let s = std::str::from_utf8(&req.body)
                .map_err(|_| ApiError::bad_request("error decoding YAML body: not UTF-8"))?;
            serde_saphyr::from_str(s)
                .map_err(|e| ApiError::bad_request(format!("error decoding YAML body: {e}")))?
        }
        _ => return Err(unknown_format(protobuf)),
    };
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request must be a JSON object",
        ));
    }
    Ok(v)
}

/// Whether the body is JSON (by its `Content-Type`, as [`parse_body`] reads it).
fn is_json(req: &Req<'_>) -> bool {
    let ct = req.header(header::CONTENT_TYPE);
    let essence = ct.split(';').next().unwrap_or("").trim();
    essence.is_empty() || essence.eq_ignore_ascii_case("application/json") || essence == "*/*"
}

/// [`parse_body`] for a written object of `kind` in `api_version`, with
/// the fields the kind does not have dropped, per `directive`: Strict
/// refuses a body with unknown or duplicate fields (400, as
/// kube-apiserver's `transformDecodeError`), Warn returns them as
/// warnings, Ignore drops them silently.
pub(super) fn parse_checked(
    req: &Req<'_>,
    t: &Target,
    api_version: &str,
    kind: &str,
    directive: FieldValidation,
) -> Result<(Value, Vec<String>), ApiError> {
    let mut v = parse_body_of(req, t.info.builtin)?;
    // Go's decoding refuses a value its type cannot hold before anything
    // else is looked at.
    if let Some(e) = fields::type_error(&t.info, api_version, kind, &v) {
        let version = api_version.rsplit('/').next().unwrap_or(api_version);
        return Err(ApiError::bad_request(format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: {e}"
        )));
    }
    let json = is_json(req).then_some(&req.body[..]);
    let errs = fields::object_errors(&t.info, api_version, kind, json, &mut v, directive);
    if errs.is_empty() {
        return Ok((v, errs));
    }
    if directive == FieldValidation::Strict {
        let version = api_version.rsplit('/').next().unwrap_or(api_version);
        return Err(ApiError::bad_request(format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: {}",
            fields::strict_message(&errs)
        )));
    }
    Ok((v, errs))
}

/// DeleteOptions as kube-apiserver reads them: from the body when there
/// is one, else from the query (never a mix). One difference: a query's
/// `dryRun` beside a body is refused (400), where kube-apiserver ignores it
/// and deletes for real.
pub(super) fn delete_spec(req: &Req<'_>) -> Result<DeleteSpec, ApiError> {
    if req.body.iter().all(u8::is_ascii_whitespace) {
        return spec_of(DeleteOptions::from_query(&req.query)?, &json!({}));
    }
    if !req.query.dry_run().is_empty() {
        return Err(ApiError::bad_request(
            "dryRun in the query is ignored when DeleteOptions come in the body (kube-apiserver would delete for real): put dryRun in the body",
        ));
    }
    spec_from_body(&parse_body(req)?)
}

/// DeleteOptions given as a JSON object: a DELETE's body, an Eviction's
/// `deleteOptions`.
pub(super) fn spec_from_body(body: &Value) -> Result<DeleteSpec, ApiError> {
    check_delete_options(body)?;
    // The types are checked above: `dryRun` is a list of strings.
    let dry_run: Vec<&str> = body["dryRun"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    params::invalid_options("DeleteOptions", params::dry_run_errors(&dry_run))?;
    let opts = DeleteOptions {
        grace_period_seconds: body["gracePeriodSeconds"].as_i64(),
        orphan_dependents: body["orphanDependents"].as_bool(),
        propagation_policy: body["propagationPolicy"].as_str().map(String::from),
        commit: params::commit_of(&dry_run),
    };
    spec_of(opts, &body["preconditions"])
}

/// Validate decoded options (422) and turn them into the store's spec.
fn spec_of(opts: DeleteOptions, pre: &Value) -> Result<DeleteSpec, ApiError> {
    let DeleteOptions {
        grace_period_seconds,
        orphan_dependents,
        propagation_policy: policy,
        commit,
    } = opts;
    let mut errs = Vec::new();
    if policy.is_some() && orphan_dependents.is_some() {
        errs.push(format!(
            "propagationPolicy: Invalid value: {:?}: orphanDependents and deletionPropagation cannot be both set",
            policy.as_deref().unwrap_or_default()
        ));
    }
    if let Some(p) = policy.as_deref()
        && !matches!(p, "Background" | "Foreground" | "Orphan")
    {
        errs.push(format!(
            "propagationPolicy: Unsupported value: {p:?}: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
        ));
    }
    params::invalid_options("DeleteOptions", errs)?;
    let add_finalizers = match (policy.as_deref(), orphan_dependents) {
        (Some("Foreground"), _) => vec![crate::controllers::gc::FOREGROUND.to_string()],
        (Some("Orphan"), _) | (None, Some(true)) => {
            vec![crate::controllers::gc::ORPHAN.to_string()]
        }
        _ => Vec::new(),
    };
    Ok(DeleteSpec {
        uid: pre["uid"].as_str().map(String::from),
        resource_version: pre["resourceVersion"].as_str().map(String::from),
        add_finalizers,
        grace_period_seconds: grace_period_seconds.map(|g| g.max(0)),
        commit,
    })
}

/// DeleteOptions must be an object whose known fields have the types the
/// real server decodes (400 otherwise, before anything is deleted).
pub(super) fn check_delete_options(body: &Value) -> Result<(), ApiError> {
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
    Ok(())
}

pub(super) fn patch_error(t: &Target, name: &str, e: PatchError) -> ApiError {
    match e {
        PatchError::Malformed(m) => ApiError::bad_request(m),
        // kube-apiserver names no field and gives no detail for a failed
        // `test` (kubectl: "The request is invalid: the server rejected our
        // request due to an error in our request").
        PatchError::TestFailed(_) => {
            let mut e = ApiError::unprocessable(
                "the server rejected our request due to an error in our request",
            );
            e.details = Some(json!({}));
            e
        }
        PatchError::Invalid(m) => ApiError::invalid(&t.info.group_kind(), name, m),
        PatchError::Conflict { message, causes } => {
            let mut e = ApiError::conflict(message);
            let causes: Vec<Value> = causes
                .into_iter()
                .map(|c| json!({"reason": "FieldManagerConflict", "message": c.message, "field": c.field}))
                .collect();
            e.details = Some(json!({ "causes": causes }));
            e
        }
    }
}
