//! Subresources that act rather than store a representation of their own,
//! each a POST answering 201:
//! - `pods/eviction` (a `policy/v1` Eviction): deletes the pod unless a
//!   PodDisruptionBudget selecting it allows no disruption (429). No PDB
//!   means allowed; a PDB's `status.disruptionsAllowed` (no disruption
//!   controller runs here: a client or test sets it) is decremented and the
//!   pod recorded in `status.disruptedPods`, as kube-apiserver does.
//! - `pods/binding` (a Binding to a Node): sets `spec.nodeName` once (409
//!   when the pod is already bound), what a scheduler does.
//! - `serviceaccounts/token` (a TokenRequest): answers a ServiceAccount
//!   token — a JWT signed by the server, for the audiences asked (the
//!   issuer's by default), bound to the ServiceAccount's uid and, with a
//!   `boundObjectRef`, a Pod's — and its expiry (see [`crate::auth`]).

use http::StatusCode;
use serde_json::{Value, json};

use super::body::{parse_body, spec_from_body};
use super::params::{WriteOptions, WriteVerb};
use super::request::Req;
use super::response::{Resp, json_response};
use crate::auth::tokens;
use crate::machinery::selector::{LabelSelector, selector_string};
use crate::machinery::status::ApiError;
use crate::registry::resources::ResourceInfo;
use crate::storage::store::{Commit, DeleteSpec};

/// POST `sub` of object `ns/name` of `info` (one that acts, per
/// [`ResourceInfo::subresources`]).
pub(super) fn serve(
    req: &Req<'_>,
    info: &ResourceInfo,
    ns: &str,
    name: &str,
    sub: &str,
) -> Result<Resp, ApiError> {
    if req.method != http::Method::POST {
        return Err(ApiError::method_not_allowed(req.method.as_str()));
    }
    let body = parse_body(req)?;
    if let Some(n) = body["metadata"]["name"]
        .as_str()
        .filter(|n| !n.is_empty() && *n != name)
    {
        return Err(ApiError::bad_request(format!(
            "name in URL does not match name in {sub} object: {name} != {n}"
        )));
    }
    let call = Call {
        req,
        info,
        ns,
        name,
        body: &body,
        commit: WriteOptions::from_query(&req.query, WriteVerb::Create)?.commit,
    };
    match sub {
        "eviction" => evict(&call),
        "binding" => bind(&call),
        _ => token(&call),
    }
}

/// One POST to a subresource: the request, the object's kind and name,
/// the decoded body and whether it is a dry run (`dryRun=All`).
#[derive(Clone, Copy)]
struct Call<'a> {
    req: &'a Req<'a>,
    info: &'a ResourceInfo,
    ns: &'a str,
    name: &'a str,
    body: &'a Value,
    commit: Commit,
}

fn success() -> Resp {
    json_response(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}),
    )
}

