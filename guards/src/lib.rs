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
//!
//! Each guard's decision is a pure function of the objects it read, so it
//! can be checked without a server. The LWS race: owner `web` was deleted
//! and re-created (uid L1, then L2) while the garbage collector had not yet
//! removed L1's StatefulSet `web`:
//!
//! ```
//! use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
//! use ward_guards::await_deletion::{Blocked, ChildState, judge};
//!
//! let sts = ObjectMeta {
//!     name: Some("web".into()),
//!     uid: Some("S1".into()),
//!     owner_references: Some(vec![OwnerReference {
//!         controller: Some(true),
//!         uid: "L1".into(),
//!         ..Default::default()
//!     }]),
//!     ..Default::default()
//! };
//! // L2's reconcile must not take it over: it waits for its deletion ...
//! assert_eq!(
//!     judge(Some(&sts), "L2", false).unwrap(),
//!     ChildState::Blocked(Blocked::OwnedByAnother { uid: "S1".into(), owner_uid: "L1".into() }),
//! );
//! // ... and, once L1's StatefulSet is gone, creates its own.
//! assert_eq!(judge(None, "L2", false).unwrap(), ChildState::Absent);
//! ```
//!
//! In a controller that decision is one line,
//! `GuardedController::new(api, cfg).guard(AwaitDeletion::<Lws, StatefulSet>::new(|l| l.name_any()))`:
//! the reconcile waits, and is woken by the StatefulSet's DELETED event.

#![warn(missing_docs)]

pub mod await_deletion;
pub mod liveness;
pub mod occ_patch;
pub mod owner_uid;
