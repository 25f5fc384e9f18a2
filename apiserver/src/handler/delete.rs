//! Deletes: one object (with DeleteOptions) or a collection.

use super::params::{self, DeleteOptions, ListOptions};
use super::read::{encode_continue, filter_of};
use http::StatusCode;
use serde_json::{Value, json};

use super::{Req, Resp, Target, committed, json_response, ns_of, render};
use crate::status::ApiError;
use crate::store::{Commit, DeleteSpec, Deleted, StoredObject};

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
    spec_from_body(&super::write::parse_body(req)?)
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
        (Some("Foreground"), _) => vec![crate::gc::FOREGROUND.to_string()],
        (Some("Orphan"), _) | (None, Some(true)) => vec![crate::gc::ORPHAN.to_string()],
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

pub(super) fn delete(req: &Req<'_>, t: &Target) -> Result<Resp, ApiError> {
    let name = t.name.as_deref().unwrap_or_default();
    let spec = delete_spec(req)?;
    let (obj, removed) = match req.state.store.delete(&t.info, ns_of(t), name, &spec)? {
        Deleted::Removed(o) => (o, true),
        Deleted::Terminating(o) => (o, false),
    };
    if spec.commit == Commit::Store {
        committed(req, t, &obj);
    }
    if removed && !crate::strategy::returns_deleted_object(&t.info) {
        return Ok(json_response(StatusCode::OK, &deleted_status(t, &obj)));
    }
    Ok(render(req, t, &obj, StatusCode::OK))
}

/// kube-apiserver's answer to a removal: `Status{Success}` with the
/// object's name, group, resource (in `kind`, as the real server puts it)
/// and uid, so a client can tell it is gone, not waiting on finalizers.
fn deleted_status(t: &Target, obj: &StoredObject) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {
            "name": obj.name(),
            "group": t.info.group,
            "kind": t.info.plural,
            "uid": obj.uid.to_string(),
        }
    })
}

/// Delete every object a list with these options returns. As in
/// kube-apiserver, the list options are decoded and validated first, then
/// the DeleteOptions; nothing is deleted unless both are valid. With a
/// `limit` only that one page is deleted, and the answer carries the
/// `continue` token of the next (as the real server does); a `continue`
/// token starts after its object. The objects are taken from the current
/// state whatever `resourceVersion` says (a fresher view than the real
/// server's watch cache may serve).
pub(super) fn delete_collection(req: &Req<'_>, t: &Target) -> Result<Resp, ApiError> {
    let list = ListOptions::from_query(&req.query)?;
    if list.watch {
        return Err(ApiError::bad_request(
            "watch is not allowed on a delete collection request",
        ));
    }
    let filter = filter_of(req, t, &list)?;
    let spec = delete_spec(req)?;
    let st = req.state;
    let page = st.store.list(
        &t.info.storage_key(),
        t.namespace.as_deref(),
        list.continue_after.as_ref(),
        list.limit,
        |o| filter.matches(o),
    );
    let mut items = Vec::new();
    for o in page.items {
        // Namespaces have no deletecollection (the router refuses it).
        match st.store.delete(&t.info, o.namespace(), o.name(), &spec) {
            Ok(Deleted::Removed(o) | Deleted::Terminating(o)) => {
                if spec.commit == Commit::Store {
                    committed(req, t, &o);
                }
                items.push(o);
            }
            // Deleted concurrently: nothing to do.
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let items: Vec<Value> = items.iter().map(|o| o.value()).collect();
    let mut meta = json!({"resourceVersion": st.store.current_rv().to_string()});
    if let Some((ns, name)) = &page.continue_after {
        meta["continue"] = encode_continue(ns, name).into();
    }
    Ok(json_response(
        StatusCode::OK,
        &json!({"kind": t.info.list_kind, "apiVersion": t.info.api_version(),
                "metadata": meta, "items": items}),
    ))
}
