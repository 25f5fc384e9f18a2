//! The whereabouts scenarios in simulated time, seeded: the naive and
//! upstream reconcilers reproduce the duplicate-IP race; the guarded one
//! breaks no invariant over the sweep's seeds (`common::seeds`, 100 by default) of every scenario.

use std::process::Command;

use ward_examples::example::Example;
use ward_examples::run::Scenario;
use ward_examples::whereabouts::Whereabouts;
use ward_examples::whereabouts::invariants::Invariant;
use ward_examples::whereabouts::reconciler::Mode;

use crate::common::breaks;

/// A seed whose S1 run with the naive reconciler hits the race.
const NAIVE_SEED: u64 = 4;
/// A seed whose S1 run with today's upstream reconciler hits the race: the
/// annotation of a Pending pod lags more than the 3 x 250 ms re-reads.
const UPSTREAM_SEED: u64 = 5;

#[test]
fn naive_s1_finds_a_duplicate_ip_within_20_seeds() {
    let first = (0..20)
        .find(|seed| {
            breaks(
                &Whereabouts::run_blocking(Scenario::S1, Mode::Naive, *seed)
                    .unwrap()
                    .violations,
                Invariant::I1,
            )
        })
        .expect("a duplicate IP within the first 20 seeds");
    assert!(first <= NAIVE_SEED);
}

#[test]
fn the_named_naive_seed_reproduces_the_duplicate_every_time() {
    let runs: Vec<_> = (0..3)
        .map(|_| Whereabouts::run_blocking(Scenario::S1, Mode::Naive, NAIVE_SEED).unwrap())
        .collect();
    for r in &runs {
        assert!(breaks(&r.violations, Invariant::I1), "{:#?}", r.violations);
        assert!(breaks(&r.violations, Invariant::I2));
        assert_eq!(
            r.violations, runs[0].violations,
            "same seed, same violations"
        );
        assert_eq!(r.journal, runs[0].journal, "same seed, same history");
    }
    // The history shows the race: the reconciler freed an IP of a pod that
    // was still starting, and the next pod got it.
    let log: Vec<&str> = runs[0].journal.iter().map(|(_, e)| e.as_str()).collect();
    assert!(
        log.iter()
            .any(|e| e.starts_with("reconciler (naive): removed")),
        "{log:#?}"
    );
}

#[test]
fn upstream_s1_breaks_when_the_annotation_lags_more_than_750_ms() {
    let r = Whereabouts::run_blocking(Scenario::S1, Mode::Upstream, UPSTREAM_SEED).unwrap();
    assert!(breaks(&r.violations, Invariant::I1), "{:#?}", r.violations);
    // The victim was re-read three times (0.75 s) while Pending, then freed.
    assert!(
        r.journal
            .iter()
            .any(|(_, e)| e.starts_with("reconciler (upstream): removed"))
    );
}

#[test]
fn guarded_breaks_no_invariant_over_the_sweeps_seeds_of_every_scenario() {
    crate::common::guarded_holds_on_every_scenario::<Whereabouts>();
}

#[test]
fn a_crashed_node_leaks_nothing_and_a_stuck_pod_is_reclaimed_when_guarded() {
    for scenario in [Scenario::S2, Scenario::S3] {
        let r = Whereabouts::run_blocking(scenario, Mode::Guarded, 7).unwrap();
        assert!(r.violations.is_empty(), "{scenario}: {:#?}", r.violations);
        assert!(
            r.journal
                .iter()
                .any(|(_, e)| e.starts_with("reconciler (guarded): removed")),
            "{scenario}: the guarded reconciler did free the dead allocations"
        );
    }
}

#[test]
fn the_binary_prints_the_duplicate_and_exits_1_and_0_when_guarded() {
    let bin = env!("CARGO_BIN_EXE_whereabouts");
    let naive = Command::new(bin)
        .args([
            "scenario",
            "S1",
            "--mode",
            "naive",
            "--seed",
            &NAIVE_SEED.to_string(),
        ])
        .output()
        .unwrap();
    assert_eq!(naive.status.code(), Some(1));
    let out = String::from_utf8_lossy(&naive.stdout);
    assert!(out.contains("I1 (duplicate IP): VIOLATED"), "{out}");
    assert!(out.contains("is held by default/web-"), "{out}");
    assert!(
        out.contains("reconciler (naive): removed"),
        "the history is printed: {out}"
    );
    let guarded = Command::new(bin)
        .args([
            "scenario",
            "S1",
            "--mode",
            "guarded",
            "--seed",
            &NAIVE_SEED.to_string(),
        ])
        .output()
        .unwrap();
    assert_eq!(guarded.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&guarded.stdout).contains("all invariants hold"));
    let usage = Command::new(bin).args(["scenario", "S9"]).output().unwrap();
    assert_eq!(usage.status.code(), Some(2));
    let crds = Command::new(bin).arg("crds").output().unwrap();
    assert!(crds.status.success());
    let yaml = String::from_utf8_lossy(&crds.stdout);
    assert!(
        yaml.contains("ippools.whereabouts.cni.cncf.io") && yaml.contains("v1alpha1"),
        "{yaml}"
    );
}

#[test]
fn the_binaries_end_quietly_on_a_closed_pipe() {
    use std::process::Stdio;
    let seed = NAIVE_SEED.to_string();
    let runs: [(&str, &[&str], i32); 2] = [
        (
            env!("CARGO_BIN_EXE_whereabouts"),
            &["scenario", "S1", "--mode", "naive", "--seed", &seed],
            1,
        ),
        (
            env!("CARGO_BIN_EXE_ward-demo"),
            &["--seeds", "2", "--threads", "1"],
            0,
        ),
    ];
    for (bin, args, code) in runs {
        // `bin args | true`: the reader is gone before the first line, so
        // every write meets a closed pipe.
        let mut child = Command::new(bin)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{bin}: {stderr}");
        assert_eq!(out.status.code(), Some(code), "{bin}: {stderr}");
    }
}

#[test]
fn the_deployed_crd_is_the_one_the_binary_generates() {
    crate::common::crds_match(
        env!("CARGO_BIN_EXE_whereabouts"),
        include_str!("../../whereabouts/deploy/crd.yaml"),
    );
}
