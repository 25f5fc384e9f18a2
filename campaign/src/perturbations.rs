//! The built-in perturbation kinds, after Sieve's (OSDI'22) and the races
//! Ward exists for:
//!
//! | kind | what the target sees |
//! |---|---|
//! | `gc-delay` | owners' dependents outlive them for seconds (each collection waits) |
//! | `gc-pause` | nothing is collected for a window, then everything at once |
//! | `stale-view` | its watches and cached lists frozen at an older resourceVersion, then released (time travel) |
//! | `unobserved` | watch events held back and coalesced: intermediate states of an object never seen |
//! | `crash` | killed right after its k-th read or write (never sees the answer), restarted with its memory lost |
//! | `write-faults` | a fraction of its writes answered 409, 429, or delayed |
//! | `webhook-faults` | a fraction of the server's calls to admission webhooks refused, timed out or slowed: each webhook's failurePolicy decides what writers see |
//!
//! `webhook-faults` is not in [`builtin`]: it perturbs only writes an
//! admission webhook takes, and none of the examples registers one (a
//! campaign over a controller whose writes go through webhooks adds it:
//! `kinds.push(Arc::new(WebhookFaults))`). Under a paused clock its
//! timeouts elapse in simulated time.
//!
//! Quorum reads stay fresh under a stale view, as they do against a real
//! API server whose watch cache lags. The opt-in [`Partition`] and
//! [`FrozenView`] cut a controller off, or freeze its view, for a window.
//!
//! (A perturbation's `kind()` is its name in a plan, as above: nothing to
//! do with Kubernetes kinds.)

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use ward_apiserver::faults::{Trigger, Verb, WebhookAction, WebhookFault};
use ward_apiserver::{Delay, WriteAction, WriteFault};
use ward_base::Rng;

use crate::plan::{Action, Perturbation, pick, secs, window};
use crate::world::{Op, World};

pub use crate::isolate::{FrozenView, Partition};

/// Every built-in kind, in a fixed order.
#[must_use]
pub fn builtin() -> Vec<Arc<dyn Perturbation>> {
    vec![
        Arc::new(GcDelay),
        Arc::new(GcPause),
        Arc::new(StaleView),
        Arc::new(Unobserved),
        Arc::new(Crash),
        Arc::new(WriteFaults),
    ]
}

/// Why a `--perturb` list was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SelectError {
    /// A name that is no kind.
    #[error("unknown perturbation {name:?}: all, none, or a comma-separated list of {known}")]
    Unknown {
        /// What was asked for.
        name: String,
        /// The kinds there are.
        known: String,
    },
}

/// The kinds `spec` names among `available`: `all`, `none`, or a
/// comma-separated list (`stale-view,crash`).
pub fn select(
    spec: &str,
    available: &[Arc<dyn Perturbation>],
) -> Result<Vec<Arc<dyn Perturbation>>, SelectError> {
    match spec.trim() {
        "all" => return Ok(available.to_vec()),
        "none" | "" => return Ok(Vec::new()),
        _ => {}
    }
    let mut out: Vec<Arc<dyn Perturbation>> = Vec::new();
    for name in spec.split(',').map(str::trim) {
        let k =
            available
                .iter()
                .find(|k| k.kind() == name)
                .ok_or_else(|| SelectError::Unknown {
                    name: name.into(),
                    known: available
                        .iter()
                        .map(|k| k.kind())
                        .collect::<Vec<_>>()
                        .join(", "),
                })?;
        if !out.iter().any(|o| o.kind() == name) {
            out.push(k.clone());
        }
    }
    Ok(out)
}

/// `gc-delay`: every collection waits `delay` during a window.
#[derive(Debug, Clone, Copy)]
pub struct GcDelay;

struct GcDelayAction {
    at: Duration,
    len: Duration,
    delay: Duration,
}

impl Perturbation for GcDelay {
    fn kind(&self) -> &'static str {
        "gc-delay"
    }

    fn targeted(&self) -> bool {
        false
    }

    fn draw(&self, rng: &mut Rng, horizon: Duration, _: &[String]) -> Box<dyn Action> {
        let (at, len) = window(rng, horizon, horizon / 10, horizon / 2);
        let delay = rng.between(Duration::from_secs(1), Duration::from_secs(20));
        Box::new(GcDelayAction { at, len, delay })
    }
}

impl fmt::Display for GcDelayAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "each GC waits {} from {} for {}",
            secs(self.delay),
            secs(self.at),
            secs(self.len)
        )
    }
}

