//! Wall time that follows tokio's clock: anchored when created, then
//! advanced by tokio time, so guards comparing ages against grace bounds
//! behave the same under `#[tokio::test(start_paused = true)]` as in
//! production (ward-apiserver stamps objects the same way).

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
    /// Anchored now.
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
}
