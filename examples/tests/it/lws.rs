//! The LWS scenarios in simulated time, seeded: the naive controller takes
//! a revision from the terminating StatefulSet (S1), upstream #733 holds S1
//! but not the StatefulSet the GC has not reached (S2), and the guarded
//! controller breaks no invariant over the sweep's seeds (`common::seeds`, 100 by default) of every scenario, and
//! settles a template change as fast as naive (S3).

use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use serde_json::json;
use ward_apiserver::ApiServer;
use ward_examples::example::{Example, Report};
use ward_examples::journal::Journal;
use ward_examples::lws::controller::{self, Mode};
use ward_examples::lws::invariants::{Checker, Invariant, Violations};
use ward_examples::lws::model::{LeaderWorkerSet, LeaderWorkerSetSpec};
use ward_examples::lws::scenario::{NAME, template};
use ward_examples::lws::{Lws, NAMESPACE, install};
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

fn two_groups_of_two() -> LeaderWorkerSet {
    LeaderWorkerSet::new(
        NAME,
        LeaderWorkerSetSpec {
            replicas: 2,
            leader_worker_template: template("v1"),
            rollout_strategy: Default::default(),
        },
    )
}

/// The I5 violations the checker finds in the store now (the settled
/// checks also judge I2 and I3, which these tests do not set up for).
fn i5(server: &ApiServer) -> Vec<String> {
    let violations = Violations::new(Journal::new());
    Checker::new(server.store().clone(), violations.clone()).settled();
    violations
        .all()
        .into_iter()
        .filter(|v| v.invariant == Invariant::I5)
        .map(|v| v.detail)
        .collect()
}

/// Wait (60 s of simulated time at most) until the LWS's status says
/// `ready` groups and `Available` as `available`.
async fn status_says(api: &Api<LeaderWorkerSet>, ready: i32, available: bool) {
    let says = await_condition(api.clone(), NAME, move |l: Option<&LeaderWorkerSet>| {
        l.and_then(|l| l.status.as_ref()).is_some_and(|s| {
            let on = |t: &str| {
                s.conditions
                    .iter()
                    .any(|c| c["type"] == t && c["status"] == "True")
            };
            s.ready_replicas == ready
                && on("Available") == available
                && on("Progressing") != available
        })
    });
    let got = tokio::time::timeout(Duration::from_secs(60), says).await;
    assert!(
        matches!(got, Ok(Ok(_))),
        "the status never said {ready} ready, Available {available}: {:?}",
        api.get(NAME).await.unwrap().status
    );
}

