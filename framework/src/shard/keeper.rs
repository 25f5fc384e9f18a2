//! The hand-over protocol a member runs on its Lease every round: renew,
//! release, claim, drain and leave (see the [module docs](super) for the
//! protocol and why two replicas cannot overlap); the member itself, its
//! builder and `run`, is `member.rs`'s.

use std::collections::BTreeMap;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{DeleteParams, ListParams, PostParams, Preconditions};
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};

use super::gate::Gate;
use super::lease::{ANNOTATION, LABEL};
use super::member::{Member, ShardError};
use super::ring::{Ring, Slots};
use super::view::Shard;
use crate::leader::{available, holder, is_conflict};
use crate::observe::ReadyCheck;

/// The keeper's state between rounds.
pub(super) struct Keeper {
    pub(super) member: Arc<Member>,
    /// Its gate is the keeper's to open and close; told to stop when the
    /// keeper is dropped.
    pub(super) shard: Shard,
    pub(super) check: Option<ReadyCheck>,
    /// The member Lease as last written (its resourceVersion proves a view fresh).
    pub(super) mine: Option<Lease>,
    /// The slots the member Lease lists (claimed, maybe not yet active).
    pub(super) held: Slots,
    /// When the Lease stops counting as held, for this member (`None`
    /// while it holds nothing worth stopping for).
    pub(super) deadline: watch::Sender<Option<Instant>>,
    /// Bumped when another member's Lease appears, goes, or changes what
    /// it claims ([`super::changes`]): the next round starts early.
    pub(super) changes: watch::Receiver<u64>,
}

