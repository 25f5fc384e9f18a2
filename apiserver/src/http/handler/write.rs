//! Writes: create, update, patch (JSON, merge, strategic) and server-side apply.

use std::sync::Arc;

use http::{StatusCode, header};
use serde_json::{Value, json};

use std::cell::RefCell;

use super::access::{self, Escalation};
use super::body::{parse_checked, patch_error};
use super::params::{WriteOptions, WriteVerb};
use super::request::{Req, Target, committed, ns_of};
use super::response::{Resp, render, with_warnings};
use crate::admission::{At, Operation};
use crate::controllers::alloc::Held;
use crate::machinery::patch::{self, PatchKind};
use crate::machinery::status::ApiError;
use crate::registry::fields::{self, FieldValidation};
use crate::registry::resources::ResourceInfo;
use crate::storage::store::{Commit, StoredObject};
use crate::storage::strategy::{self, Subresource};

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
/// ([`KindStrategy::allocates`](crate::registry::kind::KindStrategy::allocates));
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
    let (mut obj, warnings) = parse_checked(
        req,
        t,
        &t.info.api_version(),
        &t.info.kind,
        opts.field_validation,
    )?;
    let manager = req.field_manager(&opts);
    let stored = create_object(req, t, &mut obj, None, &manager, opts.commit)?;
    Ok(with_warnings(
        render(req, t, &stored, StatusCode::CREATED),
        &warnings,
    ))
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
    // The mutating webhooks see the name as sent (empty for generateName).
    let sent_name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let at = |name| At {
        operation: Operation::Create,
        info: &t.info,
        sub: None,
        namespace: ns_of(t),
        name,
    };
    if req.admission.mutate(&at(&sent_name), None, obj)? {
        check_identity(t, obj, url_name)?;
    }
    let meta = &mut obj["metadata"];
    if meta["name"].as_str().is_none_or(str::is_empty) {
        match meta["generateName"].as_str() {
            Some(prefix) if !prefix.is_empty() => {
                let suffix = req.admission.generated_name(|| req.state.random_suffix());
                let name = format!("{prefix}{suffix}");
                meta["name"] = name.into();
            }
            _ => {
                return Err(ApiError::invalid(
                    &t.info.group_kind(),
                    "",
                    "metadata.name: Required value: name or generateName is required",
                ));
            }
        }
    }
    strategy::validate(&t.info, obj)?;
    let now = req.now();
    strategy::prepare_create(&t.info, obj);
    strategy::admit(&t.info, None, obj)?;
    if let Some(e) = Escalation::for_write(req.state, &req.user, &t.info.group, &t.info.plural) {
        e.check(&t.info.plural, obj)?;
    }
    if obj["metadata"].get("managedFields").is_none() {
        patch::record_update(None, obj, manager, &now, &t.info.api_version(), None);
    }
    strategy::finish_create(&t.info, obj, &now);
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
    req.admission.validate(&at(&name), None, Some(obj))?;
    let obj = storage_form(req, t, obj.take())?;
    let stored = req.state.store.create_with(&t.info, obj, commit)?;
    drop(held);
    if commit == Commit::Store {
        committed(req, t, &stored);
    }
    Ok(stored)
}

pub(super) fn update(req: &Req<'_>, t: &Target) -> Result<Resp, ApiError> {
    let opts = WriteOptions::from_query(&req.query, WriteVerb::Update)?;
    let name = t.name.as_deref().unwrap_or_default();
    let (mut body, warnings) = parse_checked(
        req,
        t,
        &t.info.api_version(),
        &t.info.kind,
        opts.field_validation,
    )?;
    check_identity(t, &mut body, Some(name))?;
    let has_rv = body["metadata"]["resourceVersion"]
        .as_str()
        .is_some_and(|s| !s.is_empty());
    if !has_rv && !t.info.builtin {
        return Err(ApiError::invalid(
            &t.info.group_kind(),
            name,
            "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
        ));
    }
    // `namespaces/finalize` writes the whole object (but its status).
    let whole = matches!(t.sub, Subresource::Main | Subresource::Finalize);
    if whole {
        strategy::validate(&t.info, &body)?;
    }
    let manager = req.field_manager(&opts);
    let now = req.now();
    let av = t.info.api_version();
    let held = allocator(req, t, ns_of(t), name);
    let escalation = Escalation::for_write(req.state, &req.user, &t.info.group, &t.info.plural);
    let at = updating(t, name);
    let stored = req
        .state
        .store
        .update_with(&t.info, ns_of(t), name, opts.commit, |old| {
            let old = &*request_form(req, t, old)?;
            let mut body = body.clone();
            if req.admission.mutate(&at, Some(old), &mut body)? {
                check_identity(t, &mut body, Some(name))?;
                if whole {
                    strategy::validate(&t.info, &body)?;
                }
            }
            strategy::check_subresource(&t.info, t.sub, name, old, &body)?;
            let mut new = strategy::prepare_update(&t.info, t.sub, old, body);
            strategy::admit(&t.info, Some(old), &mut new)?;
            if let Some(e) = &escalation {
                e.check(&t.info.plural, &new)?;
            }
            allocate(held.as_ref(), name, Some(old), &mut new)?;
            if new["metadata"].get("managedFields").is_none()
                && let Some(mf) = old["metadata"].get("managedFields")
            {
                new["metadata"]["managedFields"] = mf.clone();
            }
            let sub = t.sub.name();
            if patch::tracks_update(old, &new) {
                patch::record_update(Some(old), &mut new, &manager, &now, &av, sub);
            }
            req.admission.validate(&at, Some(old), Some(&new))?;
            storage_form(req, t, new)
        })?;
    Ok(with_warnings(
        written(req, t, &stored, opts.commit),
        &warnings,
    ))
}