fn evict(c: &Call<'_>) -> Result<Resp, ApiError> {
    let Call {
        req,
        info,
        ns,
        name,
        body,
        commit,
    } = *c;
    let store = &req.state.store;
    let pod = store
        .get(&info.storage_key(), ns, name)
        .ok_or_else(|| ApiError::not_found("", "pods", name))?;
    // kube-apiserver validates the Eviction's deleteOptions as a DELETE's.
    let mut spec = match &body["deleteOptions"] {
        Value::Null => DeleteSpec::default(),
        opts => spec_from_body(opts)?,
    };
    if commit == Commit::DryRun {
        spec.commit = Commit::DryRun;
    }
    let commit = spec.commit;
    let pod_v = pod.value();
    let done = matches!(
        pod_v["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    );
    if !done && !pod.terminating {
        let pdbs = req
            .state
            .registry
            .get("policy", "v1", "poddisruptionbudgets")
            .ok_or_else(|| ApiError::internal("policy/v1 poddisruptionbudgets are not served"))?;
        let matching: Vec<_> = store
            .list(&pdbs.storage_key(), Some(ns), None, None, |b| {
                selector_string(&b.value()["spec"]["selector"])
                    .and_then(|s| LabelSelector::parse(&s).ok())
                    .is_some_and(|sel| sel.matches(|k| pod.label(k)))
            })
            .items;
        match matching.as_slice() {
            [] => {}
            [pdb] => {
                let now = store.clock().rfc3339();
                store.update_with(&pdbs, ns, pdb.name(), commit, |b| {
                    let allowed = b["status"]["disruptionsAllowed"].as_i64().unwrap_or(0);
                    if allowed < 1 {
                        return Err(ApiError::too_many(format!(
                            "Cannot evict pod as it would violate the pod's disruption budget. The disruption budget {} needs {} healthy pods and has {} currently",
                            b["metadata"]["name"].as_str().unwrap_or_default(),
                            b["status"]["desiredHealthy"].as_i64().unwrap_or(0),
                            b["status"]["currentHealthy"].as_i64().unwrap_or(0),
                        )));
                    }
                    let mut b = b.clone();
                    b["status"]["disruptionsAllowed"] = (allowed - 1).into();
                    b["status"]["disruptedPods"][name] = now.clone().into();
                    Ok(b)
                })?;
            }
            _ => {
                return Err(ApiError::internal(
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                ));
            }
        }
    }
    store.delete(info, ns, name, &spec)?;
    Ok(success())
}

fn bind(c: &Call<'_>) -> Result<Resp, ApiError> {
    let Call {
        req,
        info,
        ns,
        name,
        body,
        commit,
    } = *c;
    let node = body["target"]["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ApiError::invalid("Binding", name, "target.name: Required value"))?;
    if body["target"]["kind"]
        .as_str()
        .is_some_and(|k| !k.is_empty() && k != "Node")
    {
        return Err(ApiError::invalid(
            "Binding",
            name,
            format!(
                "target.kind: Unsupported value: {}: supported values: \"Node\"",
                body["target"]["kind"]
            ),
        ));
    }
    req.state.store.update_with(info, ns, name, commit, |pod| {
        if pod["metadata"]["deletionTimestamp"].is_string() {
            return Err(ApiError::conflict(format!(
                "pod {name} is being deleted, cannot be assigned to a host"
            )));
        }
        match pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
            Some(bound) => Err(ApiError::conflict(format!(
                "pod {name} is already assigned to node \"{bound}\""
            ))),
            None => {
                let mut pod = pod.clone();
                pod["spec"]["nodeName"] = node.into();
                Ok(pod)
            }
        }
    })?;
    Ok(success())
}

fn token(c: &Call<'_>) -> Result<Resp, ApiError> {
    let Call {
        req,
        info,
        ns,
        name,
        body,
        commit: _,
    } = *c;
    let sa = req
        .state
        .store
        .get(&info.storage_key(), ns, name)
        .ok_or_else(|| ApiError::not_found("", "serviceaccounts", name))?;
    let seconds = match &body["spec"]["expirationSeconds"] {
        Value::Null => 3600,
        v => match v.as_i64() {
            Some(s) if s >= 600 => s,
            Some(_) => {
                return Err(ApiError::invalid(
                    "TokenRequest.authentication.k8s.io",
                    name,
                    "spec.expirationSeconds: Invalid value: may not specify a duration less than 10 minutes",
                ));
            }
            None => {
                return Err(ApiError::bad_request(
                    "spec.expirationSeconds must be an integer",
                ));
            }
        },
    };
    let audiences: Vec<String> = match &body["spec"]["audiences"] {
        Value::Null => Vec::new(),
        Value::Array(a) if a.iter().all(Value::is_string) => a
            .iter()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect(),
        _ => {
            return Err(ApiError::bad_request(
                "spec.audiences must be a list of strings",
            ));
        }
    };
    let pod = bound_pod(c, &body["spec"]["boundObjectRef"])?;
    let clock = req.state.store.clock();
    let now = clock.now();
    let expiry = now
        .saturating_add(jiff::SignedDuration::from_secs(seconds))
        .unwrap_or(now);
    let sa_uid = sa.uid.to_string();
    let claims = tokens::Claims {
        aud: if audiences.is_empty() {
            vec![tokens::ISSUER.to_string()]
        } else {
            audiences.clone()
        },
        exp: expiry.as_second(),
        iat: now.as_second(),
        nbf: now.as_second(),
        iss: tokens::ISSUER.into(),
        jti: tokens::random_token()[..32].to_string(),
        sub: format!("system:serviceaccount:{ns}:{name}"),
        kubernetes: tokens::Bound {
            namespace: ns.into(),
            serviceaccount: tokens::ObjectRef {
                name: name.into(),
                uid: sa_uid,
            },
            pod,
        },
    };
    let mut out = body.clone();
    out["kind"] = "TokenRequest".into();
    out["apiVersion"] = "authentication.k8s.io/v1".into();
    out["metadata"] = json!({"name": name, "namespace": ns, "creationTimestamp": clock.rfc3339()});
    out["spec"]["expirationSeconds"] = seconds.into();
    out["spec"]["audiences"] = json!(claims.aud);
    out["status"] = json!({
        "token": req.state.auth.issue(&claims),
        "expirationTimestamp": crate::machinery::clock::format_time(expiry),
    });
    Ok(json_response(StatusCode::CREATED, &out))
}

/// The Pod a TokenRequest's `boundObjectRef` names (with its uid), if any:
/// 400 for another kind, 404 when it is missing, 409 when its uid differs.
fn bound_pod(c: &Call<'_>, r: &Value) -> Result<Option<tokens::ObjectRef>, ApiError> {
    if r.is_null() {
        return Ok(None);
    }
    let kind = r["kind"].as_str().unwrap_or_default();
    if kind != "Pod" {
        return Err(ApiError::bad_request(format!(
            "spec.boundObjectRef.kind: Unsupported value: {kind:?}: supported values: \"Pod\""
        )));
    }
    let name = r["name"].as_str().unwrap_or_default();
    let key = crate::registry::resources::StorageKey {
        group: String::new(),
        plural: "pods".into(),
    };
    let pod = c
        .req
        .state
        .store
        .get(&key, c.ns, name)
        .ok_or_else(|| ApiError::not_found("", "pods", name))?;
    let uid = pod.uid.to_string();
    if let Some(want) = r["uid"].as_str().filter(|u| !u.is_empty())
        && want != uid
    {
        return Err(ApiError::conflict(format!(
            "the UID in the bound object reference ({want}) does not match the UID in record. The object might have been deleted and then recreated"
        )));
    }
    Ok(Some(tokens::ObjectRef {
        name: name.into(),
        uid,
    }))
}
