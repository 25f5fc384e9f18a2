//! The `/scale` subresource (`kubectl scale`, a HorizontalPodAutoscaler):
//! an `autoscaling/v1` Scale read from and written to the object — for
//! Deployments, ReplicaSets, StatefulSets, ReplicationControllers, and
//! custom resources whose CRD declares `subresources.scale`.
//!
//! GET answers the Scale; PUT takes a Scale; PATCH (merge, JSON or
//! strategic) patches the Scale as it is now; an apply (server-side apply)
//! applies a Scale, its conflicts those over the object's replicas. A write changes only the
//! replicas at the spec path, in one optimistic update of the object: a
//! Scale's `metadata.resourceVersion`, when given, must be the object's
//! (409), and `spec.replicas` must be a non-negative integer (422).
//! `dryRun=All` answers without storing, as for every write.

use std::cell::RefCell;

use http::{StatusCode, header};
use serde_json::{Value, json};

use super::body::{parse_checked, patch_error};
use super::params::{GetOptions, WriteOptions, WriteVerb};
use super::request::{Action, Req, Target, committed, ns_of};
use super::response::{Resp, json_response, with_warnings};
use super::write::{check_patched, patch_duplicates};
use crate::machinery::patch::{self, PatchKind};
use crate::machinery::status::ApiError;
use crate::registry::fields;
use crate::registry::resources::{ResourceInfo, ScalePaths};
use crate::storage::store::Commit;
use crate::storage::strategy::{self, Subresource};

/// The API version of the Scale a `/scale` subresource reads and writes.
const SCALE_VERSION: &str = "autoscaling/v1";

/// Serve `action` on `t`'s `/scale` (the router only sends get, update, patch).
pub(super) fn serve(req: &Req<'_>, t: &Target, action: Action) -> Result<Resp, ApiError> {
    let paths = t
        .info
        .scale
        .as_ref()
        .ok_or_else(|| ApiError::not_found("", "", ""))?;
    let name = t.name.as_deref().unwrap_or_default();
    match action {
        Action::Get => {
            GetOptions::from_query(&req.query)?;
            let o = req
                .state
                .store
                .get(&t.info.storage_key(), ns_of(t), name)
                .ok_or_else(|| ApiError::not_found(&t.info.group, &t.info.plural, name))?;
            Ok(json_response(StatusCode::OK, &scale_of(&o.value(), paths)))
        }
        Action::Update => {
            let opts = WriteOptions::from_query(&req.query, WriteVerb::Update)?;
            let (body, warnings) =
                parse_checked(req, t, SCALE_VERSION, "Scale", opts.field_validation)?;
            let resp = write(req, t, paths, &opts, |_, _| Ok(Scaled::to(body.clone())))?;
            Ok(with_warnings(resp, &warnings))
        }
        Action::Patch => {
            let ct = req.header(header::CONTENT_TYPE);
            let kind = PatchKind::from_content_type(ct).ok_or_else(|| {
                ApiError::unsupported_media_type(format!(
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml (got {ct:?})"
                ))
            })?;
            if kind == PatchKind::Apply {
                return apply(req, t, paths);
            }
            let opts = WriteOptions::from_query(&req.query, WriteVerb::Patch)?;
            let dups = patch_duplicates(kind, &req.body, opts.field_validation);
            let warnings = RefCell::new(Vec::new());
            let resp = write(req, t, paths, &opts, |_, mut scale| {
                match kind {
                    PatchKind::Json => patch::apply_json_patch(&mut scale, &req.body),
                    PatchKind::Strategic => {
                        patch::apply_strategic_merge_patch(&mut scale, &req.body, "Scale")
                    }
                    _ => patch::apply_merge_patch(&mut scale, &req.body),
                }
                .map_err(|e| patch_error(t, name, e))?;
                *warnings.borrow_mut() = check_patched(
                    kind,
                    &req.body,
                    opts.field_validation,
                    &dups,
                    &mut scale,
                    |v| fields::prune_kind(SCALE_VERSION, "Scale", v),
                )?;
                Ok(Scaled::to(scale))
            })?;
            Ok(with_warnings(resp, &warnings.into_inner()))
        }
        _ => Err(ApiError::method_not_allowed(req.method.as_str())),
    }
}

/// Server-side apply of a Scale: the parent's managers own its replicas as
/// kube-apiserver's ScaleHandler shows them to the Scale
/// ([`patch::apply_to_scale`]); the managedFields the apply leaves are the
/// object's.
fn apply(req: &Req<'_>, t: &Target, paths: &ScalePaths) -> Result<Resp, ApiError> {
    let opts = WriteOptions::from_query(&req.query, WriteVerb::Apply)?;
    let name = t.name.as_deref().unwrap_or_default();
    // WriteOptions refuses an apply without a field manager.
    let manager = req.field_manager(&opts);
    let now = req.state.store.clock().rfc3339();
    let av = t.info.api_version();
    let replicas: Vec<&str> = paths
        .spec_replicas
        .split('.')
        .filter(|s| !s.is_empty())
        .collect();
    let apply_opts = patch::ApplyOptions {
        manager: &manager,
        force: opts.force,
        now: &now,
        api_version: &av,
        kind: "Scale",
        name,
        subresource: Some("scale"),
    };
    // The applied Scale's resourceVersion, when given, is a precondition.
    let rv = patch::parse_applied(&req.body)
        .ok()
        .map(|b| b["metadata"]["resourceVersion"].clone());
    write(req, t, paths, &opts, |old, scale| {
        let done = patch::apply_to_scale(old, &scale, &replicas, &req.body, &apply_opts)
            .map_err(|e| patch_error(t, name, e))?;
        let mut scale = done.scale;
        if let Some(rv) = &rv {
            scale["metadata"]["resourceVersion"] = rv.clone();
        }
        Ok(Scaled {
            scale,
            managed_fields: Some(done.managed_fields),
        })
    })
}

