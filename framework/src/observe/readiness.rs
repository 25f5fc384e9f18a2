//! Readiness as a set of named checks, each driven by the part of the
//! process it speaks for: a controller's check passes once its watches have
//! synced, leader election's once the candidate reaches the API server.
//! The process is ready when it has at least one check and all pass —
//! nothing registered means nothing has vouched for it yet.
//!
//! `/readyz` answers 200 `ok` when ready, else 503 with one line per check
//! in kube-apiserver's verbose format (`[+]name ok`, `[-]name failed`).
//! Waiting for readiness ([`Readiness::until_ready`]) wakes every waiter.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::catalog;

/// Whether the process is ready to serve; cheap to clone, every clone sees
/// the same checks.
#[derive(Clone)]
pub struct Readiness(Arc<Shared>);

struct Shared {
    /// name -> (generation of the handle that owns it, passing).
    checks: Mutex<BTreeMap<String, (u64, bool)>>,
    ready: watch::Sender<bool>,
}

impl Default for Readiness {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Readiness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Readiness")
            .field("checks", &*self.0.lock())
            .finish()
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, (u64, bool)>> {
        self.checks.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn publish(&self, checks: &BTreeMap<String, (u64, bool)>) {
        let ready = all_pass(checks);
        self.ready
            .send_if_modified(|r| std::mem::replace(r, ready) != ready);
    }
}

fn all_pass(checks: &BTreeMap<String, (u64, bool)>) -> bool {
    !checks.is_empty() && checks.values().all(|(_, ok)| *ok)
}

impl Readiness {
    /// No checks: not ready.
    #[must_use]
    pub fn new() -> Self {
        Readiness(Arc::new(Shared {
            checks: Mutex::new(BTreeMap::new()),
            ready: watch::Sender::new(false),
        }))
    }

    /// Register the check `name`, failing until [`ReadyCheck::set`] says
    /// otherwise. A check registered again under the same name replaces the
    /// old one (whose handle then changes nothing): a controller run again
    /// after losing leadership takes over its own check.
    #[must_use]
    pub fn check(&self, name: impl Into<String>) -> ReadyCheck {
        let name = name.into();
        let mut checks = self.0.lock();
        let generation = checks.get(&name).map_or(0, |(g, _)| g + 1);
        checks.insert(name.clone(), (generation, false));
        self.0.publish(&checks);
        catalog::ready_gauge(&name, false);
        drop(checks);
        ReadyCheck {
            readiness: self.clone(),
            name: Arc::from(name),
            generation,
        }
    }

    /// Whether every check passes (and there is at least one).
    #[must_use]
    pub fn is_ready(&self) -> bool {
        *self.0.ready.borrow()
    }

    /// Set the check named `ready` (registering it on the first call).
    /// With no other check, readiness is this flag, as it was before
    /// readiness became named checks.
    #[deprecated(
        since = "0.2.0",
        note = "register a named check: `readiness.check(name).set(ok)`"
    )]
    pub fn set_ready(&self, ready: bool) {
        const NAME: &str = "ready";
        let generation = self.0.lock().get(NAME).map(|(g, _)| *g);
        let check = match generation {
            Some(generation) => ReadyCheck {
                readiness: self.clone(),
                name: Arc::from(NAME),
                generation,
            },
            None => self.check(NAME),
        };
        check.set(ready);
    }

    /// Wait until ready; any number of waiters are all woken.
    pub async fn until_ready(&self) {
        let mut rx = self.0.ready.subscribe();
        // The sender lives as long as `self`: wait_for cannot fail here.
        let _ = rx.wait_for(|r| *r).await;
    }

    /// A receiver of every change of readiness.
    #[must_use]
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.0.ready.subscribe()
    }

    /// Each check as `[+]name ok` or `[-]name failed`, one per line, then
    /// `readyz check passed` or `readyz check failed` (kube-apiserver's
    /// verbose format).
    #[must_use]
    pub fn report(&self) -> String {
        self.verdict().1
    }

    /// Whether ready, and the [`report`](Self::report) — read together.
    pub(crate) fn verdict(&self) -> (bool, String) {
        let checks = self.0.lock();
        let mut out = String::new();
        for (name, (_, ok)) in checks.iter() {
            let (sign, word) = if *ok { ('+', "ok") } else { ('-', "failed") };
            out.push_str(&format!("[{sign}]{name} {word}\n"));
        }
        let all = all_pass(&checks);
        if checks.is_empty() {
            out.push_str("[-]no checks registered\n");
        }
        out.push_str(if all {
            "readyz check passed\n"
        } else {
            "readyz check failed\n"
        });
        (all, out)
    }
}

