//! Exact replay of controllers whose reconciles end at the same simulated
//! instant by construction — a plain kube-runtime `Controller` and a
//! `GuardedController` — with every perturbation kind: every reconcile
//! takes the same fixed time, several parents change at once, and each
//! reconcile applies an owned child and writes its parent's status. With
//! tokio's paused clock "at the same instant" is the common case, so which
//! reconcile's write goes first is decided by everything that orders
//! ready work (the runtime, kube-runtime's runner and scheduler, the
//! server's watch fan-out), and must be decided alike on every run of a
//! seed: here, with runs of the other controller in between, and in
//! other processes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::json;
use ward_apiserver::{ApiServer, ServerConfig};
use ward_base::{Rng, fnv1a};
use ward_campaign::{Perturber, Plan, perturbations::builtin, simulate};
use ward_guards::await_deletion::AwaitDeletion;
use ward_runtime::GuardedController;

const PARENTS: usize = 4;
const HORIZON: Duration = Duration::from_secs(10);
/// Every reconcile's fixed duration.
const WORK: Duration = Duration::from_millis(300);

async fn reconcile(d: Arc<Deployment>, client: Arc<kube::Client>) -> Result<Action, kube::Error> {
    tokio::time::sleep(WORK).await;
    let ns = d.namespace().unwrap_or_default();
    let name = d.name_any();
    let generation = d.metadata.generation.unwrap_or_default();
    let owner = d.controller_owner_ref(&()).expect("a stored Deployment");
    let child = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("{name}-copy"), "ownerReferences": [owner]},
        "data": {"generation": generation.to_string()},
    });
    Api::<ConfigMap>::namespaced((*client).clone(), &ns)
        .patch(
            &format!("{name}-copy"),
            &PatchParams::apply("copier").force(),
            &Patch::Apply(&child),
        )
        .await?;
    let status = json!({"status": {"observedGeneration": generation, "replicas": 0}});
    Api::<Deployment>::namespaced((*client).clone(), &ns)
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(Action::requeue(Duration::from_secs(3)))
}

fn error_policy(_: Arc<Deployment>, _: &kube::Error, _: Arc<kube::Client>) -> Action {
    Action::requeue(Duration::from_secs(1))
}

/// kube-runtime's `Controller`, unmodified.
async fn plain(client: kube::Client) {
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let copies: Api<ConfigMap> = Api::default_namespaced(client.clone());
    Controller::new(deployments, watcher::Config::default())
        .owns(copies, watcher::Config::default())
        .run(reconcile, error_policy, Arc::new(client))
        .for_each(|_| async {})
        .await;
}

/// The same, as a `GuardedController` whose guard reads the owner and the
/// child consistently.
async fn guarded(client: kube::Client) {
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let copies: Api<ConfigMap> = Api::default_namespaced(client.clone());
    GuardedController::new(deployments, watcher::Config::default())
        .owns(copies, watcher::Config::default())
        .guard(AwaitDeletion::<Deployment, ConfigMap>::new(|d| {
            format!("{}-copy", d.name_any())
        }))
        .run(reconcile, error_policy, Arc::new(client))
        .for_each(|_| async {})
        .await;
}

fn deployment(i: usize) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": format!("app-{i}")},
        "spec": {"selector": {"matchLabels": {"app": format!("app-{i}")}},
                 "template": {"metadata": {"labels": {"app": format!("app-{i}")}},
                              "spec": {"containers": [{"name": "c", "image": "v0"}]}}}}))
    .unwrap()
}

/// A run: its history (the plan, the perturber's log, every committed
/// write) and the order its tasks were polled in.
struct Run {
    history: Vec<String>,
    polls: ward_campaign::polls::Polls,
}

