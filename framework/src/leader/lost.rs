//! What the work is told: [`Lost`], the future that completes when it must
//! stop leading.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::sync::watch;

/// What the work is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Leading,
    Stopping,
    Lost,
}

/// A future that completes when the work must stop leading: the Lease was
/// lost, or shutdown began (then the Lease is released once the work
/// returns). It is `Send + Sync + 'static`, for
/// [`GuardedController::graceful_shutdown_on`](crate::GuardedController::graceful_shutdown_on);
/// clones are independent futures on the same signal.
pub struct Lost {
    rx: watch::Receiver<Phase>,
    wait: Option<Pin<Box<dyn Future<Output = ()> + Send + Sync>>>,
}

impl Lost {
    pub(super) fn new(rx: watch::Receiver<Phase>) -> Self {
        Lost { rx, wait: None }
    }

    /// Whether the work must stop now (the future has completed or would at once).
    #[must_use]
    pub fn is_lost(&self) -> bool {
        *self.rx.borrow() != Phase::Leading
    }

    /// Whether leadership was lost (as opposed to shutting down while leading).
    #[must_use]
    pub fn is_taken(&self) -> bool {
        *self.rx.borrow() == Phase::Lost
    }
}

impl Clone for Lost {
    fn clone(&self) -> Self {
        Lost::new(self.rx.clone())
    }
}

impl fmt::Debug for Lost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lost")
            .field("phase", &*self.rx.borrow())
            .finish()
    }
}

impl Future for Lost {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let rx = &this.rx;
        let wait = this.wait.get_or_insert_with(|| {
            let mut rx = rx.clone();
            // A dropped sender (the election itself was dropped) counts as lost.
            Box::pin(async move {
                let _ = rx.wait_for(|p| *p != Phase::Leading).await;
            })
        });
        wait.as_mut().poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lost_fires_on_stop_and_on_a_dropped_sender() {
        let (tx, rx) = watch::channel(Phase::Leading);
        let lost = Lost::new(rx.clone());
        assert!(!lost.is_lost());
        tx.send_replace(Phase::Stopping);
        assert!(lost.is_lost() && !lost.is_taken());
        lost.clone().await;
        tx.send_replace(Phase::Lost);
        assert!(lost.is_taken());

        let (tx, rx) = watch::channel(Phase::Leading);
        let lost = Lost::new(rx);
        drop(tx);
        lost.await;
    }

    #[test]
    fn lost_is_send_sync_static() {
        fn check<T: Future<Output = ()> + Send + Sync + 'static>() {}
        check::<Lost>();
    }
}