impl Action for GcDelayAction {
    fn run(&self, w: Arc<World>) -> BoxFuture<'static, ()> {
        let (at, len, delay) = (self.at, self.len, Delay::fixed(self.delay));
        async move {
            let begin = |w: &World| {
                let before = w.faults().gc().delay;
                w.faults().set_gc_delay(delay);
                w.log(format!("perturb: GC delayed {}", secs(delay_of(delay))));
                Some(before)
            };
            let end = |w: &World, before| {
                // Leave a delay the scenario has set since alone.
                if w.faults().gc().delay == delay {
                    w.faults().set_gc_delay(before);
                }
                w.log("perturb: GC delay lifted".into());
            };
            w.window(at, len, begin, end).await;
        }
        .boxed()
    }
}

fn delay_of(d: Delay) -> Duration {
    Duration::from_millis(d.base_ms)
}

/// `gc-pause`: nothing is collected during a window.
#[derive(Debug, Clone, Copy)]
pub struct GcPause;

struct GcPauseAction {
    at: Duration,
    len: Duration,
}

impl Perturbation for GcPause {
    fn kind(&self) -> &'static str {
        "gc-pause"
    }

    fn targeted(&self) -> bool {
        false
    }

    fn draw(&self, rng: &mut Rng, horizon: Duration, _: &[String]) -> Box<dyn Action> {
        let (at, len) = window(rng, horizon, Duration::from_secs(2), horizon / 3);
        Box::new(GcPauseAction { at, len })
    }
}

impl fmt::Display for GcPauseAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GC paused from {} for {}", secs(self.at), secs(self.len))
    }
}

impl Action for GcPauseAction {
    fn run(&self, w: Arc<World>) -> BoxFuture<'static, ()> {
        let (at, len) = (self.at, self.len);
        async move {
            let begin = |w: &World| {
                if w.faults().gc().paused {
                    return None; // the scenario's own pause: not ours to lift
                }
                w.faults().pause_gc();
                w.log("perturb: GC paused".into());
                Some(())
            };
            let end = |w: &World, ()| {
                w.faults().resume_gc();
                w.log("perturb: GC resumed".into());
            };
            w.window(at, len, begin, end).await;
        }
        .boxed()
    }
}

/// `stale-view`: the target's watches and cached lists frozen at the
/// resourceVersion of the window's start, then released.
#[derive(Debug, Clone, Copy)]
pub struct StaleView;

pub(crate) struct StaleViewAction {
    pub(crate) target: String,
    pub(crate) at: Duration,
    pub(crate) len: Duration,
    /// Quorum reads frozen too (`frozen-view`).
    pub(crate) quorum: bool,
}

impl Perturbation for StaleView {
    fn kind(&self) -> &'static str {
        "stale-view"
    }

    fn draw(&self, rng: &mut Rng, horizon: Duration, targets: &[String]) -> Box<dyn Action> {
        let target = pick(rng, targets);
        let (at, len) = window(rng, horizon, Duration::from_secs(2), horizon / 3);
        Box::new(StaleViewAction {
            target,
            at,
            len,
            quorum: false,
        })
    }
}

impl fmt::Display for StaleViewAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = if self.quorum {
            format!("all {} reads", self.target)
        } else {
            format!("{}'s view", self.target)
        };
        write!(
            f,
            "{what} frozen from {} for {}",
            secs(self.at),
            secs(self.len)
        )
    }
}

impl Action for StaleViewAction {
    fn target(&self) -> Option<&str> {
        Some(&self.target)
    }

    fn run(&self, w: Arc<World>) -> BoxFuture<'static, ()> {
        let (target, at, len, quorum) = (self.target.clone(), self.at, self.len, self.quorum);
        async move {
            let Some(client) = w.client_or_log(&target) else {
                return;
            };
            let begin = |w: &World| {
                let rv = w.current_rv();
                w.faults().update_view(client, |v| {
                    v.frozen_at = Some(rv);
                    v.stale_quorum_reads = quorum;
                });
                if quorum {
                    w.log(format!("perturb: every read of {target} frozen at rv {rv}"));
                } else {
                    w.log(format!("perturb: {target}'s view frozen at rv {rv}"));
                }
                Some(())
            };
            let end = |w: &World, ()| {
                w.faults().update_view(client, |v| {
                    v.frozen_at = None;
                    v.stale_quorum_reads = false;
                });
                if quorum {
                    w.log(format!("perturb: {target}'s reads released"));
                } else {
                    w.log(format!("perturb: {target}'s view released"));
                }
            };
            w.window(at, len, begin, end).await;
        }
        .boxed()
    }
}

/// `unobserved`: the target's watch events held back and coalesced, so it
/// sees only the latest state of an object that changed meanwhile.
#[derive(Debug, Clone, Copy)]
pub struct Unobserved;

struct UnobservedAction {
    target: String,
    at: Duration,
    len: Duration,
    hold: Duration,
}

