//! A run's timeline: what happened, when, on which swimlane.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

/// A swimlane of a run's timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lane {
    /// The workload's steps.
    Workload,
    /// The controller's requests, exits and restarts.
    Controller,
    /// Committed writes (the controller's, the workload's, the GC's).
    Store,
    /// The plan's actions.
    Perturbation,
}

/// One entry of a run's timeline.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    /// Milliseconds from the run's start.
    pub ms: u64,
    /// Its lane.
    pub lane: Lane,
    /// What happened.
    pub what: String,
}

/// The controller's requests the server refused (403 Forbidden), in
/// order, as the timeline has them (`GET /api/... → 403`): what a
/// controller without the RBAC it needs was denied.
#[must_use]
pub fn refusals(entries: &[Entry]) -> Vec<&str> {
    entries
        .iter()
        .filter(|e| e.lane == Lane::Controller && e.what.ends_with("→ 403"))
        .map(|e| e.what.as_str())
        .collect()
}

/// A run's timeline, appended to by its tasks.
#[derive(Clone)]
pub(crate) struct Timeline(Arc<(Instant, Mutex<Vec<Entry>>)>);

impl Timeline {
    pub(crate) fn new() -> Timeline {
        Timeline(Arc::new((Instant::now(), Mutex::default())))
    }

    pub(crate) fn push(&self, lane: Lane, what: String) {
        let ms = self.0.0.elapsed().as_millis() as u64;
        let mut v = self.0.1.lock().unwrap_or_else(|e| e.into_inner());
        v.push(Entry { ms, lane, what });
    }

    pub(crate) fn entries(&self) -> Vec<Entry> {
        self.0.1.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