/// Why a round ended early; the next one retries.
#[derive(Debug, thiserror::Error)]
enum RoundError {
    #[error(transparent)]
    Api(#[from] kube::Error),
    #[error("the ring's view was not proven current (it predates this member's own write)")]
    Stale,
    #[error("this member's Lease was {0}: every slot dropped")]
    Lost(&'static str),
}

impl Drop for Keeper {
    /// However the member ends — left, or its future dropped — nothing
    /// runs on its slots any more, and its controllers are told to stop.
    fn drop(&mut self) {
        self.gate().cancel(Slots::ALL);
        self.shard.inner.stopping.send_replace(true);
    }
}

impl Keeper {
    fn gate(&self) -> &Gate {
        &self.shard.inner.gate
    }

    fn labels(&self) -> [(&'static str, String); 2] {
        [
            ("ring", self.member.ring.clone()),
            ("identity", self.member.identity.clone()),
        ]
    }

    fn count(&self, event: &'static str, n: usize) {
        let [ring, identity] = self.labels();
        metrics::counter!(
            "ward_shard_handovers_total",
            &[ring, identity, ("event", event.to_string())]
        )
        .increment(n as u64);
    }

    fn gauges(&self, members: Option<usize>) {
        let labels = self.labels();
        metrics::gauge!("ward_shard_slots_owned", &labels).set(self.gate().active().len() as f64);
        if let Some(n) = members {
            metrics::gauge!("ward_shard_members", &labels).set(n as f64);
        }
    }

    fn ready(&self, ok: bool) {
        if let Some(check) = &self.check {
            check.set(ok);
        }
    }

    /// Rounds forever, every `renew_every` (`retry_every` after a failed
    /// one), raced against the Lease's deadline: when it passes, whatever
    /// the round was doing (a hanging write, a drain) is dropped and every
    /// reconcile stopped.
    pub(super) async fn keep(&mut self) {
        loop {
            let expired = expired(self.deadline.subscribe());
            let lost = {
                let step = pin!(self.step());
                tokio::select! {
                    biased;
                    () = expired => true,
                    () = step => false,
                }
            };
            if lost {
                self.lose();
            }
            if self.deadline.borrow().is_none() {
                // Lost (or never held): nothing may be activated again until
                // the cancelled reconciles are gone.
                self.gate().idle(Slots::ALL).await;
            }
        }
    }

    /// One round, then the pause before the next: `renew_every` (or
    /// `retry_every` after a failure), cut short when another member's
    /// claim changes — but never to less than a quarter of `renew_every`
    /// from this round's start, so members answering each other's changes
    /// run at most four rounds a period.
    async fn step(&mut self) {
        let timing = self.member.timing;
        let started = Instant::now();
        // What changed before this round's LIST, the LIST sees.
        self.changes.borrow_and_update();
        let pause = match self.round().await {
            Ok(()) => {
                self.ready(true);
                timing.renew_every
            }
            Err(e) => {
                tracing::warn!(ring = %self.member.ring, identity = %self.member.identity, error = %e, "shard round failed");
                if matches!(e, RoundError::Lost(_)) {
                    self.lose();
                }
                self.ready(false);
                timing.retry_every
            }
        };
        let timer = tokio::time::sleep(pause);
        let mut timer = pin!(timer);
        tokio::select! {
            biased;
            () = &mut timer => {}
            changed = self.changes.changed() => match changed {
                Ok(()) => sleep_until(started + timing.renew_every / 4).await,
                // The watch ended (it does not, but then the timer rules).
                Err(_) => timer.await,
            },
        }
    }

    /// No renew landed in time: stop every reconcile now, before any other
    /// member can count this Lease expired.
    fn lose(&mut self) {
        self.deadline.send_replace(None);
        let running = self.gate().cancel(Slots::ALL);
        if !self.held.is_empty() {
            self.count("lost", self.held.len());
            tracing::warn!(ring = %self.member.ring, identity = %self.member.identity,
                slots = self.held.len(), cancelled = running, "lost the member lease: every slot dropped");
        }
        // The Lease may still list them (a write may land late): the next
        // write lists only what is claimed afresh.
        self.held = Slots::NONE;
        self.ready(false);
        self.gauges(None);
    }

    /// One round of the protocol (steps as numbered in the module docs).
    async fn round(&mut self) -> Result<(), RoundError> {
        let m = self.member.clone();
        // 1. Read every member Lease of the ring.
        let mut view = self.view().await?;
        if view.mine.is_none() && self.mine.is_none() && self.held.is_empty() {
            // 0. Announce: a member without a Lease creates it listing
            // nothing, then reads again — members started together see
            // each other before they claim, instead of each claiming
            // every slot and withdrawing them all.
            self.write().await?;
            view = self.view().await?;
        }
        let others = view.others(&m);
        let ring = Ring::new(
            others
                .keys()
                .map(String::as_str)
                .chain([m.identity.as_str()]),
        );
        let desired = ring.slots_of(&m.identity);
        let theirs = others.values().fold(Slots::NONE, |a, s| a.union(*s));
        self.gauges(Some(ring.members().len()));
        if self.mine.is_none() {
            self.mine = view.mine;
        }
        // 2. Release what the ring gives to others: drain, then write. An
        // active slot another live Lease lists is released too: the
        // protocol never lets that happen, so whoever is confused, neither
        // keeps reconciling on it.
        let release = self
            .held
            .minus(desired)
            .union(self.gate().active().intersection(theirs));
        if !release.is_empty() {
            let patience = self.drain_patience();
            let cancelled = self.gate().drain(release, patience).await;
            self.count("cancelled", cancelled);
            self.held = self.held.minus(release);
            self.write().await?;
            self.count("released", release.len());
            self.gauges(None);
        }
        // 3. Claim what the ring gives to this member and nobody lists.
        let claim = desired.minus(self.held).minus(theirs);
        self.held = self.held.union(claim);
        self.write().await?;
        // 4. Activate what is claimed, once a view taken after that write
        // shows no other live member listing it; withdraw what another does.
        let pending = self.held.minus(self.gate().active());
        if !pending.is_empty() {
            let after = self.view().await?;
            if after.mine.as_ref().and_then(rv) != self.mine.as_ref().and_then(rv) {
                return Err(RoundError::Stale);
            }
            let contested = after
                .others(&m)
                .values()
                .fold(Slots::NONE, |a, s| a.union(*s))
                .intersection(pending);
            let won = pending.minus(contested);
            self.gate().activate(won);
            self.count("claimed", won.len());
            if !contested.is_empty() {
                self.held = self.held.minus(contested);
                self.write().await?;
                self.count("withdrawn", contested.len());
            }
            self.gauges(None);
        }
        // 5. Collect the Leases of members gone for good, so the ring's
        // Leases list only what someone holds.
        self.collect(&view.expired).await;
        Ok(())
    }

    /// Delete `expired` member Leases, each only as it was read (a holder
    /// that came back and renewed it meanwhile keeps it: 409), bounded by
    /// a renewal period. Best effort: another member may have collected it
    /// first (404), and what is not collected now is next round.
    async fn collect(&self, expired: &[(String, String)]) {
        let m = &self.member;
        for (name, rv) in expired {
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    resource_version: Some(rv.clone()),
                    uid: None,
                }),
                ..DeleteParams::default()
            };
            match tokio::time::timeout(m.timing.renew_every, m.api.delete(name, &dp)).await {
                Ok(Ok(_)) => {
                    tracing::info!(ring = %m.ring, lease = %name, "collected an expired member Lease");
                }
                Ok(Err(e)) => {
                    tracing::debug!(ring = %m.ring, lease = %name, error = %e, "expired member Lease not collected");
                }
                Err(_) => return,
            }
        }
    }

