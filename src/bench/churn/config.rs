//! What a churn run is asked for: its sizes and rates, and the controller
//! variants it compares.

use std::time::Duration;

use serde::Serialize;

/// Sizes and rates of the churn benchmark.
#[derive(Debug, Clone)]
pub struct ChurnConfig {
    /// Object counts, one server each.
    pub sizes: Vec<usize>,
    /// Writes per second of the generator (20% creates, 60% updates, 20% deletes).
    pub rate: f64,
    /// How long each phase churns.
    pub churn: Duration,
    /// Rounds of (bare, guarded) per size.
    pub rounds: usize,
    /// Further rounds per size that only sync (no churn window): more
    /// pairs for the saturated ratio, which one round measures noisily.
    pub sync_rounds: usize,
    /// Nodes owning the objects.
    pub nodes: usize,
    /// Longest a controller may take to reconcile every object once.
    pub sync_timeout: Duration,
    /// Pause between phases.
    pub settle: Duration,
    /// Seed of the generator.
    pub seed: u64,
}

/// Which controller runs the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    /// `kube_runtime::Controller`.
    Bare,
    /// `ward_runtime::GuardedController` with `OwnerUid<Node>` (consistent reads
    /// from a watch cache, the default).
    Guarded,
    /// The same with `Reads::Shared`: quorum GETs shared by overlapping checks.
    #[serde(rename = "guarded-shared")]
    GuardedShared,
    /// The same with `Reads::Get`: one quorum GET per check (the baseline
    /// the other two are measured against).
    #[serde(rename = "guarded-get")]
    GuardedGet,
    /// `kube_runtime::Controller` whose reconcile awaits once (a
    /// `yield_now`) before its work, in the sync-only rounds: a control for
    /// what suspending every reconcile once costs by itself (the bare
    /// reconcile never suspends; a guard that waits for a read does).
    #[serde(rename = "bare-await")]
    BareAwait,
    /// `ward_runtime::GuardedController` with no guard: what the wrapper costs by
    /// itself (the reconcile-cost harness only, [`crate::bench::cost`]).
    Unguarded,
}
