//! Shutting down on SIGTERM or SIGINT, as kube-runtime's
//! `Controller::shutdown_on_signal` does — for what Ward runs outside a
//! controller, above all [`LeaderElection::run`](crate::LeaderElection::run),
//! whose Lease must be released before the process exits: a pod is stopped
//! with SIGTERM, and a Lease left held costs the next leader a whole lease
//! duration.
//!
//! ```no_run
//! # async fn demo(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use ward_runtime::LeaderElection;
//!
//! let stop = ward_runtime::shutdown::signal()?; // handlers installed now
//! LeaderElection::new(client, "default", "my-controller", "pod-a")
//!     .run(|lost| async move { lost.await }, stop)
//!     .await?;
//! # Ok(())
//! # }
//! ```

use std::future::Future;

/// A future that completes on the first SIGTERM or SIGINT (Ctrl-C) after
/// this call. The handlers are installed at once, not at the first poll,
/// so a signal that comes before the future is polled is not lost (and
/// does not kill the process). A second signal after that exits the
/// process at once (status 130), as a second Ctrl-C forces
/// kube-runtime's shutdown: a stuck reconcile cannot keep it alive. Must
/// be called inside a tokio runtime.
///
/// # Errors
/// The signal handlers could not be installed.
pub fn signal() -> std::io::Result<impl Future<Output = ()> + Send + Sync + 'static> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        Ok(async move {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM: shutting down (again to force)"),
                _ = int.recv() => tracing::info!("SIGINT: shutting down (again to force)"),
            }
            tokio::spawn(async move {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
                tracing::warn!("second signal: exiting now");
                std::process::exit(130);
            });
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            let _ = tokio::signal::ctrl_c().await;
        })
    }
}