/// The object as stored: in the storage version of a resource served in
/// several versions ([`crate::conversion`]), else as it is.
fn storage_form(req: &Req<'_>, t: &Target, obj: Value) -> Result<Value, ApiError> {
    match &t.info.conversion {
        Some(c) => req.admission.convert(&t.info, &obj, &c.storage),
        None => Ok(obj),
    }
}

/// The stored object `old` in the request's version (a patch or an
/// update applies to it, admission sees it there).
fn request_form<'v>(
    req: &Req<'_>,
    t: &Target,
    old: &'v Value,
) -> Result<std::borrow::Cow<'v, Value>, ApiError> {
    if t.info.conversion.is_none()
        || is_api_version(&t.info, old["apiVersion"].as_str().unwrap_or(""))
    {
        return Ok(std::borrow::Cow::Borrowed(old));
    }
    req.admission
        .convert(&t.info, old, &t.info.api_version())
        .map(std::borrow::Cow::Owned)
}

/// Where an update, patch or apply of an existing object meets admission.
fn updating<'a>(t: &'a Target, name: &'a str) -> At<'a> {
    At {
        operation: Operation::Update,
        info: &t.info,
        sub: t.sub.name(),
        namespace: ns_of(t),
        name,
    }
}

/// The duplicate fields of a merge or strategic merge patch body, when
/// `directive` looks for them (kube-apiserver decodes those patches
/// strictly; a JSON patch's body is not checked).
pub(super) fn patch_duplicates(
    kind: PatchKind,
    body: &[u8],
    directive: FieldValidation,
) -> Vec<String> {
    match kind {
        PatchKind::Merge | PatchKind::Strategic if directive.checks() => {
            fields::patch_duplicates(body)
        }
        _ => Vec::new(),
    }
}

/// Drop the unknown fields of a patched object `new` (its schema: `prune`)
/// and decide per `directive`, as kube-apiserver's patchers do: the
/// patch body's duplicates (`dups`) then the patched object's unknown
/// fields are warnings (returned) or, under Strict, 422 Invalid: `"" is
/// invalid: patch: Invalid value: "<patched object>": strict decoding
/// error: ...` (a strategic merge patch shows the patch, as Go prints a map).
pub(super) fn check_patched(
    kind: PatchKind,
    body: &[u8],
    directive: FieldValidation,
    dups: &[String],
    new: &mut Value,
    prune: impl FnOnce(&mut Value) -> Vec<String>,
) -> Result<Vec<String>, ApiError> {
    let before = (directive == FieldValidation::Strict && kind != PatchKind::Strategic)
        .then(|| new.to_string());
    let pruned = prune(new);
    if !directive.checks() {
        return Ok(Vec::new());
    }
    let mut errs = dups.to_vec();
    errs.extend(fields::unknown(&pruned));
    if errs.is_empty() || directive == FieldValidation::Warn {
        return Ok(errs);
    }
    let shown = before.unwrap_or_else(|| {
        serde_json::from_slice::<Value>(body).map_or_else(|_| String::new(), |p| go_map(&p))
    });
    Err(ApiError::unprocessable(format!(
        " \"\" is invalid: patch: Invalid value: {}: {}",
        Value::String(shown),
        fields::strict_message(&errs)
    )))
}

