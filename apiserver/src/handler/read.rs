//! Reads: get, list (with stale views and pagination) and watch.

use super::params::{GetOptions, ListOptions};
use axum::body::Body;
use futures::StreamExt;
use http::{Response, StatusCode, header};
use serde_json::{Value, json};

use super::{Req, Resp, Target, bytes_response, json_response, ns_of, render, stale_read_rv};
use crate::filter::ObjectFilter;
use crate::status::ApiError;
use crate::table;
use crate::watch::{self, WatchSpec};

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

pub(super) fn filter_of(
    req: &Req<'_>,
    t: &Target,
    opts: &ListOptions,
) -> Result<ObjectFilter, ApiError> {
    let mut filter = ObjectFilter::new(
        &t.info,
        t.namespace.clone(),
        opts.label_selector.as_deref(),
        opts.field_selector.as_deref(),
    )?;
    // Without the feature the option is ignored, as kube-apiserver ignores
    // it with the gate off (a client then sees no `shardInfo`).
    if req.state.config.sharded_list_and_watch
        && let Some(s) = &opts.shard_selector
    {
        filter.shard = Some(
            crate::shard::ShardSelector::parse(s)
                .map_err(|e| ApiError::bad_request(format!("invalid shardSelector: {e}")))?,
        );
    }
    Ok(filter)
}

pub(super) fn encode_continue(ns: &str, name: &str) -> String {
    let raw = format!("{ns}\u{0}{name}");
    raw.bytes().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn decode_continue(token: &str) -> Result<(String, String), ApiError> {
    let bad = || ApiError::bad_request(format!("continue key is not valid: {token}"));
    if !token.len().is_multiple_of(2) {
        return Err(bad());
    }
    let bytes = (0..token.len())
        .step_by(2)
        .map(|i| {
            token
                .get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(bad)?;
    let s = String::from_utf8(bytes).map_err(|_| bad())?;
    let (ns, name) = s.split_once('\u{0}').ok_or_else(bad)?;
    // Tokens name the last object of a page: never an empty name.
    if name.is_empty() {
        return Err(bad());
    }
    Ok((ns.to_string(), name.to_string()))
}

pub(super) fn list(req: &Req<'_>, t: &Target, opts: &ListOptions) -> Result<Resp, ApiError> {
    let filter = filter_of(req, t, opts)?;
    let limit = opts.limit;
    let after = opts.continue_after.as_ref();
    let page = match stale_read_rv(req, opts.resource_version.is_some()) {
        Some(at) => req
            .state
            .store
            .list_at(
                at,
                &t.info.storage_key(),
                t.namespace.as_deref(),
                after,
                limit,
                |o| filter.matches(o),
            )
            .map_err(|floor| {
                ApiError::expired(format!("too old resource version: {at} ({floor})"))
            })?,
        None => req.state.store.list(
            &t.info.storage_key(),
            t.namespace.as_deref(),
            after,
            limit,
            |o| filter.matches(o),
        ),
    };
    // The list's metadata, whatever form the items take.
    let mut meta = json!({"resourceVersion": page.rv.to_string()});
    if let Some((ns, n)) = &page.continue_after {
        meta["continue"] = encode_continue(ns, n).into();
    }
    if let Some(shard) = &filter.shard {
        meta["shardInfo"] = json!({"selector": shard.as_str()});
    }
    if crate::partial::wants_partial(req.header(header::ACCEPT)) {
        let list = crate::partial::partial_list(&page.items, &meta);
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
    let list = super::list_json(
        &t.info.list_kind,
        &api_version,
        &meta,
        &page.items,
        |out, o| out.extend_from_slice(&o.bytes_at(&api_version)),
    );
    Ok(bytes_response(StatusCode::OK, list))
}

pub(super) fn watch(req: &Req<'_>, t: &Target, opts: ListOptions) -> Result<Resp, ApiError> {
    let filter = filter_of(req, t, &opts)?;
    let accept = req.header(header::ACCEPT);
    let render: Option<watch::Render> = if crate::partial::wants_partial(accept) {
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
    let rx = watch::start(&req.state.store, spec, req.state.shutdown.clone());
    let stream =
        tokio_stream::wrappers::ReceiverStream::new(rx).map(Ok::<_, std::convert::Infallible>);
    Ok(Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .extension(super::Streamed)
        .body(Body::from_stream(stream))
        .expect("static response parts are valid"))
}
