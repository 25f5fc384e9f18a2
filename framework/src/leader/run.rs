//! [`LeaderElection::run`]: wait for leadership, run the work while
//! leading, stop it when leadership is lost or shutdown begins, and
//! release the Lease.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;

use tokio::sync::watch;

use super::election::LeaderElection;
use super::keeper::{Keeper, Kept};
use super::lost::{Lost, Phase};
use super::outcome::{LeaderError, Outcome};
use crate::observe::catalog;
use crate::observe::readiness::RemoveOnDrop;

impl LeaderElection {
    /// Wait for leadership, run `work` while leading, and release the Lease
    /// on shutdown.
    ///
    /// `work` is called once leadership is acquired, with a [`Lost`] future
    /// that completes when it must stop: the Lease was lost, or `shutdown`
    /// completed. The work is expected to return promptly then (finishing
    /// what is in flight); it is never dropped half-way. While it winds down
    /// after `shutdown`, the Lease is still renewed; once it returns the
    /// Lease is released. If `work` returns on its own, the Lease is released
    /// too.
    ///
    /// Transient API errors are retried (acquire every `retry_every`; renew
    /// until the Lease would expire). Dropping the returned future stops
    /// everything without releasing (the Lease then expires).
    ///
    /// The states, and what moves between them:
    ///
    /// ```text
    /// Following ──acquired──► Leading ──shutdown, or the work returned──► Stopping
    ///     │                      │                                       │        │
    ///     │ shutdown             │ keeper: lost           work returned  │        │ keeper: lost
    ///     ▼                      ▼                                       ▼        ▼
    ///  NeverLed    Lost (the work told, then awaited)               Releasing    Lost
    ///                                                                    │
    ///                                                                    ▼
    ///                                                   Released (or a release error)
    /// ```
    ///
    /// `Following` is `acquire`; `Leading` and `Stopping` are the phases the
    /// [`Lost`] signal carries; `Releasing` is the keeper's release once told
    /// to stop.
    pub async fn run<F, Fut, S>(self, work: F, shutdown: S) -> Result<Outcome, LeaderError>
    where
        F: FnOnce(Lost) -> Fut,
        Fut: Future<Output = ()>,
        S: Future,
    {
        self.timing.validate()?;
        let mut this = self;
        catalog::register_election(&this.lease, &this.identity);
        this.check = this
            .readiness
            .as_ref()
            .map(|r| r.check(format!("leader-election/{}", this.lease)));
        // The candidate stops with `run` (or when its future is dropped).
        let _stopped = this.check.clone().map(RemoveOnDrop);
        let me = Arc::new(this);
        me.leading(false);
        let mut shutdown = pin!(shutdown);
        let (lease, valid_from) = tokio::select! {
            biased;
            _ = &mut shutdown => return Ok(Outcome::NeverLed),
            got = me.acquire() => got,
        };
        me.leading(true);
        me.count("ward_leader_transitions_total", "event", "acquired");
        tracing::info!(lease = %me.lease, identity = %me.identity, "acquired leadership");

        let (phase_tx, phase_rx) = watch::channel(Phase::Leading);
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut keeper = Keeper(tokio::spawn(me.clone().keep(
            lease,
            valid_from,
            stop_rx,
            phase_tx.clone(),
        )));
        let mut work = pin!(work(Lost::new(phase_rx)));
        let mut work_done = false;
        let mut end = tokio::select! {
            _ = &mut work => { work_done = true; None }
            _ = &mut shutdown => None,
            end = &mut keeper => Some(end),
        };
        if end.is_none() {
            // Shutdown, or the work returned: stop the work, renewing meanwhile.
            phase_tx.send_if_modified(|p| {
                let leading = *p == Phase::Leading;
                if leading {
                    *p = Phase::Stopping;
                }
                leading
            });
            if !work_done {
                tokio::select! {
                    _ = &mut work => work_done = true,
                    lost = &mut keeper => end = Some(lost),
                }
            }
        }
        let end = match end {
            Some(end) => end,
            None => {
                let _ = stop_tx.send(true);
                (&mut keeper).await
            }
        };
        if !work_done {
            work.await;
        }
        match end {
            Kept::Lost(reason) => Ok(Outcome::Lost(reason)),
            Kept::Released(Ok(())) => Ok(Outcome::Released),
            Kept::Released(Err(e)) => Err(e),
        }
    }
}
