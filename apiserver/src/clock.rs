//! Wall-clock timestamps derived from tokio's clock, so that a test running
//! under `#[tokio::test(start_paused = true)]` sees creation and deletion
//! timestamps advance exactly as its simulated time does.

use jiff::Timestamp;
use tokio::time::Instant;

/// A wall clock anchored at server start and advanced by tokio's clock.
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
    /// Anchor the clock at the current wall time.
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
        let span = jiff::SignedDuration::try_from(elapsed).unwrap_or(jiff::SignedDuration::MAX);
        self.wall0.saturating_add(span).unwrap_or(self.wall0)
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

/// Format a timestamp as `2006-01-02T15:04:05Z`.
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
