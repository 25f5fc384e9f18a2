//! The API's vocabulary, below everything else: errors as metav1.Status,
//! the clock, name and label validation, label, field and shard
//! selectors, the protobuf encoding, and the patch formats.
//!
//! Nothing here knows a kind, the store or a request.

pub mod certificate;
pub mod clock;
pub mod patch;
pub mod proto;
pub mod selector;
pub mod shard;
pub mod status;
pub mod validation;
