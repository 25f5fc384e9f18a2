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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Identifies the client a request came from: one per in-process service
/// handle; over HTTP, the `X-Ward-Client` header's, else one per
/// authenticated user ([`user_client`]: every connection of a controller
/// process running as one ServiceAccount is one client), else one per
/// connection. A client's view of the server (delay, freeze, coalescing)
/// and the write faults aimed at it hang off this.
pub type ClientId = u64;

/// The header an HTTP request names its client with ([`ClientId`], as a
/// number); without it, a request is its user's client, else its
/// connection's.
pub const CLIENT_HEADER: &str = "x-ward-client";

/// The client an HTTP request authenticated as user `name` is, when it
/// names no client itself: a stable id from the name (FNV-1a, its top two
/// bits `01`, which neither in-process handles — counted from 1 — nor
/// connections — top bit set — have). Aim a view or a write fault at it to
/// perturb a controller that runs as its own process, as that user, and
/// not the test's own clients.
#[must_use]
pub fn user_client(name: &str) -> ClientId {
    (ward_base::fnv1a(name.as_bytes()) & !(3 << 62)) | (1 << 62)
}

/// Errors from fault configuration.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FaultError {
    /// A fraction outside 0..=1.
    #[error("fraction must be between 0 and 1, got {0}")]
    Fraction(f64),
    /// A write fault that can never fire.
    #[error("a write fault needs a trigger that can fire (fraction > 0 or next > 0)")]
    NeverFires,
}

/// A delay of `base_ms` plus a uniformly drawn `0..=jitter_ms`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Delay {
    /// Fixed part, milliseconds.
    pub base_ms: u64,
    /// Upper bound of the random part, milliseconds.
    pub jitter_ms: u64,
}

impl Delay {
    /// A fixed delay.
    #[must_use]
    pub fn fixed(d: Duration) -> Self {
        Delay {
            base_ms: d.as_millis() as u64,
            jitter_ms: 0,
        }
    }

    /// `base` plus a uniform draw from `0..=jitter`.
    #[must_use]
    pub fn jittered(base: Duration, jitter: Duration) -> Self {
        Delay {
            base_ms: base.as_millis() as u64,
            jitter_ms: jitter.as_millis() as u64,
        }
    }

    /// Whether this delay is always zero.
    #[must_use]
    pub fn is_zero(&self) -> bool {
        self.base_ms == 0 && self.jitter_ms == 0
    }
}

/// Garbage-collector faults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GcFaults {
    /// Wait this long before each collection.
    pub delay: Delay,
    /// While paused, nothing is collected (work queues up).
    pub paused: bool,
}

/// What one client sees.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClientView {
    /// Deliver each watch event this much later.
    pub watch_delay: Delay,
    /// Serve lists and watches as of this resourceVersion: watches hold back
    /// newer events, lists show the state at this rv.
    pub frozen_at: Option<u64>,
    /// Also serve quorum reads (GET, and lists without a resourceVersion)
    /// from the frozen state; by default they stay fresh.
    pub stale_quorum_reads: bool,
    /// Deliver only the latest state of an object among the events held back
    /// together (by `watch_delay` or a freeze): intermediate states are never seen.
    pub coalesce: bool,
}

impl ClientView {
    /// Whether this view changes anything.
    #[must_use]
    pub fn is_fresh(&self) -> bool {
        *self == ClientView::default()
    }
}

/// The verb of a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verb {
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
    /// DELETE of one object or a collection.
    Delete,
}

/// What a write fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteAction {
    /// 409 Conflict with the optimistic-concurrency message.
    Conflict,
    /// 429 TooManyRequests (kube's client retries these).
    TooManyRequests,
    /// 500 InternalError.
    InternalError,
    /// Let the write through after this delay.
    Latency(Delay),
}

/// When a write fault fires.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// Each matching write with this probability (seeded).
    Fraction(f64),
    /// The next N matching writes, then the fault is spent.
    Next(u32),
}

/// A write fault: a filter, an action and a trigger.
///
/// ```
/// use std::time::Duration;
/// use k8s_openapi::api::core::v1::Pod;
/// use ward_apiserver::{Delay, Faults, Verb, WriteAction, WriteFault};
///
/// let faults = Faults::new(7);
/// faults
///     .add_write_fault(
///         WriteFault::fraction(0.15, WriteAction::Conflict)
///             .kind::<Pod>()
///             .verbs(&[Verb::Patch])
///             .latency(Delay::fixed(Duration::from_millis(20))),
///     )?
///     .add_write_fault(WriteFault::next(1, WriteAction::InternalError).resource("configmaps"))?
///     .pause_gc();
/// # Ok::<(), ward_apiserver::FaultError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WriteFault {
    /// Verbs it applies to (empty: all).
    #[serde(default)]
    pub verbs: Vec<Verb>,
    /// API group it applies to (`""` for the core group; None: any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Resource plural it applies to, e.g. `pods` (None: all).
    #[serde(default)]
    pub resource: Option<String>,
    /// Client it applies to (None: all).
    #[serde(default)]
    pub client: Option<ClientId>,
    /// What to do.
    pub action: WriteAction,
    /// A delay before the action (so a 409 can also be slow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Delay>,
    /// When.
    pub trigger: Trigger,
}

/// A write fault that fired: wait `latency`, then do `action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fired {
    /// The fault's extra latency, if any.
    pub latency: Option<Delay>,
    /// What to do.
    pub action: WriteAction,
}

