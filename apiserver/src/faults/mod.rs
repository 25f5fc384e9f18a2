//! Fault injection: the knobs that open the seed races on demand.
//!
//! - **GC**: a delay before each collection (fixed or jittered), pause and
//!   resume — the "apiserver is overloaded" window in which a dependent
//!   outlives its owner.
//! - **Per-client views**: a client's watches deliver events late, are frozen
//!   at a resourceVersion (its lists and watches — and, if asked, its quorum
//!   reads — show the state as of that rv: Sieve's "time travel"), or skip
//!   intermediate states of an object (Sieve's "unobserved state").
//! - **Write faults**: answer a fraction, or the next N, of the writes
//!   matching a filter (verb, kind or resource, client) with 409, 429 or
//!   500, after an optional latency.
//! - **Webhook faults**: a call to an admission webhook delayed, refused
//!   or timed out, so its `failurePolicy` (and a controller's handling of
//!   the answer) can be tested under perturbation.
//! - **Pod lifecycle** (kwok-like, off by default): pods are scheduled onto a
//!   node and then set Running with a podIP, each after a configurable,
//!   jittered delay.
//!
//! Every random choice comes from one generator seeded by the server's seed,
//! and every delay runs on tokio time, so under
//! `#[tokio::test(start_paused = true)]` the same seed replays the same
//! interleaving.

use std::sync::{Arc, Mutex};
use std::time::Duration;

mod config;

pub use config::{
    CLIENT_HEADER, ClientId, ClientView, Delay, FaultConfig, FaultError, Fired, GcFaults,
    PodLifecycle, Trigger, Verb, WebhookAction, WebhookFault, WriteAction, WriteFault, user_client,
};
use config::{validate_trigger, validate_write};

/// The seeded generator of every random choice the server makes (Ward's
/// one SplitMix64, from `ward-base`).
pub use ward_base::Rng;

#[derive(Debug)]
struct Inner {
    config: FaultConfig,
    rng: Rng,
}

/// The live fault settings of a running server. Cheap to clone; every
/// clone controls the same server.
#[derive(Debug, Clone)]
pub struct Faults {
    inner: Arc<Mutex<Inner>>,
    changed: Arc<tokio::sync::watch::Sender<u64>>,
}

