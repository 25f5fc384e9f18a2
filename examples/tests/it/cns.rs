//! The CNS scenarios in simulated time, seeded: the naive agent never
//! recovers from the stale NNC (S1), upstream's merged fix holds S1 but not
//! an NC replaced inside a valid NNC (S2), and the guarded agent breaks no
//! invariant over the sweep's seeds (`common::seeds`, 100 by default) of every scenario.

use std::process::Command;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use ward_apiserver::{ApiServer, ServerConfig};
use ward_examples::cns::agent::{Cns, Mode};
use ward_examples::cns::cluster::{Host, Writer};
use ward_examples::cns::invariants::{Checker, Invariant, Violations};
use ward_examples::cns::kubelet::Kubelet;
use ward_examples::cns::model::POD_IP;
use ward_examples::cns::{AzureCns, NODE, install, writer_config};
use ward_examples::example::{Example, Report};
use ward_examples::journal::Journal;
use ward_examples::run::Scenario;

use crate::common::breaks;

/// Seeds on which the naive agent ingests the stale NNC and never recovers
/// (every S1 run restarts CNS inside the GC window, so every seed does).
const NAIVE_SEEDS: [u64; 3] = [0, 1, 2];

fn says(r: &Report<AzureCns>, prefix: &str) -> bool {
    r.journal.iter().any(|(_, e)| e.starts_with(prefix))
}

#[test]
fn naive_s1_ingests_the_stale_nnc_and_the_node_never_recovers() {
    for seed in NAIVE_SEEDS {
        let r = AzureCns::run_blocking(Scenario::S1, Mode::Naive, seed).unwrap();
        assert!(
            breaks(&r.violations, Invariant::I2),
            "seed {seed}: {:#?}",
            r.violations
        );
        assert!(
            breaks(&r.violations, Invariant::I4),
            "seed {seed}: {:#?}",
            r.violations
        );
        // The seed's steps: startup GET takes the stale NNC; the new NC's
        // IPs are "already present"; the pod's IP names the dropped NC.
        assert!(says(&r, "cns (naive): startup GET found NNC node-a"));
        assert!(says(&r, "cns (naive): dropped NC"));
        assert!(
            r.journal
                .iter()
                .any(|(_, e)| e.contains("0 IPs loaded, 16 already present")),
            "{:#?}",
            r.journal
        );
    }
}

#[test]
fn a_seed_replays_the_same_history() {
    let a = AzureCns::run_blocking(Scenario::S1, Mode::Naive, NAIVE_SEEDS[1]).unwrap();
    let b = AzureCns::run_blocking(Scenario::S1, Mode::Naive, NAIVE_SEEDS[1]).unwrap();
    assert_eq!(a.violations, b.violations);
    assert_eq!(a.journal, b.journal);
}

#[test]
fn upstreams_merged_fix_holds_s1_but_not_a_replaced_nc() {
    let s1 = AzureCns::run_blocking(Scenario::S1, Mode::Upstream, 3).unwrap();
    assert!(s1.violations.is_empty(), "{:#?}", s1.violations);
    assert!(says(&s1, "cns (upstream): NNC node-a is controlled by"));
    let s2 = AzureCns::run_blocking(Scenario::S2, Mode::Upstream, 3).unwrap();
    assert!(
        breaks(&s2.violations, Invariant::I1),
        "{:#?}",
        s2.violations
    );
    assert!(
        breaks(&s2.violations, Invariant::I2),
        "{:#?}",
        s2.violations
    );
}

#[test]
fn guarded_skips_the_stale_nnc_and_purges_a_replaced_nc() {
    let s1 = AzureCns::run_blocking(Scenario::S1, Mode::Guarded, 3).unwrap();
    assert!(s1.violations.is_empty(), "{:#?}", s1.violations);
    assert!(
        says(&s1, "cns (guarded): guard owner-uid skipped NNC"),
        "{:#?}",
        s1.journal
    );
    let s2 = AzureCns::run_blocking(Scenario::S2, Mode::Guarded, 3).unwrap();
    assert!(s2.violations.is_empty(), "{:#?}", s2.violations);
    assert!(
        s2.journal
            .iter()
            .any(|(_, e)| e.contains("purged, 5 assigned moved")),
        "the five pods keep their IPs under the new NC: {:#?}",
        s2.journal
    );
    let s3 = AzureCns::run_blocking(Scenario::S3, Mode::Guarded, 3).unwrap();
    assert!(s3.violations.is_empty(), "{:#?}", s3.violations);
    assert!(says(&s3, "cns (guarded): restored default/web-0-0"));
}

