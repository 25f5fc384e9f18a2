//! Writes: create, update, patch (JSON, merge, strategic) and server-side apply.

use std::sync::Arc;

use http::{StatusCode, header};
use serde_json::{Value, json};

use super::body::{parse_body, patch_error};
use super::params::{WriteOptions, WriteVerb};
use super::request::{Req, Target, committed, ns_of};
use super::response::{Resp, render};
use crate::alloc::Held;
use crate::patch::{self, PatchKind};
use crate::resources::ResourceInfo;
use crate::status::ApiError;
use crate::store::{Commit, StoredObject};
use crate::strategy::{self, Subresource};

/// Check apiVersion/kind against the URL (filling them in when absent),
/// and metadata's shape, name and namespace.
pub(super) fn check_identity(
    t: &Target,
    obj: &mut Value,
    url_name: Option<&str>,
) -> Result<(), ApiError> {
    match obj.get("apiVersion") {
        None | Some(Value::Null) => obj["apiVersion"] = t.info.api_version().into(),
        Some(Value::String(av)) if is_api_version(&t.info, av) => {}
        Some(av) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({}) does not match the expected API version ({})",
                av.as_str().unwrap_or("<not a string>"),
                t.info.api_version()
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
        let url_ns = t.namespace.as_deref().unwrap_or_default();
        match meta.get("namespace").and_then(Value::as_str) {
            Some(n) if n == url_ns => {}
            Some(n) if !n.is_empty() => {
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

/// Whether `av` is `info`'s `group/version` (`version` for the core group),
/// without building that string.
fn is_api_version(info: &ResourceInfo, av: &str) -> bool {
    if info.group.is_empty() {
        av == info.version
    } else {
        av.split_once('/') == Some((info.group.as_str(), info.version.as_str()))
    }
}

/// The Service allocator, taken for a write of the object (not a
/// subresource) of a kind that allocates
/// ([`KindStrategy::allocates`](crate::kind::KindStrategy::allocates));
/// hold it until the write is stored.
fn allocator<'a>(req: &Req<'a>, t: &Target, ns: &str, name: &str) -> Option<Held<'a>> {
    (t.sub == Subresource::Main && t.info.strategy.allocates())
        .then(|| req.state.services.lock(&req.state.store, &t.info, ns, name))
}

/// Allocate into `new` (a create when `old` is `None`) if `held`.
fn allocate(
    held: Option<&Held<'_>>,
    name: &str,
    old: Option<&Value>,
    new: &mut Value,
) -> Result<(), ApiError> {
    held.map_or(Ok(()), |h| h.assign(name, old, new))
}

/// The answer to a successful update, patch or apply.
fn written(req: &Req<'_>, t: &Target, stored: &StoredObject, commit: Commit) -> Resp {
    if commit == Commit::Store {
        committed(req, t, stored);
    }
    render(req, t, stored, StatusCode::OK)
}

pub(super) fn create(req: &Req<'_>, t: &Target) -> Result<Resp, ApiError> {
    let opts = WriteOptions::from_query(&req.query, WriteVerb::Create)?;
    let mut obj = parse_body(req)?;
    let manager = req.field_manager(&opts);
    let stored = create_object(req, t, &mut obj, None, &manager, opts.commit)?;
    Ok(render(req, t, &stored, StatusCode::CREATED))
}

pub(super) fn create_object(
    req: &Req<'_>,
    t: &Target,
    obj: &mut Value,
    url_name: Option<&str>,
    manager: &str,
    commit: Commit,
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
    strategy::admit(&t.info, None, obj)?;
    if obj["metadata"].get("managedFields").is_none() {
        patch::record_update(None, obj, manager, &now, &t.info.api_version(), None);
    }
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let ns = obj["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let held = allocator(req, t, &ns, &name);
    allocate(held.as_ref(), &name, None, obj)?;
    let stored = req.state.store.create_with(&t.info, obj.take(), commit)?;
    drop(held);
    if commit == Commit::Store {
        committed(req, t, &stored);
    }
    Ok(stored)
}

pub(super) fn update(req: &Req<'_>, t: &Target) -> Result<Resp, ApiError> {
    let opts = WriteOptions::from_query(&req.query, WriteVerb::Update)?;
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
    let manager = req.field_manager(&opts);
    let now = req.state.store.clock().rfc3339();
    let av = t.info.api_version();
    let held = allocator(req, t, ns_of(t), name);
    let stored = req
        .state
        .store
        .update_with(&t.info, ns_of(t), name, opts.commit, |old| {
            strategy::check_subresource(&t.info, t.sub, name, old, &body)?;
            let mut new = strategy::prepare_update(&t.info, t.sub, old, body.clone());
            strategy::admit(&t.info, Some(old), &mut new)?;
            allocate(held.as_ref(), name, Some(old), &mut new)?;
            if new["metadata"].get("managedFields").is_none()
                && let Some(mf) = old["metadata"].get("managedFields")
            {
                new["metadata"]["managedFields"] = mf.clone();
            }
            let sub = t.sub.name();
            patch::record_update(Some(old), &mut new, &manager, &now, &av, sub);
            Ok(new)
        })?;
    Ok(written(req, t, &stored, opts.commit))
}

pub(super) fn patch(req: &Req<'_>, t: &Target) -> Result<Resp, ApiError> {
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
    let verb = match kind {
        PatchKind::Apply => WriteVerb::Apply,
        _ => WriteVerb::Patch,
    };
    let opts = WriteOptions::from_query(&req.query, verb)?;
    let now = req.state.store.clock().rfc3339();
    let av = t.info.api_version();
    let sub = t.sub.name();
    if kind == PatchKind::Apply {
        return apply(req, t, &name, &now, &opts);
    }
    let manager = req.field_manager(&opts);
    let held = allocator(req, t, ns_of(t), &name);
    let stored = req
        .state
        .store
        .update_with(&t.info, ns_of(t), &name, opts.commit, |old| {
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
            strategy::check_subresource(&t.info, t.sub, &name, old, &new)?;
            let mut new = strategy::prepare_update(&t.info, t.sub, old, new);
            strategy::admit(&t.info, Some(old), &mut new)?;
            allocate(held.as_ref(), &name, Some(old), &mut new)?;
            patch::record_update(Some(old), &mut new, &manager, &now, &av, sub);
            Ok(new)
        })?;
    Ok(written(req, t, &stored, opts.commit))
}

pub(super) fn apply(
    req: &Req<'_>,
    t: &Target,
    name: &str,
    now: &str,
    opts: &WriteOptions,
) -> Result<Resp, ApiError> {
    // WriteOptions refuses an apply without a field manager.
    let manager = req.field_manager(opts);
    let av = t.info.api_version();
    let apply_opts = patch::ApplyOptions {
        manager: &manager,
        force: opts.force,
        now,
        api_version: &av,
        kind: &t.info.kind,
        name,
        subresource: t.sub.name(),
    };
    // Update if present, create if absent; a create that loses a race with
    // another create retries as an update.
    for _ in 0..3 {
        // Released before a create below takes it again.
        let held = allocator(req, t, ns_of(t), name);
        let res = req
            .state
            .store
            .update_with(&t.info, ns_of(t), name, opts.commit, |old| {
                let mut merged = patch::server_side_apply(Some(old), &req.body, &apply_opts)
                    .map_err(|e| patch_error(t, name, e))?;
                check_identity(t, &mut merged, Some(name))?;
                if t.sub == Subresource::Main {
                    strategy::validate(&t.info, &merged)?;
                }
                strategy::check_subresource(&t.info, t.sub, name, old, &merged)?;
                let mut new = strategy::prepare_update(&t.info, t.sub, old, merged);
                strategy::admit(&t.info, Some(old), &mut new)?;
                allocate(held.as_ref(), name, Some(old), &mut new)?;
                Ok(new)
            });
        drop(held);
        match res {
            Ok(stored) => {
                return Ok(written(req, t, &stored, opts.commit));
            }
            Err(e) if e.code == 404 && e.reason == "NotFound" && t.sub == Subresource::Main => {
                let create = patch::ApplyOptions {
                    subresource: None,
                    ..apply_opts
                };
                let mut obj = patch::server_side_apply(None, &req.body, &create)
                    .map_err(|e| patch_error(t, name, e))?;
                match create_object(req, t, &mut obj, Some(name), &manager, opts.commit) {
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
