//! [`Member::run`]: join the ring, keep the member Lease round after
//! round ([`Keeper`]), leave on shutdown.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;

use tokio::sync::watch;

use super::gate::Gate;
use super::keeper::Keeper;
use super::member::{Member, ShardError};
use super::ring::Slots;
use super::view::Shard;
use crate::observe::catalog;
use crate::observe::readiness::RemoveOnDrop;

impl Member {
    /// Join the ring, run `work` with the [`Shard`] it reconciles through,
    /// and leave gracefully once `shutdown` completes: every slot drained,
    /// then the member Lease deleted, then `shard.stopping()` completes and
    /// `work` is awaited.
    ///
    /// A member that cannot renew in time loses its slots (every reconcile
    /// on them cancelled before the Lease can expire) and carries on: it
    /// rejoins with its next successful round. Dropping the returned future
    /// stops everything without leaving (the Lease then expires).
    ///
    /// # Errors
    /// [`ShardError::Config`] for durations that do not fit together;
    /// [`ShardError::Leave`] if the Lease could not be deleted on the way
    /// out (the others take its slots once it expires).
    pub async fn run<F, Fut, S>(self, work: F, shutdown: S) -> Result<(), ShardError>
    where
        F: FnOnce(Shard) -> Fut,
        Fut: Future<Output = ()>,
        S: Future,
    {
        self.timing.validate().map_err(|e| match e {
            crate::LeaderError::Config(why) => ShardError::Config(why),
            other => ShardError::Config(other.to_string()),
        })?;
        let check = self.readiness.as_ref().map(|r| {
            r.check(format!(
                "shard/{}/{}",
                self.api.namespace().unwrap_or_default(),
                self.ring
            ))
        });
        let _remove = check.clone().map(RemoveOnDrop);
        catalog::register_shard(&self.ring, &self.identity);
        let shard = Shard::new(
            self.ring.clone(),
            self.identity.clone(),
            self.key,
            Gate::default(),
        );
        let member = Arc::new(self);
        let (changed, changes) = watch::channel(0);
        let ring_watch = super::changes::watch_ring(
            member.api.clone(),
            &member.ring,
            &member.lease_name,
            changed,
        );
        let mut keeper = Keeper {
            member: member.clone(),
            shard: shard.clone(),
            check,
            mine: None,
            held: Slots::NONE,
            deadline: watch::Sender::new(None),
            changes,
        };
        let mut work = pin!(work(shard.clone()));
        let mut shutdown = pin!(shutdown);
        let mut work_done = false;
        {
            let keep = pin!(keeper.keep());
            // Biased, here and below: a simulation replays only if the
            // order branches are polled in is fixed.
            tokio::select! {
                biased;
                () = keep => unreachable!("the keeper runs until dropped"),
                () = ring_watch => unreachable!("the ring's watch runs until dropped"),
                _ = &mut shutdown => {}
                () = &mut work => work_done = true,
            }
        }
        let left = keeper.leave().await;
        drop(keeper);
        if !work_done {
            work.await;
        }
        left
    }
}
