//! The LWS scenarios in simulated time, seeded: the naive controller takes
//! a revision from the terminating StatefulSet (S1), upstream #733 holds S1
//! but not the StatefulSet the GC has not reached (S2), and the guarded
//! controller breaks no invariant over the sweep's seeds (`common::seeds`, 100 by default) of every scenario, and
//! settles a template change as fast as naive (S3).

use std::process::Command;

use ward_examples::example::{Example, Report};
use ward_examples::lws::Lws;
use ward_examples::lws::controller::Mode;
use ward_examples::lws::invariants::Invariant;
use ward_examples::run::Scenario;

use crate::common::breaks;

/// Seeds on which S1's naive controller takes the terminating
/// StatefulSet's hash (every S1 run recreates inside the window).
const NAIVE_SEEDS: [u64; 3] = [0, 1, 2];
/// A seed on which the GC removes the old revisions before the old
/// StatefulSet, so #733's deletionTimestamp check has nothing to see.
const UPSTREAM_SEED: u64 = 1;

fn says(r: &Report<Lws>, needle: &str) -> bool {
    r.journal.iter().any(|(_, e)| e.contains(needle))
}

#[test]
fn naive_s1_creates_a_revision_with_the_terminating_statefulsets_hash() {
    for seed in NAIVE_SEEDS {
        let r = Lws::run_blocking(Scenario::S1, Mode::Naive, seed).unwrap();
        assert!(
            breaks(&r.violations, Invariant::I1),
            "seed {seed}: {:#?}",
            r.violations
        );
        assert!(
            breaks(&r.violations, Invariant::I4),
            "seed {seed}: {:#?}",
            r.violations
        );
        assert!(says(&r, "(the hash of StatefulSet uid"), "{:#?}", r.journal);
    }
}

#[test]
fn a_seed_replays_the_same_history() {
    let a = Lws::run_blocking(Scenario::S2, Mode::Naive, UPSTREAM_SEED).unwrap();
    let b = Lws::run_blocking(Scenario::S2, Mode::Naive, UPSTREAM_SEED).unwrap();
    assert_eq!(a.violations, b.violations);
    assert_eq!(a.journal, b.journal);
}

#[test]
fn upstream_733_holds_s1_but_not_a_statefulset_the_gc_has_not_reached() {
    let s1 = Lws::run_blocking(Scenario::S1, Mode::Upstream, UPSTREAM_SEED).unwrap();
    assert!(s1.violations.is_empty(), "{:#?}", s1.violations);
    assert!(says(&s1, "StatefulSet is terminating; requeue"));
    let s2 = Lws::run_blocking(Scenario::S2, Mode::Upstream, UPSTREAM_SEED).unwrap();
    assert!(
        breaks(&s2.violations, Invariant::I1),
        "{:#?}",
        s2.violations
    );
    assert!(
        says(&s2, "(the hash of StatefulSet uid"),
        "{:#?}",
        s2.journal
    );
}

#[test]
fn guarded_waits_for_the_old_statefulset_and_writes_only_its_own() {
    for scenario in [Scenario::S1, Scenario::S2] {
        let r = Lws::run_blocking(scenario, Mode::Guarded, UPSTREAM_SEED).unwrap();
        assert!(r.violations.is_empty(), "{scenario}: {:#?}", r.violations);
        assert!(
            !says(&r, "(the hash of StatefulSet uid"),
            "{:#?}",
            r.journal
        );
        assert!(r.measured.settled_after.is_some());
    }
}

#[test]
fn the_guard_does_not_slow_a_template_change() {
    for seed in 0..5 {
        let naive = Lws::run_blocking(Scenario::S3, Mode::Naive, seed).unwrap();
        let guarded = Lws::run_blocking(Scenario::S3, Mode::Guarded, seed).unwrap();
        assert!(guarded.violations.is_empty(), "{:#?}", guarded.violations);
        assert!(naive.measured.settled_after.is_some());
        assert_eq!(
            naive.measured.settled_after, guarded.measured.settled_after,
            "seed {seed}"
        );
    }
}

#[test]
fn guarded_breaks_no_invariant_over_the_sweeps_seeds_of_every_scenario() {
    crate::common::guarded_holds_on_every_scenario::<Lws>();
}

#[test]
fn the_binary_shows_the_foreign_revision_and_exits_1_and_0_when_guarded() {
    let bin = env!("CARGO_BIN_EXE_lws");
    let seed = UPSTREAM_SEED.to_string();
    let upstream = Command::new(bin)
        .args(["scenario", "S2", "--mode", "upstream", "--seed", &seed])
        .output()
        .unwrap();
    assert_eq!(upstream.status.code(), Some(1));
    let out = String::from_utf8_lossy(&upstream.stdout);
    assert!(
        out.contains("I1 (revision with a foreign hash): VIOLATED"),
        "{out}"
    );
    let guarded = Command::new(bin)
        .args(["scenario", "S2", "--mode", "guarded", "--seed", &seed])
        .output()
        .unwrap();
    assert_eq!(guarded.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&guarded.stdout).contains("all invariants hold"));
    let usage = Command::new(bin).args(["scenario", "S9"]).output().unwrap();
    assert_eq!(usage.status.code(), Some(2));
}

