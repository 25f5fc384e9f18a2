//! Deletes: one object (with DeleteOptions) or a collection.

use super::read::filter_of;
use super::write::{is_crd, reject_dry_run};
use super::*;

/// DeleteOptions from the body (if any) and the query.
pub(super) fn delete_spec(req: &Req<'_>) -> Result<DeleteSpec, ApiError> {
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
    if body["dryRun"].as_array().is_some_and(|a| !a.is_empty()) {
        return Err(ApiError::bad_request(
            "dryRun is not supported by ward-apiserver",
        ));
    }
    Ok(())
}

pub(super) fn delete(req: &Req<'_>, t: &Target) -> Result<Resp, ApiError> {
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

pub(super) fn delete_collection(req: &Req<'_>, t: &Target) -> Result<Resp, ApiError> {
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
            st.store.delete_namespace(&st.registry, o.name(), &spec)
        } else {
            st.store.delete(&t.info, o.namespace(), o.name(), &spec)
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