    /// The drain timeout, but never past the deadline less the clock skew
    /// (then the reconciles are cancelled, and the release written, while
    /// the Lease is still valid).
    fn drain_patience(&self) -> Duration {
        let timing = self.member.timing;
        let left = match *self.deadline.borrow() {
            Some(d) => d
                .saturating_duration_since(Instant::now())
                .saturating_sub(timing.skew()),
            None => Duration::ZERO,
        };
        self.member.drain.min(left)
    }

    /// The ring's member Leases, by a quorum LIST.
    async fn view(&self) -> Result<View, kube::Error> {
        let m = &self.member;
        let lp = ListParams::default().labels(&format!("{LABEL}={}", m.ring));
        // Expiry is judged as of the request, not the answer: the list's
        // snapshot may be older than the answer's arrival.
        let now = m.clock.now();
        let list = m.api.list(&lp).await?;
        let mut view = View::default();
        for lease in list.items {
            if lease.metadata.name.as_deref() == Some(m.lease_name.as_str()) {
                view.mine = Some(lease);
                continue;
            }
            let Some(spec) = &lease.spec else { continue };
            let Some(who) = holder(Some(spec)) else {
                continue;
            };
            if available(spec, &m.identity, now, m.timing.lease_duration) {
                // Expired: its holder stopped before this instant. Expired
                // for a whole lease duration more, it is collected.
                let long_ago = jiff::SignedDuration::try_from(m.timing.lease_duration)
                    .ok()
                    .and_then(|d| now.checked_sub(d).ok());
                if let (Some(then), Some(name), Some(rv)) = (
                    long_ago,
                    lease.metadata.name.clone(),
                    lease.metadata.resource_version.clone(),
                ) && available(spec, &m.identity, then, m.timing.lease_duration)
                {
                    view.expired.push((name, rv));
                }
                continue;
            }
            let text = lease
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ANNOTATION));
            let slots = match text.map(|h| Slots::from_hex(h)) {
                None => Slots::NONE,
                Some(Ok(slots)) => slots,
                Some(Err(_)) => {
                    // A member whose claims cannot be read holds everything.
                    tracing::warn!(ring = %m.ring, lease = ?lease.metadata.name, annotation = ?text,
                        "unreadable shard slots: counting them all as held");
                    Slots::ALL
                }
            };
            let entry = view.members.entry(who.to_string()).or_default();
            *entry = entry.union(slots);
        }
        Ok(view)
    }

    /// Write the member Lease: renewed, listing `held`. Its validity
    /// counts from the write's start.
    async fn write(&mut self) -> Result<(), RoundError> {
        let m = self.member.clone();
        let started = Instant::now();
        let mut lease = self.mine.clone().unwrap_or_else(|| {
            let mut l = Lease::default();
            l.metadata.name = Some(m.lease_name.clone());
            l
        });
        lease
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(LABEL.into(), m.ring.clone());
        lease
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(ANNOTATION.into(), self.held.to_hex());
        let now = MicroTime(m.clock.now());
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if holder(Some(spec)) != Some(m.identity.as_str()) {
            spec.holder_identity = Some(m.identity.clone());
            spec.acquire_time = Some(now.clone());
        }
        spec.renew_time = Some(now);
        spec.lease_duration_seconds = Some(m.timing.seconds());
        let pp = PostParams::default();
        let written = match lease.metadata.resource_version {
            None => m.api.create(&pp, &lease).await,
            Some(_) => m.api.replace(&m.lease_name, &pp, &lease).await,
        };
        match written {
            Ok(l) => {
                self.mine = Some(l);
                self.deadline.send_replace(Some(m.timing.deadline(started)));
                Ok(())
            }
            // Deleted under this member (kubectl, a cleanup): others may
            // have claimed its slots already.
            Err(kube::Error::Api(s)) if s.code == 404 => {
                self.mine = None;
                Err(RoundError::Lost("deleted"))
            }
            // Written by someone else since: a late write of this member's
            // (harmless), or an edit — then it may no longer list what runs.
            Err(e) if is_conflict(&e) && lease.metadata.resource_version.is_some() => {
                self.mine = None;
                let now = m.api.get_opt(&m.lease_name).await?;
                let intact = now.as_ref().is_some_and(|l| {
                    let listed = l
                        .metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(ANNOTATION))
                        .and_then(|h| Slots::from_hex(h).ok())
                        .unwrap_or(Slots::NONE);
                    holder(l.spec.as_ref()) == Some(m.identity.as_str())
                        && self.gate().active().minus(listed).is_empty()
                });
                if !intact {
                    return Err(RoundError::Lost("changed by someone else"));
                }
                self.mine = now;
                Err(RoundError::Api(e))
            }
            Err(e) => {
                // Created meanwhile (a stale view missed it): learn it next round.
                if is_conflict(&e) {
                    self.mine = None;
                }
                Err(RoundError::Api(e))
            }
        }
    }

    /// Leave the ring: drain every slot, then delete the member Lease.
    /// The deadline still holds while draining: a member cut off from the
    /// server cancels what runs once its Lease could expire, drained or not.
    pub(super) async fn leave(&mut self) -> Result<(), ShardError> {
        let patience = self.drain_patience();
        let expired = expired(self.deadline.subscribe());
        let drained = {
            let drain = pin!(self.gate().drain(Slots::ALL, patience));
            tokio::select! {
                biased;
                () = expired => None,
                cancelled = drain => Some(cancelled),
            }
        };
        match drained {
            Some(cancelled) => {
                self.count("cancelled", cancelled);
                self.count("released", self.held.len());
            }
            None => self.lose(),
        }
        self.held = Slots::NONE;
        self.gauges(Some(0));
        let m = &self.member;
        let Some(mine) = &self.mine else {
            return Ok(());
        };
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: mine.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let deleted =
            tokio::time::timeout(m.timing.lease_duration, m.api.delete(&m.lease_name, &dp));
        match deleted.await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(kube::Error::Api(s))) if s.code == 404 || s.code == 409 => Ok(()),
            Ok(Err(source)) => Err(ShardError::Leave {
                lease: m.lease_name.clone(),
                source,
            }),
            Err(_) => Err(ShardError::LeaveTimeout {
                lease: m.lease_name.clone(),
            }),
        }
    }
}