impl Perturbation for Unobserved {
    fn kind(&self) -> &'static str {
        "unobserved"
    }

    fn draw(&self, rng: &mut Rng, horizon: Duration, targets: &[String]) -> Box<dyn Action> {
        let target = pick(rng, targets);
        let (at, len) = window(rng, horizon, Duration::from_secs(2), horizon / 3);
        let hold = rng.between(Duration::from_millis(500), Duration::from_secs(5));
        Box::new(UnobservedAction {
            target,
            at,
            len,
            hold,
        })
    }
}

impl fmt::Display for UnobservedAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}'s watch events held {} and coalesced from {} for {}",
            self.target,
            secs(self.hold),
            secs(self.at),
            secs(self.len)
        )
    }
}

impl Action for UnobservedAction {
    fn target(&self) -> Option<&str> {
        Some(&self.target)
    }

    fn run(&self, w: Arc<World>) -> BoxFuture<'static, ()> {
        let (target, at, len, hold) = (self.target.clone(), self.at, self.len, self.hold);
        async move {
            let Some(client) = w.client_or_log(&target) else {
                return;
            };
            let begin = |w: &World| {
                w.faults().update_view(client, |v| {
                    v.coalesce = true;
                    v.watch_delay = Delay::fixed(hold);
                });
                w.log(format!("perturb: {target} misses intermediate states"));
                Some(())
            };
            let end = |w: &World, ()| {
                w.faults().update_view(client, |v| {
                    v.coalesce = false;
                    v.watch_delay = Delay::default();
                });
                w.log(format!("perturb: {target} sees every state again"));
            };
            w.window(at, len, begin, end).await;
            // Done once what the window held has gone out too (an event
            // held just before the end is released up to `hold` later):
            // a run that settles after the plan is done settles after it.
            w.until(at + len + hold).await;
        }
        .boxed()
    }
}

/// `crash`: the target killed right after its k-th read or write from a
/// drawn moment, and restarted with its memory lost.
#[derive(Debug, Clone, Copy)]
pub struct Crash;

struct CrashAction {
    target: String,
    at: Duration,
    op: Op,
    k: u64,
}

impl Perturbation for Crash {
    fn kind(&self) -> &'static str {
        "crash"
    }

    fn draw(&self, rng: &mut Rng, horizon: Duration, targets: &[String]) -> Box<dyn Action> {
        let target = pick(rng, targets);
        let (at, _) = window(rng, horizon, Duration::ZERO, Duration::ZERO);
        let op = if rng.up_to(1) == 0 {
            Op::Write
        } else {
            Op::Read
        };
        let k = 1 + rng.up_to(4);
        Box::new(CrashAction { target, at, op, k })
    }
}

impl fmt::Display for CrashAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} crashes right after its {} #{} from {}",
            self.target,
            self.op,
            self.k,
            secs(self.at)
        )
    }
}

impl Action for CrashAction {
    fn target(&self) -> Option<&str> {
        Some(&self.target)
    }

    fn run(&self, w: Arc<World>) -> BoxFuture<'static, ()> {
        let (target, at, op, k) = (self.target.clone(), self.at, self.op, self.k);
        async move {
            w.until(at).await;
            if w.client_or_log(&target).is_some() && w.arm_crash(&target, op, k) {
                w.log(format!(
                    "perturb: {target} will crash after {k} more {op}(s)"
                ));
            }
        }
        .boxed()
    }
}

/// `write-faults`: during a window, a fraction of the target's writes are
/// answered 409 Conflict (PUTs only: kube never answers a create so, and
/// retries a patch's own conflicts) or 429 TooManyRequests, or delayed.
#[derive(Debug, Clone, Copy)]
pub struct WriteFaults;

struct WriteFaultsAction {
    target: String,
    at: Duration,
    len: Duration,
    fraction: f64,
    action: WriteAction,
}

impl Perturbation for WriteFaults {
    fn kind(&self) -> &'static str {
        "write-faults"
    }

    fn draw(&self, rng: &mut Rng, horizon: Duration, targets: &[String]) -> Box<dyn Action> {
        let target = pick(rng, targets);
        let (at, len) = window(rng, horizon, Duration::from_secs(2), horizon / 2);
        // Hundredths, so the plan prints exactly what runs.
        let fraction = (10 + rng.up_to(40)) as f64 / 100.0;
        let action = match rng.up_to(2) {
            0 => WriteAction::Conflict,
            1 => WriteAction::TooManyRequests,
            _ => WriteAction::Latency(Delay::fixed(
                rng.between(Duration::from_millis(50), Duration::from_secs(2)),
            )),
        };
        Box::new(WriteFaultsAction {
            target,
            at,
            len,
            fraction,
            action,
        })
    }
}

