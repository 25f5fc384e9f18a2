//! The fault configuration: what each family of faults can be set to —
//! the GC's, a client's view, write faults, webhook faults, the pod
//! lifecycle — as the admin endpoint reads and writes it (JSON), and what
//! makes a write or webhook fault valid. [`super::Faults`] applies it.

use std::collections::HashMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use ward_base::Rng;

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

    pub(super) fn matches(
        &self,
        verb: Verb,
        group: &str,
        resource: &str,
        client: ClientId,
    ) -> bool {
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

impl Trigger {
    /// Whether it fires now (consuming one shot of `Next`).
    pub(super) fn fires(&mut self, rng: &mut Rng) -> bool {
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

pub(super) fn validate_write(w: &WriteFault) -> Result<(), FaultError> {
    validate_trigger(w.trigger)
}

pub(super) fn validate_trigger(trigger: Trigger) -> Result<(), FaultError> {
    match trigger {
        Trigger::Fraction(p) if !(0.0..=1.0).contains(&p) || p.is_nan() => {
            Err(FaultError::Fraction(p))
        }
        Trigger::Fraction(0.0) => Err(FaultError::NeverFires),
        Trigger::Next(0) => Err(FaultError::NeverFires),
        _ => Ok(()),
    }
}
