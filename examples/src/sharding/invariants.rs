//! The sharding invariants (see the [module docs](super)): I1 from the
//! replicas' reconciles as they run, I2 from every write the server
//! commits (member Leases included, in resourceVersion order), I3 and I4
//! once everything has settled.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use jiff::{SignedDuration, Timestamp};
use serde_json::Value;
use ward::shard::{ANNOTATION, Ring, Slots};
use ward_campaign::Write;

use super::{BY, NAMESPACE, RING};

crate::journal::invariants! {
    "sharding":
    /// No two replicas reconcile one object at once.
    I1 => "I1 (two replicas reconciled one object at once)",
    /// No write outside the slots the writer's live Lease lists.
    I2 => "I2 (a write outside the writer's slots)",
    /// After the churn, every object reconciled by its final owner in time.
    I3 => "I3 (an object not reconciled by its final owner in time)",
    /// The final ring is balanced.
    I4 => "I4 (the ring unbalanced)",
}

/// The reconciles running now, per object (I1), and every one finished.
#[derive(Clone)]
pub struct Running {
    inner: Arc<Mutex<RunningState>>,
    violations: Violations,
    clock: tokio::time::Instant,
}

#[derive(Default)]
struct RunningState {
    now: HashMap<String, Vec<String>>,
    /// Finished reconciles: object -> (replica, start, end), in simulated time.
    done: BTreeMap<String, Vec<(String, std::time::Duration, std::time::Duration)>>,
}

impl Running {
    /// Reconciles judged into `violations`.
    #[must_use]
    pub fn new(violations: Violations) -> Self {
        Running {
            inner: Arc::default(),
            violations,
            clock: tokio::time::Instant::now(),
        }
    }

    /// `who` starts reconciling `object`; it ends when the guard drops
    /// (finished or cancelled).
    #[must_use]
    pub fn enter(&self, who: &str, object: &str) -> Entered {
        let mut s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let others = s.now.entry(object.to_string()).or_default();
        if let Some(other) = others.iter().find(|o| *o != who) {
            self.violations.violate(
                Invariant::I1,
                object.to_string(),
                format!("{who} started reconciling {object} while {other} was"),
            );
        }
        others.push(who.to_string());
        Entered {
            running: self.clone(),
            who: who.to_string(),
            object: object.to_string(),
            start: self.clock.elapsed(),
        }
    }

    /// Whether `who` finished a reconcile of `object` that started at or
    /// after `from` and ended by `by` (simulated time from the start).
    #[must_use]
    pub fn finished(
        &self,
        who: &str,
        object: &str,
        from: std::time::Duration,
        by: std::time::Duration,
    ) -> bool {
        let s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        s.done.get(object).is_some_and(|runs| {
            runs.iter()
                .any(|(w, start, end)| w == who && *start >= from && *end <= by)
        })
    }
}

/// A running reconcile.
pub struct Entered {
    running: Running,
    who: String,
    object: String,
    start: std::time::Duration,
}

impl Drop for Entered {
    fn drop(&mut self) {
        let end = self.running.clock.elapsed();
        let mut s = self.running.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = s.now.get_mut(&self.object)
            && let Some(i) = v.iter().position(|w| *w == self.who)
        {
            v.swap_remove(i);
        }
        s.done
            .entry(self.object.clone())
            .or_default()
            .push((self.who.clone(), self.start, end));
    }
}

/// A member Lease as the server last committed it.
#[derive(Debug, Clone)]
struct Member {
    slots: Slots,
    expires: Timestamp,
}

/// I2, judged on every committed write: a write stamped by replica `r`
/// (annotation `sharding.ward.dev/by`) to an object whose uid hashes
/// outside the slots `r`'s Lease listed at that instant — or after that
/// Lease expired or was deleted — breaks it. `t0` is the wall time of the
/// perturber's creation (writes carry their time from it).
pub fn writes_in_slots(
    t0: Timestamp,
    violations: Violations,
) -> impl FnMut(&Write<'_>) -> Result<(), String> + Send + 'static {
    let mut members: BTreeMap<String, Member> = BTreeMap::new();
    move |w| {
        if w.namespace != NAMESPACE {
            return Ok(());
        }
        let now = t0 + SignedDuration::try_from(w.at).unwrap_or(SignedDuration::MAX);
        match w.resource {
            "leases" => {
                match w.after.and_then(member) {
                    Some((who, m)) => members.insert(who, m),
                    None => w
                        .before
                        .and_then(member)
                        .and_then(|(who, _)| members.remove(&who)),
                };
            }
            "configmaps" => {
                let (Some(after), Some(_)) = (w.after, w.before) else {
                    return Ok(()); // the scenario's own creates
                };
                let Some(by) = after["metadata"]["annotations"][BY].as_str() else {
                    return Ok(());
                };
                let Some(uid) = after["metadata"]["uid"].as_str() else {
                    return Ok(());
                };
                let hash = ward_base::fnv1a(uid.as_bytes());
                let held = members
                    .get(by)
                    .filter(|m| m.expires > now)
                    .is_some_and(|m| m.slots.contains_hash(hash));
                if !held {
                    violations.violate(
                        Invariant::I2,
                        w.name.to_string(),
                        format!(
                            "{by} wrote {} (slot {}) at rv {}, outside the slots its live Lease listed ({:?})",
                            w.name,
                            Slots::slot_of(hash),
                            w.rv,
                            members.get(by).map(|m| m.slots)
                        ),
                    );
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// A member Lease's holder, slots and expiry; `None` for another Lease or
/// one without a holder.
fn member(lease: &Value) -> Option<(String, Member)> {
    let meta = &lease["metadata"];
    if meta["labels"][ward::shard::LABEL].as_str() != Some(RING) {
        return None;
    }
    let spec = &lease["spec"];
    let who = spec["holderIdentity"].as_str().filter(|h| !h.is_empty())?;
    let renewed: Timestamp = spec["renewTime"].as_str()?.parse().ok()?;
    let secs = spec["leaseDurationSeconds"].as_i64()?;
    let slots = meta["annotations"][ANNOTATION]
        .as_str()
        .and_then(|h| Slots::from_hex(h).ok())
        .unwrap_or(Slots::NONE);
    Some((
        who.to_string(),
        Member {
            slots,
            expires: renewed + SignedDuration::from_secs(secs),
        },
    ))
}

/// I4: the ring of `members` spreads 1,000 uids drawn from `seed` within
/// ±30% of the mean; the worst replica's share if not.
///
/// # Errors
/// The first replica outside the bound, and its share.
pub fn balanced(members: &[String], seed: u64) -> Result<(), String> {
    let ring = Ring::new(members.iter().cloned());
    let mut rng = ward_base::Rng::stream(seed, "sharding/uids");
    let mut counts: BTreeMap<&str, usize> = members.iter().map(|m| (m.as_str(), 0)).collect();
    for _ in 0..1_000 {
        let uid = format!("{:016x}-{:016x}", rng.next_u64(), rng.next_u64());
        if let Some(owner) = ring.owner_of(ward_base::fnv1a(uid.as_bytes()))
            && let Some(c) = counts.get_mut(owner)
        {
            *c += 1;
        }
    }
    let mean = 1_000.0 / members.len().max(1) as f64;
    match counts
        .iter()
        .find(|(_, c)| (**c as f64 - mean).abs() > 0.3 * mean)
    {
        Some((m, c)) => Err(format!("{m} owns {c} of 1,000 uids (mean {mean:.0})")),
        None => Ok(()),
    }
}