impl Faults {
    /// No faults; random choices seeded with `seed`.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Faults {
            inner: Arc::new(Mutex::new(Inner {
                config: FaultConfig::default(),
                rng: Rng::new(seed ^ 0x5741_5244_4641_554c),
            })),
            changed: Arc::new(tokio::sync::watch::channel(0).0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn edit(&self, f: impl FnOnce(&mut FaultConfig)) {
        f(&mut self.lock().config);
        self.changed.send_modify(|n| *n += 1);
    }

    /// Notified whenever the configuration changes.
    #[must_use]
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The current configuration.
    #[must_use]
    pub fn config(&self) -> FaultConfig {
        self.lock().config.clone()
    }

    /// Replace the whole configuration (the admin endpoint's PUT).
    pub fn set_config(&self, config: FaultConfig) -> Result<&Self, FaultError> {
        for w in &config.writes {
            validate_write(w)?;
        }
        for w in &config.webhooks {
            validate_trigger(w.trigger)?;
        }
        self.edit(|c| *c = config);
        Ok(self)
    }

    /// Remove every fault.
    pub fn clear(&self) -> &Self {
        self.edit(|c| *c = FaultConfig::default());
        self
    }

    /// Delay each garbage collection.
    pub fn set_gc_delay(&self, delay: Delay) -> &Self {
        self.edit(|c| c.gc.delay = delay);
        self
    }

    /// Stop collecting garbage until [`Faults::resume_gc`].
    pub fn pause_gc(&self) -> &Self {
        self.edit(|c| c.gc.paused = true);
        self
    }

    /// Collect again (queued work proceeds, each item after its delay).
    pub fn resume_gc(&self) -> &Self {
        self.edit(|c| c.gc.paused = false);
        self
    }

    /// The GC settings.
    #[must_use]
    pub fn gc(&self) -> GcFaults {
        self.lock().config.gc
    }

    /// Set what `client` sees.
    pub fn set_view(&self, client: ClientId, view: ClientView) -> &Self {
        self.update_view(client, |v| *v = view)
    }

    /// Change what `client` sees, in one step under the lock (so two
    /// editors of different fields of one view never undo each other).
    pub fn update_view(&self, client: ClientId, f: impl FnOnce(&mut ClientView)) -> &Self {
        self.edit(|c| {
            let mut view = c.views.get(&client).copied().unwrap_or_default();
            f(&mut view);
            if view.is_fresh() {
                c.views.remove(&client);
            } else {
                c.views.insert(client, view);
            }
        });
        self
    }

    /// What `client` sees.
    #[must_use]
    pub fn view(&self, client: ClientId) -> ClientView {
        self.lock()
            .config
            .views
            .get(&client)
            .copied()
            .unwrap_or_default()
    }

    /// Add a write fault; refused (nothing added) when its trigger cannot
    /// fire or its fraction is outside 0..=1. Chains: `faults.add_write_fault(a)?.add_write_fault(b)?`.
    pub fn add_write_fault(&self, fault: WriteFault) -> Result<&Self, FaultError> {
        validate_write(&fault)?;
        self.edit(|c| c.writes.push(fault));
        Ok(self)
    }

    /// Remove the first write fault equal to `fault` (a window of faults
    /// ending); whether there was one.
    pub fn remove_write_fault(&self, fault: &WriteFault) -> bool {
        let mut removed = false;
        self.edit(|c| {
            if let Some(i) = c.writes.iter().position(|w| w == fault) {
                c.writes.remove(i);
                removed = true;
            }
        });
        removed
    }

    /// Add a webhook fault; refused (nothing added) when its trigger cannot
    /// fire.
    pub fn add_webhook_fault(&self, fault: WebhookFault) -> Result<&Self, FaultError> {
        validate_trigger(fault.trigger)?;
        self.edit(|c| c.webhooks.push(fault));
        Ok(self)
    }

    /// Remove the first webhook fault equal to `fault` (a window ending);
    /// whether there was one.
    pub fn remove_webhook_fault(&self, fault: &WebhookFault) -> bool {
        let mut removed = false;
        self.edit(|c| {
            if let Some(i) = c.webhooks.iter().position(|w| w == fault) {
                c.webhooks.remove(i);
                removed = true;
            }
        });
        removed
    }

    /// The webhook fault that fires for a call to webhook `name`, if any
    /// (consuming one shot of a `Next(n)` fault).
    pub fn webhook_fault(&self, name: &str) -> Option<WebhookAction> {
        let mut inner = self.lock();
        let Inner { config, rng } = &mut *inner;
        let i = config
            .webhooks
            .iter_mut()
            .position(|w| w.webhook.as_deref().is_none_or(|n| n == name) && w.trigger.fires(rng))?;
        let action = config.webhooks[i].action;
        if config.webhooks[i].trigger == Trigger::Next(0) {
            config.webhooks.remove(i);
        }
        drop(inner);
        self.changed.send_modify(|n| *n += 1);
        Some(action)
    }

    /// Configure the pod stages.
    pub fn set_pod_lifecycle(&self, pods: PodLifecycle) -> &Self {
        self.edit(|c| c.pods = pods);
        self
    }

    /// The pod stages.
    #[must_use]
    pub fn pod_lifecycle(&self) -> PodLifecycle {
        self.lock().config.pods.clone()
    }

    /// Draw a delay.
    pub fn draw(&self, d: Delay) -> Duration {
        if d.jitter_ms == 0 {
            return Duration::from_millis(d.base_ms);
        }
        let j = self.lock().rng.up_to(d.jitter_ms);
        Duration::from_millis(d.base_ms + j)
    }

    /// Draw from the shared generator.
    pub fn random(&self) -> u64 {
        self.lock().rng.next_u64()
    }

    /// The write fault that fires for this write to `group`/`resource`, if
    /// any (consuming one shot of a `Next(n)` fault).
    pub fn write_fault(
        &self,
        verb: Verb,
        group: &str,
        resource: &str,
        client: ClientId,
    ) -> Option<Fired> {
        let mut inner = self.lock();
        let Inner { config, rng } = &mut *inner;
        let mut fired = None;
        for (i, w) in config.writes.iter_mut().enumerate() {
            if !w.matches(verb, group, resource, client) {
                continue;
            }
            if w.trigger.fires(rng) {
                let f = Fired {
                    latency: w.latency,
                    action: w.action,
                };
                fired = Some((i, f));
                break;
            }
        }
        let (i, action) = fired?;
        if config.writes[i].trigger == Trigger::Next(0) {
            config.writes.remove(i);
        }
        drop(inner);
        self.changed.send_modify(|n| *n += 1);
        Some(action)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn view_edits_keep_the_other_fields_and_a_fresh_view_is_dropped() {
        let f = Faults::new(1);
        f.update_view(7, |v| v.frozen_at = Some(3));
        f.update_view(7, |v| v.coalesce = true);
        assert_eq!(
            f.view(7),
            ClientView {
                frozen_at: Some(3),
                coalesce: true,
                ..ClientView::default()
            }
        );
        f.update_view(7, |v| v.frozen_at = None);
        f.update_view(7, |v| v.coalesce = false);
        assert!(f.config().views.is_empty());
    }

    #[test]
    fn next_n_fires_n_times_then_is_removed() {
        let f = Faults::new(1);
        f.add_write_fault(
            WriteFault::next(2, WriteAction::Conflict)
                .resource("pods")
                .verbs(&[Verb::Patch]),
        )
        .unwrap();
        let conflict = Some(Fired {
            latency: None,
            action: WriteAction::Conflict,
        });
        assert_eq!(f.write_fault(Verb::Update, "", "pods", 1), None);
        assert_eq!(f.write_fault(Verb::Patch, "", "configmaps", 1), None);
        assert_eq!(f.write_fault(Verb::Patch, "", "pods", 1), conflict);
        assert_eq!(
            f.write_fault(Verb::Patch, "metrics.k8s.io", "pods", 2),
            conflict
        );
        assert_eq!(f.write_fault(Verb::Patch, "", "pods", 1), None);
        assert!(f.config().writes.is_empty());
    }

    #[test]
    fn group_filters_and_latency_with_a_status() {
        let f = Faults::new(1);
        let slow = Delay::fixed(Duration::from_millis(30));
        f.add_write_fault(
            WriteFault::next(1, WriteAction::TooManyRequests)
                .group_resource("", "events")
                .latency(slow),
        )
        .unwrap()
        .add_write_fault(
            WriteFault::next(1, WriteAction::Conflict).group_resource("apps", "deployments"),
        )
        .unwrap();
        assert_eq!(
            f.write_fault(Verb::Create, "events.k8s.io", "events", 1),
            None
        );
        assert_eq!(
            f.write_fault(Verb::Create, "", "events", 1),
            Some(Fired {
                latency: Some(slow),
                action: WriteAction::TooManyRequests
            })
        );
        assert_eq!(f.write_fault(Verb::Patch, "", "deployments", 1), None);
        assert!(
            f.write_fault(Verb::Patch, "apps", "deployments", 1)
                .is_some()
        );
    }

    #[test]
    fn fractions_are_seeded() {
        let run = |seed| {
            let f = Faults::new(seed);
            f.add_write_fault(WriteFault::fraction(0.3, WriteAction::InternalError))
                .unwrap();
            (0..200)
                .map(|_| f.write_fault(Verb::Create, "", "pods", 0).is_some())
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        let hits = run(7).iter().filter(|h| **h).count();
        assert!((30..=90).contains(&hits), "{hits} of 200 at p=0.3");
    }

    #[test]
    fn bad_fault_configs_are_refused() {
        let f = Faults::new(0);
        assert_eq!(
            f.add_write_fault(WriteFault::fraction(1.5, WriteAction::Conflict))
                .err(),
            Some(FaultError::Fraction(1.5))
        );
        assert_eq!(
            f.add_write_fault(WriteFault::next(0, WriteAction::Conflict))
                .err(),
            Some(FaultError::NeverFires)
        );
        assert!(f.config().writes.is_empty());
    }

    #[test]
    fn jittered_delays_stay_in_range_and_replay() {
        let a = Faults::new(3);
        let b = Faults::new(3);
        let d = Delay::jittered(Duration::from_millis(100), Duration::from_millis(50));
        for _ in 0..100 {
            let x = a.draw(d);
            assert!(x >= Duration::from_millis(100) && x <= Duration::from_millis(150));
            assert_eq!(x, b.draw(d));
        }
    }

    #[test]
    fn config_round_trips_through_json() {
        let f = Faults::new(0);
        f.pause_gc();
        f.set_view(
            9,
            ClientView {
                frozen_at: Some(12),
                ..ClientView::default()
            },
        );
        f.add_write_fault(WriteFault::next(
            1,
            WriteAction::Latency(Delay::fixed(Duration::from_secs(1))),
        ))
        .unwrap();
        let json = serde_json::to_string(&f.config()).unwrap();
        let back: FaultConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(back, f.config());
    }
}
