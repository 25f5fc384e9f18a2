//! Two kinds that isolate one controller while it keeps running — what a
//! replica of a sharded or leader-elected controller must survive:
//!
//! | kind | what the target sees |
//! |---|---|
//! | `partition` | cut off from the server: every request hangs until the window ends (one abandoned meanwhile never arrives), or fails at once |
//! | `frozen-view` | everything it reads, quorum reads included, as of the window's start (a stuck proxy or cache in front of it) |
//!
//! They are not among [`builtin`](crate::builtin): the three examples'
//! campaigns predate them. A scenario adds them to its kinds (the
//! sharding example does).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use ward_base::Rng;

use crate::perturbations::StaleViewAction;
use crate::plan::{Action, Perturbation, pick, secs, window};
use crate::world::{Cut, World};

/// `partition`: the target's requests hang or fail for a window.
#[derive(Debug, Clone, Copy)]
pub struct Partition;

struct PartitionAction {
    target: String,
    at: Duration,
    len: Duration,
    cut: Cut,
}

impl Perturbation for Partition {
    fn kind(&self) -> &'static str {
        "partition"
    }

    fn draw(&self, rng: &mut Rng, horizon: Duration, targets: &[String]) -> Box<dyn Action> {
        let target = pick(rng, targets);
        let (at, len) = window(rng, horizon, Duration::from_secs(2), horizon / 3);
        let cut = if rng.up_to(1) == 0 {
            Cut::Hang
        } else {
            Cut::Fail
        };
        Box::new(PartitionAction {
            target,
            at,
            len,
            cut,
        })
    }
}

impl fmt::Display for PartitionAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let how = match self.cut {
            Cut::Hang => "its requests hang",
            Cut::Fail => "its requests fail",
        };
        write!(
            f,
            "{} partitioned ({how}) from {} for {}",
            self.target,
            secs(self.at),
            secs(self.len)
        )
    }
}

impl Action for PartitionAction {
    fn target(&self) -> Option<&str> {
        Some(&self.target)
    }

    fn run(&self, w: Arc<World>) -> BoxFuture<'static, ()> {
        let (target, at, len, cut) = (self.target.clone(), self.at, self.len, self.cut);
        async move {
            let begin = |w: &World| {
                w.client_or_log(&target)?;
                w.partition(&target, Some(cut)).then_some(())?;
                w.log(format!("perturb: {target} partitioned ({cut:?})"));
                Some(())
            };
            let end = |w: &World, ()| {
                w.partition(&target, None);
                w.log(format!("perturb: {target} reconnected"));
            };
            w.window(at, len, begin, end).await;
        }
        .boxed()
    }
}

/// `frozen-view`: all the target reads, quorum reads included, frozen at
/// the resourceVersion of the window's start, then released.
#[derive(Debug, Clone, Copy)]
pub struct FrozenView;

impl Perturbation for FrozenView {
    fn kind(&self) -> &'static str {
        "frozen-view"
    }

    fn draw(&self, rng: &mut Rng, horizon: Duration, targets: &[String]) -> Box<dyn Action> {
        let target = pick(rng, targets);
        let (at, len) = window(rng, horizon, Duration::from_secs(2), horizon / 3);
        // `stale-view`'s action, quorum reads frozen too.
        Box::new(StaleViewAction {
            target,
            at,
            len,
            quorum: true,
        })
    }
}
