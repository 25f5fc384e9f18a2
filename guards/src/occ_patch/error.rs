//! What an optimistic-concurrency write fails with, and the one message
//! kube-apiserver gives for every failed JSON patch.

use std::time::Duration;

/// The message a real kube-apiserver gives for ANY failed JSON patch
/// (a failed `test`, or a `remove` of a missing path): 422 Invalid with no
/// detail. Only a re-read can tell whether one of our tests failed.
pub const GENERIC_INVALID_PATCH: &str =
    "the server rejected our request due to an error in our request";

/// Errors of an optimistic-concurrency write.
#[derive(Debug, thiserror::Error)]
pub enum OccError {
    /// Every attempt conflicted until the deadline passed (or the attempt
    /// cap was reached).
    #[error("still conflicting after {attempts} attempts in {elapsed:?}")]
    Conflict {
        /// How many attempts were made.
        attempts: u32,
        /// How long they took (tokio time).
        elapsed: Duration,
    },
    /// The object under that name is not the expected one (another uid).
    #[error("the object was replaced: expected uid {expected}, found {found}")]
    Replaced {
        /// The uid pinned with [`OccPatch::expect_uid`](super::OccPatch::expect_uid).
        expected: String,
        /// The uid found.
        found: String,
    },
    /// `decide` aborted, for this reason.
    #[error("decision aborted: {0}")]
    Aborted(#[source] BoxError),
    /// A change cannot be made to the fresh object (bad path, nothing to
    /// remove or replace, no resourceVersion or uid to test).
    #[error("invalid change: {0}")]
    Invalid(String),
    /// The object read does not decode as the API's type.
    #[error("decoding the object failed: {0}")]
    Decode(#[source] serde_json::Error),
    /// Another API error.
    #[error("API call failed: {0}")]
    Kube(#[from] kube::Error),
}

/// The reason `decide` gives up: any error (a `&str` or `String` converts
/// with `.into()`), kept as the [`OccError::Aborted`] source.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;