#[test]
fn the_deployed_crd_is_the_one_the_binary_generates() {
    crate::common::crds_match(
        env!("CARGO_BIN_EXE_lws"),
        include_str!("../../lws/deploy/crd.yaml"),
    );
}

#[test]
fn the_production_guide_shows_the_deployment_and_lease_rbac_as_shipped() {
    let guide = include_str!("../../../docs/production.md");
    let deployment = include_str!("../../lws/deploy/deployment.yaml");
    assert!(guide.contains(&format!("```yaml\n{deployment}```")));
    let rbac = include_str!("../../lws/deploy/rbac.yaml");
    assert!(rbac.contains("resources: [leases]"));
    assert!(
        guide.contains(&format!("```yaml\n{rbac}```")),
        "docs/production.md lacks rbac.yaml as shipped"
    );
}

/// One GET over a fresh connection; the status and body.
fn http_get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw)?;
    let status = raw
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = raw.split_once("\r\n\r\n").map(|(_, b)| b.to_string());
    Ok((status, body.unwrap_or_default()))
}

/// The binary as a Deployment runs it (leader election, the endpoint),
/// on its embedded server: ready, leading, and on SIGTERM it releases the
/// Lease and exits 0. Real time: every wait is bounded.
#[test]
fn the_binary_behind_leader_election_is_ready_and_releases_on_sigterm() {
    run_until_sigterm(
        &["--leader-elect"],
        r#"ward_leader{lease="default/ward-lws",identity="e2e"} 1"#,
        "released the Lease",
    );
}

/// The same as one replica of a sharded ring: ready, holding every slot
/// (alone in the ring), and on SIGTERM it leaves the ring and exits 0.
#[test]
fn the_binary_as_a_shard_member_is_ready_and_leaves_on_sigterm() {
    run_until_sigterm(
        &["--shard", "lws"],
        r#"ward_shard_slots_owned{ring="lws",identity="e2e"} 128"#,
        "left the ring",
    );
}

/// Run the binary with `mode` on its embedded server until ready and
/// synced with `metric` showing, then SIGTERM it: it prints `last` and
/// exits 0.
fn run_until_sigterm(mode: &[&str], metric: &str, last: &str) {
    use std::io::BufRead;
    use std::time::{Duration, Instant};
    let kubeconfig =
        std::env::temp_dir().join(format!("lws-e2e-{}.kubeconfig", std::process::id()));
    /// Kills the child if the test fails before it exits.
    struct Reap(std::process::Child);
    impl Drop for Reap {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = Reap(
        Command::new(env!("CARGO_BIN_EXE_lws"))
            .arg("run")
            .args(mode)
            .args(["--identity", "e2e"])
            .args(["--metrics-addr", "127.0.0.1:0", "--kubeconfig"])
            .arg(&kubeconfig)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.0.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let next_line = || rx.recv_timeout(deadline.saturating_duration_since(Instant::now()));
    let addr = loop {
        let line = next_line().expect("the endpoint's address");
        if let Some(a) = line.strip_prefix("serving /metrics, /healthz and /readyz on http://") {
            break a.to_string();
        }
    };
    // Ready once it answers the Lease — a follower is ready too, so /readyz
    // can pass before the leader's controller has registered its own check.
    // The controller is up once its synced check reports 1 in /metrics.
    let synced = r#"ward_ready{check="synced/LeaderWorkerSet"} 1"#;
    let metrics = loop {
        let (status, body) = http_get(&addr, "/readyz").unwrap();
        if status == 200 {
            let (_, metrics) = http_get(&addr, "/metrics").unwrap();
            if metrics.contains(synced) && metrics.contains(metric) {
                break metrics;
            }
        }
        assert!(Instant::now() < deadline, "never ready and synced: {body}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        metrics.contains("# TYPE ward_reconcile_duration_seconds histogram"),
        "{metrics}"
    );
    let kill = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let released = loop {
        match next_line() {
            Ok(line) if line == last => break true,
            Ok(_) => {}
            Err(_) => break false,
        }
    };
    let status = loop {
        if let Some(s) = child.0.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "still running after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = std::fs::remove_file(&kubeconfig);
    assert!(released, "no {last:?} after SIGTERM");
    assert_eq!(status.code(), Some(0));
}
