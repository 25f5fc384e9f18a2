//! Deletes: one object (with DeleteOptions) or a collection.

use http::StatusCode;
use serde_json::{Value, json};

use super::body::delete_spec;
use super::params::{ListOptions, encode_continue};
use super::request::{Req, Target, committed, filter_of, ns_of};
use super::response::{Resp, json_response, render};
use crate::admission::{At, MAX_ROUNDS, Operation};
use crate::machinery::status::ApiError;
use crate::storage::store::{Commit, DeleteSpec, Deleted, StoredObject};

pub(super) fn delete(req: &Req<'_>, t: &Target) -> Result<Resp, ApiError> {
    let name = t.name.as_deref().unwrap_or_default();
    let spec = delete_spec(req)?;
    let (obj, removed) = match admitted_delete(req, t, ns_of(t), name, "", &spec)? {
        Deleted::Removed(o) => (o, true),
        Deleted::Terminating(o) => (o, false),
    };
    if spec.commit == Commit::Store {
        committed(req, t, &obj);
    }
    if removed && !crate::storage::strategy::returns_deleted_object(&t.info) {
        return Ok(json_response(StatusCode::OK, &deleted_status(t, &obj)));
    }
    Ok(render(req, t, &obj, StatusCode::OK))
}

/// Delete one object once the admission webhooks have seen it: the delete
/// then carries the resourceVersion they saw as a precondition (unless the
/// client set one), and starts over if the object changed meanwhile.
/// `request_name` is the name admission is told (`""` in a collection).
fn admitted_delete(
    req: &Req<'_>,
    t: &Target,
    ns: &str,
    name: &str,
    request_name: &str,
    spec: &DeleteSpec,
) -> Result<Deleted, ApiError> {
    if let Some(why) = t.info.strategy.undeletable(name) {
        let plural = &t.info.plural;
        return Err(
            ApiError::forbidden(format!("{plural} {name:?} is forbidden: {why}")).with_details(
                &t.info.group,
                plural,
                name,
            ),
        );
    }
    if !req.admission.active() {
        return req.state.store.delete(&t.info, ns, name, spec);
    }
    let at = At {
        operation: Operation::Delete,
        info: &t.info,
        sub: None,
        namespace: ns,
        name: request_name,
    };
    for _ in 0..MAX_ROUNDS {
        let Some(current) = req.state.store.get(&t.info.storage_key(), ns, name) else {
            return req.state.store.delete(&t.info, ns, name, spec);
        };
        req.admission.delete(&at, &current.value())?;
        let mut seen = spec.clone();
        let ours = seen.resource_version.is_none();
        if ours {
            seen.resource_version = Some(current.rv.to_string());
        }
        match req.state.store.delete(&t.info, ns, name, &seen) {
            Err(e) if e.code == 409 && ours => {}
            done => return done,
        }
    }
    Err(ApiError::conflict_modified(
        &t.info.group,
        &t.info.plural,
        name,
    ))
}

/// kube-apiserver's answer to a removal: `Status{Success}` with the
/// object's name, group, resource (in `kind`, as the real server puts it)
/// and uid, so a client can tell it is gone, not waiting on finalizers.
fn deleted_status(t: &Target, obj: &StoredObject) -> Value {
    let mut details = json!({
        "name": obj.name(),
        "kind": t.info.plural,
        "uid": obj.uid.to_string(),
    });
    // Left out for the core group, as kube-apiserver does.
    if !t.info.group.is_empty() {
        details["group"] = t.info.group.clone().into();
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    })
}

/// Delete every object a list with these options returns. As in
/// kube-apiserver, the list options are decoded and validated first, then
/// the DeleteOptions; nothing is deleted unless both are valid. With a
/// `limit` only that one page is deleted, and the answer carries the
/// `continue` token of the next (as the real server does); a `continue`
/// token starts after its object. The objects are taken from the current
/// state whatever `resourceVersion` says (a fresher view than the real
/// server's watch cache may serve), and answered as listed, before their
/// deletion (one deleted concurrently too).
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
    for o in &page.items {
        // Namespaces have no deletecollection (the router refuses it).
        match admitted_delete(req, t, o.namespace(), o.name(), "", &spec) {
            Ok(Deleted::Removed(o) | Deleted::Terminating(o)) => {
                if spec.commit == Commit::Store {
                    committed(req, t, &o);
                }
            }
            // Deleted concurrently: nothing to do.
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    // The answer is the list the deletions were made from, as
    // kube-apiserver's is: the objects as they were listed. A built-in
    // kind's items without apiVersion and kind, as kube-apiserver writes a
    // list of them.
    let items: Vec<Value> = page
        .items
        .iter()
        .map(|o| {
            let mut v = o.value();
            if t.info.builtin
                && let Some(m) = v.as_object_mut()
            {
                m.remove("apiVersion");
                m.remove("kind");
            }
            v
        })
        .collect();
    let mut meta = json!({"resourceVersion": page.rv.to_string()});
    if let Some((ns, name)) = &page.continue_after {
        meta["continue"] = encode_continue(page.rv, ns, name).into();
    }
    Ok(json_response(
        StatusCode::OK,
        &json!({"kind": t.info.list_kind, "apiVersion": t.info.api_version(),
                "metadata": meta, "items": items}),
    ))
}