/// What a write makes of the object's Scale.
struct Scaled {
    /// The Scale to store (its replicas; its resourceVersion, when given,
    /// a precondition).
    scale: Value,
    /// The object's managedFields an apply leaves (None: recorded as an
    /// update by the request's manager).
    managed_fields: Option<Value>,
}

impl Scaled {
    fn to(scale: Value) -> Self {
        Scaled {
            scale,
            managed_fields: None,
        }
    }
}

/// Update the object's replicas to those of the Scale `to_scale` makes
/// from the object and its current Scale; answer the Scale of the result.
fn write(
    req: &Req<'_>,
    t: &Target,
    paths: &ScalePaths,
    opts: &WriteOptions,
    to_scale: impl Fn(&Value, Value) -> Result<Scaled, ApiError>,
) -> Result<Resp, ApiError> {
    let name = t.name.as_deref().unwrap_or_default();
    let manager = req.field_manager(opts);
    let now = req.state.store.clock().rfc3339();
    let av = t.info.api_version();
    let stored = req
        .state
        .store
        .update_with(&t.info, ns_of(t), name, opts.commit, |old| {
            let Scaled {
                scale,
                managed_fields,
            } = to_scale(old, scale_of(old, paths))?;
            let replicas = replicas_of(&t.info, name, &scale)?;
            let mut new = old.clone();
            strategy::put_field(
                &mut new,
                &pointer(&paths.spec_replicas),
                Some(replicas.into()),
            );
            // The Scale's resourceVersion, when given, is the store's precondition (409).
            if let Some(rv) = scale["metadata"]["resourceVersion"]
                .as_str()
                .filter(|s| !s.is_empty())
            {
                new["metadata"]["resourceVersion"] = rv.into();
            }
            let applied = managed_fields.is_some();
            if let Some(managed) = managed_fields {
                let managed = Some(managed).filter(|m| !m.is_null());
                strategy::put_field(&mut new, "/metadata/managedFields", managed);
            }
            let mut new = strategy::prepare_update(&t.info, Subresource::Main, old, new);
            strategy::admit(&t.info, Some(old), &mut new)?;
            if !applied && patch::tracks_update(old, &new) {
                patch::record_update(Some(old), &mut new, &manager, &now, &av, Some("scale"));
                patch::untimed(&mut new, "scale");
            }
            Ok(new)
        })?;
    if opts.commit == Commit::Store {
        committed(req, t, &stored);
    }
    Ok(json_response(
        StatusCode::OK,
        &scale_of(&stored.value(), paths),
    ))
}

/// `spec.replicas` of a Scale: a non-negative integer (422 otherwise).
fn replicas_of(info: &ResourceInfo, name: &str, scale: &Value) -> Result<i64, ApiError> {
    let invalid = |why: &str| {
        ApiError::invalid(
            "Scale.autoscaling",
            name,
            format!(
                "spec.replicas: Invalid value: {}: {why}",
                scale["spec"]["replicas"]
            ),
        )
    };
    if scale["metadata"]["name"]
        .as_str()
        .is_some_and(|n| n != name)
    {
        return Err(ApiError::bad_request(format!(
            "the name of the Scale ({}) does not match the name of the {} ({name})",
            scale["metadata"]["name"], info.kind
        )));
    }
    match &scale["spec"]["replicas"] {
        Value::Null => Ok(0),
        v => match v.as_i64() {
            Some(n) if n >= 0 => Ok(n),
            Some(_) => Err(invalid("must be greater than or equal to 0")),
            None => Err(invalid("must be an integer")),
        },
    }
}

/// The `autoscaling/v1` Scale of `obj`.
#[must_use]
pub fn scale_of(obj: &Value, paths: &ScalePaths) -> Value {
    let m = &obj["metadata"];
    let mut meta = json!({"name": m["name"], "uid": m["uid"],
        "resourceVersion": m["resourceVersion"], "creationTimestamp": m["creationTimestamp"]});
    if m["namespace"].is_string() {
        meta["namespace"] = m["namespace"].clone();
    }
    let mut status =
        json!({"replicas": get_path(obj, &paths.status_replicas).as_i64().unwrap_or(0)});
    if let Some(sel) = paths.label_selector.as_deref().map(|p| get_path(obj, p))
        && let Some(s) = crate::machinery::selector::selector_string(sel)
    {
        status["selector"] = s.into();
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": meta,
        "spec": {"replicas": get_path(obj, &paths.spec_replicas).as_i64().unwrap_or(0)},
        "status": status,
    })
}

/// A CRD's `.a.b.c` path as a JSON pointer.
fn pointer(path: &str) -> String {
    path.replace('.', "/")
}

/// The value at a `.a.b.c` path (Null when absent).
fn get_path<'a>(obj: &'a Value, path: &str) -> &'a Value {
    obj.pointer(&pointer(path)).unwrap_or(&Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_read_and_write_nested_fields() {
        let mut o = json!({"spec": {"replicas": 3}});
        assert_eq!(get_path(&o, ".spec.replicas"), &json!(3));
        assert_eq!(get_path(&o, ".status.replicas"), &Value::Null);
        strategy::put_field(&mut o, &pointer(".spec.deep.count"), Some(json!(5)));
        assert_eq!(o["spec"]["deep"]["count"], 5);
        assert_eq!(o["spec"]["replicas"], 3);
        strategy::put_field(&mut o, &pointer(".spec.deep"), None);
        assert_eq!(o, json!({"spec": {"replicas": 3}}));
    }
}
