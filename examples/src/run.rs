//! What every example's scenarios share: which scenario, which variant of
//! the controller, and running one in simulated time.

use std::fmt;
use std::str::FromStr;

/// Which variant of an example's controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    /// The controller as it was when the bug was reported.
    Naive,
    /// With the fix upstream merged.
    Upstream,
    /// Built from Ward's guards.
    Guarded,
}

impl Mode {
    /// Every mode.
    pub const ALL: [Mode; 3] = [Mode::Naive, Mode::Upstream, Mode::Guarded];
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Naive => "naive",
            Mode::Upstream => "upstream",
            Mode::Guarded => "guarded",
        })
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "naive" => Ok(Mode::Naive),
            "upstream" => Ok(Mode::Upstream),
            "guarded" => Ok(Mode::Guarded),
            other => Err(format!(
                "unknown mode {other:?}: naive, upstream or guarded"
            )),
        }
    }
}

/// Which scenario (each example's scenario module says what each does).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scenario {
    /// The seed race.
    S1,
    /// The second scenario.
    S2,
    /// The third scenario.
    S3,
}

impl Scenario {
    /// Every scenario.
    pub const ALL: [Scenario; 3] = [Scenario::S1, Scenario::S2, Scenario::S3];
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

impl FromStr for Scenario {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "S1" | "s1" => Ok(Scenario::S1),
            "S2" | "s2" => Ok(Scenario::S2),
            "S3" | "s3" => Ok(Scenario::S3),
            other => Err(format!("unknown scenario {other:?}: S1, S2 or S3")),
        }
    }
}

/// Run `fut` on its own single-threaded runtime with tokio's clock paused
/// (simulated time), as every scenario runs.
pub use ward_campaign::simulate;

/// The seed's plan of `kinds` over the scenario's controller under test
/// `target`, drawn over `horizon`, and a perturber for it that journals
/// what it does; with the plan as printed (for the report).
#[must_use]
pub fn perturber(
    server: &ward_apiserver::ApiServer,
    seed: u64,
    kinds: &[std::sync::Arc<dyn ward_campaign::Perturbation>],
    horizon: std::time::Duration,
    target: &str,
    journal: &crate::journal::Journal,
) -> (ward_campaign::Perturber, String) {
    let plan = ward_campaign::Plan::draw(seed, kinds, horizon, &[target.to_string()])
        .expect("every kind has its target");
    let text = plan.to_string();
    let log = journal.clone();
    (
        ward_campaign::Perturber::new(server, plan, move |line| log.log(line)),
        text,
    )
}

/// Call `check` on every change of `store` (with the event) and at least
/// every second (without one: a lagging subscriber also lands here), until
/// the store closes: how every example's invariant checker follows the
/// server's own state.
pub async fn follow_store(
    store: &ward_apiserver::store::Store,
    mut check: impl FnMut(Option<&ward_apiserver::store::Event>),
) {
    use tokio::sync::broadcast::error::RecvError;
    let (_, _, mut rx) = store.snapshot_all_and_subscribe();
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    loop {
        tokio::select! {
            biased;
            ev = rx.recv() => match ev {
                Ok(e) => check(Some(&e)),
                Err(RecvError::Lagged(_)) => check(None),
                Err(RecvError::Closed) => return,
            },
            _ = tick.tick() => check(None),
        }
    }
}

/// Print each of `all` invariants: holds, or where and how it first broke
/// (what the example binaries' `scenario` command prints).
pub fn print_invariants<I: Copy + PartialEq + fmt::Display>(
    all: &[I],
    violations: &[crate::journal::Violation<I>],
) {
    for inv in all {
        let broken: Vec<_> = violations.iter().filter(|v| v.invariant == *inv).collect();
        match broken.first() {
            None => ward_base::outln!("  {inv}: holds"),
            Some(v) => ward_base::outln!(
                "  {inv}: VIOLATED at {:?}: {} ({} time(s))",
                v.at,
                v.detail,
                broken.len()
            ),
        }
    }
}

/// Print the journal, up to `until` if given.
pub fn print_events(journal: &[(std::time::Duration, String)], until: Option<std::time::Duration>) {
    match until {
        Some(u) => ward_base::outln!("\nevents up to {u:?}:"),
        None => ward_base::outln!("\nevents:"),
    }
    for (at, what) in journal
        .iter()
        .filter(|(at, _)| until.is_none_or(|u| *at <= u))
    {
        ward_base::outln!("  {:>9.3}s  {what}", at.as_secs_f64());
    }
}

/// Complete on SIGTERM or SIGINT ([`ward::shutdown::signal`]). Should the
/// handlers fail to install, never complete: the signals then keep their
/// default action and end the process.
pub async fn until_signal() {
    match ward::shutdown::signal() {
        Ok(signal) => signal.await,
        Err(e) => {
            tracing::warn!(error = %e, "no signal handlers: SIGTERM ends the process at once");
            std::future::pending().await
        }
    }
}
