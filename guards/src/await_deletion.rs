//! Await deletion: never create, apply over or adopt a named child while its
//! predecessor — the object of that name that belongs to an earlier owner —
//! is still there.
//!
//! The race it stops (LWS, with background deletion and a lagging GC):
//!
//! ```text
//! 1. LWS "test" (uid L1) owns StatefulSet "test" (controller ownerRef uid L1)
//! 2. DELETE LWS test (background) ... GC has not deleted StatefulSet test yet:
//!    it has NO deletionTimestamp, its ownerRef still says L1
//! 3. CREATE LWS "test" -> uid L2
//! 4. reconcile(L2): GET StatefulSet "test" -> L1's child; a check on
//!    deletionTimestamp alone passes; the controller takes its revision hash
//!    and applies over it
//! ```
//!
//! [`AwaitDeletion`] makes the reconcile of L2 wait while the child named for
//! it is terminating OR its controller ownerReference UID is not L2's live
//! UID, and wakes it on the child's DELETED event (a watch, not polling).
//!
//! ```no_run
//! use k8s_openapi::api::apps::v1::StatefulSet;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::ResourceExt;
//! use ward_guards::await_deletion::AwaitDeletion;
//!
//! // Before reconciling an owner (here a ConfigMap stands in for the LWS),
//! // wait for a predecessor StatefulSet of the same name to be gone.
//! let guard = AwaitDeletion::<ConfigMap, StatefulSet>::new(|owner| owner.name_any());
//! // GuardedController::new(api, cfg).guard(guard) ...
//! # let _ = guard;
//! ```

use std::fmt::Debug;
use std::marker::PhantomData;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use kube::core::NamespaceResourceScope;
use kube::runtime::wait::{await_condition, conditions};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use ward_runtime::{Guard, GuardContext, GuardError, Reads, Verdict};

/// Why the child blocks its owner's reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocked {
    /// The child is terminating (deletionTimestamp set).
    Terminating {
        /// The child's uid.
        uid: String,
    },
    /// The child's controller is another owner (another UID under the same name).
    OwnedByAnother {
        /// The child's uid.
        uid: String,
        /// The uid its controller ownerReference names.
        owner_uid: String,
    },
    /// The child has no controller and orphans may not be adopted.
    Orphan {
        /// The child's uid.
        uid: String,
    },
}

/// The decision on one child, given the owner's live uid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildState {
    /// No child of that name: creating it is safe.
    Absent,
    /// The child is the owner's own: applying to it is safe.
    Owned,
    /// The child has no controller and may be adopted.
    Adoptable,
    /// Wait for the child to go.
    Blocked(Blocked),
}

/// Errors judging a child.
#[derive(Debug, thiserror::Error)]
pub enum AwaitDeletionError {
    /// The owner has no uid (it was never stored).
    #[error("owner {0} has no uid")]
    NoOwnerUid(String),
    /// The child has no uid.
    #[error("child {0} has no uid")]
    NoChildUid(String),
}

/// Judge an existing `child` against the owner's live uid (the decision
/// table of [`AwaitDeletion`]).
pub fn judge(
    child: Option<&ObjectMeta>,
    owner_uid: &str,
    allow_orphans: bool,
) -> Result<ChildState, AwaitDeletionError> {
    let Some(child) = child else {
        return Ok(ChildState::Absent);
    };
    let uid = child
        .uid
        .clone()
        .ok_or_else(|| AwaitDeletionError::NoChildUid(child.name.clone().unwrap_or_default()))?;
    if child.deletion_timestamp.is_some() {
        return Ok(ChildState::Blocked(Blocked::Terminating { uid }));
    }
    let controller = child
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true));
    Ok(match controller {
        Some(r) if r.uid == owner_uid => ChildState::Owned,
        Some(r) => ChildState::Blocked(Blocked::OwnedByAnother {
            uid,
            owner_uid: r.uid.clone(),
        }),
        None if allow_orphans => ChildState::Adoptable,
        None => ChildState::Blocked(Blocked::Orphan { uid }),
    })
}

/// A guard on an owner `K`: its reconcile waits while the `Child` named
/// for it (in its namespace) is a predecessor — terminating, or controlled
/// by another UID — and is woken when that child is deleted.
pub struct AwaitDeletion<K, Child> {
    child_name: Box<dyn Fn(&K) -> String + Send + Sync>,
    allow_orphans: bool,
    fresh_owner: bool,
    reads: Reads,
    fallback: Duration,
    _child: PhantomData<fn() -> Child>,
}

impl<K, Child> AwaitDeletion<K, Child> {
    /// Guard the child named `child_name(owner)`.
    #[must_use]
    pub fn new(child_name: impl Fn(&K) -> String + Send + Sync + 'static) -> Self {
        AwaitDeletion {
            child_name: Box::new(child_name),
            allow_orphans: true,
            fresh_owner: true,
            reads: Reads::default(),
            fallback: Duration::from_secs(300),
            _child: PhantomData,
        }
    }

    /// Whether a child with no controller may be adopted (default true);
    /// when false, the owner waits for it to go.
    #[must_use]
    pub fn allow_orphans(mut self, allow: bool) -> Self {
        self.allow_orphans = allow;
        self
    }

    /// Whether to re-read the owner for its live uid before judging
    /// (default true); false trusts the reconciled object's uid.
    #[must_use]
    pub fn fresh_owner(mut self, fresh: bool) -> Self {
        self.fresh_owner = fresh;
        self
    }

