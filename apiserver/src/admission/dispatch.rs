//! Calling the webhooks an admission step needs: which take the request
//! ([`takes`]), the HTTPS call with its faults and failure policy
//! ([`call_one`]), the mutating chain with reinvocation ([`mutate`]) and
//! the validating webhooks together ([`validate`]); and where a webhook is
//! ([`resolve`]).

use std::sync::Arc;

use serde_json::{Map, Value};

use super::call;
use super::config::{self, Webhook};
use super::context::Context;
use super::matching::{self, Conditions};
use super::review::{self, Request};
use crate::faults::{Faults, WebhookAction};
use crate::machinery::status::ApiError;
use crate::registry::resources::StorageKey;
use crate::storage::store::Store;

/// Whether `hook` takes the request; Err when its conditions fail to
/// evaluate under Fail.
fn takes(
    hook: &Webhook,
    r: &Request<'_>,
    ns_labels: Option<&Map<String, Value>>,
    uid: &str,
) -> Result<bool, ApiError> {
    if !matching::rules_match(&hook.rules, r) || !matching::selectors_match(hook, r, ns_labels) {
        return Ok(false);
    }
    match matching::conditions(hook, r, &r.json(uid)) {
        Conditions::Match => Ok(true),
        Conditions::Skip => Ok(false),
        Conditions::Error(_) if hook.ignore_failures => Ok(false),
        Conditions::Error(e) => {
            let gr = crate::machinery::status::group_resource(r.group, r.resource);
            Err(ApiError::forbidden(if r.name.is_empty() {
                format!("{gr} is forbidden: {e}")
            } else {
                format!("{gr} {:?} is forbidden: {e}", r.name)
            }))
        }
    }
}

/// A review's uid, drawn from the server's seeded generator.
pub(crate) fn review_uid(faults: &Faults) -> String {
    let (a, b) = (faults.random(), faults.random());
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        (b >> 48) & 0x3fff | 0x8000,
        b & 0xffff_ffff_ffff
    )
}

/// Calls one webhook and reads its answer: Ok(None) when the call failed
/// and its policy is Ignore.
async fn call_one(
    hook: &Webhook,
    r: &Request<'_>,
    ctx: &Context<'_>,
) -> Result<Option<review::Verdict>, ApiError> {
    if r.dry_run && !hook.dry_run_safe() {
        return Err(ApiError::bad_request(format!(
            "admission webhook {:?} does not support dry run",
            hook.name
        )));
    }
    let uid = review_uid(ctx.faults);
    let body =
        serde_json::to_vec(&r.review(&uid)).map_err(|e| ApiError::internal(e.to_string()))?;
    // A body that does not decode fails in the client, as a call does.
    let decoded = call(hook, body, ctx).await.and_then(|bytes| {
        serde_json::from_slice::<Value>(&bytes)
            .map_err(|e| format!("couldn't get version/kind; json parse error: {e}"))
    });
    let outcome = match decoded {
        Ok(answer) => review::Verdict::read(&answer, &uid, hook.mutating)
            .map_err(|e| format!("received invalid webhook response: {e}")),
        Err(e) => Err(format!("failed to call webhook: {e}")),
    };
    match outcome {
        Ok(v) => Ok(Some(v)),
        Err(e) if hook.ignore_failures => {
            tracing::warn!(webhook = %hook.name, error = %e, "failed calling webhook, failing open");
            Ok(None)
        }
        Err(e) => Err(ApiError::internal(format!(
            "Internal error occurred: failed calling webhook {:?}: {e}",
            hook.name
        ))),
    }
}

/// The HTTPS call, with the webhook faults that fire for it.
async fn call(hook: &Webhook, body: Vec<u8>, ctx: &Context<'_>) -> Result<bytes::Bytes, String> {
    let target = resolve(&hook.endpoint, hook.timeout, ctx.store)?;
    match ctx.faults.webhook_fault(&hook.name) {
        None => {}
        Some(WebhookAction::Delay(d)) => {
            let d = ctx.faults.draw(d);
            if d >= hook.timeout {
                tokio::time::sleep(hook.timeout).await;
                return Err(format!("Post {:?}: context deadline exceeded", target.url));
            }
            tokio::time::sleep(d).await;
            let left = hook.timeout - d;
            return call::post(&target, &hook.ca_bundle, body, left).await;
        }
        Some(WebhookAction::Refuse) => {
            return Err(format!(
                "Post {:?}: dial tcp {}: connect: connection refused",
                target.url, target.dial
            ));
        }
        Some(WebhookAction::Timeout) => {
            tokio::time::sleep(hook.timeout).await;
            return Err(format!("Post {:?}: context deadline exceeded", target.url));
        }
    }
    call::post(&target, &hook.ca_bundle, body, hook.timeout).await
}