#[test]
fn guarded_breaks_no_invariant_over_the_sweeps_seeds_of_every_scenario() {
    crate::common::guarded_holds_on_every_scenario::<AzureCns>();
}

/// I3 is not vacuous: two live pods recording one address break it.
#[tokio::test(start_paused = true)]
async fn the_checker_sees_one_ip_held_by_two_live_pods() {
    let server = ApiServer::start_in_process().await;
    let client = server.client();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    for name in ["p1", "p2"] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": {POD_IP: "10.244.1.3"}},
            "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "c"}]}}))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    let (checker, violations) = checker(&server, client);
    checker.check();
    let v = violations.all();
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_eq!(v[0].invariant, Invariant::I3);
    assert!(v[0].detail.contains("default/p1 and default/p2"), "{v:#?}");
}

fn checker(server: &ApiServer, client: kube::Client) -> (Checker, Violations) {
    let journal = Journal::new();
    let violations = Violations::new(journal.clone());
    let kubelet = Kubelet::new(client, NODE, journal.clone(), violations.clone());
    let checker = Checker {
        store: server.store().clone(),
        node: NODE.into(),
        cns: Cns::new(NODE, Mode::Guarded, kubelet.sandboxes(), journal),
        host: Host::default(),
        waiting: kubelet.waiting(),
        sandboxes: kubelet.sandboxes(),
        violations: violations.clone(),
        parsed: Default::default(),
    };
    (checker, violations)
}

/// I3 counts the data plane: two sandboxes holding one address break it
/// with no pod record naming it; a terminating pod's record does not (its
/// sandbox may be torn down and its address handed on before the
/// kubelet's final delete).
#[tokio::test(start_paused = true)]
async fn the_checker_sees_one_ip_in_two_sandboxes_but_not_in_a_terminating_record() {
    let server = ApiServer::start_in_process().await;
    let client = server.client();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    for name in ["old", "new"] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": {POD_IP: "10.244.1.3"}},
            "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "c"}]}}))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    pods.delete("old", &DeleteParams::default().grace_period(30))
        .await
        .unwrap();
    let (checker, violations) = checker(&server, client);
    checker.check();
    assert!(violations.all().is_empty(), "{:#?}", violations.all());
    {
        let mut s = checker.sandboxes.lock().unwrap();
        s.insert("default/a".into(), "10.244.1.7".into());
        s.insert("default/b".into(), "10.244.1.7".into());
    }
    checker.check();
    let v = violations.all();
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_eq!(v[0].invariant, Invariant::I3);
    assert!(
        v[0].detail
            .contains("the sandboxes of default/a and default/b both hold 10.244.1.7"),
        "{v:#?}"
    );
}

/// The leak I5 judges, made on purpose: the kubelet tears pod web-0 down
/// (terminating, then CNI DEL), CNS restarts, then the kubelet's final
/// delete. Restoring from the pods' records (naive, upstream) brings the
/// terminating pod's address back and nothing ever releases it; restoring
/// from the node's CNI state (guarded) does not — and neither leaks the
/// address of web-1, which keeps running.
#[test]
fn a_restart_between_cni_del_and_the_final_delete_leaks_only_from_the_records() {
    for (mode, leaks) in [
        (Mode::Naive, true),
        (Mode::Upstream, true),
        (Mode::Guarded, false),
    ] {
        let found = ward_examples::run::simulate(|| restart_between_del_and_delete(mode));
        assert_eq!(found.len(), usize::from(leaks), "{mode}: {found:#?}");
        if leaks {
            assert!(
                found[0].contains("for default/web-0, which has no sandbox"),
                "{found:#?}"
            );
        }
    }
}