/// The run of `seed` with every kind, of the plain controller or the
/// guarded one.
fn run(seed: u64, guard: bool) -> Run {
    let kinds = builtin();
    simulate(|| async move {
        ward_campaign::polls::record();
        let server = ApiServer::start(ServerConfig::default().seed(seed))
            .await
            .unwrap();
        let plan = Plan::draw(seed, &kinds, HORIZON, &["copier".into()]).unwrap();
        let mut history = vec![plan.to_string()];
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = log.clone();
        let mut perturber = Perturber::new(&server, plan, move |line| {
            sink.lock().unwrap().push(line);
        });
        if guard {
            perturber.supervise("copier", guarded);
        } else {
            perturber.supervise("copier", plain);
        }
        perturber.start().unwrap();
        let api: Api<Deployment> = Api::default_namespaced(server.client());
        let workload = async {
            for i in 0..PARENTS {
                api.create(&PostParams::default(), &deployment(i))
                    .await
                    .unwrap();
            }
            // Rounds of changes to several parents at one instant.
            let mut rng = Rng::stream(seed, "workload");
            for round in 1..=5u32 {
                tokio::time::sleep(Duration::from_secs(rng.up_to(2))).await;
                for i in 0..PARENTS {
                    if rng.up_to(1) == 0 {
                        continue;
                    }
                    let bump = json!({"spec": {"template": {"spec": {"containers": [
                        {"name": "c", "image": format!("v{round}")}]}}}});
                    api.patch(
                        &format!("app-{i}"),
                        &PatchParams::default(),
                        &Patch::Merge(&bump),
                    )
                    .await
                    .unwrap();
                }
            }
            // Past every window (each opens within the first 80% of the
            // horizon and lasts at most half of it).
            tokio::time::sleep(HORIZON * 2).await;
        };
        perturber.run(workload).await.unwrap();
        history.extend(log.lock().unwrap().drain(..));
        history.extend(perturber.events());
        Run {
            history,
            polls: ward_campaign::polls::take(),
        }
    })
}

/// How many seeds: 30 (sized to CI's budget; `WARD_SEEDS=200` for the wide run), or `WARD_SEEDS`.
fn seeds() -> u64 {
    std::env::var("WARD_SEEDS").map_or(30, |v| v.parse().expect("WARD_SEEDS is a number"))
}

/// Each seed's runs (plain, then guarded) as digest lines.
fn digests() -> Vec<String> {
    (0..seeds())
        .flat_map(|seed| {
            [false, true].map(|guard| {
                let h = run(seed, guard).history;
                format!("{seed} {guard} {:016x}", fnv1a(h.join("\n").as_bytes()))
            })
        })
        .collect()
}

#[test]
fn simultaneous_reconciles_replay_in_this_process() {
    let first = run(3, false).history;
    assert!(
        first
            .iter()
            .filter(|l| l.contains("MODIFIED configmaps default/app-"))
            .count()
            > 4,
        "the controller applied its children: {first:#?}"
    );
    for seed in 0..seeds() {
        // Plain, guarded, plain, guarded: each run of one follows a run of
        // the other.
        let (a, x, b, y) = (
            run(seed, false),
            run(seed, true),
            run(seed, false),
            run(seed, true),
        );
        for (what, one, two) in [("plain", a, b), ("guarded", x, y)] {
            if one.history != two.history {
                let line = one
                    .history
                    .iter()
                    .zip(&two.history)
                    .position(|(p, q)| p != q);
                let polls = one
                    .polls
                    .first_divergence(&two.polls)
                    .map_or("the same polls".into(), |d| d.to_string());
                panic!(
                    "seed {seed} ({what}) replayed differently at history line {line:?}:\n{:?}\n{:?}\n{polls}",
                    line.map(|l| &one.history[l]),
                    line.map(|l| &two.history[l]),
                );
            }
        }
    }
}

#[test]
fn simultaneous_reconciles_replay_in_other_processes() {
    if ward_base::testing::is_child() {
        for d in digests() {
            println!("digest {d}");
        }
        return;
    }
    let child = || {
        let name = "replay::simultaneous_reconciles_replay_in_other_processes";
        ward_base::testing::run_alone(name)
    };
    let digests_of = |out: String| ward_base::testing::tagged(&out, "digest");
    // The two children run beside this process's own runs.
    let (one, two) = std::thread::scope(|s| {
        let one = s.spawn(child);
        let two = s.spawn(child);
        (one.join().unwrap(), two.join().unwrap())
    });
    let here = digests();
    assert_eq!(here.len() as u64, 2 * seeds());
    assert_eq!(
        digests_of(one),
        here,
        "a child process's runs differ from this one's"
    );
    assert_eq!(
        digests_of(two),
        here,
        "the second child process's runs differ"
    );
}
