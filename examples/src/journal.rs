//! What every example scenario keeps: the journal of what happened, in
//! simulated time (printed with a violation, compared across replays of a
//! seed), and the sink of broken invariants; and how an example declares
//! its invariants (`invariants!`).

use std::collections::HashSet;
use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// A shared log of what happened, in simulated time, printed with a violation.
#[derive(Debug, Clone)]
pub struct Journal {
    start: Instant,
    entries: Arc<Mutex<Vec<(Duration, String)>>>,
    /// Print each entry as it comes and keep none (a live run).
    echo: bool,
}

impl Journal {
    /// A journal starting now.
    #[must_use]
    pub fn new() -> Self {
        Journal {
            start: Instant::now(),
            entries: Arc::default(),
            echo: false,
        }
    }

    /// A journal for a live run: each entry is printed to stdout as it
    /// comes, with its time since the start, and none is kept (a
    /// long-running controller must not grow a history).
    #[must_use]
    pub fn echo() -> Self {
        Journal {
            echo: true,
            ..Self::new()
        }
    }

    /// Simulated time since the start.
    #[must_use]
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Record an event.
    pub fn log(&self, what: impl Into<String>) {
        let at = self.elapsed();
        if self.echo {
            ward_base::outln!("{:>9.3}s  {}", at.as_secs_f64(), what.into());
            return;
        }
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((at, what.into()));
    }

    /// Everything recorded.
    #[must_use]
    pub fn entries(&self) -> Vec<(Duration, String)> {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Default for Journal {
    fn default() -> Self {
        Self::new()
    }
}

/// An example's invariants: an enum of them, each printed with what it
/// forbids (declared with `invariants!`).
pub trait Invariant: Copy + Eq + Hash + fmt::Debug + fmt::Display + Send + Sync + 'static {
    /// Every invariant, in order.
    const ALL: &'static [Self];
}

/// Declare an example's invariants: the enum `Invariant`, each variant with
/// its doc and the text it is printed with, every one in
/// [`Invariant::ALL`], and the example's `Violation` and `Violations`
/// types over it.
macro_rules! invariants {
    ($example:literal: $($(#[$doc:meta])* $name:ident => $text:literal,)+) => {
        #[doc = concat!("Which ", $example, " invariant.")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Invariant {
            $($(#[$doc])* $name,)+
        }

        impl $crate::journal::Invariant for Invariant {
            const ALL: &'static [Self] = &[$(Invariant::$name),+];
        }

        impl ::std::fmt::Display for Invariant {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(match self {
                    $(Invariant::$name => $text,)+
                })
            }
        }

        #[doc = concat!("A broken ", $example, " invariant.")]
        pub type Violation = $crate::journal::Violation<Invariant>;
        #[doc = concat!("Where ", $example, " violations go.")]
        pub type Violations = $crate::journal::Violations<Invariant>;
    };
}
pub(crate) use invariants;

/// A broken invariant (of an example's own invariant type `I`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation<I> {
    /// Which.
    pub invariant: I,
    /// Simulated time since the scenario started.
    pub at: Duration,
    /// What exactly.
    pub detail: String,
}

/// Where violations go: each (invariant, subject) once, journaled.
#[derive(Debug, Clone)]
pub struct Violations<I> {
    journal: Journal,
    inner: Arc<Mutex<Seen<I>>>,
}

/// The (invariant, subject) pairs recorded, and the violations in order.
type Seen<I> = (HashSet<(I, String)>, Vec<Violation<I>>);

impl<I: Copy + Eq + Hash + fmt::Display> Violations<I> {
    /// A sink that journals to `journal`.
    #[must_use]
    pub fn new(journal: Journal) -> Self {
        Violations {
            journal,
            inner: Arc::new(Mutex::new((HashSet::new(), Vec::new()))),
        }
    }

    /// Record that `invariant` broke for `subject` (once per pair).
    pub fn violate(&self, invariant: I, subject: String, detail: String) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if g.0.insert((invariant, subject)) {
            self.journal.log(format!("VIOLATION {invariant}: {detail}"));
            g.1.push(Violation {
                invariant,
                at: self.journal.elapsed(),
                detail,
            });
        }
    }

    /// Every violation so far, in order.
    #[must_use]
    pub fn all(&self) -> Vec<Violation<I>> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .1
            .clone()
    }
}
