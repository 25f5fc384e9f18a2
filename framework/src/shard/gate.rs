//! The gate every reconcile of a sharded controller passes: a reconcile
//! starts only on an object whose slot is active, is counted while it
//! runs, and is cancelled when its slot must be given up at once.
//!
//! The keeper deactivates a slot *before* it writes the slot's release,
//! and waits here until the reconciles already running on it have
//! finished (or, past the drain timeout, been cancelled and dropped):
//! entering and deactivating take the same lock, so a reconcile either
//! entered before the slot went inactive (and is waited for) or sees it
//! inactive (and never starts).

use std::time::Duration;

use tokio::sync::watch;

use super::ring::{SLOTS, Slots};

#[derive(Debug)]
struct State {
    active: Slots,
    /// Bumped whenever a slot is deactivated: a watch started before then
    /// is stale even if the same slots are active again now.
    epoch: u64,
    /// Slots whose reconciles must stop now.
    cancelled: Slots,
    running: [u32; SLOTS],
}

/// Active slots and the reconciles running on them.
#[derive(Debug, Clone)]
pub(crate) struct Gate {
    tx: watch::Sender<State>,
}

impl Default for Gate {
    fn default() -> Self {
        Gate {
            tx: watch::Sender::new(State {
                active: Slots::NONE,
                epoch: 0,
                cancelled: Slots::NONE,
                running: [0; SLOTS],
            }),
        }
    }
}

impl Gate {
    /// The slots reconciles may start on now.
    pub(crate) fn active(&self) -> Slots {
        self.tx.borrow().active
    }

    /// The active slots and the deactivation epoch now: equal twice only
    /// if no slot was deactivated in between and the active set is the
    /// same (a slot lost and regained bumps the epoch).
    pub(crate) fn selection(&self) -> (Slots, u64) {
        let s = self.tx.borrow();
        (s.active, s.epoch)
    }

    /// A watch of the active slots, for a watch that must restart when
    /// they change.
    pub(crate) fn watch_active(&self) -> ActiveWatch {
        ActiveWatch {
            rx: self.tx.subscribe(),
            seen: (Slots::NONE, u64::MAX),
        }
    }

    /// Completes once no reconcile runs on `slots`.
    pub(crate) async fn idle(&self, slots: Slots) {
        let mut rx = self.tx.subscribe();
        let _ = rx
            .wait_for(|s| (0..SLOTS).all(|i| !slots.contains(i) || s.running[i] == 0))
            .await;
    }

    /// Let reconciles start on `slots` (the keeper waits for [`idle`](Self::idle)
    /// after a cancel first: activating clears the cancel).
    pub(crate) fn activate(&self, slots: Slots) {
        self.tx.send_if_modified(|s| {
            let before = s.active;
            s.active = s.active.union(slots);
            s.cancelled = s.cancelled.minus(slots);
            s.active != before
        });
    }

    /// Start a reconcile of an object hashing to `hash`, if its slot is active.
    pub(crate) fn enter(&self, hash: u64) -> Option<Ticket> {
        let slot = Slots::slot_of(hash);
        let mut entered = false;
        self.tx.send_if_modified(|s| {
            entered = s.active.contains(slot);
            if entered {
                s.running[slot] += 1;
            }
            // Nobody waits for a reconcile to start.
            false
        });
        entered.then(|| Ticket {
            gate: self.clone(),
            slot,
        })
    }

    /// Stop new reconciles on `slots`; wait until those running have
    /// finished, cancelling what still runs after `patience`. Returns how
    /// many were cancelled.
    pub(crate) async fn drain(&self, slots: Slots, patience: Duration) -> usize {
        self.tx.send_if_modified(|s| {
            let before = s.active;
            s.active = s.active.minus(slots);
            s.active != before
        });
        let mut rx = self.tx.subscribe();
        let idle = |s: &State| (0..SLOTS).all(|i| !slots.contains(i) || s.running[i] == 0);
        if tokio::time::timeout(patience, rx.wait_for(idle))
            .await
            .is_ok()
        {
            return 0;
        }
        let cancelled = self.cancel(slots);
        // Cancelled reconciles are dropped at their next poll.
        let _ = rx.wait_for(idle).await;
        cancelled
    }

