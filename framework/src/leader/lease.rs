//! The pure arithmetic of a Lease: the durations of an election (shared
//! with a shard member's Lease), when a Lease is free, who holds it, and
//! the Lease as a candidate writes it when taking it. No I/O.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use tokio::time::Instant;

use super::LeaderError;

/// The durations of an election (and of a shard member's Lease).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timing {
    pub(crate) lease_duration: Duration,
    pub(crate) renew_every: Duration,
    pub(crate) retry_every: Duration,
    pub(crate) clock_skew: Option<Duration>,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            lease_duration: Duration::from_secs(15),
            renew_every: Duration::from_secs(5),
            retry_every: Duration::from_secs(2),
            clock_skew: None,
        }
    }
}

impl Timing {
    pub(crate) fn skew(&self) -> Duration {
        self.clock_skew.unwrap_or_else(|| {
            Duration::from_secs(1).min(self.lease_duration.saturating_sub(self.renew_every) / 2)
        })
    }

    /// When a Lease written at `from` stops counting as held, for its holder.
    pub(crate) fn deadline(&self, from: Instant) -> Instant {
        from + self.lease_duration.saturating_sub(self.skew())
    }

    /// `leaseDurationSeconds`: whole seconds, rounded up.
    pub(crate) fn seconds(&self) -> i32 {
        let d = self.lease_duration;
        let s = d.as_secs() + u64::from(d.subsec_nanos() > 0);
        i32::try_from(s).unwrap_or(i32::MAX)
    }

    pub(crate) fn validate(&self) -> Result<(), LeaderError> {
        let bad = |m: String| Err(LeaderError::Config(m));
        if self.lease_duration < Duration::from_secs(1) {
            return bad(format!(
                "lease duration {:?} is under 1s",
                self.lease_duration
            ));
        }
        if self.renew_every.is_zero() || self.retry_every.is_zero() {
            return bad("renew and retry periods must be positive".into());
        }
        if self.renew_every + self.skew() >= self.lease_duration {
            return bad(format!(
                "renew period {:?} plus clock skew {:?} must be shorter than the lease duration {:?}",
                self.renew_every,
                self.skew(),
                self.lease_duration
            ));
        }
        Ok(())
    }
}

pub(crate) fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// The holder named in `spec`, if any (an empty identity is no holder).
pub(crate) fn holder(spec: Option<&LeaseSpec>) -> Option<&str> {
    spec.and_then(|s| s.holder_identity.as_deref())
        .filter(|h| !h.is_empty())
}

/// Whether `identity` may take a Lease with `spec` at `now`: it is free,
/// already its own, or its holder's `renewTime + leaseDurationSeconds` has
/// passed (`fallback` when the Lease names no duration).
pub(crate) fn available(
    spec: &LeaseSpec,
    identity: &str,
    now: jiff::Timestamp,
    fallback: Duration,
) -> bool {
    let Some(h) = holder(Some(spec)) else {
        return true;
    };
    if h == identity {
        return true;
    }
    let Some(renewed) = spec.renew_time.as_ref().or(spec.acquire_time.as_ref()) else {
        return true;
    };
    let duration = spec.lease_duration_seconds.map_or(
        jiff::SignedDuration::try_from(fallback).unwrap_or(jiff::SignedDuration::MAX),
        |s| jiff::SignedDuration::from_secs(i64::from(s)),
    );
    renewed
        .0
        .checked_add(duration)
        .is_ok_and(|expiry| expiry < now)
}

/// The Lease `name` as candidate `identity` writes it when taking it at
/// `now` (with `seconds` as its duration), from `current`.
pub(super) fn taken(
    current: Option<Lease>,
    name: &str,
    identity: &str,
    now: MicroTime,
    seconds: i32,
) -> Lease {
    let mut lease = current.unwrap_or_else(|| {
        let mut l = Lease::default();
        l.metadata.name = Some(name.to_string());
        l
    });
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    let mine = spec.holder_identity.as_deref() == Some(identity);
    if !mine {
        let transitions = spec.lease_transitions.unwrap_or(0);
        spec.lease_transitions = Some(if lease.metadata.resource_version.is_some() {
            transitions.saturating_add(1)
        } else {
            0
        });
        spec.acquire_time = Some(now.clone());
        spec.holder_identity = Some(identity.to_string());
    }
    spec.acquire_time.get_or_insert_with(|| now.clone());
    spec.lease_transitions.get_or_insert(0);
    spec.renew_time = Some(now);
    spec.lease_duration_seconds = Some(seconds);
    lease
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(holder: Option<&str>, renewed: jiff::Timestamp, secs: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(str::to_string),
            renew_time: Some(MicroTime(renewed)),
            lease_duration_seconds: Some(secs),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn a_held_lease_is_available_only_after_it_expires() {
        let t0: jiff::Timestamp = "2025-01-01T00:00:00Z".parse().unwrap();
        let s = spec(Some("a"), t0, 15);
        let at = |secs: i64| t0 + jiff::SignedDuration::from_secs(secs);
        let fallback = Duration::from_secs(15);
        assert!(!available(&s, "b", at(10), fallback));
        assert!(!available(&s, "b", at(15), fallback), "expiry is exclusive");
        assert!(available(&s, "b", at(16), fallback));
        assert!(available(&s, "a", at(1), fallback), "its own lease");
        assert!(
            available(&spec(None, t0, 15), "b", at(1), fallback),
            "released"
        );
        assert!(
            available(&spec(Some(""), t0, 15), "b", at(1), fallback),
            "empty holder"
        );
        let no_duration = LeaseSpec {
            lease_duration_seconds: None,
            ..s.clone()
        };
        assert!(!available(&no_duration, "b", at(14), fallback));
        assert!(available(&no_duration, "b", at(16), fallback));
    }

    fn timing(lease_ms: u64, renew_ms: u64, retry_ms: u64, skew_ms: Option<u64>) -> Timing {
        let ms = Duration::from_millis;
        Timing {
            lease_duration: ms(lease_ms),
            renew_every: ms(renew_ms),
            retry_every: ms(retry_ms),
            clock_skew: skew_ms.map(ms),
        }
    }

    #[test]
    fn timing_is_validated() {
        let t = Timing::default();
        assert_eq!(t, timing(15_000, 5_000, 2_000, None));
        assert!(t.validate().is_ok());
        assert_eq!((t.skew(), t.seconds()), (Duration::from_secs(1), 15));
        let bad = |t: Timing| matches!(t.validate(), Err(LeaderError::Config(_)));
        assert!(bad(timing(15_000, 15_000, 2_000, None)), "renew >= lease");
        assert!(bad(timing(500, 100, 100, None)), "lease under 1 s");
        assert!(bad(timing(15_000, 5_000, 0, None)), "zero retry");
        assert!(
            bad(timing(15_000, 5_000, 2_000, Some(10_000))),
            "skew too big"
        );
        // The default skew shrinks to fit a tight renew period.
        let tight = timing(3_000, 2_000, 1_000, None);
        assert!(tight.validate().is_ok());
        assert_eq!(tight.skew(), Duration::from_millis(500));
        assert_eq!(timing(2_500, 1_000, 1_000, None).seconds(), 3, "rounded up");
        let t0 = Instant::now();
        assert_eq!(
            t.deadline(t0) - t0,
            Duration::from_secs(14),
            "minus the skew"
        );
    }
}