/// Group `i`'s leader pod (controlled by the leader StatefulSet `owner`) and
/// worker StatefulSet (controlled by that pod), created and marked as a
/// cluster's StatefulSet controller, kubelet and LWS pod controller would:
/// the pod Running with Ready `ready`, the workers all ready.
async fn group(client: &kube::Client, owner: &StatefulSet, i: i32, ready: bool) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), NAMESPACE);
    let name = format!("{NAME}-{i}");
    let labels = json!({"leaderworkerset.sigs.k8s.io/name": NAME,
                        "leaderworkerset.sigs.k8s.io/worker-index": "0"});
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels,
                     "ownerReferences": [owner.controller_owner_ref(&()).unwrap()]},
        "spec": {"containers": [{"name": "worker", "image": "v1"}]}}))
    .unwrap();
    let pod = pods.create(&PostParams::default(), &pod).await.unwrap();
    mark_pod(&pods, &name, ready).await;
    let workers: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"leaderworkerset.sigs.k8s.io/name": NAME},
                     "ownerReferences": [pod.controller_owner_ref(&()).unwrap()]},
        "spec": {"replicas": 1, "serviceName": NAME,
                 "selector": {"matchLabels": {"group": name}},
                 "template": {"metadata": {"labels": {"group": name}},
                              "spec": {"containers": [{"name": "worker", "image": "v1"}]}}}}))
    .unwrap();
    sets.create(&PostParams::default(), &workers).await.unwrap();
    let status = json!({"status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1}});
    sets.patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
}

/// Mark pod `name` Running, with condition Ready `ready`.
async fn mark_pod(pods: &Api<Pod>, name: &str, ready: bool) {
    let status = json!({"status": {"phase": "Running",
        "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
}

/// The status tells what the children show: 0 of 2 groups and Progressing
/// while none is ready; Available once both groups' leader pods and worker
/// StatefulSets are; Progressing again when a leader stops being Ready —
/// each change of a child updates it, and I5 holds at every step.
#[tokio::test(start_paused = true)]
async fn the_status_counts_the_groups_its_children_show_ready() {
    let server = ApiServer::start_in_process().await;
    let client = server.client();
    install(&client).await.unwrap();
    let ctl = tokio::spawn(controller::run(
        client.clone(),
        NAMESPACE,
        Mode::Guarded,
        Journal::new(),
    ));
    let api: Api<LeaderWorkerSet> = Api::namespaced(client.clone(), NAMESPACE);
    api.create(&PostParams::default(), &two_groups_of_two())
        .await
        .unwrap();
    status_says(&api, 0, false).await;
    assert_eq!(i5(&server), Vec::<String>::new());
    let leader = Api::<StatefulSet>::namespaced(client.clone(), NAMESPACE)
        .get(NAME)
        .await
        .unwrap();
    group(&client, &leader, 0, true).await;
    status_says(&api, 1, false).await;
    group(&client, &leader, 1, true).await;
    status_says(&api, 2, true).await;
    assert_eq!(i5(&server), Vec::<String>::new());
    mark_pod(
        &Api::namespaced(client.clone(), NAMESPACE),
        &format!("{NAME}-1"),
        false,
    )
    .await;
    status_says(&api, 1, false).await;
    assert_eq!(i5(&server), Vec::<String>::new());
    ctl.abort();
}

/// I5 is not vacuous: the status the controller wrote before it counted
/// its children — every group ready and Available as soon as the revision
/// was current — breaks it when no child is ready.
#[tokio::test(start_paused = true)]
async fn the_checker_sees_a_status_claiming_groups_no_child_shows() {
    let server = ApiServer::start_in_process().await;
    let client = server.client();
    install(&client).await.unwrap();
    let api: Api<LeaderWorkerSet> = Api::namespaced(client.clone(), NAMESPACE);
    api.create(&PostParams::default(), &two_groups_of_two())
        .await
        .unwrap();
    let claims = |ready: i32, available: &str| {
        json!({"status": {"replicas": 2, "readyReplicas": ready, "conditions": [
            {"type": "Available", "status": available, "reason": "AllGroupsReady",
             "message": "All replicas are ready"}]}})
    };
    for (ready, available, broken) in [
        (2, "True", true),
        (0, "True", true),
        (1, "False", true),
        (0, "False", false),
    ] {
        api.patch_status(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(claims(ready, available)),
        )
        .await
        .unwrap();
        let found = i5(&server);
        assert_eq!(
            !found.is_empty(),
            broken,
            "{ready} ready, Available {available}: {found:?}"
        );
    }
    api.patch_status(
        NAME,
        &PatchParams::default(),
        &Patch::Merge(claims(2, "True")),
    )
    .await
    .unwrap();
    assert_eq!(
        i5(&server),
        ["LWS test says readyReplicas 2 and Available but its children show 0 of 2 groups ready"]
    );
}

/// `kubectl` from PATH; None (the test skipped) when it is not installed,
/// unless `WARD_REQUIRE_KUBECTL=1` makes that a failure.
fn kubectl() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var("WARD_REQUIRE_KUBECTL").as_deref() != Ok("1"),
            "kubectl is not on PATH (WARD_REQUIRE_KUBECTL=1)"
        );
        println!("skipped: kubectl is not on PATH");
    }
    found
}

/// As a new user would: `lws run` on its embedded server, a
/// LeaderWorkerSet applied with kubectl. No StatefulSet controller runs
/// there, so no group is ready and kubectl shows 0 and Progressing; once
/// the children are marked ready through the API (as a cluster's
/// controllers and kubelet would), it shows 2 and Available.
#[test]
fn live_with_kubectl_the_status_shows_what_the_children_show() {
    let Some(kubectl) = kubectl() else { return };
    let live = Live::start("e2e-kubectl", &[]);
    live.ready_with(&[r#"ward_ready{check="synced/LeaderWorkerSet"} 1"#]);
    let home = live.kubeconfig.with_extension("home");
    let run = |args: &[&str], stdin: Option<String>| {
        use std::io::Write;
        let mut child = Command::new(&kubectl)
            .args(args)
            .arg("--request-timeout=30s")
            .env("KUBECONFIG", &live.kubeconfig)
            .env("HOME", &home)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        input
            .write_all(stdin.unwrap_or_default().as_bytes())
            .unwrap();
        drop(input);
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let json = |v: serde_json::Value| Some(v.to_string());
    run(
        &["apply", "-f", "-"],
        json(serde_json::to_value(two_groups_of_two()).unwrap()),
    );
    let shown = "-o=jsonpath={.status.readyReplicas} {.status.conditions[?(@.type=='Available')].status} {.status.conditions[?(@.type=='Progressing')].reason}";
    let wait_for = |want: &str| loop {
        let got = run(&["get", "lws", NAME, shown], None);
        if got == want {
            return;
        }
        assert!(
            std::time::Instant::now() < live.deadline,
            "kubectl never showed {want:?}; last {got:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    wait_for("0 False GroupsAreProgressing");
    let leader = run(
        &["get", "statefulset", NAME, "-o=jsonpath={.metadata.uid}"],
        None,
    );
    for i in 0..2 {
        let name = format!("{NAME}-{i}");
        let owner = |kind: &str, api: &str, name: &str, uid: &str| json!([{"apiVersion": api, "kind": kind, "name": name, "uid": uid, "controller": true}]);
        run(
            &["apply", "-f", "-"],
            json(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"leaderworkerset.sigs.k8s.io/name": NAME,
                                                  "leaderworkerset.sigs.k8s.io/worker-index": "0"},
                         "ownerReferences": owner("StatefulSet", "apps/v1", NAME, &leader)},
            "spec": {"containers": [{"name": "worker", "image": "v1"}]}})),
        );
        run(
            &[
                "patch",
                "pod",
                &name,
                "--subresource=status",
                "--type=merge",
                "-p",
                r#"{"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}"#,
            ],
            None,
        );
        let pod = run(&["get", "pod", &name, "-o=jsonpath={.metadata.uid}"], None);
        run(
            &["apply", "-f", "-"],
            json(json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "labels": {"leaderworkerset.sigs.k8s.io/name": NAME},
                         "ownerReferences": owner("Pod", "v1", &name, &pod)},
            "spec": {"replicas": 1, "serviceName": NAME, "selector": {"matchLabels": {"group": name}},
                     "template": {"metadata": {"labels": {"group": name}},
                                  "spec": {"containers": [{"name": "worker", "image": "v1"}]}}}})),
        );
        run(
            &[
                "patch",
                "statefulset",
                &name,
                "--subresource=status",
                "--type=merge",
                "-p",
                r#"{"status": {"replicas": 1, "readyReplicas": 1}}"#,
            ],
            None,
        );
    }
    wait_for("2 True AllGroupsReady");
    let _ = std::fs::remove_dir_all(&home);
}

