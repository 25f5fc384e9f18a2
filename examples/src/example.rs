//! An example, typed: its scenarios, the variants of its controller, the
//! invariants its scenarios check, and one seeded run of a scenario in a
//! variant, with what the run found ([`Report`]).
//!
//! Each example (whereabouts, CNS, LWS, sharding) implements [`Example`]
//! once, on a unit type in its module; `ward-demo`'s campaigns
//! ([`crate::demo`]) and the binaries' `scenario` command
//! ([`crate::cli`]) run every example through it, so a scenario or a
//! variant is always a value of the example's own type, never a string.
//! Running needs the `sim` feature (the scenarios run on tokio's paused
//! clock); the rest describes the example for its live binary too.

use std::fmt;
use std::time::Duration;

use crate::journal::{Invariant, Violation};
#[cfg(feature = "sim")]
use crate::run::ScenarioError;

/// An example controller with its scenarios.
pub trait Example: fmt::Debug + Clone + Send + Sync + 'static {
    /// Its name, as the table and its binary call it (`whereabouts`).
    const NAME: &'static str;
    /// Which scenario.
    type Scenario: Copy + Eq + fmt::Debug + fmt::Display + Send + Sync + 'static;
    /// Which variant of the controller.
    type Mode: Copy + Eq + fmt::Debug + fmt::Display + Send + Sync + 'static;
    /// The invariants its scenarios check.
    type Invariant: Invariant;
    /// What a run measures besides its violations (`()` for most).
    type Measured: Clone + fmt::Debug + Send + 'static;
    /// Every scenario, in table order.
    const SCENARIOS: &'static [Self::Scenario];
    /// Every variant, in table order.
    const MODES: &'static [Self::Mode];

    /// Whether `mode` is built from Ward's guards (and so must never break
    /// an invariant).
    fn guarded(mode: Self::Mode) -> bool;

    /// Run `scenario` with `mode` and `seed` inside a runtime with a paused
    /// clock, carrying out the seed's plan of the perturbation `kinds`.
    #[cfg(feature = "sim")]
    fn run(
        scenario: Self::Scenario,
        mode: Self::Mode,
        seed: u64,
        kinds: &[std::sync::Arc<dyn ward_campaign::Perturbation>],
    ) -> impl Future<Output = Result<Report<Self>, ScenarioError>> + Send;

    /// [`run`](Example::run) without perturbation, on its own
    /// single-threaded runtime with a paused clock (simulated time).
    #[cfg(feature = "sim")]
    fn run_blocking(
        scenario: Self::Scenario,
        mode: Self::Mode,
        seed: u64,
    ) -> Result<Report<Self>, ScenarioError> {
        crate::run::simulate(|| Self::run(scenario, mode, seed, &[]))
    }

    /// The scenarios' fixed parameters, as the binary's `scenario` command
    /// prints them after the seed (e.g. ` (recovery bound 30s)`).
    #[must_use]
    fn parameters() -> String {
        String::new()
    }

    /// Lines the `scenario` command prints after the invariants.
    #[must_use]
    fn summary(_report: &Report<Self>) -> Vec<String> {
        Vec::new()
    }

    /// How much of the journal the `scenario` command prints.
    #[must_use]
    fn history(_report: &Report<Self>) -> History {
        History::All
    }
}

/// How much of a run's journal a binary prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum History {
    /// None of it.
    Hidden,
    /// Up to this time.
    Until(Duration),
    /// All of it.
    All,
}

/// What a run found.
#[derive(Debug, Clone)]
pub struct Report<E: Example> {
    /// Which scenario.
    pub scenario: E::Scenario,
    /// Which variant.
    pub mode: E::Mode,
    /// The seed.
    pub seed: u64,
    /// The perturbation plan carried out (see `ward_campaign::Plan`).
    pub plan: String,
    /// Every write the server committed, with its resourceVersion (see
    /// `ward_campaign::Perturber::events`).
    pub events: Vec<String>,
    /// Every invariant broken, in order.
    pub violations: Vec<Violation<E::Invariant>>,
    /// What happened, in simulated time.
    pub journal: Vec<(Duration, String)>,
    /// What else the run measured.
    pub measured: E::Measured,
    /// Why the run ended before its scenario did, if it did: the
    /// controllers passed the run's bounds (`ward_campaign::Limits`) — a
    /// livelock. The settled invariants were not judged; `ward-demo`
    /// counts the run as failed.
    pub livelock: Option<String>,
}