/// One LIST of the ring's member Leases.
#[derive(Default)]
struct View {
    mine: Option<Lease>,
    /// Live members other than this one, with the slots their Leases list.
    members: BTreeMap<String, Slots>,
    /// Other members' Leases expired for over a lease duration (name,
    /// resourceVersion): their holders are gone, and so is their claim.
    expired: Vec<(String, String)>,
}

impl View {
    /// The live members other than `m` (another Lease naming `m`'s own
    /// identity — two replicas given one identity — counts as `m`).
    fn others(&self, m: &Member) -> BTreeMap<String, Slots> {
        let mut others = self.members.clone();
        others.remove(&m.identity);
        others
    }
}

fn rv(lease: &Lease) -> Option<&str> {
    lease.metadata.resource_version.as_deref()
}

/// Completes when the deadline `rx` holds has passed (never while it is `None`).
async fn expired(mut rx: watch::Receiver<Option<Instant>>) {
    loop {
        let deadline = *rx.borrow_and_update();
        match deadline {
            Some(d) => tokio::select! {
                biased;
                () = sleep_until(d) => return,
                changed = rx.changed() => if changed.is_err() { return std::future::pending().await },
            },
            None => {
                if rx.changed().await.is_err() {
                    return std::future::pending().await;
                }
            }
        }
    }
}