/// The I5 violations of one run of that script in `mode`.
async fn restart_between_del_and_delete(mode: Mode) -> Vec<String> {
    let server = ApiServer::start(ServerConfig::default().seed(7))
        .await
        .unwrap();
    let client = server.client();
    install(&client).await.unwrap();
    let journal = Journal::new();
    let violations = Violations::new(journal.clone());
    let host = Host::default();
    let mut node = Node::default();
    node.metadata.name = Some(NODE.into());
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
    let writer = Writer::new(
        client.clone(),
        host.clone(),
        writer_config(7),
        journal.clone(),
    );
    let kubelet = Kubelet::new(client.clone(), NODE, journal.clone(), violations.clone());
    let cns = Cns::new(NODE, mode, kubelet.sandboxes(), journal.clone());
    let mut tasks = vec![
        tokio::spawn(writer.run()),
        tokio::spawn(kubelet.clone().run(cns.clone())),
    ];
    let agent = || {
        tokio::spawn({
            let (cns, client, host) = (cns.clone(), client.clone(), host.clone());
            async move { cns.run(client, host).await.unwrap() }
        })
    };
    let first = agent();
    for name in ["web-0", "web-1"] {
        kubelet.create(name).await.unwrap();
    }
    let mut waiting = kubelet.waiting().subscribe();
    tokio::time::timeout(Duration::from_secs(60), waiting.wait_for(|w| w.is_empty()))
        .await
        .expect("both pods get an address")
        .unwrap();
    let uid = kubelet.tear_down(&cns, "web-0").await.unwrap();
    first.abort();
    let _ = first.await;
    cns.reset();
    tasks.push(agent());
    let restarted = async {
        while !cns.state().ready {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), restarted)
        .await
        .expect("CNS serves again");
    kubelet.remove("web-0", uid).await.unwrap();
    // I5's bound: 90 s after the last step.
    tokio::time::sleep(Duration::from_secs(90)).await;
    let checker = Checker {
        store: server.store().clone(),
        node: NODE.into(),
        cns: cns.clone(),
        host,
        waiting: kubelet.waiting(),
        sandboxes: kubelet.sandboxes(),
        violations: violations.clone(),
        parsed: Default::default(),
    };
    checker.settled();
    for t in tasks {
        t.abort();
    }
    violations
        .all()
        .into_iter()
        .filter(|v| v.invariant == Invariant::I5)
        .map(|v| v.detail)
        .collect()
}

#[test]
fn the_binary_shows_the_node_that_never_recovers_and_exits_1_and_0_when_guarded() {
    let bin = env!("CARGO_BIN_EXE_cns");
    let seed = NAIVE_SEEDS[0].to_string();
    let naive = Command::new(bin)
        .args(["scenario", "S1", "--mode", "naive", "--seed", &seed])
        .output()
        .unwrap();
    assert_eq!(naive.status.code(), Some(1));
    let out = String::from_utf8_lossy(&naive.stdout);
    assert!(out.contains("I4 (node never recovers): VIOLATED"), "{out}");
    assert!(
        out.contains("startup GET found NNC node-a"),
        "the history is printed: {out}"
    );
    let guarded = Command::new(bin)
        .args(["scenario", "S1", "--mode", "guarded", "--seed", &seed])
        .output()
        .unwrap();
    assert_eq!(guarded.status.code(), Some(0));
    let out = String::from_utf8_lossy(&guarded.stdout);
    assert!(out.contains("all invariants hold"), "{out}");
    assert!(out.contains("guard owner-uid skipped"), "{out}");
    let usage = Command::new(bin).args(["scenario", "S9"]).output().unwrap();
    assert_eq!(usage.status.code(), Some(2));
}

#[test]
fn the_deployed_crd_is_the_one_the_binary_generates() {
    crate::common::crds_match(
        env!("CARGO_BIN_EXE_cns"),
        include_str!("../../cns/deploy/crd.yaml"),
    );
}
