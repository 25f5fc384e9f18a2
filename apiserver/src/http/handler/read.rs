//! Reads: get, list (with stale views and pagination) and watch.

use axum::body::Body;
use futures::StreamExt;
use http::{Response, StatusCode, header};
use serde_json::{Value, json};

use super::params::{GetOptions, ListOptions, ReadAt, encode_continue};
use super::request::{Req, Target, filter_of, ns_of, stale_read_rv};
use super::response::{Resp, Streamed, bytes_response, converting, json_response, render};
use crate::machinery::status::ApiError;
use crate::storage::table;
use crate::storage::watch::{self, WatchSpec};

pub(super) fn get(req: &Req<'_>, t: &Target, opts: &GetOptions) -> Result<Resp, ApiError> {
    let name = t.name.as_deref().unwrap_or_default();
    let key = t.info.storage_key();
    let o = match stale_read_rv(req, opts.resource_version.is_some()) {
        Some(at) => req
            .state
            .store
            .list_at(at, &key, Some(ns_of(t)), None, None, |o| o.name() == name)
            .map_err(|floor| {
                ApiError::expired(format!("too old resource version: {at} ({floor})"))
            })?
            .items
            .pop(),
        None => req.state.store.get(&key, ns_of(t), name),
    }
    .ok_or_else(|| ApiError::not_found(&t.info.group, &t.info.plural, name))?;
    Ok(render(req, t, &o, StatusCode::OK))
}

/// kube-apiserver's answer to a `continue` token older than the history
/// kept (410), which carries a token to continue inconsistently: the
/// latest state from the same key (its resourceVersion 0 here, -1 in
/// kube's tokens).
const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// A list: the latest state, or one snapshot paged through
/// ([`ListOptions::read_at`]).
pub(super) fn list(req: &Req<'_>, t: &Target, opts: &ListOptions) -> Result<Resp, ApiError> {
    let filter = filter_of(req, t, opts)?;
    let limit = opts.limit;
    let after = opts.continue_after.as_ref();
    let store = &req.state.store;
    let (key, ns) = (t.info.storage_key(), t.namespace.as_deref());
    let latest = || store.list(&key, ns, after, limit, |o| filter.matches(o));
    let at = |rv: u64| store.list_at(rv, &key, ns, after, limit, |o| filter.matches(o));
    let too_old = |rv: u64, floor: u64| {
        ApiError::expired(format!("too old resource version: {rv} ({floor})"))
    };
    let reached = |rv: u64| {
        let current = store.current_rv();
        if rv > current {
            return Err(ApiError::timeout(format!(
                "Too large resource version: {rv}, current: {current}"
            )));
        }
        Ok(())
    };
    let page = match (
        stale_read_rv(req, opts.resource_version.is_some()),
        opts.read_at(),
    ) {
        (Some(frozen), _) => at(frozen).map_err(|floor| too_old(frozen, floor))?,
        (None, ReadAt::Latest) => latest(),
        (None, ReadAt::NotOlderThan(rv)) => {
            reached(rv)?;
            latest()
        }
        (None, ReadAt::Exact(rv)) => {
            reached(rv)?;
            at(rv).map_err(|floor| too_old(rv, floor))?
        }
        // A token to continue inconsistently: the latest state.
        (None, ReadAt::Continue(0)) => latest(),
        (None, ReadAt::Continue(rv)) => at(rv).map_err(|_| {
            let mut e = ApiError::expired(CONTINUE_EXPIRED);
            e.continue_token = after.map(|(ns, n)| encode_continue(0, ns, n));
            e
        })?,
    };
    // The list's metadata, whatever form the items take.
    let mut meta = json!({"resourceVersion": page.rv.to_string()});
    if let Some((ns, n)) = &page.continue_after {
        meta["continue"] = encode_continue(page.rv, ns, n).into();
        // As kube-apiserver: counted only when no selector filters the list.
        if opts.label_selector.is_none() && opts.field_selector.is_none() {
            meta["remainingItemCount"] = page.remaining.into();
        }
    }
    if let Some(shard) = &filter.shard {
        meta["shardInfo"] = json!({"selector": shard.as_str()});
    }
    if crate::storage::partial::wants_partial(req.header(header::ACCEPT)) {
        let list = crate::storage::partial::partial_list(&page.items, &meta);
        return Ok(bytes_response(StatusCode::OK, list));
    }
    if table::wants_table(req.header(header::ACCEPT)) {
        let objs: Vec<Value> = page
            .items
            .iter()
            .map(|o| {
                let mut v = o.value();
                v["apiVersion"] = t.info.api_version().into();
                v
            })
            .collect();
        return Ok(json_response(
            StatusCode::OK,
            &table::table(&t.info, &objs, meta),
        ));
    }
    let api_version = t.info.api_version();
    if !t.info.builtin && meta.get("continue").is_none() {
        // A custom resource's list is unstructured there: its `continue`
        // is written, empty, when there is none.
        meta["continue"] = "".into();
    }
    let list = crate::storage::render::list_json(
        &t.info.list_kind,
        &api_version,
        &meta,
        &page.items,
        |out, o| {
            let bytes = o.served_bytes(&t.info, &api_version);
            if t.info.builtin {
                crate::storage::render::write_without_type_meta(out, &bytes);
            } else {
                out.extend_from_slice(&bytes);
            }
        },
    );
    Ok(converting(t, bytes_response(StatusCode::OK, list)))
}