impl fmt::Display for WriteFaultsAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.action {
            // Updates (PUT) only: the plan says so, or a controller that
            // only creates and patches reads "48% of its writes" and
            // looks for conflicts it cannot get.
            WriteAction::Conflict => "409 Conflict (its updates: PUTs only)".to_string(),
            WriteAction::TooManyRequests => "429 TooManyRequests".to_string(),
            WriteAction::InternalError => "500 InternalError".to_string(),
            WriteAction::Latency(d) => format!("a delay of {}", secs(delay_of(d))),
        };
        write!(
            f,
            "{:.0}% of {}'s writes get {what} from {} for {}",
            self.fraction * 100.0,
            self.target,
            secs(self.at),
            secs(self.len)
        )
    }
}

impl Action for WriteFaultsAction {
    fn target(&self) -> Option<&str> {
        Some(&self.target)
    }

    fn run(&self, w: Arc<World>) -> BoxFuture<'static, ()> {
        let (target, at, len) = (self.target.clone(), self.at, self.len);
        let (fraction, action) = (self.fraction, self.action);
        async move {
            let Some(client) = w.client_or_log(&target) else {
                return;
            };
            let mut fault = WriteFault::fraction(fraction, action).client(client);
            if action == WriteAction::Conflict {
                // Only a write that names the version it read can
                // conflict: a PUT. kube answers a create AlreadyExists
                // or creates it, and retries a patch's conflicts itself
                // (a patch that tests the version it read conflicts
                // when another write really came first); a controller
                // that reads an injected 409 there chases a fault no
                // server makes.
                fault = fault.verbs(&[Verb::Update]);
            }
            let begin = |w: &World| {
                w.faults().add_write_fault(fault.clone()).ok()?;
                w.log(format!("perturb: {target}'s writes start failing"));
                Some(())
            };
            let end = |w: &World, ()| {
                w.faults().remove_write_fault(&fault);
                w.log(format!("perturb: {target}'s writes succeed again"));
            };
            if !w.window(at, len, begin, end).await {
                return;
            }
            // Done once a write delayed at the window's end has landed.
            if let WriteAction::Latency(d) = action {
                w.until(at + len + delay_of(d)).await;
            }
        }
        .boxed()
    }
}

/// `webhook-faults`: during a window, a fraction of the server's calls to
/// admission webhooks are refused (`connection refused`), time out
/// (`context deadline exceeded` after the webhook's timeoutSeconds) or are
/// delayed; a webhook's failurePolicy then fails the write (Fail) or lets
/// it through unchecked (Ignore). Not in [`builtin`] (see the module docs).
#[derive(Debug, Clone, Copy)]
pub struct WebhookFaults;

struct WebhookFaultsAction {
    at: Duration,
    len: Duration,
    fraction: f64,
    action: WebhookAction,
}

impl Perturbation for WebhookFaults {
    fn kind(&self) -> &'static str {
        "webhook-faults"
    }

    fn targeted(&self) -> bool {
        false
    }

    fn draw(&self, rng: &mut Rng, horizon: Duration, _: &[String]) -> Box<dyn Action> {
        let (at, len) = window(rng, horizon, Duration::from_secs(2), horizon / 2);
        // Hundredths, so the plan prints exactly what runs.
        let fraction = (10 + rng.up_to(40)) as f64 / 100.0;
        let action = match rng.up_to(2) {
            0 => WebhookAction::Refuse,
            1 => WebhookAction::Timeout,
            _ => WebhookAction::Delay(Delay::fixed(
                rng.between(Duration::from_millis(50), Duration::from_secs(2)),
            )),
        };
        Box::new(WebhookFaultsAction {
            at,
            len,
            fraction,
            action,
        })
    }
}

impl fmt::Display for WebhookFaultsAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.action {
            WebhookAction::Refuse => "refused".to_string(),
            WebhookAction::Timeout => "timed out".to_string(),
            WebhookAction::Delay(d) => format!("delayed {}", secs(delay_of(d))),
        };
        write!(
            f,
            "{:.0}% of the calls to admission webhooks {what} from {} for {}",
            self.fraction * 100.0,
            secs(self.at),
            secs(self.len)
        )
    }
}

impl Action for WebhookFaultsAction {
    fn run(&self, w: Arc<World>) -> BoxFuture<'static, ()> {
        let (at, len) = (self.at, self.len);
        let fault = WebhookFault {
            webhook: None,
            action: self.action,
            trigger: Trigger::Fraction(self.fraction),
        };
        async move {
            let begin = |w: &World| {
                w.faults().add_webhook_fault(fault.clone()).ok()?;
                w.log("perturb: admission webhook calls start failing".into());
                Some(())
            };
            let end = |w: &World, ()| {
                w.faults().remove_webhook_fault(&fault);
                w.log("perturb: admission webhook calls succeed again".into());
            };
            w.window(at, len, begin, end).await;
        }
        .boxed()
    }
}
