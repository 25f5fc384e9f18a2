//! Owner UID: accept an object only if it is not terminating and its
//! controller ownerReference names the live owner — by UID, read fresh.
//!
//! The race it stops (Azure CNS, node recreated under the same name):
//!
//! ```text
//! 1. Node A (uid U1); NodeNetworkConfig kube-system/A (controller ownerRef U1)
//! 2. DELETE Node A ... GC of the NNC is delayed (no deletionTimestamp on it)
//! 3. CREATE Node A -> uid U2 (the new NNC cannot be created: the name is taken)
//! 4. CNS starts, GETs NNC "A" by name -> the stale NNC of U1, and ingests it
//! ```
//!
//! [`OwnerUid`] rejects the NNC of step 4: its controller owner is U1, the
//! live Node A is U2. The owner is read as it is now, never from a plain
//! name-keyed cache, which would happily say "Node A exists": as a guard,
//! from a watch cache only once it has caught up with the server's current
//! resourceVersion, else with a quorum GET (see
//! [`GuardContext::get_consistent`]).
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::{ConfigMap, Node};
//! use ward_guards::owner_uid::{Acceptance, OwnerUid};
//!
//! # async fn demo(client: kube::Client, nnc: ConfigMap) -> Result<(), ward_guards::owner_uid::OwnerUidError> {
//! // As a plain check (e.g. on a startup path outside any controller):
//! match OwnerUid::<Node>::new().accept(&client, &nnc).await? {
//!     Acceptance::Accept => { /* ingest */ }
//!     Acceptance::Reject(why) => tracing::info!(%why, "not ingesting a stale object"),
//! }
//! // Or as a guard: GuardedController::new(api, cfg).guard(OwnerUid::<Node>::new())
//! # Ok(()) }
//! ```

use std::any::TypeId;
use std::fmt::{self, Debug};
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::NamespaceResourceScope;
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use ward_runtime::{Guard, GuardContext, GuardError, Reads, Verdict};

/// Errors reading the owner.
#[derive(Debug, thiserror::Error)]
pub enum OwnerUidError {
    /// The API call failed.
    #[error("reading the owner failed: {0}")]
    Kube(#[from] kube::Error),
}

/// Why an object is rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// It is being deleted.
    Terminating,
    /// It has no controller ownerReference of the owner's kind.
    NoController,
    /// No owner of that name exists.
    OwnerGone {
        /// The owner's name.
        name: String,
    },
    /// An owner of that name exists, but it is another object.
    OwnerReplaced {
        /// The uid the ownerReference names.
        expected: String,
        /// The live owner's uid.
        live: String,
    },
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::Terminating => f.write_str("the object is terminating"),
            Rejection::NoController => {
                f.write_str("the object has no controller of the owner's kind")
            }
            Rejection::OwnerGone { name } => write!(f, "its owner {name} is gone"),
            Rejection::OwnerReplaced { expected, live } => {
                write!(
                    f,
                    "its owner was replaced: ownerReference uid {expected}, live owner uid {live}"
                )
            }
        }
    }
}

/// The verdict on an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acceptance {
    /// Its controller is the live owner.
    Accept,
    /// Do not act on it.
    Reject(Rejection),
}

/// Accept an object only if its controller ownerReference to an `Owner`
/// names the live owner's UID (read fresh) and it is not terminating.
///
/// As a guard it reads the owner the way [`reads`](Self::reads) says, by
/// default [`Reads::Consistent`]: from the controller's watch cache of the
/// owner kind once that has caught up with the server's current
/// resourceVersion (one shared LIST of one item for all the checks that
/// overlap), else a quorum GET — as fresh as a GET each either way.
/// [`OwnerUid::accept`] is a plain GET, for use outside a controller.
pub struct OwnerUid<Owner> {
    reads: Reads,
    _owner: PhantomData<fn() -> Owner>,
}

impl<Owner> Default for OwnerUid<Owner> {
    fn default() -> Self {
        OwnerUid {
            reads: Reads::default(),
            _owner: PhantomData,
        }
    }
}

/// What to read to judge an object: its owner's name (in `namespace`, for
/// a namespaced owner), and the uid its controller ownerReference names.
struct Lookup<'a> {
    namespace: Option<&'a str>,
    name: &'a str,
    expected_uid: &'a str,
}

