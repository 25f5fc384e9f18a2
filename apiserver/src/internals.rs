//! Internals this crate's integration tests and the workspace's
//! benchmarks reach: **not part of the public API**, no semver promise,
//! hidden from the docs. Anything a user needs belongs in a documented
//! module instead.

pub use crate::http::discovery::AGGREGATED_V2;
pub use crate::http::handler::PeerAddr;
pub use crate::machinery::proto;
pub use crate::machinery::shard;
pub use crate::registry::builtins::BUILTINS;
pub use crate::registry::fields::prune_kind;
pub use crate::storage::filter::ObjectFilter;
pub use crate::storage::watch::{WatchSpec, start as watch};