/// `--kubeconfig` names where the embedded server's kubeconfig goes; a
/// file there that an embedded server did not write (a user's own) is
/// refused with the way to run against it, and left as it was.
#[test]
fn run_never_overwrites_a_kubeconfig_it_did_not_write() {
    let theirs = std::env::temp_dir().join(format!("lws-theirs-{}.kubeconfig", std::process::id()));
    let text = "apiVersion: v1\nkind: Config\nclusters:\n- name: prod\n  cluster:\n    server: https://10.0.0.1:6443\n";
    std::fs::write(&theirs, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lws"))
        .args(["run", "--metrics-addr", "127.0.0.1:0", "--kubeconfig"])
        .arg(&theirs)
        .output()
        .unwrap();
    let kept = std::fs::read_to_string(&theirs).unwrap();
    let _ = std::fs::remove_file(&theirs);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is not a kubeconfig an embedded ward-apiserver wrote"),
        "{err}"
    );
    assert!(err.contains("run --cluster"), "{err}");
    assert_eq!(kept, text);
}

/// #44's process case: two `lws run --shard` replicas on the first one's
/// embedded server (which filters by shard, KEP-5866); the second is
/// killed (SIGKILL) and LeaderWorkerSets are created at once, about half
/// of them in its slots. The survivor takes those slots over once the dead
/// one's Lease has expired, and every LeaderWorkerSet gets its StatefulSet:
/// the survivor's fresh-reading guard never reads one as gone.
#[test]
fn a_sharded_replica_takes_over_what_a_killed_one_held() {
    let slots =
        |who: &str, n: u32| format!(r#"ward_shard_slots_owned{{ring="lws",identity="{who}"}} {n}"#);
    let synced = r#"ward_ready{check="synced/LeaderWorkerSet"} 1"#;
    // Short Leases: the survivor takes over ~5 s after the kill, not ~20.
    let args = [
        "--shard",
        "lws",
        "--lease-duration",
        "4",
        "--renew-every",
        "1",
    ];
    let a = Live::start("shard-a", &args);
    a.ready_with(&[synced, &slots("shard-a", 128)]);
    let mut b = Live::start_on("shard-b", &args, Some(&a.kubeconfig));
    b.ready_with(&[synced, &slots("shard-b", 64)]);
    a.ready_with(&[&slots("shard-a", 64)]);
    b.child.kill().unwrap();
    b.child.wait().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let missing = runtime.block_on(async {
        let kubeconfig = kube::config::Kubeconfig::read_from(&a.kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let api: Api<LeaderWorkerSet> = Api::namespaced(client.clone(), NAMESPACE);
        let sets: Api<StatefulSet> = Api::namespaced(client, NAMESPACE);
        let names: Vec<String> = (0..8).map(|i| format!("late-{i}")).collect();
        for name in &names {
            let mut l = two_groups_of_two();
            l.metadata.name = Some(name.clone());
            api.create(&PostParams::default(), &l).await.unwrap();
        }
        // The Lease expires, a round takes its slots, the reconciles run:
        // well within a minute.
        let every = async {
            for name in &names {
                let exists = |s: Option<&StatefulSet>| s.is_some();
                await_condition(sets.clone(), name, exists).await.unwrap();
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(60), every).await;
        let mut missing = Vec::new();
        for name in names {
            if sets.get_opt(&name).await.unwrap().is_none() {
                missing.push(name);
            }
        }
        missing
    });
    assert!(
        missing.is_empty(),
        "no StatefulSet for {missing:?} a minute after the kill"
    );
    a.ready_with(&[&slots("shard-a", 128)]);
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

/// The `lws run` binary on an embedded server of its own, killed (and its
/// kubeconfig removed) when dropped. Real time: every wait is bounded by
/// `deadline`.
struct Live {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    kubeconfig: std::path::PathBuf,
    deadline: std::time::Instant,
    /// Where it serves /metrics, /healthz and /readyz.
    addr: String,
}

impl Live {
    /// Start it with `args` after `run`, and wait until it serves its
    /// endpoint.
    fn start(name: &str, args: &[&str]) -> Live {
        Live::start_on(name, args, None)
    }

    /// [`start`](Self::start) with `--identity name`; with `cluster`, as a
    /// replica of the embedded server that kubeconfig names (`--cluster`).
    fn start_on(name: &str, args: &[&str], cluster: Option<&std::path::Path>) -> Live {
        use std::io::BufRead;
        let kubeconfig =
            std::env::temp_dir().join(format!("lws-{name}-{}.kubeconfig", std::process::id()));
        let mut command = Command::new(env!("CARGO_BIN_EXE_lws"));
        command.arg("run").args(args).args(["--identity", name]);
        if let Some(kc) = cluster {
            command.arg("--cluster").env("KUBECONFIG", kc);
        }
        let mut child = command
            .args(["--metrics-addr", "127.0.0.1:0", "--kubeconfig"])
            .arg(&kubeconfig)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                let _ = tx.send(line);
            }
        });
        let mut live = Live {
            child,
            lines,
            kubeconfig,
            deadline: std::time::Instant::now() + std::time::Duration::from_secs(60),
            addr: String::new(),
        };
        live.addr = loop {
            let line = live.next_line().expect("the endpoint's address");
            if let Some(a) = line.strip_prefix("serving /metrics, /healthz and /readyz on http://")
            {
                break a.to_string();
            }
        };
        live
    }

    /// Its next line on stdout, until the deadline.
    fn next_line(&self) -> Result<String, std::sync::mpsc::RecvTimeoutError> {
        self.lines.recv_timeout(
            self.deadline
                .saturating_duration_since(std::time::Instant::now()),
        )
    }

    /// Wait until `/readyz` answers 200 and `/metrics` shows every one of
    /// `lines`; the metrics then.
    fn ready_with(&self, lines: &[&str]) -> String {
        loop {
            let (status, body) = http_get(&self.addr, "/readyz").unwrap();
            if status == 200 {
                let (_, metrics) = http_get(&self.addr, "/metrics").unwrap();
                if lines.iter().all(|l| metrics.contains(l)) {
                    return metrics;
                }
            }
            assert!(
                std::time::Instant::now() < self.deadline,
                "never ready and synced: {body}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// SIGTERM it; its exit status.
    fn terminate(&mut self) -> std::process::ExitStatus {
        let kill = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(
                std::time::Instant::now() < self.deadline,
                "still running after SIGTERM"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.kubeconfig);
    }
}

/// Run the binary with `mode` on its embedded server until ready and
/// synced with `metric` showing, then SIGTERM it: it prints `last` and
/// exits 0.
fn run_until_sigterm(mode: &[&str], metric: &str, last: &str) {
    let mut live = Live::start("e2e", mode);
    // Ready once it answers the Lease — a follower is ready too, so /readyz
    // can pass before the leader's controller has registered its own check.
    // The controller is up once its synced check reports 1 in /metrics.
    let synced = r#"ward_ready{check="synced/LeaderWorkerSet"} 1"#;
    let metrics = live.ready_with(&[synced, metric]);
    assert!(
        metrics.contains("# TYPE ward_reconcile_duration_seconds histogram"),
        "{metrics}"
    );
    let status = live.terminate();
    let released = std::iter::from_fn(|| live.next_line().ok()).any(|l| l == last);
    assert!(released, "no {last:?} after SIGTERM");
    assert_eq!(status.code(), Some(0));
}