impl WriteFault {
    /// A fault answering `action` to the next `n` writes of any kind.
    #[must_use]
    pub fn next(n: u32, action: WriteAction) -> Self {
        WriteFault {
            verbs: Vec::new(),
            group: None,
            resource: None,
            client: None,
            action,
            latency: None,
            trigger: Trigger::Next(n),
        }
    }

    /// A fault answering `action` to each write with probability `p`.
    #[must_use]
    pub fn fraction(p: f64, action: WriteAction) -> Self {
        WriteFault {
            trigger: Trigger::Fraction(p),
            ..WriteFault::next(0, action)
        }
    }

    /// Only these verbs.
    #[must_use]
    pub fn verbs(mut self, verbs: &[Verb]) -> Self {
        self.verbs = verbs.to_vec();
        self
    }

    /// Only this resource (plural), in any group.
    #[must_use]
    pub fn resource(mut self, plural: &str) -> Self {
        self.resource = Some(plural.to_string());
        self
    }

    /// Only this resource of this group (`""`: the core group).
    #[must_use]
    pub fn group_resource(mut self, group: &str, plural: &str) -> Self {
        self.group = Some(group.to_string());
        self.resource(plural)
    }

    /// Only writes to `K`, by its group and plural.
    #[cfg(feature = "client")]
    #[must_use]
    pub fn kind<K: kube::Resource<DynamicType = ()>>(self) -> Self {
        self.group_resource(&K::group(&()), &K::plural(&()))
    }

    /// Wait this long before the action (for [`WriteAction::Latency`],
    /// in addition to its own delay).
    #[must_use]
    pub fn latency(mut self, delay: Delay) -> Self {
        self.latency = Some(delay);
        self
    }

    /// Only this client.
    #[must_use]
    pub fn client(mut self, client: ClientId) -> Self {
        self.client = Some(client);
        self
    }

    fn matches(&self, verb: Verb, group: &str, resource: &str, client: ClientId) -> bool {
        (self.verbs.is_empty() || self.verbs.contains(&verb))
            && self.group.as_deref().is_none_or(|g| g == group)
            && self.resource.as_deref().is_none_or(|r| r == resource)
            && self.client.is_none_or(|c| c == client)
    }
}

/// kwok-like pod stages (off by default).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PodLifecycle {
    /// Whether pods move through the stages at all.
    pub enabled: bool,
    /// From creation to `spec.nodeName` set.
    pub schedule: Delay,
    /// From scheduled to Running with a podIP.
    pub run: Delay,
    /// Nodes to schedule onto (round robin); when empty, the Node objects in
    /// the store, or `ward-node-0` when there are none.
    pub nodes: Vec<String>,
}

impl Default for PodLifecycle {
    fn default() -> Self {
        PodLifecycle {
            enabled: false,
            schedule: Delay::fixed(Duration::from_millis(100)),
            run: Delay::fixed(Duration::from_millis(500)),
            nodes: Vec::new(),
        }
    }
}

/// The whole fault configuration, as the admin endpoint shows and takes it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FaultConfig {
    /// Garbage collector.
    pub gc: GcFaults,
    /// Per-client views, by client id.
    pub views: HashMap<ClientId, ClientView>,
    /// Write faults, checked in order; the first that fires wins.
    pub writes: Vec<WriteFault>,
    /// Pod stages.
    pub pods: PodLifecycle,
    /// Faults on calls to admission webhooks, checked in order; the first
    /// that fires wins.
    pub webhooks: Vec<WebhookFault>,
}

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

impl Trigger {
    /// Whether it fires now (consuming one shot of `Next`).
    fn fires(&mut self, rng: &mut Rng) -> bool {
        match self {
            Trigger::Fraction(p) => rng.unit() < *p,
            Trigger::Next(n) if *n > 0 => {
                *n -= 1;
                true
            }
            Trigger::Next(_) => false,
        }
    }
}

/// What a webhook fault does to a call from the server to an admission
/// webhook: the webhook's `failurePolicy` then decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WebhookAction {
    /// Make the call after this delay (past the webhook's
    /// `timeoutSeconds`, it times out).
    Delay(Delay),
    /// The connection is refused: `dial tcp ...: connect: connection
    /// refused`.
    Refuse,
    /// The call runs out its whole `timeoutSeconds`: `context deadline
    /// exceeded`.
    Timeout,
}

/// A fault on the server's calls to admission webhooks: a filter (a
/// webhook's name, or any), an action and a trigger.
///
/// ```
/// use ward_apiserver::Faults;
/// use ward_apiserver::faults::{Trigger, WebhookAction, WebhookFault};
///
/// let faults = Faults::new(7);
/// faults.add_webhook_fault(WebhookFault {
///     webhook: Some("label.example.com".into()),
///     action: WebhookAction::Refuse,
///     trigger: Trigger::Next(1),
/// })?;
/// # Ok::<(), ward_apiserver::FaultError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebhookFault {
    /// The webhook's name (None: every webhook).
    #[serde(default)]
    pub webhook: Option<String>,
    /// What to do.
    pub action: WebhookAction,
    /// When.
    pub trigger: Trigger,
}

fn validate_write(w: &WriteFault) -> Result<(), FaultError> {
    validate_trigger(w.trigger)
}

fn validate_trigger(trigger: Trigger) -> Result<(), FaultError> {
    match trigger {
        Trigger::Fraction(p) if !(0.0..=1.0).contains(&p) || p.is_nan() => {
            Err(FaultError::Fraction(p))
        }
        Trigger::Fraction(0.0) => Err(FaultError::NeverFires),
        Trigger::Next(0) => Err(FaultError::NeverFires),
        _ => Ok(()),
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
