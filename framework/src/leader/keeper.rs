//! The keeper: acquiring the Lease (woken at once when it is released),
//! renewing it until lost or told to stop, and releasing it.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::PostParams;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until, timeout_at};

use super::lease::{available, holder, is_conflict, taken};
use super::lost::Phase;
use super::{LeaderElection, LeaderError, LostReason};

impl LeaderElection {
    /// One attempt: the Lease if this candidate holds it now.
    async fn try_acquire(&self) -> Result<Attempt, kube::Error> {
        let current = self.api.get_opt(&self.name).await?;
        let spec = current.as_ref().and_then(|l| l.spec.clone());
        let (now, fallback) = (self.clock.now(), self.timing.lease_duration);
        if spec.is_some_and(|s| !available(&s, &self.identity, now, fallback)) {
            return Ok(Attempt::Held);
        }
        let pp = PostParams::default();
        let written = match current {
            None => {
                self.api
                    .create(
                        &pp,
                        &taken(
                            None,
                            &self.name,
                            &self.identity,
                            MicroTime(self.clock.now()),
                            self.timing.seconds(),
                        ),
                    )
                    .await
            }
            Some(c) => {
                self.api
                    .replace(
                        &self.name,
                        &pp,
                        &taken(
                            Some(c),
                            &self.name,
                            &self.identity,
                            MicroTime(self.clock.now()),
                            self.timing.seconds(),
                        ),
                    )
                    .await
            }
        };
        match written {
            Ok(l) => Ok(Attempt::Acquired(Box::new(l))),
            // Another candidate wrote first.
            Err(e) if is_conflict(&e) => Ok(Attempt::Conflict),
            Err(e) => Err(e),
        }
    }

    /// Try until this candidate holds the Lease; returns it and when the
    /// successful write started (its validity counts from there).
    pub(super) async fn acquire(&self) -> (Lease, Instant) {
        let mut released = pin!(self.released());
        loop {
            let started = Instant::now();
            let attempt = self.try_acquire().await;
            let result = match &attempt {
                Ok(Attempt::Acquired(_)) => "acquired",
                Ok(Attempt::Held) => "held",
                Ok(Attempt::Conflict) => "conflict",
                Err(_) => "error",
            };
            self.count("ward_leader_acquire_attempts_total", "result", result);
            self.healthy(attempt.is_ok());
            match attempt {
                Ok(Attempt::Acquired(lease)) if Instant::now() < self.timing.deadline(started) => {
                    return (*lease, started);
                }
                Ok(Attempt::Acquired(_)) => {
                    tracing::warn!(lease = %self.lease, "acquired too late to lead; trying again")
                }
                Ok(Attempt::Held | Attempt::Conflict) => {}
                Err(e) => {
                    tracing::warn!(lease = %self.lease, error = %e, "acquiring the lease failed")
                }
            }
            // Try again after `retry_every`, or at once when the holder
            // gives the Lease up (or it is deleted).
            tokio::select! {
                biased;
                Some(()) = released.next() => {}
                () = tokio::time::sleep(self.timing.retry_every) => {}
            }
        }
    }