/// One named readiness check (see [`Readiness::check`]); clones drive the
/// same check.
#[derive(Clone)]
pub struct ReadyCheck {
    readiness: Readiness,
    name: Arc<str>,
    generation: u64,
}

impl fmt::Debug for ReadyCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadyCheck")
            .field("name", &self.name)
            .field("generation", &self.generation)
            .finish()
    }
}

impl ReadyCheck {
    /// Pass (`true`) or fail (`false`); a no-op once the check was
    /// registered again under the same name.
    pub fn set(&self, ok: bool) {
        let shared = &self.readiness.0;
        let mut checks = shared.lock();
        match checks.get_mut(&*self.name) {
            Some((g, state)) if *g == self.generation => *state = ok,
            _ => return,
        }
        shared.publish(&checks);
        catalog::ready_gauge(&self.name, ok);
    }

    /// Unregister the check (a no-op once registered again): what it spoke
    /// for has stopped, and no longer has a say.
    pub(crate) fn remove(&self) {
        let shared = &self.readiness.0;
        let mut checks = shared.lock();
        if checks
            .get(&*self.name)
            .is_none_or(|(g, _)| *g != self.generation)
        {
            return;
        }
        checks.remove(&*self.name);
        shared.publish(&checks);
        catalog::ready_gauge(&self.name, false);
    }

    /// The check's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Removes its check when dropped: what it speaks for has stopped (a
/// process left with no checks is not ready).
pub(crate) struct RemoveOnDrop(pub(crate) ReadyCheck);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        self.0.remove();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_when_some_check_exists_and_all_pass() {
        let r = Readiness::new();
        assert!(!r.is_ready(), "no checks: not ready");
        let a = r.check("a");
        let b = r.clone().check("b");
        assert!(!r.is_ready());
        a.set(true);
        assert!(!r.is_ready(), "b still fails");
        b.clone().set(true);
        assert!(r.is_ready());
        assert_eq!(r.report(), "[+]a ok\n[+]b ok\nreadyz check passed\n");
        a.set(false);
        assert!(!r.is_ready());
        assert_eq!(r.report(), "[-]a failed\n[+]b ok\nreadyz check failed\n");
        assert_eq!(
            Readiness::new().report(),
            "[-]no checks registered\nreadyz check failed\n"
        );
    }

    #[test]
    #[allow(deprecated)]
    fn set_ready_drives_one_check_named_ready() {
        let r = Readiness::new();
        r.set_ready(true);
        assert!(r.is_ready());
        r.set_ready(false);
        assert_eq!(r.report(), "[-]ready failed\nreadyz check failed\n");
        r.set_ready(true);
        let other = r.check("sync");
        assert!(!r.is_ready(), "in the conjunction with other checks");
        other.set(true);
        assert!(r.is_ready());
    }

    #[test]
    fn a_check_registered_again_replaces_the_old_handle() {
        let r = Readiness::new();
        let old = r.check("sync");
        old.set(true);
        assert!(r.is_ready());
        let new = r.check("sync");
        assert!(!r.is_ready(), "the new check starts failing");
        old.set(true);
        assert!(!r.is_ready(), "the old handle changes nothing");
        new.set(true);
        assert!(r.is_ready());
    }

    #[test]
    fn a_removed_check_has_no_say() {
        let r = Readiness::new();
        let (a, b) = (r.check("a"), r.check("b"));
        a.set(true);
        drop(RemoveOnDrop(b.clone()));
        assert!(r.is_ready(), "b stopped; a passes");
        b.set(false);
        assert!(r.is_ready(), "a removed check's handle changes nothing");
        let a2 = r.check("a");
        a.remove();
        assert_eq!(
            r.report(),
            "[-]a failed\nreadyz check failed\n",
            "not the newer a"
        );
        drop(RemoveOnDrop(a2));
        assert!(!r.is_ready(), "no checks left");
    }

    #[tokio::test]
    async fn every_waiter_is_woken() {
        let r = Readiness::new();
        let check = r.check("x");
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let r = r.clone();
                tokio::spawn(async move { r.until_ready().await })
            })
            .collect();
        tokio::task::yield_now().await;
        check.set(true);
        for w in waiters {
            tokio::time::timeout(std::time::Duration::from_secs(10), w)
                .await
                .expect("woken")
                .unwrap();
        }
    }
}
