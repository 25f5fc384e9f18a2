//! The sharding invariants (see the [module docs](super)): I1 from the
//! replicas' reconciles as they run, I2 from every write the server
//! commits (member Leases included, in resourceVersion order), I3 and I4
//! once everything has settled.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use jiff::{SignedDuration, Timestamp};
use serde_json::Value;
use ward_campaign::Write;
use ward_runtime::shard::{ANNOTATION, Ring, Slots};

use super::{BY, NAMESPACE, RING, SEEN, WANT};

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
    /// Every change the churn makes is answered in time.
    I5 => "I5 (a change never answered)",
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
/// Lease expired or was deleted — breaks it. The scenario's own creates
/// and edits are not judged: an edit changes `want`, which a replica's
/// write never does (it writes back the `want` it read, under the
/// resourceVersion it read). `t0` is the wall time of the perturber's
/// creation (writes carry their time from it).
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
                let (Some(after), Some(before)) = (w.after, w.before) else {
                    return Ok(()); // the scenario's own creates
                };
                if after["data"][WANT] != before["data"][WANT] {
                    return Ok(()); // the scenario's own edits (a replica copies `want`)
                }
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

/// What I5 reads off the server's history: every change of an object's
/// `want` mark (the scenario's creates and edits) and every write of its
/// `seen` (a replica's answer), each with its time from the perturber's
/// creation.
#[derive(Clone, Default)]
pub struct Marks {
    inner: Arc<Mutex<MarksState>>,
}

#[derive(Default)]
struct MarksState {
    /// (object, mark, when it was set)
    changes: Vec<(String, u64, std::time::Duration)>,
    /// object -> (when, seen) for every write that changed `seen`
    answers: BTreeMap<String, Vec<(std::time::Duration, u64)>>,
}

impl Marks {
    /// The judge that records them (it never finds a violation itself:
    /// [`Marks::unanswered`] judges once the run is over).
    pub fn recorder(&self) -> impl FnMut(&Write<'_>) -> Result<(), String> + Send + 'static {
        let marks = self.clone();
        move |w| {
            if w.namespace != NAMESPACE || w.resource != "configmaps" {
                return Ok(());
            }
            let mark = |o: Option<&Value>, key: &str| {
                o.and_then(|o| o["data"][key].as_str())
                    .and_then(|m| m.parse::<u64>().ok())
            };
            let mut s = marks.inner.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(want) = mark(w.after, WANT)
                && mark(w.before, WANT) != Some(want)
            {
                s.changes.push((w.name.to_string(), want, w.at));
            }
            if let Some(seen) = mark(w.after, SEEN)
                && mark(w.before, SEEN) != Some(seen)
            {
                s.answers
                    .entry(w.name.to_string())
                    .or_default()
                    .push((w.at, seen));
            }
            Ok(())
        }
    }

    /// How many changes were recorded.
    #[must_use]
    pub fn changes(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .changes
            .len()
    }

    /// The changes not answered — no write of `seen` at least their mark,
    /// at or after the change — by `deadline(change time)`, each as
    /// (object, mark, when), in the order they were made.
    #[must_use]
    pub fn unanswered(
        &self,
        deadline: impl Fn(std::time::Duration) -> std::time::Duration,
    ) -> Vec<(String, u64, std::time::Duration)> {
        let s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        s.changes
            .iter()
            .filter(|(name, mark, at)| {
                let by = deadline(*at);
                !s.answers.get(name).is_some_and(|answers| {
                    answers
                        .iter()
                        .any(|(t, seen)| t >= at && *t <= by && seen >= mark)
                })
            })
            .cloned()
            .collect()
    }
}

/// A member Lease's holder, slots and expiry; `None` for another Lease or
/// one without a holder.
fn member(lease: &Value) -> Option<(String, Member)> {
    let meta = &lease["metadata"];
    if meta["labels"][ward_runtime::shard::LABEL].as_str() != Some(RING) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    fn write(marks: &Marks, before: Option<&Value>, after: &Value, at: u64) {
        let mut record = marks.recorder();
        record(&Write {
            rv: at,
            verb: if before.is_some() {
                "MODIFIED"
            } else {
                "ADDED"
            },
            resource: "configmaps",
            namespace: NAMESPACE,
            name: "obj-01",
            before,
            after: Some(after),
            at: Duration::from_secs(at),
        })
        .unwrap();
    }

    fn cm(want: u64, seen: Option<u64>) -> Value {
        match seen {
            Some(s) => json!({ "data": { WANT: want.to_string(), SEEN: s.to_string() } }),
            None => json!({ "data": { WANT: want.to_string() } }),
        }
    }

    #[test]
    fn a_change_counts_as_answered_only_by_a_seen_at_least_its_mark_in_time() {
        let marks = Marks::default();
        write(&marks, None, &cm(1, None), 1); // created with mark 1
        write(&marks, Some(&cm(1, None)), &cm(1, Some(1)), 2); // answered
        write(&marks, Some(&cm(1, Some(1))), &cm(2, Some(1)), 3); // changed to 2
        write(&marks, Some(&cm(2, Some(1))), &cm(2, Some(1)), 4); // a write that saw 1 only
        assert_eq!(marks.changes(), 2);
        let by = |at: Duration| at + Duration::from_secs(5);
        assert_eq!(
            marks.unanswered(by),
            vec![("obj-01".to_string(), 2, Duration::from_secs(3))]
        );
        write(&marks, Some(&cm(2, Some(1))), &cm(2, Some(2)), 9); // too late
        assert_eq!(marks.unanswered(by).len(), 1);
        assert!(
            marks
                .unanswered(|at| at + Duration::from_secs(6))
                .is_empty()
        );
    }
}
