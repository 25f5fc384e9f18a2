//! Leader election on a `coordination.k8s.io/v1` Lease.
//!
//! One candidate at a time holds the Lease (`spec.holderIdentity`) and runs
//! the work; the others wait. Every write to the Lease is an update carrying
//! the resourceVersion that was read, so two candidates racing for it cannot
//! both win: the loser gets 409.
//!
//! - **Acquire**: create the Lease when it is absent; take it over when it
//!   is free (no holder, or released) or when its holder's
//!   `renewTime + leaseDurationSeconds` is in the past — judged with the
//!   Lease's own timestamps against [`Clock`](crate::clock::Clock) (wall time that follows tokio's
//!   clock), bumping `leaseTransitions`.
//! - **Renew** every `renew_every`. A candidate stops leading — its [`Lost`]
//!   signal fires — when the Lease is taken over or deleted, or when no renew
//!   has succeeded for `lease_duration - clock_skew`, *even if a renew is
//!   still in flight*: a slow API call cannot keep a stale leader running.
//!   A renew that lands after that is rejected with 409 if another candidate
//!   took over meanwhile (its resourceVersion changed) and is given back at
//!   once if not.
//! - **Release** on shutdown (or when the work returns): the Lease's holder
//!   is cleared, and the other candidates — each watching the Lease —
//!   try at once instead of waiting for it to expire or for their next
//!   retry.
//!
//! Metrics (labels `lease` = `namespace/name`, `identity`), every series
//! present from the start, followers' included: gauge `ward_leader` (1
//! while leading, else 0); counters
//! `ward_leader_transitions_total{event=acquired|lost|released}`,
//! `ward_leader_acquire_attempts_total{result=acquired|held|conflict|error}`,
//! `ward_leader_renew_failures_total{reason=timeout|conflict|error}` and
//! `ward_leader_late_renewals_total{result=conflict|renewed|error}`.
//! [`LeaderElection::readiness`] adds a readiness check that passes while
//! the candidate is healthy, leading or not.
//!
//! Why an election of Ward's own rather than an existing crate: kube-rs
//! (kube-runtime 5) ships none, and Ward needs properties it tests itself,
//! which would otherwise depend on another crate's choices: the work
//! stopped at the deadline even while a renew is still in flight, a renew
//! that lands late refused or given back, a release the followers see at
//! once (they watch the Lease), followers' metrics and readiness from the
//! start, and the same Lease arithmetic for a shard member's Lease
//! ([`crate::shard`]). Any window where two leaders run is the race Ward
//! exists to close. The files: `lease.rs`, the pure Lease
//! arithmetic (when a Lease is free, the durations, the Lease a candidate
//! writes); `outcome.rs`, how an election ends and its errors;
//! `election.rs`, the public API (the candidate and its settings), its
//! metrics and readiness; `keeper.rs`, the task that acquires, renews and
//! releases; `run.rs`, [`LeaderElection::run`]; `lost.rs`, the work's
//! signal; and here only the re-exports.
//!
//! [`LeaderElection::run`] ties it together: it waits for leadership, then
//! runs the work with a [`Lost`] future that completes as soon as the work
//! must stop (leadership lost, or shutdown begun) — made to be passed to
//! [`GuardedController::graceful_shutdown_on`](crate::GuardedController::graceful_shutdown_on).
//!
//! ```no_run
//! use std::sync::Arc;
//! use futures::StreamExt;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::Api;
//! use kube::runtime::{controller::Action, watcher};
//! use ward_runtime::GuardedController;
//! use ward_runtime::leader::{LeaderElection, Outcome};
//!
//! async fn reconcile(_cm: Arc<ConfigMap>, _: Arc<()>) -> Result<Action, kube::Error> {
//!     Ok(Action::await_change())
//! }
//!
//! # async fn demo(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let api = Api::<ConfigMap>::namespaced(client.clone(), "default");
//! let readiness = ward_runtime::Readiness::new(); // served at /readyz by ward_runtime::Observability
//! let outcome = LeaderElection::new(client, "default", "my-controller", "pod-a")
//!     .readiness(readiness.clone())
//!     .run(
//!         // Called once leadership is acquired; `lost` completes when it
//!         // ends: leadership lost, or SIGTERM/SIGINT (then the Lease is
//!         // released once the controller has stopped).
//!         |lost| async move {
//!             GuardedController::new(api, watcher::Config::default())
//!                 .readiness(readiness)
//!                 .graceful_shutdown_on(lost)
//!                 .run(reconcile, |_, _, _| Action::await_change(), Arc::new(()))
//!                 .for_each(|_| async {})
//!                 .await;
//!         },
//!         ward_runtime::shutdown::signal()?,
//!     )
//!     .await?;
//! if let Outcome::Lost(reason) = outcome {
//!     // Another replica leads now: exit and let the restart start a new candidate.
//!     eprintln!("leadership lost: {reason}");
//!     std::process::exit(1);
//! }
//! # Ok(())
//! # }
//! ```

mod election;
mod keeper;
pub(crate) mod lease;
mod lost;
mod outcome;
mod run;

pub use election::LeaderElection;
pub(crate) use lease::{Timing, available, holder, is_conflict};
pub use lost::Lost;
pub use outcome::{LeaderError, LostReason, Outcome};

#[cfg(test)]
mod tests {
    /// docs/production.md shows the module's example as it is compiled here.
    #[test]
    fn the_production_guide_shows_the_module_example() {
        let source = include_str!("mod.rs");
        let block = source
            .split_once("//! ```no_run\n")
            .and_then(|(_, rest)| rest.split_once("//! ```\n"))
            .map(|(b, _)| b)
            .expect("the module example");
        let visible: String = block
            .lines()
            .map(|l| {
                l.strip_prefix("//! ")
                    .unwrap_or(l.trim_start_matches("//!"))
            })
            .filter(|l| !(l.starts_with("# ") || *l == "#"))
            .map(|l| format!("{l}\n"))
            .collect();
        let readme = include_str!("../../../docs/production.md");
        assert!(
            readme.contains(&format!("```rust\n{visible}```")),
            "docs/production.md lacks the leader example as compiled:\n{visible}"
        );
    }
}