    /// Stop every reconcile on `slots` at once (a lost Lease); returns how
    /// many were running.
    pub(crate) fn cancel(&self, slots: Slots) -> usize {
        let mut running = 0;
        self.tx.send_modify(|s| {
            s.active = s.active.minus(slots);
            s.epoch += 1;
            s.cancelled = s.cancelled.union(slots);
            running = (0..SLOTS)
                .filter(|&i| slots.contains(i))
                .map(|i| s.running[i] as usize)
                .sum();
        });
        running
    }

    /// How many reconciles run now.
    #[cfg(test)]
    fn running(&self) -> u32 {
        self.tx.borrow().running.iter().sum()
    }
}

/// The active slots as one watcher last took them ([`Gate::watch_active`]):
/// one subscription, however many events pass meanwhile.
#[derive(Debug)]
pub(crate) struct ActiveWatch {
    rx: watch::Receiver<State>,
    /// The active slots and the deactivation epoch last taken.
    seen: (Slots, u64),
}

impl ActiveWatch {
    /// Take the active slots now.
    pub(crate) fn take(&mut self) -> Slots {
        let s = self.rx.borrow_and_update();
        self.seen = (s.active, s.epoch);
        s.active
    }

    /// The active slots and deactivation epoch last taken.
    pub(crate) fn seen(&self) -> (Slots, u64) {
        self.seen
    }

    /// Completes once the active slots differ from those last taken, or a
    /// slot has been deactivated since (even if active again).
    pub(crate) async fn changed(&mut self) {
        let seen = self.seen;
        // The gate (the sender) outlives its shards: the wait ends only
        // with a change.
        let _ = self.rx.wait_for(|s| (s.active, s.epoch) != seen).await;
    }
}

/// A reconcile that passed the gate; dropping it ends the reconcile's count.
#[derive(Debug)]
pub(crate) struct Ticket {
    gate: Gate,
    slot: usize,
}

impl Ticket {
    /// Completes when this reconcile must stop at once.
    pub(crate) async fn cancelled(&self) {
        let slot = self.slot;
        let mut rx = self.gate.tx.subscribe();
        let _ = rx.wait_for(|s| s.cancelled.contains(slot)).await;
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let slot = self.slot;
        self.gate.tx.send_modify(|s| s.running[slot] -= 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IN_0: u64 = 1;
    const IN_1: u64 = 1 << 57;

    #[test]
    fn only_active_slots_admit_reconciles() {
        let gate = Gate::default();
        assert!(gate.enter(IN_0).is_none());
        gate.activate(Slots::one(0));
        let t = gate.enter(IN_0).expect("slot 0 is active");
        assert!(gate.enter(IN_1).is_none());
        assert_eq!(gate.running(), 1);
        drop(t);
        assert_eq!(gate.running(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_drain_waits_for_running_reconciles_then_cancels_the_rest() {
        let gate = Gate::default();
        gate.activate(Slots::ALL);
        let slow = gate.enter(IN_0).unwrap();
        let other = gate.enter(IN_1).unwrap();
        // Finishes on its own within the patience.
        let finishing = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            drop(slow);
        });
        assert_eq!(gate.drain(Slots::one(0), Duration::from_secs(5)).await, 0);
        finishing.await.unwrap();
        assert!(gate.enter(IN_0).is_none(), "drained slots stay closed");
        // Never finishes: cancelled after the patience, and the drain
        // returns once the cancelled reconcile has been dropped.
        let stuck = tokio::spawn(async move {
            tokio::select! {
                () = other.cancelled() => "cancelled",
                () = std::future::pending() => "finished",
            }
        });
        let started = tokio::time::Instant::now();
        assert_eq!(gate.drain(Slots::one(1), Duration::from_secs(5)).await, 1);
        assert_eq!(started.elapsed(), Duration::from_secs(5));
        assert_eq!(stuck.await.unwrap(), "cancelled");
        assert_eq!(gate.running(), 0);
        // Reactivated, a slot admits again and is no longer cancelled.
        gate.activate(Slots::one(1));
        let again = gate.enter(IN_1).unwrap();
        assert!(
            tokio::time::timeout(Duration::from_secs(1), again.cancelled())
                .await
                .is_err()
        );
    }
}
