//! Which task the runtime polled, in order: the trace that says where two
//! runs of one seed part ways, and which task did it (`--cfg
//! tokio_unstable`, as exact replay needs: tokio's task hooks are part of
//! its unstable API).
//!
//! A simulation records when it calls [`record`]; [`take`] returns what
//! it recorded. Tasks are named by their spawn order in the simulation
//! (tokio's task ids count across the process) and where they were
//! spawned, so two runs' traces compare line by line:
//!
//! ```
//! use ward_campaign::{polls, simulate};
//!
//! let run = || simulate(|| async {
//!     polls::record();
//!     let (tx, rx) = tokio::sync::oneshot::channel();
//!     tokio::spawn(async move { tx.send(1).unwrap() });
//!     rx.await.unwrap();
//!     polls::take()
//! });
//! let (a, b) = (run(), run());
//! assert_eq!(a.first_divergence(&b), None);
//! assert_eq!(a.tasks(), 1);
//! ```

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::panic::Location;

/// A simulation's polls, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Polls {
    /// Where each task was spawned, by spawn order.
    spawned_at: Vec<&'static Location<'static>>,
    /// The spawn order of each task polled, in the order it was polled.
    order: Vec<usize>,
}

/// Where two traces first differ: the poll's position, the task each run
/// polled there (spawn order and place; `None` past a trace's end), and
/// the tasks the runs polled just before, which they share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    /// The position of the first differing poll.
    pub at: usize,
    /// What this run polled there.
    pub this: Option<(usize, &'static Location<'static>)>,
    /// What the other run polled there.
    pub other: Option<(usize, &'static Location<'static>)>,
    /// The polls before it (up to 8), the same in both runs.
    pub before: Vec<(usize, &'static Location<'static>)>,
}

impl Polls {
    /// How many tasks the simulation spawned while recording.
    #[must_use]
    pub fn tasks(&self) -> usize {
        self.spawned_at.len()
    }

    /// How many polls it recorded.
    #[must_use]
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether it recorded no poll.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    fn task(&self, i: usize) -> Option<(usize, &'static Location<'static>)> {
        let t = *self.order.get(i)?;
        Some((
            t,
            self.spawned_at
                .get(t)
                .copied()
                .unwrap_or(Location::caller()),
        ))
    }

    /// Where this trace and `other` first differ, if they do: a poll of
    /// another task, or a task spawned elsewhere.
    #[must_use]
    pub fn first_divergence(&self, other: &Polls) -> Option<Divergence> {
        let at = (0..self.len().max(other.len())).find(|&i| self.task(i) != other.task(i))?;
        Some(Divergence {
            at,
            this: self.task(at),
            other: other.task(at),
            before: (at.saturating_sub(8)..at)
                .filter_map(|i| self.task(i))
                .collect(),
        })
    }
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let task = |t: &Option<(usize, &Location<'_>)>| match t {
            Some((n, at)) => format!("task #{n} (spawned at {}:{})", at.file(), at.line()),
            None => "nothing (the trace ended)".into(),
        };
        writeln!(f, "poll {} differs:", self.at)?;
        writeln!(f, "  this run polled {}", task(&self.this))?;
        writeln!(f, "  the other polled {}", task(&self.other))?;
        write!(f, "  after, in both:")?;
        for t in &self.before {
            write!(f, "\n    {}", task(&Some(*t)))?;
        }
        Ok(())
    }
}

/// What this thread records: task ids (process-wide) to spawn order.
struct Recording {
    ids: BTreeMap<tokio::task::Id, usize>,
    polls: Polls,
}

thread_local! {
    static RECORDING: RefCell<Option<Recording>> = const { RefCell::new(None) };
}

/// Record this simulation's spawns and polls from now on (call it inside
/// [`simulate`](crate::simulate)'s future).
pub fn record() {
    RECORDING.with(|r| {
        *r.borrow_mut() = Some(Recording {
            ids: BTreeMap::new(),
            polls: Polls::default(),
        });
    });
}

/// What was recorded since [`record`] (empty if it was not called); stops
/// recording.
#[must_use]
pub fn take() -> Polls {
    RECORDING.with(|r| r.borrow_mut().take().map(|r| r.polls).unwrap_or_default())
}

/// Install the hooks that record, on a simulation's runtime.
pub(crate) fn install(builder: &mut tokio::runtime::Builder) {
    builder
        .on_task_spawn(|meta| {
            let at = meta.spawned_at();
            with_recording(|r| {
                r.ids.insert(meta.id(), r.polls.spawned_at.len());
                r.polls.spawned_at.push(at);
            });
        })
        .on_before_task_poll(|meta| {
            with_recording(|r| {
                if let Some(&n) = r.ids.get(&meta.id()) {
                    r.polls.order.push(n);
                }
            });
        });
}

fn with_recording(f: impl FnOnce(&mut Recording)) {
    let _ = RECORDING.try_with(|r| {
        if let Ok(mut r) = r.try_borrow_mut()
            && let Some(r) = r.as_mut()
        {
            f(r);
        }
    });
}