/// Where a webhook is called now: its URL, or a ready endpoint of its
/// Service (the EndpointSlice port named as the Service's port is).
///
/// # Errors
///
/// A Service or port that does not exist, or no ready endpoint, as
/// kube-apiserver's service resolver words them.
pub fn resolve(
    endpoint: &config::Endpoint,
    timeout: std::time::Duration,
    store: &Store,
) -> Result<call::Target, String> {
    let (namespace, name, path, port) = match endpoint {
        config::Endpoint::Url(url) => return call::Target::of_url(url, timeout),
        config::Endpoint::Service {
            namespace,
            name,
            path,
            port,
        } => (namespace, name, path, *port),
    };
    let services = StorageKey {
        group: String::new(),
        plural: "services".into(),
    };
    let service = store
        .get(&services, namespace, name)
        .ok_or_else(|| format!("service \"{name}\" not found"))?
        .value();
    let svc_port = (service["spec"]["ports"].as_array().into_iter().flatten())
        .find(|p| p["port"].as_u64() == Some(u64::from(port)))
        .ok_or_else(|| format!("no service port {port} found for service \"{name}\""))?;
    let port_name = svc_port["name"].as_str().unwrap_or_default();
    let slices = StorageKey {
        group: "discovery.k8s.io".into(),
        plural: "endpointslices".into(),
    };
    let page = store.list(&slices, Some(namespace), None, None, |o| {
        o.label("kubernetes.io/service-name") == Some(name.as_str())
    });
    for slice in &page.items {
        let slice = slice.value();
        let Some(p) = (slice["ports"].as_array().into_iter().flatten())
            .find(|p| p["name"].as_str().unwrap_or_default() == port_name)
            .and_then(|p| p["port"].as_u64())
            .and_then(|p| u16::try_from(p).ok())
        else {
            continue;
        };
        let ready = (slice["endpoints"].as_array().into_iter().flatten())
            .filter(|e| e["conditions"]["ready"] != false)
            .find_map(|e| e["addresses"][0].as_str());
        if let Some(address) = ready {
            return Ok(call::Target::of_service(
                address, p, name, namespace, path, timeout,
            ));
        }
    }
    Err(format!("no endpoints available for service \"{name}\""))
}

/// The mutating step: each webhook that takes the request, in order, on
/// the object the previous one made; then, once, those with
/// `reinvocationPolicy: IfNeeded` whose output a later webhook changed.
pub(super) async fn mutate(
    hooks: &[Arc<Webhook>],
    request: Request<'_>,
    ns_labels: Option<&Map<String, Value>>,
    ctx: &Context<'_>,
    warnings: &mut Vec<String>,
) -> Result<Value, ApiError> {
    let mut object = request.object.cloned();
    // Each called webhook's output, for reinvocation.
    let mut outputs: Vec<(usize, Option<Value>)> = Vec::new();
    for pass in 0..2 {
        for (i, hook) in hooks.iter().enumerate() {
            if pass == 1 {
                let Some((_, out)) = outputs.iter().find(|(j, _)| *j == i) else {
                    continue;
                };
                if !hook.reinvoke || *out == object {
                    continue;
                }
            }
            let current = object.clone();
            let mut request = request.clone();
            request.object = current.as_ref();
            if !takes(hook, &request, ns_labels, "")? {
                continue;
            }
            let Some(verdict) = call_one(hook, &request, ctx).await? else {
                continue;
            };
            warnings.extend(verdict.warnings.iter().cloned());
            if !verdict.allowed {
                return Err(ApiError::from_status(&review::denial(
                    &hook.name,
                    verdict.status.as_ref(),
                )));
            }
            if let Some(patch) = &verdict.patch {
                if verdict.patch_type != "JSONPatch" {
                    let e = format!("unsupported patch type {:?}", verdict.patch_type);
                    if hook.ignore_failures {
                        tracing::warn!(webhook = %hook.name, error = %e, "failed calling webhook, failing open");
                        continue;
                    }
                    return Err(ApiError::internal(format!(
                        "Internal error occurred: failed calling webhook {:?}: {e}",
                        hook.name
                    )));
                }
                let Some(obj) = object.as_mut() else {
                    return Err(ApiError::internal(format!(
                        "Internal error occurred: admission webhook {:?} attempted to modify the object, which is not supported for this operation",
                        hook.name
                    )));
                };
                apply_patch(obj, patch)
                    .map_err(|e| ApiError::internal(format!("Internal error occurred: {e}")))?;
            }
            outputs.retain(|(j, _)| *j != i);
            outputs.push((i, object.clone()));
        }
        // Reinvocation: only if something changed after a webhook that
        // asks for it.
        let again = outputs
            .iter()
            .any(|(i, out)| hooks[*i].reinvoke && *out != object);
        if !again {
            break;
        }
    }
    Ok(object.unwrap_or(Value::Null))
}

fn apply_patch(obj: &mut Value, patch: &[u8]) -> Result<(), String> {
    let p: json_patch::Patch = serde_json::from_slice(patch).map_err(|e| format!("json: {e}"))?;
    let mut patched = obj.clone();
    json_patch::patch(&mut patched, &p).map_err(|e| e.to_string())?;
    if !patched.is_object() {
        return Err("the patch did not produce an object".into());
    }
    *obj = patched;
    Ok(())
}

/// The validating step: every webhook that takes the request, called
/// together; the first denial or failure (in webhook order) is the
/// answer.
pub(super) async fn validate(
    hooks: &[Arc<Webhook>],
    request: &Request<'_>,
    ns_labels: Option<&Map<String, Value>>,
    ctx: &Context<'_>,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    let mut calls = Vec::new();
    for hook in hooks {
        if takes(hook, request, ns_labels, "")? {
            calls.push(async move {
                let verdict = call_one(hook, request, ctx).await?;
                Ok::<_, ApiError>(verdict.map(|v| {
                    let denied = (!v.allowed).then(|| {
                        ApiError::from_status(&review::denial(&hook.name, v.status.as_ref()))
                    });
                    (v.warnings, denied)
                }))
            });
        }
    }
    let mut first = None;
    for r in futures::future::join_all(calls).await {
        match r {
            Ok(Some((w, denied))) => {
                warnings.extend(w);
                first = first.or(denied);
            }
            Ok(None) => {}
            Err(e) => first = first.or(Some(e)),
        }
    }
    first.map_or(Ok(()), Err)
}
