//! A request as the verbs see it: the shared state, the client, the
//! method, headers, query and body ([`Req`]); the resource, namespace,
//! name and subresource it targets ([`Target`]); the action routing chose
//! ([`Action`]); the parts of its path before any lookup
//! ([`ResourcePath`]); and what every verb reads the same way (the filter of a
//! list, a frozen client's read version, the field manager).

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Method, header};

use super::params::{self, ListOptions};
use super::state::State;
use crate::faults::ClientId;
use crate::machinery::status::ApiError;
use crate::registry::kind::Subresource;
use crate::registry::resources::ResourceInfo;
use crate::storage::filter::ObjectFilter;
use crate::storage::store::StoredObject;

/// The resourceVersion a client's read is served at when its view is
/// frozen: reads that name a resourceVersion (informer lists, `rv=0`) are
/// stale, quorum reads (none named) only when the view says so.
pub(super) fn stale_read_rv(req: &Req<'_>, names_rv: bool) -> Option<u64> {
    let view = req.state.faults.view(req.client);
    let frozen = view.frozen_at?;
    (names_rv || view.stale_quorum_reads).then_some(frozen)
}

/// One request, as the verbs see it.
pub(super) struct Req<'a> {
    pub(super) state: &'a Arc<State>,
    pub(super) client: ClientId,
    /// Who sent it (authenticated, and authorized for what it asks).
    pub(super) user: Arc<crate::auth::UserInfo>,
    pub(super) method: &'a Method,
    pub(super) headers: &'a HeaderMap,
    pub(super) query: params::Query,
    pub(super) body: Bytes,
    /// What the admission webhooks answered in earlier passes of this
    /// request ([`crate::admission`]).
    pub(super) admission: crate::admission::Admission,
}

impl Req<'_> {
    /// A header's value (`""` when absent or not text).
    pub(super) fn header(&self, h: header::HeaderName) -> &str {
        self.headers
            .get(h)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// The time this write records, the same in every pass.
    pub(super) fn now(&self) -> String {
        self.admission.now(|| self.state.store.clock().rfc3339())
    }

    /// 405 unless the method is GET.
    pub(super) fn only_get(&self) -> Result<(), ApiError> {
        if self.method == Method::GET {
            Ok(())
        } else {
            Err(ApiError::method_not_allowed(self.method.as_str()))
        }
    }

    /// The manager a write is recorded under: `fieldManager`, else the
    /// user agent's first segment (as the real server defaults it).
    pub(super) fn field_manager(&self, opts: &params::WriteOptions) -> String {
        if let Some(m) = &opts.field_manager {
            return m.clone();
        }
        let ua = self.header(header::USER_AGENT);
        let m: String = ua
            .split('/')
            .next()
            .unwrap_or("")
            .chars()
            .take(128)
            .collect();
        if m.is_empty() { "unknown".into() } else { m }
    }
}

/// A request aimed at a served resource.
pub(super) struct Target {
    pub(super) info: Arc<ResourceInfo>,
    pub(super) namespace: Option<String>,
    pub(super) name: Option<String>,
    pub(super) sub: Subresource,
}

/// What a request asks of a served resource, decided from its method and
/// the shape of its path before any parameter is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    /// GET of one object (or its status).
    Get,
    /// GET of a collection: a list, or a watch when `watch` is set.
    List,
    /// POST to a namespace's (or a cluster-scoped kind's) collection.
    Create,
    /// PUT of one object (or its status).
    Update,
    /// PATCH of one object (or its status).
    Patch,
    /// DELETE of one object.
    Delete,
    /// DELETE of a namespace's (or a cluster-scoped kind's) collection.
    DeleteCollection,
}

impl Action {
    /// The discovery verb that must be served for this action (`list` also
    /// covers `watch`).
    pub(super) fn verb(self) -> &'static str {
        match self {
            Action::Get => "get",
            Action::List => "list",
            Action::Create => "create",
            Action::Update => "update",
            Action::Patch => "patch",
            Action::Delete => "delete",
            Action::DeleteCollection => "deletecollection",
        }
    }
}

/// After every committed write: a CRD's served resources follow the store.
pub(super) fn committed(req: &Req<'_>, t: &Target, obj: &StoredObject) {
    if crate::storage::crd::is_crd(&t.info) {
        crate::storage::crd::settle(&req.state.registry, &req.state.store, &obj.value());
    }
}

/// The target's namespace (`""` for a cluster-scoped one).
pub(super) fn ns_of(t: &Target) -> &str {
    t.namespace.as_deref().unwrap_or("")
}

/// The filter a list, watch or deletecollection applies: selectors, and
/// KEP-5866's `shardSelector` when the feature is on.
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
            req.state
                .shard_selectors
                .parse(s)
                .map_err(|e| ApiError::bad_request(format!("invalid shardSelector: {e}")))?,
        );
    }
    Ok(filter)
}

/// The parts of a resource path (`/api/{v}/...` or `/apis/{g}/{v}/...`),
/// before any lookup: what routing and write faults both read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ResourcePath<'a> {
    pub(super) group: &'a str,
    pub(super) version: &'a str,
    pub(super) namespace: Option<&'a str>,
    pub(super) plural: &'a str,
    pub(super) name: Option<&'a str>,
    pub(super) sub: Option<&'a str>,
}

impl<'a> ResourcePath<'a> {
    /// Split a decoded path; None when it is not a resource path.
    pub(super) fn parse(path: &'a str) -> Option<Self> {
        let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let (group, version, rest) = match segs.as_slice() {
            ["api", v, rest @ ..] => ("", *v, rest),
            ["apis", g, v, rest @ ..] => (*g, *v, rest),
            _ => return None,
        };
        let (namespace, rest) = match rest {
            // A namespace's own subresources.
            ["namespaces", _, "status" | "finalize"] => (None, rest),
            ["namespaces", ns, tail @ ..] if !tail.is_empty() => (Some(*ns), tail),
            _ => (None, rest),
        };
        let (plural, name, sub) = match rest {
            [p] => (*p, None, None),
            [p, n] => (*p, Some(*n), None),
            [p, n, s] => (*p, Some(*n), Some(*s)),
            _ => return None,
        };
        Some(ResourcePath {
            group,
            version,
            namespace,
            plural,
            name,
            sub,
        })
    }
}
