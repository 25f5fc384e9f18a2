//! A replica's membership in a ring: the member's builder, and `run`,
//! which joins, keeps and leaves the ring (the rounds are `keeper.rs`'s;
//! the [module docs](super) give the protocol and why two replicas cannot
//! overlap).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;

use super::key::ShardKey;
use crate::clock::Clock;
use crate::leader::Timing;
use crate::observe::Readiness;

/// Errors from a sharded member.
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    /// The durations do not fit together.
    #[error("invalid shard member settings: {0}")]
    Config(String),
    /// The member Lease could not be deleted on leaving (the others take
    /// its slots once it expires).
    #[error("could not delete member lease {lease}: {source}")]
    Leave {
        /// The Lease's name.
        lease: String,
        /// What went wrong.
        #[source]
        source: kube::Error,
    },
    /// Deleting the member Lease took longer than a lease duration.
    #[error("deleting member lease {lease} timed out")]
    LeaveTimeout {
        /// The Lease's name.
        lease: String,
    },
}

/// One replica of a sharded controller: a member of the ring `ring`,
/// holding the Lease `<ring>-<identity>` in `namespace` (see the
/// [module docs](super)).
///
/// ```no_run
/// use std::sync::Arc;
/// use futures::StreamExt;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::api::Api;
/// use kube::runtime::{controller::Action, watcher};
/// use ward_runtime::GuardedController;
/// use ward_runtime::shard::Member;
///
/// async fn reconcile(_cm: Arc<ConfigMap>, _: Arc<()>) -> Result<Action, kube::Error> {
///     Ok(Action::await_change())
/// }
///
/// # async fn demo(client: kube::Client, pod_name: String) -> Result<(), Box<dyn std::error::Error>> {
/// let readiness = ward_runtime::Readiness::new(); // served at /readyz by ward_runtime::Observability
/// Member::new(client.clone(), "my-namespace", "my-controller", pod_name)
///     .readiness(readiness.clone()) // check shard/my-namespace/my-controller
///     .run(
///         |shard| async move {
///             // LISTs and WATCHes through shard.client(..) carry the
///             // shard's shardSelector.
///             let api = Api::<ConfigMap>::all(shard.client(client));
///             GuardedController::new(api, watcher::Config::default())
///                 .shard(shard.clone())
///                 .graceful_shutdown_on(shard.stopping())
///                 .run(reconcile, |_, _, _| Action::await_change(), Arc::new(()))
///                 .for_each(|_| async {})
///                 .await;
///         },
///         ward_runtime::shutdown::signal()?,
///     )
///     .await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Member {
    pub(super) api: Api<Lease>,
    pub(super) ring: String,
    pub(super) identity: String,
    pub(super) lease_name: String,
    pub(super) timing: Timing,
    pub(super) drain: Duration,
    pub(super) key: ShardKey,
    pub(super) clock: Clock,
    pub(super) readiness: Option<Readiness>,
}

impl Member {
    /// Replica `identity` (unique per process, e.g. the pod name) of the
    /// ring `ring`, whose member Leases live in `namespace`. The Lease's
    /// name joins them with `-`: ring `a` with identity `b-c` and ring
    /// `a-b` with identity `c` would share one — keep ring names free of
    /// `-`, or give each ring its own namespace.
    #[must_use]
    pub fn new(
        client: Client,
        namespace: &str,
        ring: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        let (ring, identity) = (ring.into(), identity.into());
        Member {
            api: Api::namespaced(client, namespace),
            lease_name: format!("{ring}-{identity}"),
            ring,
            identity,
            timing: Timing::default(),
            drain: Duration::from_secs(5),
            key: ShardKey::Uid,
            clock: Clock::new(),
            readiness: None,
        }
    }

    /// What objects are hashed by (default [`ShardKey::Uid`]).
    #[must_use]
    pub fn key(mut self, key: ShardKey) -> Self {
        self.key = key;
        self
    }

    /// How long a member Lease stays valid after its last renew (default 15 s).
    #[must_use]
    pub fn lease_duration(mut self, d: Duration) -> Self {
        self.timing.lease_duration = d;
        self
    }

    /// How often a round runs: renew, release, claim (default 5 s).
    #[must_use]
    pub fn renew_every(mut self, d: Duration) -> Self {
        self.timing.renew_every = d;
        self
    }

    /// How soon a failed round is retried (default 2 s).
    #[must_use]
    pub fn retry_every(mut self, d: Duration) -> Self {
        self.timing.retry_every = d;
        self
    }

    /// How much earlier than its Lease's expiry a member stops every
    /// reconcile, to absorb clock differences between replicas (default
    /// as [`LeaderElection::clock_skew`](crate::LeaderElection::clock_skew)).
    #[must_use]
    pub fn clock_skew(mut self, d: Duration) -> Self {
        self.timing.clock_skew = Some(d);
        self
    }

    /// How long reconciles running on a slot being handed over may take to
    /// finish before they are cancelled (default 5 s; never past the
    /// Lease's deadline less the clock skew).
    #[must_use]
    pub fn drain_timeout(mut self, d: Duration) -> Self {
        self.drain = d;
        self
    }

    /// The clock that stamps and judges Lease times (replicas under one
    /// paused tokio clock should share one, as for
    /// [`LeaderElection::clock`](crate::LeaderElection::clock)).
    #[must_use]
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Drive a readiness check named `shard/<namespace>/<ring>`: it passes
    /// after each round that renewed the Lease (and, when it claimed, saw
    /// its claim in a view proven current), fails when a round fails or
    /// the Lease is lost, and is removed once [`run`](Self::run) returns. A member owning no
    /// slot (more replicas than work) is ready.
    #[must_use]
    pub fn readiness(mut self, readiness: Readiness) -> Self {
        self.readiness = Some(readiness);
        self
    }
}

#[cfg(test)]
mod tests {
    /// docs/sharding.md shows `Member`'s example as it is compiled here.
    #[test]
    fn the_sharding_guide_shows_the_member_example() {
        let source = include_str!("member.rs");
        let block = source
            .split_once("/// ```no_run\n")
            .and_then(|(_, rest)| rest.split_once("/// ```\n"))
            .map(|(b, _)| b)
            .expect("the example");
        let visible: String = block
            .lines()
            .map(|l| {
                l.trim_start()
                    .strip_prefix("/// ")
                    .unwrap_or(l.trim_start().trim_start_matches("///"))
            })
            .filter(|l| !(l.starts_with("# ") || *l == "#"))
            .map(|l| format!("{l}\n"))
            .collect();
        let guide = include_str!("../../../docs/sharding.md");
        assert!(
            guide.contains(&format!("```rust\n{visible}```")),
            "docs/sharding.md lacks the Member example as compiled:\n{visible}"
        );
    }
}
