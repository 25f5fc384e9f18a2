//! The journal every example scenario keeps: what happened, in simulated
//! time, printed with a violation and compared across replays of a seed.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// A shared log of what happened, in simulated time, printed with a violation.
#[derive(Debug, Clone)]
pub struct Journal {
    start: Instant,
    entries: Arc<Mutex<Vec<(Duration, String)>>>,
}

impl Journal {
    /// A journal starting now.
    #[must_use]
    pub fn new() -> Self {
        Journal {
            start: Instant::now(),
            entries: Arc::default(),
        }
    }

    /// Simulated time since the start.
    #[must_use]
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Record an event.
    pub fn log(&self, what: impl Into<String>) {
        let at = self.elapsed();
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((at, what.into()));
    }

    /// Everything recorded.
    #[must_use]
    pub fn entries(&self) -> Vec<(Duration, String)> {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Default for Journal {
    fn default() -> Self {
        Self::new()
    }
}
