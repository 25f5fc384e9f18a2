//! When a controller's watches have synced: each watch Ward opens counts as
//! pending until its first `InitDone` (its initial list is in the cache).
//!
//! kube-runtime's `Store::wait_until_ready` is not a safe way to learn this
//! while the controller runs: its `DelayedInit` keeps one waker, so of
//! several concurrent waiters (the controller's applier is one) only the
//! last to poll is woken and the others can hang. [`Synced`] is a
//! `tokio::sync::watch` underneath: every waiter is woken.

use std::sync::{Arc, Mutex};

use futures::{Stream, TryStreamExt};
use kube::runtime::watcher;
use tokio::sync::watch;

use crate::observe::ReadyCheck;

/// Whether the watches a [`GuardedController`](super::GuardedController)
/// opened have all delivered their initial list; cheap to clone.
#[derive(Clone, Debug)]
pub struct Synced(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    /// Watches not yet synced.
    pending: watch::Sender<usize>,
    /// Checks to pass once none is pending; the lock also orders every
    /// change of `pending` against [`Synced::pass_when_synced`].
    on_sync: Mutex<Vec<ReadyCheck>>,
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<ReadyCheck>> {
        self.on_sync.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Synced {
    pub(super) fn new() -> Self {
        Synced(Arc::new(Inner {
            pending: watch::Sender::new(0),
            on_sync: Mutex::new(Vec::new()),
        }))
    }

    /// One watch pending for good: the main stream of a controller built
    /// from a stream, whose initial list Ward cannot see.
    pub(super) fn unseen() -> Self {
        let s = Self::new();
        s.0.pending.send_replace(1);
        s
    }

    /// Pass `check` once every watch has synced (at once if they have).
    pub(super) fn pass_when_synced(&self, check: ReadyCheck) {
        let mut waiting = self.0.lock();
        if *self.0.pending.borrow() == 0 {
            check.set(true);
        } else {
            waiting.push(check);
        }
    }

    /// Count `events` as one more pending watch, until its first `InitDone`
    /// passes through (after the reflector, if any, applied it).
    pub(super) fn track<T, S>(&self, events: S) -> impl Stream<Item = S::Item> + use<T, S>
    where
        S: Stream<Item = Result<watcher::Event<T>, watcher::Error>>,
    {
        {
            let _order = self.0.lock();
            self.0.pending.send_modify(|n| *n += 1);
        }
        let inner = self.0.clone();
        let mut done = false;
        events.inspect_ok(move |e| {
            if !done && matches!(e, watcher::Event::InitDone) {
                done = true;
                let mut waiting = inner.lock();
                inner.pending.send_modify(|n| *n -= 1);
                if *inner.pending.borrow() == 0 {
                    waiting.drain(..).for_each(|c| c.set(true));
                }
            }
        })
    }

    /// Whether every watch Ward opened has synced.
    #[must_use]
    pub fn is_synced(&self) -> bool {
        *self.0.pending.borrow() == 0
    }

    /// Wait until every watch Ward opened has synced (they sync only while
    /// the controller runs); any number of waiters are all woken.
    pub async fn wait(&self) {
        let mut rx = self.0.pending.subscribe();
        // The sender lives as long as `self`: wait_for cannot fail here.
        let _ = rx.wait_for(|n| *n == 0).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[tokio::test]
    async fn each_watch_is_pending_until_its_first_init_done() {
        let synced = Synced::new();
        let events = |n: usize| {
            futures::stream::iter(
                [
                    watcher::Event::Init,
                    watcher::Event::InitDone,
                    watcher::Event::Init,
                    watcher::Event::InitDone,
                ]
                .into_iter()
                .take(n)
                .map(Ok::<watcher::Event<ConfigMap>, watcher::Error>),
            )
        };
        let mut a = Box::pin(synced.track(events(4)));
        let mut b = Box::pin(synced.track(events(2)));
        assert!(!synced.is_synced());
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let s = synced.clone();
                tokio::spawn(async move { s.wait().await })
            })
            .collect();
        a.next().await;
        a.next().await; // a's InitDone
        assert!(!synced.is_synced(), "b has not synced");
        while a.next().await.is_some() {} // a re-lists: counted once
        assert!(!synced.is_synced());
        while b.next().await.is_some() {}
        assert!(synced.is_synced());
        for w in waiters {
            tokio::time::timeout(std::time::Duration::from_secs(10), w)
                .await
                .expect("every waiter is woken")
                .unwrap();
        }
    }
}
