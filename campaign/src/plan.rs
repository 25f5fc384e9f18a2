//! A perturbation plan: drawn from a seed, printed, carried out.
//!
//! A [`Perturbation`] is a kind of trouble (a stale view, a crash...); it
//! draws one concrete [`Action`] — when, for how long, against which
//! controller — from the run's seed. A [`Plan`] is the actions of every
//! enabled kind. Each kind draws from its own stream of the seed, so
//! turning one kind off leaves the others' draws unchanged, and the same
//! seed always yields the same plan.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use ward_base::Rng;

use crate::world::World;

/// A kind of perturbation; implement it to add your own (see the crate doc).
pub trait Perturbation: Send + Sync {
    /// Its name on the command line, e.g. `stale-view`.
    fn kind(&self) -> &'static str;

    /// Whether its actions aim at a controller (most do; the GC's do not).
    fn targeted(&self) -> bool {
        true
    }

    /// One concrete action, drawn from `rng`, for a run whose interesting
    /// part lasts about `horizon`, aimed at one of `targets` (the names of
    /// the controllers under test; never empty for a targeted kind).
    fn draw(&self, rng: &mut Rng, horizon: Duration, targets: &[String]) -> Box<dyn Action>;
}

/// Why a plan could not be drawn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// A kind that aims at a controller, and no controller to aim at.
    #[error("{kind} aims at a controller under test, and the plan was given none")]
    NoTarget {
        /// The kind.
        kind: &'static str,
    },
}

/// One drawn perturbation. Its `Display` is the plan's line for it.
pub trait Action: fmt::Display + Send + Sync {
    /// Carry it out against the run, on (simulated) tokio time: typically
    /// sleep until its start, change the server's faults, sleep, restore.
    fn run(&self, world: Arc<World>) -> BoxFuture<'static, ()>;

    /// The controller it aims at, if any: [`crate::Perturber::start`]
    /// refuses a plan whose target is not registered. An action of a kind
    /// of your own that aims at a controller returns it here, or is not
    /// checked.
    fn target(&self) -> Option<&str> {
        None
    }
}

/// The actions of one run, each with its kind's name.
pub struct Plan {
    /// The seed it was drawn from.
    pub seed: u64,
    /// The actions, in the order of the kinds.
    pub actions: Vec<(&'static str, Arc<dyn Action>)>,
}

impl Plan {
    /// The plan of `seed`: one action per kind in `kinds`, each aimed at
    /// one of `targets` if its kind aims at a controller.
    ///
    /// # Errors
    /// [`PlanError::NoTarget`] if `targets` is empty and a kind needs one.
    pub fn draw(
        seed: u64,
        kinds: &[Arc<dyn Perturbation>],
        horizon: Duration,
        targets: &[String],
    ) -> Result<Plan, PlanError> {
        let mut actions = Vec::with_capacity(kinds.len());
        for k in kinds {
            if targets.is_empty() && k.targeted() {
                return Err(PlanError::NoTarget { kind: k.kind() });
            }
            let mut rng = Rng::stream(seed, &format!("plan/{}", k.kind()));
            actions.push((k.kind(), Arc::from(k.draw(&mut rng, horizon, targets))));
        }
        Ok(Plan { seed, actions })
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.actions.is_empty() {
            return writeln!(f, "plan of seed {}: no perturbation", self.seed);
        }
        writeln!(f, "plan of seed {}:", self.seed)?;
        for (kind, a) in &self.actions {
            writeln!(f, "  {kind}: {a}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A start time and a window length, drawn the same way by every kind:
/// the start in the first 80% of `horizon`, the length between `min` and
/// `max`.
pub fn window(
    rng: &mut Rng,
    horizon: Duration,
    min: Duration,
    max: Duration,
) -> (Duration, Duration) {
    let at = rng.between(Duration::ZERO, horizon.mul_f64(0.8));
    (at, rng.between(min, max.max(min)))
}

/// One of `targets`, drawn.
pub fn pick(rng: &mut Rng, targets: &[String]) -> String {
    let i = rng.up_to(targets.len().saturating_sub(1) as u64) as usize;
    targets[i].clone()
}

/// `1.234s`, as plans print times.
pub(crate) fn secs(d: Duration) -> String {
    format!("{:.3}s", d.as_secs_f64())
}
