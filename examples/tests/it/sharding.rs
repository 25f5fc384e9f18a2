//! The sharding example: naive replicas reconcile one object twice at once
//! and write outside their slots; Ward's hold under every perturbation
//! kind, on the sweep's seeds and on the seeds wide runs once broke.

use crate::common::{breaks, guarded, seeds};
use ward_campaign::perturbations::builtin;
use ward_examples::demo::{self, Selection};
use ward_examples::example::Report;
use ward_examples::sharding::Sharding;
use ward_examples::sharding::invariants::Invariant;
use ward_examples::sharding::replica::Mode;
use ward_examples::sharding::scenario;

fn run(mode: Mode, seed: u64) -> Report<Sharding> {
    let kinds = builtin();
    ward_examples::run::simulate(|| scenario::run(mode, seed, &kinds)).unwrap()
}

#[test]
fn naive_replicas_overlap_at_a_join_and_write_outside_their_slots() {
    let first = run(Mode::Naive, 0);
    assert!(
        breaks(&first.violations, Invariant::I1),
        "{:?}",
        first.violations
    );
    // I1 at one of the first joins (r1 at 1 s, r2 at 2 s; nothing else
    // changes before 4 s), as in the module docs: the joiner's view gives
    // it slots r0 still reconciles.
    let i1 = first
        .violations
        .iter()
        .find(|v| v.invariant == Invariant::I1)
        .unwrap();
    assert!(
        ["r1", "r2"]
            .iter()
            .any(|r| i1.detail.starts_with(&format!("{r} started reconciling")))
            && i1.detail.ends_with("while r0 was"),
        "{}",
        i1.detail
    );
    let naive: Vec<_> = (0..10).map(|s| run(Mode::Naive, s).violations).collect();
    assert!(
        naive.iter().any(|v| breaks(v, Invariant::I2)),
        "no naive seed of 0..10 wrote outside its slots"
    );
    // Naive replicas also leave changes unanswered: a replica reconciles
    // only what its own view gives it, and a slot nobody's view gives it
    // waits for the next change.
    assert!(
        naive.iter().any(|v| breaks(v, Invariant::I5)),
        "no naive seed of 0..10 left a change unanswered"
    );
}

#[test]
fn guarded_replicas_hold_over_the_sweeps_seeds_under_every_kind() {
    let sel = Selection {
        kinds: builtin(),
        ..Selection::seeds(0..seeds() / 2)
    };
    let rows = demo::campaign(&guarded::<Sharding>(), &sel, 2, &|| {});
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].runs as u64, seeds() / 2);
    assert_eq!(
        (rows[0].violating_runs, rows[0].errors),
        (0, 0),
        "{:?}",
        rows[0]
    );
}

/// A member partitioned, then told to leave: its drain outlasted its Lease
/// until the deadline held while leaving too.
#[test]
fn guarded_replicas_hold_on_the_seeds_wide_runs_broke() {
    for seed in [500_867, 500_937] {
        let r = run(Mode::Guarded, seed);
        assert!(r.violations.is_empty(), "seed {seed}: {:?}", r.violations);
    }
}

/// A seed replays the same history in this process: seed 7, or the
/// first `WARD_REPLAY_SEEDS` seeds (a wider run), each run twice with a
/// naive run between.
#[test]
fn a_seed_replays_the_same_history() {
    let seeds: Vec<u64> = match std::env::var("WARD_REPLAY_SEEDS") {
        Ok(n) => (0..n.parse().expect("WARD_REPLAY_SEEDS is a number")).collect(),
        Err(_) => vec![7],
    };
    for seed in seeds {
        let a = run(Mode::Guarded, seed);
        let _between = run(Mode::Naive, seed);
        let b = run(Mode::Guarded, seed);
        assert_eq!(a.plan, b.plan);
        let first = |x: &[String], y: &[String]| x.iter().zip(y).position(|(p, q)| p != q);
        let (ja, jb): (Vec<String>, Vec<String>) = (
            a.journal.iter().map(|e| format!("{e:?}")).collect(),
            b.journal.iter().map(|e| format!("{e:?}")).collect(),
        );
        if let Some(i) = first(&a.events, &b.events) {
            panic!(
                "seed {seed}: histories differ at {i}:\n{}\n---\n{}",
                a.events[i.saturating_sub(12)..i + 3].join("\n"),
                b.events[i.saturating_sub(12)..i + 3].join("\n")
            );
        }
        if let Some(i) = first(&ja, &jb) {
            panic!("seed {seed}: journals differ at {i}: {} / {}", ja[i], jb[i]);
        }
        assert_eq!(
            (ja.len(), a.events.len()),
            (jb.len(), b.events.len()),
            "seed {seed}"
        );
    }
}
