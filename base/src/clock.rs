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
}