/// A JSON value as Go's `%+v` prints the `map[string]interface{}` it
/// decodes to: `map[a:1 b:[x y]]`, keys sorted.
fn go_map(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let items: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{k}:{}", go_map(v)))
                .collect();
            format!("map[{}]", items.join(" "))
        }
        Value::Array(a) => {
            let items: Vec<String> = a.iter().map(go_map).collect();
            format!("[{}]", items.join(" "))
        }
        Value::String(s) => s.clone(),
        Value::Null => "<nil>".into(),
        other => other.to_string(),
    }
}

pub(super) fn patch(req: &Req<'_>, t: &Target) -> Result<Resp, ApiError> {
    let name = t.name.as_deref().unwrap_or_default().to_string();
    let ct = req.header(header::CONTENT_TYPE);
    // kube-apiserver's words for a patch type nobody serves.
    let kind = PatchKind::from_content_type(ct).ok_or_else(|| {
        let mut e = ApiError::unsupported_media_type("415: Unsupported Media Type");
        e.details = Some(serde_json::json!({}));
        e
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
    let now = req.now();
    let av = t.info.api_version();
    let sub = t.sub.name();
    if kind == PatchKind::Apply {
        return apply(req, t, &name, &now, &opts);
    }
    let manager = req.field_manager(&opts);
    let held = allocator(req, t, ns_of(t), &name);
    let escalation = Escalation::for_write(req.state, &req.user, &t.info.group, &t.info.plural);
    let dups = patch_duplicates(kind, &req.body, opts.field_validation);
    let warnings = RefCell::new(Vec::new());
    // A merge patch is parsed once: merged, then its own keys say what it
    // wrote (only those are pruned). A malformed one fails in the update,
    // after the object is found, as before.
    let merge_patch = (kind == PatchKind::Merge)
        .then(|| patch::parse_merge_patch(&req.body).map_err(|e| patch_error(t, &name, e)));
    let at = updating(t, &name);
    let stored = req
        .state
        .store
        .update_with(&t.info, ns_of(t), &name, opts.commit, |old| {
            let old = &*request_form(req, t, old)?;
            let mut new = old.clone();
            let res = match (kind, &merge_patch) {
                (_, Some(Err(e))) => return Err(e.clone()),
                (_, Some(Ok(p))) => patch::merge_parsed(&mut new, p),
                (PatchKind::Json, None) => patch::apply_json_patch(&mut new, &req.body),
                (PatchKind::Strategic, None) => {
                    patch::apply_strategic_merge_patch(&mut new, &req.body, &t.info.kind)
                }
                (PatchKind::Merge | PatchKind::Apply, None) => unreachable!("handled above"),
            };
            res.map_err(|e| patch_error(t, &name, e))?;
            if !new.is_object() {
                return Err(ApiError::unprocessable(
                    "the patch did not produce an object",
                ));
            }
            *warnings.borrow_mut() = check_patched(
                kind,
                &req.body,
                opts.field_validation,
                &dups,
                &mut new,
                |v| match &merge_patch {
                    Some(Ok(p)) => fields::prune_merge_patched(&t.info, v, p),
                    _ => fields::prune_changed(&t.info, v, old),
                },
            )?;
            check_identity(t, &mut new, Some(&name))?;
            if req.admission.mutate(&at, Some(old), &mut new)? {
                check_identity(t, &mut new, Some(&name))?;
            }
            if t.sub == Subresource::Main {
                strategy::validate(&t.info, &new)?;
            }
            strategy::check_subresource(&t.info, t.sub, &name, old, &new)?;
            let mut new = strategy::prepare_update(&t.info, t.sub, old, new);
            strategy::admit(&t.info, Some(old), &mut new)?;
            if let Some(e) = &escalation {
                e.check(&t.info.plural, &new)?;
            }
            allocate(held.as_ref(), &name, Some(old), &mut new)?;
            if patch::tracks_update(old, &new) {
                patch::record_update(Some(old), &mut new, &manager, &now, &av, sub);
            }
            req.admission.validate(&at, Some(old), Some(&new))?;
            storage_form(req, t, new)
        })?;
    Ok(with_warnings(
        written(req, t, &stored, opts.commit),
        &warnings.into_inner(),
    ))
}

pub(super) fn apply(
    req: &Req<'_>,
    t: &Target,
    name: &str,
    now: &str,
    opts: &WriteOptions,
) -> Result<Resp, ApiError> {
    let warnings = apply_field_errors(req, t, name, opts.field_validation)?;
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
    let escalation = Escalation::for_write(req.state, &req.user, &t.info.group, &t.info.plural);
    let at = updating(t, name);
    // Update if present, create if absent; a create that loses a race with
    // another create retries as an update.
    for _ in 0..3 {
        // Released before a create below takes it again.
        let held = allocator(req, t, ns_of(t), name);
        let res = req
            .state
            .store
            .update_with(&t.info, ns_of(t), name, opts.commit, |old| {
                let old = &*request_form(req, t, old)?;
                let mut merged = patch::server_side_apply(Some(old), &req.body, &apply_opts)
                    .map_err(|e| patch_error(t, name, e))?;
                check_identity(t, &mut merged, Some(name))?;
                if req.admission.mutate(&at, Some(old), &mut merged)? {
                    check_identity(t, &mut merged, Some(name))?;
                }
                if t.sub == Subresource::Main {
                    strategy::validate(&t.info, &merged)?;
                }
                strategy::check_subresource(&t.info, t.sub, name, old, &merged)?;
                let mut new = strategy::prepare_update(&t.info, t.sub, old, merged);
                strategy::admit(&t.info, Some(old), &mut new)?;
                if let Some(e) = &escalation {
                    e.check(&t.info.plural, &new)?;
                }
                allocate(held.as_ref(), name, Some(old), &mut new)?;
                req.admission.validate(&at, Some(old), Some(&new))?;
                storage_form(req, t, new)
            });
        drop(held);
        match res {
            Ok(stored) => {
                return Ok(with_warnings(
                    written(req, t, &stored, opts.commit),
                    &warnings,
                ));
            }
            Err(e) if e.code == 404 && e.reason == "NotFound" && t.sub == Subresource::Main => {
                access::may_create(
                    req.state,
                    &req.user,
                    &t.info.group,
                    &t.info.plural,
                    ns_of(t),
                    name,
                )?;
                let create = patch::ApplyOptions {
                    subresource: None,
                    ..apply_opts
                };
                let mut obj = patch::server_side_apply(None, &req.body, &create)
                    .map_err(|e| patch_error(t, name, e))?;
                match create_object(req, t, &mut obj, Some(name), &manager, opts.commit) {
                    Ok(stored) => {
                        return Ok(with_warnings(
                            render(req, t, &stored, StatusCode::CREATED),
                            &warnings,
                        ));
                    }
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

/// An apply body's unknown and duplicate fields, as kube-apiserver's apply
/// patcher decides them. Unknown fields of a built-in kind fail whatever
/// the directive: server-side apply converts the applied configuration to
/// its typed schema first (500 with no reason, `failed to create typed
/// patch object (ns/name; apps/v1, Kind=Deployment): .spec.replica: field
/// not declared in schema`). Then, under Strict or Warn, a duplicate key
/// (YAML's, or JSON's read as YAML): 400 `error strict decoding YAML:
/// ...` or a warning `line N: key "k" already set in map`.
fn apply_field_errors(
    req: &Req<'_>,
    t: &Target,
    name: &str,
    directive: FieldValidation,
) -> Result<Vec<String>, ApiError> {
    if let Ok(mut applied) = patch::parse_applied(&req.body) {
        let mut pruned = fields::prune_unknown(&t.info, &mut applied);
        if !t.info.builtin {
            if let Some(meta) = applied.get_mut("metadata") {
                pruned.extend(fields::prune_object_meta(meta, "metadata"));
            }
            if let Some(schema) = &t.info.schema {
                schema.each_embedded_metadata(&mut applied, &mut |path, meta| {
                    pruned.extend(fields::prune_object_meta(meta, path));
                });
            }
            pruned.sort();
        }
        if !pruned.is_empty() {
            // structured-merge-diff's paths start with a dot.
            let errs: Vec<String> = pruned
                .iter()
                .map(|p| format!(".{p}: field not declared in schema"))
                .collect();
            let errs = if let [one] = errs.as_slice() {
                one.clone()
            } else {
                format!("errors:\n  {}", errs.join("\n  "))
            };
            return Err(ApiError::unknown(format!(
                "failed to create typed patch object ({}/{name}; {}/{}, Kind={}): {errs}",
                ns_of(t),
                t.info.group,
                t.info.version,
                t.info.kind
            )));
        }
    }
    if !directive.checks() {
        return Ok(Vec::new());
    }
    match fields::yaml_duplicate(&req.body) {
        Some(d) if directive == FieldValidation::Strict => Err(ApiError::bad_request(format!(
            "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  {d}"
        ))),
        Some(d) => Ok(vec![d]),
        None => Ok(Vec::new()),
    }
}