/// A watch event line with its object in `desired`; if the webhook
/// fails, the ERROR event kube-apiserver sends (500 InternalError) and
/// true: the watch ends there.
async fn converted_line(
    line: bytes::Bytes,
    conversion: &crate::conversion::Conversion,
    desired: &str,
    state: &super::state::State,
) -> (bytes::Bytes, bool) {
    let Ok(event) = serde_json::from_slice::<Value>(&line) else {
        return (line, false);
    };
    let object = &event["object"];
    if event["type"] == "ERROR" || event["type"] == "BOOKMARK" || object["apiVersion"] == desired {
        return (line, false);
    }
    match conversion
        .convert(vec![object.clone()], desired, &state.store, &state.faults)
        .await
    {
        Ok(mut done) => (
            watch::encode_line(
                event["type"].as_str().unwrap_or_default(),
                done.pop().unwrap_or_default().to_string().as_bytes(),
            ),
            false,
        ),
        Err(e) => {
            let mut status =
                ApiError::internal(format!("Internal error occurred: {}", e.message)).to_status();
            status["details"] = json!({"causes": [{"message": e.message}]});
            (
                watch::encode_line("ERROR", status.to_string().as_bytes()),
                true,
            )
        }
    }
}

pub(super) fn watch(req: &Req<'_>, t: &Target, opts: ListOptions) -> Result<Resp, ApiError> {
    let filter = filter_of(req, t, &opts)?;
    let accept = req.header(header::ACCEPT);
    let render: Option<watch::Render> = if crate::storage::partial::wants_partial(accept) {
        Some(watch::Render::Metadata)
    } else if table::wants_table(accept) {
        Some(watch::Render::Table)
    } else {
        None
    };
    let spec = WatchSpec {
        info: t.info.clone(),
        filter,
        from: opts.resource_version,
        bookmarks: opts.allow_watch_bookmarks,
        send_initial_events: opts.send_initial_events == Some(true),
        timeout: opts.timeout,
        bookmark_interval: req.state.config.bookmark_interval,
        render,
        view: Some((req.state.faults.clone(), req.client)),
    };
    let plain = spec.render.is_none();
    let rx = watch::start(&req.state.store, spec, req.state.shutdown.clone());
    let events = tokio_stream::wrappers::ReceiverStream::new(rx);
    let conversion = t
        .info
        .conversion
        .clone()
        .filter(|c| plain && c.by_webhook());
    let stream = match conversion {
        None => events.map(Ok::<_, std::convert::Infallible>).boxed(),
        Some(conversion) => {
            let state = req.state.clone();
            let desired = t.info.api_version();
            events
                .then(move |line| {
                    let (state, conversion, desired) =
                        (state.clone(), conversion.clone(), desired.clone());
                    async move { converted_line(line, &conversion, &desired, &state).await }
                })
                // After the ERROR event of a failed conversion, the watch ends.
                .scan(false, |ended, (line, failed)| {
                    let next = (!*ended).then_some(Ok::<_, std::convert::Infallible>(line));
                    *ended |= failed;
                    futures::future::ready(next)
                })
                .boxed()
        }
    };
    Ok(Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .extension(Streamed)
        .body(Body::from_stream(stream))
        .expect("static response parts are valid"))
}
