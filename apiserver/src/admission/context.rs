//! What calling webhooks and evaluating policies needs besides the
//! question: the store, the served kinds, the fault knobs and who asks.

use serde_json::Value;

use crate::faults::Faults;
use crate::storage::store::Store;

/// What calling webhooks needs besides the question.
#[derive(Debug)]
pub struct Context<'a> {
    /// The store (Services' EndpointSlices, namespaces' labels, params).
    pub store: &'a Store,
    /// The served kinds (a policy's `paramKind`).
    pub registry: &'a crate::registry::resources::Registry,
    /// The fault knobs (webhook faults).
    pub faults: &'a Faults,
    /// Who asks.
    pub user: &'a crate::auth::UserInfo,
    /// A dry run.
    pub dry_run: bool,
    /// The request's options.
    pub options: Value,
}
