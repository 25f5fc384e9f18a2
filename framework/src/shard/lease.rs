//! The names a member Lease carries, shared by the member that writes it
//! and the watch that reads the others'.

/// The label naming a member Lease's ring.
pub const LABEL: &str = "ward.dev/ring";
/// The annotation listing the slots a member Lease's holder holds (32 hex
/// digits, slot 0 the lowest bit).
pub const ANNOTATION: &str = "ward.dev/shard-slots";
