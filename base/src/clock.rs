//! Wall time that follows tokio's clock: anchored at the wall time when
//! created, then advanced by tokio time. Under
//! `#[tokio::test(start_paused = true)]` creation and deletion timestamps,
//! lease renewals and grace bounds advance exactly as simulated time does.
//! Two clocks created at different simulated times disagree by that
//! difference: share one (`ServerConfig::clock` takes it for the server).

use jiff::{SignedDuration, Timestamp};
use tokio::time::Instant;

/// A wall clock advanced by tokio's clock.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    wall0: Timestamp,
    inst0: Instant,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    /// Anchored at the current wall time and tokio instant.
    #[must_use]
    pub fn new() -> Self {
        Clock {
            wall0: Timestamp::now(),
            inst0: Instant::now(),
        }
    }

    /// Anchored at the current wall time rounded down to a whole second.
    /// Kubernetes timestamps are whole seconds, so with this anchor the
    /// second an event is stamped with depends on tokio time alone, not on
    /// the wall clock's sub-second phase when the clock was made: a seeded
    /// simulation then stamps, and decides, the same on every run.
    #[must_use]
    pub fn on_the_second() -> Self {
        let now = Timestamp::now();
        Clock {
            wall0: Timestamp::from_second(now.as_second()).unwrap_or(now),
            inst0: Instant::now(),
        }
    }

    /// The current time.
    #[must_use]
    pub fn now(&self) -> Timestamp {
        let elapsed = Instant::now().saturating_duration_since(self.inst0);
        let d = SignedDuration::try_from(elapsed).unwrap_or(SignedDuration::MAX);
        self.wall0.saturating_add(d).unwrap_or(self.wall0)
    }

    /// The current time as Kubernetes writes it: RFC 3339, whole seconds, `Z`.
    #[must_use]
    pub fn rfc3339(&self) -> String {
        format_time(self.now())
    }
}

/// Sleep until `t`, or forever when there is no `t` (a `select!` arm that
/// is armed only sometimes).
pub async fn sleep_until_opt(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// Format a timestamp as Kubernetes does: `2006-01-02T15:04:05Z`.
#[must_use]
pub fn format_time(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn follows_tokio_time() {
        let c = Clock::new();
        let a = c.now();
        tokio::time::advance(std::time::Duration::from_secs(90)).await;
        let b = c.now();
        assert_eq!(b.duration_since(a).as_secs(), 90);
        assert!(c.rfc3339().ends_with('Z'));
    }

    #[tokio::test(start_paused = true)]
    async fn on_the_second_stamps_by_tokio_time_alone() {
        let c = Clock::on_the_second();
        assert_eq!(c.now().subsec_nanosecond(), 0);
        let first = c.rfc3339();
        tokio::time::advance(std::time::Duration::from_millis(999)).await;
        assert_eq!(c.rfc3339(), first, "still the anchor's second");
        tokio::time::advance(std::time::Duration::from_millis(1)).await;
        assert_ne!(c.rfc3339(), first, "the next second, exactly 1 s on");
    }
}
