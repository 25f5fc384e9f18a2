//! How an election ends: [`Outcome`], with the [`LostReason`] when
//! leadership was lost, or a [`LeaderError`].

use std::fmt;

/// Errors from leader election.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The durations do not fit together.
    #[error("invalid leader election settings: {0}")]
    Config(String),
    /// The Lease could not be released on shutdown (the next candidate
    /// takes over once it expires).
    #[error("could not release lease {lease}: {source}")]
    Release {
        /// `namespace/name` of the Lease.
        lease: String,
        /// What went wrong.
        #[source]
        source: kube::Error,
    },
    /// Releasing the Lease took longer than a lease duration.
    #[error("releasing lease {lease} timed out")]
    ReleaseTimeout {
        /// `namespace/name` of the Lease.
        lease: String,
    },
}

/// Why leadership was lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LostReason {
    /// No renew succeeded in time (the API was slow or failing): the Lease
    /// may already be expired in the other candidates' eyes.
    Expired,
    /// Another candidate holds the Lease (`None`: it was released by someone else).
    TakenOver {
        /// The new holder.
        holder: Option<String>,
    },
    /// The Lease was deleted.
    Deleted,
}

impl fmt::Display for LostReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LostReason::Expired => f.write_str("no renew succeeded before the lease expired"),
            LostReason::TakenOver { holder: Some(h) } => write!(f, "taken over by {h}"),
            LostReason::TakenOver { holder: None } => f.write_str("released by another party"),
            LostReason::Deleted => f.write_str("the lease was deleted"),
        }
    }
}

/// How [`LeaderElection::run`](super::LeaderElection::run) ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Shutdown came before this candidate ever led; the work never ran.
    NeverLed,
    /// Led, then lost the Lease; the work was told to stop and has returned.
    Lost(LostReason),
    /// Led until shutdown (or until the work returned), then released the Lease.
    Released,
}