    /// An item each time a watch of the Lease sees it released (no
    /// holder) or deleted. A watch that fails (no `list`/`watch` RBAC, say)
    /// is retried with kube-runtime's default backoff and yields nothing:
    /// then only the retry period is left.
    fn released(&self) -> impl futures::Stream<Item = ()> + Send + 'static {
        use kube::runtime::{WatchStreamExt, watcher};
        let wc = watcher::Config::default().fields(&format!("metadata.name={}", self.name));
        watcher::watcher(self.api.clone(), wc)
            .default_backoff()
            .filter_map(|event| {
                futures::future::ready(match event {
                    Ok(watcher::Event::Apply(l)) if holder(l.spec.as_ref()).is_none() => Some(()),
                    Ok(watcher::Event::Delete(_)) => Some(()),
                    _ => None,
                })
            })
    }

    /// Renew until lost or told to stop (then release).
    pub(super) async fn keep(
        self: Arc<Self>,
        mut lease: Lease,
        mut valid_from: Instant,
        mut stop: watch::Receiver<bool>,
        phase: watch::Sender<Phase>,
    ) -> Kept {
        let mut next = valid_from + self.timing.renew_every;
        let reason = loop {
            let deadline = self.timing.deadline(valid_from);
            tokio::select! {
                biased;
                _ = async { drop(stop.wait_for(|s| *s).await) } => {
                    let released = self.release(lease).await;
                    self.leading(false);
                    self.count("ward_leader_transitions_total", "event", "released");
                    tracing::info!(lease = %self.lease, identity = %self.identity, "released leadership");
                    return Kept::Released(released);
                }
                _ = sleep_until(deadline) => break LostReason::Expired,
                _ = sleep_until(next) => {}
            }
            let started = Instant::now();
            match self.clone().renew(&lease, deadline).await {
                Renewed::Ok(l) => {
                    lease = l;
                    valid_from = started;
                    next = started + self.timing.renew_every;
                }
                Renewed::Stale(l) => {
                    lease = l;
                    next = Instant::now() + self.timing.retry_every;
                }
                Renewed::Failed => next = Instant::now() + self.timing.retry_every,
                Renewed::Lost(reason) => break reason,
            }
        };
        phase.send_replace(Phase::Lost);
        self.leading(false);
        self.count("ward_leader_transitions_total", "event", "lost");
        tracing::warn!(lease = %self.lease, identity = %self.identity, %reason, "lost leadership");
        Kept::Lost(reason)
    }

    /// One renew, abandoned at `deadline` (it may still land later: then a
    /// conflict is expected, and a success is given back).
    async fn renew(self: Arc<Self>, lease: &Lease, deadline: Instant) -> Renewed {
        let mut next = lease.clone();
        let spec = next.spec.get_or_insert_with(LeaseSpec::default);
        spec.renew_time = Some(MicroTime(self.clock.now()));
        spec.lease_duration_seconds = Some(self.timing.seconds());
        let me = self.clone();
        // A task of its own: abandoned at the deadline, it still completes.
        let mut call = tokio::spawn(async move {
            me.api
                .replace(&me.name, &PostParams::default(), &next)
                .await
        });
        let result = tokio::select! {
            r = &mut call => r.unwrap_or_else(|e| Err(kube::Error::Service(Box::new(e)))),
            _ = sleep_until(deadline) => {
                self.count("ward_leader_renew_failures_total", "reason", "timeout");
                let me = self.clone();
                tokio::spawn(async move { me.late_renew(call).await });
                return Renewed::Lost(LostReason::Expired);
            }
        };
        match result {
            Ok(l) => Renewed::Ok(l),
            Err(e) if is_conflict(&e) => {
                self.count("ward_leader_renew_failures_total", "reason", "conflict");
                // Still ours with another resourceVersion (someone touched
                // it)? Renew again; otherwise it is gone.
                match timeout_at(deadline, self.api.get_opt(&self.name)).await {
                    Err(_) => Renewed::Lost(LostReason::Expired),
                    Ok(Ok(None)) => Renewed::Lost(LostReason::Deleted),
                    Ok(Ok(Some(l))) => match holder(l.spec.as_ref()) {
                        Some(h) if h == self.identity => Renewed::Stale(l),
                        h => Renewed::Lost(LostReason::TakenOver {
                            holder: h.map(str::to_string),
                        }),
                    },
                    Ok(Err(e)) => {
                        tracing::warn!(lease = %self.lease, error = %e, "reading the lease after a conflict failed");
                        Renewed::Failed
                    }
                }
            }
            Err(kube::Error::Api(s)) if s.code == 404 => Renewed::Lost(LostReason::Deleted),
            Err(e) => {
                self.count("ward_leader_renew_failures_total", "reason", "error");
                tracing::warn!(lease = %self.lease, error = %e, "renewing the lease failed");
                Renewed::Failed
            }
        }
    }

    /// The outcome of a renew abandoned at its deadline.
    async fn late_renew(&self, call: JoinHandle<Result<Lease, kube::Error>>) {
        let result = match call.await {
            Ok(Ok(lease)) => {
                // Nobody took over meanwhile: give the Lease back rather than
                // keep it while not leading.
                if let Err(e) = self.release(lease).await {
                    tracing::warn!(lease = %self.lease, error = %e, "releasing after a late renew failed");
                }
                "renewed"
            }
            Ok(Err(e)) if is_conflict(&e) => "conflict",
            _ => "error",
        };
        tracing::info!(lease = %self.lease, identity = %self.identity, result, "a late renew completed");
        self.count("ward_leader_late_renewals_total", "result", result);
    }

    /// Give the Lease up (holder cleared, duration 1 s), with optimistic concurrency.
    async fn release(&self, lease: Lease) -> Result<(), LeaderError> {
        let attempt = async {
            let mut lease = lease;
            for _ in 0..3 {
                if holder(lease.spec.as_ref()) != Some(self.identity.as_str()) {
                    return Ok(());
                }
                let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
                spec.holder_identity = None;
                spec.lease_duration_seconds = Some(1);
                spec.renew_time = Some(MicroTime(self.clock.now()));
                match self
                    .api
                    .replace(&self.name, &PostParams::default(), &lease)
                    .await
                {
                    Ok(_) => return Ok(()),
                    Err(e) if is_conflict(&e) => match self.api.get_opt(&self.name).await {
                        Ok(Some(l)) => lease = l,
                        Ok(None) => return Ok(()),
                        Err(source) => return Err(source),
                    },
                    Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
                    Err(source) => return Err(source),
                }
            }
            Ok(())
        };
        let lease = self.lease.clone();
        match tokio::time::timeout(self.timing.lease_duration, attempt).await {
            Ok(result) => result.map_err(|source| LeaderError::Release { lease, source }),
            Err(_) => Err(LeaderError::ReleaseTimeout { lease }),
        }
    }
}

/// One attempt to acquire.
enum Attempt {
    Acquired(Box<Lease>),
    /// Another candidate holds it.
    Held,
    /// Another candidate wrote first.
    Conflict,
}

/// How the keeper ended.
pub(super) enum Kept {
    Lost(LostReason),
    Released(Result<(), LeaderError>),
}

enum Renewed {
    Ok(Lease),
    /// Still ours, at another resourceVersion: retry with it.
    Stale(Lease),
    /// A transient error: retry.
    Failed,
    Lost(LostReason),
}

/// The keeper task, aborted when dropped (it must not outlive `run`).
pub(super) struct Keeper(pub(super) JoinHandle<Kept>);

impl Drop for Keeper {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Future for Keeper {
    type Output = Kept;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Kept> {
        Pin::new(&mut self.0).poll(cx).map(|r| match r {
            Ok(kept) => kept,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Kept::Lost(LostReason::Expired),
        })
    }
}