    /// How the owner and the child are read (default
    /// [`Reads::Consistent`]: as fresh as a GET, from the controller's
    /// watch cache once it has caught up, see
    /// [`GuardContext::get_consistent`]).
    #[must_use]
    pub fn reads(mut self, reads: Reads) -> Self {
        self.reads = reads;
        self
    }

    /// The requeue after which a wait is re-checked even without a DELETED event.
    #[must_use]
    pub fn fallback(mut self, d: Duration) -> Self {
        self.fallback = d;
        self
    }
}

#[async_trait::async_trait]
impl<K, Child> Guard<K> for AwaitDeletion<K, Child>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
    Child: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
{
    fn name(&self) -> &'static str {
        "await-deletion"
    }

    async fn check(&self, owner: &K, ctx: &GuardContext) -> Result<Verdict, GuardError> {
        let ns = owner.namespace().unwrap_or_default();
        let owner_name = owner.name_any();
        let mut owner_uid = owner.uid().ok_or_else(|| {
            GuardError::invalid(AwaitDeletionError::NoOwnerUid(owner_name.clone()))
        })?;
        if self.fresh_owner {
            let owners: Api<K> = Api::namespaced(ctx.client().clone(), &ns);
            match ctx.read_metadata(self.reads, &owners, &owner_name).await? {
                Some(live) if live.uid.as_deref() == Some(owner_uid.as_str()) => {}
                Some(live) => {
                    // The cache is behind: this reconcile is for an owner that
                    // no longer exists; the live one gets its own.
                    owner_uid = live.uid.clone().unwrap_or_default();
                    return Ok(Verdict::skip(format!(
                        "owner {owner_name} was replaced (live uid {owner_uid})"
                    )));
                }
                None => return Ok(Verdict::skip(format!("owner {owner_name} is gone"))),
            }
        }
        let child_name = (self.child_name)(owner);
        let children: Api<Child> = Api::namespaced(ctx.client().clone(), &ns);
        let child = ctx
            .read_metadata(self.reads, &children, &child_name)
            .await?;
        let state =
            judge(child.as_deref(), &owner_uid, self.allow_orphans).map_err(GuardError::invalid)?;
        let (uid, reason) = match state {
            ChildState::Absent | ChildState::Owned | ChildState::Adoptable => {
                return Ok(Verdict::proceed());
            }
            ChildState::Blocked(Blocked::Terminating { uid }) => {
                let r = format!(
                    "{} {ns}/{child_name} (uid {uid}) is terminating",
                    Child::kind(&())
                );
                (uid, r)
            }
            ChildState::Blocked(Blocked::OwnedByAnother {
                uid,
                owner_uid: other,
            }) => {
                let r = format!(
                    "{} {ns}/{child_name} belongs to owner uid {other}, not {owner_uid}",
                    Child::kind(&())
                );
                (uid, r)
            }
            ChildState::Blocked(Blocked::Orphan { uid }) => {
                let r = format!("{} {ns}/{child_name} has no controller", Child::kind(&()));
                (uid, r)
            }
        };
        let wake = async move {
            let gone = await_condition(children, &child_name, conditions::is_deleted(&uid));
            if let Err(e) = gone.await {
                tracing::debug!(error = %e, "watch for the predecessor's deletion ended");
            }
        };
        Ok(Verdict::wait(reason)
            .until(wake)
            .fallback(self.fallback)
            .into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};

    fn child(owner_uid: Option<&str>, controller: bool, terminating: bool) -> ConfigMap {
        let mut c = ConfigMap::default();
        c.metadata.name = Some("test".into());
        c.metadata.uid = Some("child-uid".into());
        c.metadata.owner_references = owner_uid.map(|u| {
            vec![OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: "test".into(),
                uid: u.into(),
                controller: Some(controller),
                block_owner_deletion: None,
            }]
        });
        if terminating {
            c.metadata.deletion_timestamp = Some(Time("2026-01-01T00:00:00Z".parse().unwrap()));
        }
        c
    }

    #[test]
    fn decision_table() {
        use ChildState::*;
        let j =
            |c: Option<&ConfigMap>, orphans| judge(c.map(|c| &c.metadata), "L2", orphans).unwrap();
        assert_eq!(j(None, true), Absent);
        assert_eq!(j(Some(&child(Some("L2"), true, false)), true), Owned);
        // The GC-lag window: not terminating, but the controller is L1.
        assert_eq!(
            j(Some(&child(Some("L1"), true, false)), true),
            Blocked(self::Blocked::OwnedByAnother {
                uid: "child-uid".into(),
                owner_uid: "L1".into()
            })
        );
        // Terminating blocks even when it is ours.
        assert_eq!(
            j(Some(&child(Some("L2"), true, true)), true),
            Blocked(self::Blocked::Terminating {
                uid: "child-uid".into()
            })
        );
        // A non-controller reference does not make it ours.
        assert_eq!(j(Some(&child(Some("L2"), false, false)), true), Adoptable);
        assert_eq!(
            j(Some(&child(None, false, false)), false),
            Blocked(self::Blocked::Orphan {
                uid: "child-uid".into()
            })
        );
        let mut no_uid = child(None, false, false);
        no_uid.metadata.uid = None;
        assert!(judge(Some(&no_uid.metadata), "L2", true).is_err());
    }
}
