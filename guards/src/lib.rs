//! Ward's ownership-aware guards, one file per guard. Each stops a "same
//! name, different object" race that kube-runtime's name-keyed scheduling
//! and caching leave open; each file's documentation opens with the race,
//! as a sequence of API events.
//!
//! - [`await_deletion`]: do not create, apply or adopt a named child while
//!   its predecessor is terminating or belongs to another owner UID.
//! - [`owner_uid`]: accept an object only if its controller owner is the
//!   live owner (fresh read), by UID.
//! - [`liveness`]: decide whether a pod still owns a record (an IP, a
//!   lease) from its phase, UID, status and the record's age.
//! - [`occ_patch`]: optimistic-concurrency patches and deletes that
//!   re-decide on fresh state after a conflict.

#![warn(missing_docs)]

pub mod await_deletion;
pub mod liveness;
pub mod occ_patch;
pub mod owner_uid;