impl Lookup<'_> {
    /// The verdict, given the owner's metadata as read.
    fn judge(&self, live: Option<&ObjectMeta>) -> Acceptance {
        let live_uid = live.and_then(|m| m.uid.as_deref());
        decide(self.expected_uid, self.name, live_uid)
    }
}

impl<Owner> OwnerUid<Owner>
where
    Owner: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    Owner::Scope: 'static,
{
    /// The check for owners of kind `Owner`.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// As a guard, how to read the owner (default [`Reads::Consistent`]).
    #[must_use]
    pub fn reads(mut self, reads: Reads) -> Self {
        self.reads = reads;
        self
    }

    /// Judge `obj`: reads its owner with a quorum GET.
    pub async fn accept<K: Resource>(
        &self,
        client: &Client,
        obj: &K,
    ) -> Result<Acceptance, OwnerUidError> {
        let l = match Self::lookup(obj) {
            Ok(l) => l,
            Err(why) => return Ok(Acceptance::Reject(why)),
        };
        let ar = ApiResource::erase::<Owner>(&());
        let api: Api<DynamicObject> = match l.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        };
        let live = api.get_opt(l.name).await?;
        Ok(l.judge(live.as_ref().map(|o| &o.metadata)))
    }

    /// Whether `Owner` lives in a namespace (its child's).
    fn namespaced() -> bool {
        TypeId::of::<Owner::Scope>() == TypeId::of::<NamespaceResourceScope>()
    }

    fn lookup<K: Resource>(obj: &K) -> Result<Lookup<'_>, Rejection> {
        if obj.meta().deletion_timestamp.is_some() {
            return Err(Rejection::Terminating);
        }
        let (kind, api_version) = (Owner::kind(&()), Owner::api_version(&()));
        let r = obj
            .meta()
            .owner_references
            .iter()
            .flatten()
            .find(|r| r.controller == Some(true) && r.kind == kind && r.api_version == api_version)
            .ok_or(Rejection::NoController)?;
        Ok(Lookup {
            namespace: Self::namespaced()
                .then(|| obj.meta().namespace.as_deref().unwrap_or_default()),
            name: &r.name,
            expected_uid: &r.uid,
        })
    }
}

/// The decision table: the ownerReference's uid against the live owner's.
#[must_use]
pub fn decide(expected_uid: &str, owner_name: &str, live_uid: Option<&str>) -> Acceptance {
    match live_uid {
        None => Acceptance::Reject(Rejection::OwnerGone {
            name: owner_name.to_string(),
        }),
        Some(live) if live != expected_uid => Acceptance::Reject(Rejection::OwnerReplaced {
            expected: expected_uid.to_string(),
            live: live.to_string(),
        }),
        Some(_) => Acceptance::Accept,
    }
}

#[async_trait::async_trait]
impl<K, Owner> Guard<K> for OwnerUid<Owner>
where
    K: Resource + Send + Sync + 'static,
    Owner: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    Owner::Scope: 'static,
{
    fn name(&self) -> &'static str {
        "owner-uid"
    }

    /// With consistent reads of a cluster-scoped owner, start the owner
    /// kind's watch cache with the controller. (A namespaced owner's
    /// caches are per namespace: each starts at its first check.)
    fn prepare(&self, ctx: &GuardContext) {
        if self.reads == Reads::Consistent && !Self::namespaced() {
            ctx.warm_consistent(&*ctx.dynamic_api::<Owner>(None));
        }
    }

    async fn check(&self, obj: &K, ctx: &GuardContext) -> Result<Verdict, GuardError> {
        let acceptance = match Self::lookup(obj) {
            Err(why) => Acceptance::Reject(why),
            Ok(l) => {
                let api = ctx.dynamic_api::<Owner>(l.namespace);
                l.judge(
                    ctx.read_metadata(self.reads, &api, l.name)
                        .await?
                        .as_deref(),
                )
            }
        };
        Ok(match acceptance {
            Acceptance::Accept => Verdict::proceed(),
            Acceptance::Reject(why) => Verdict::skip(format!("{}: {why}", obj.name_any())),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decision_table() {
        assert_eq!(decide("U1", "a", Some("U1")), Acceptance::Accept);
        assert_eq!(
            decide("U1", "a", Some("U2")),
            Acceptance::Reject(Rejection::OwnerReplaced {
                expected: "U1".into(),
                live: "U2".into()
            })
        );
        assert_eq!(
            decide("U1", "a", None),
            Acceptance::Reject(Rejection::OwnerGone { name: "a".into() })
        );
    }
}
