//! A seed's run is a pure function of the seed and the code, even for a
//! controller whose writes follow `HashMap` iteration order — the order
//! std's `RandomState` keys decide, which outside a simulation differ from
//! thread to thread and from process to process. The controller is plain
//! kube-runtime (whose runner and scheduler keep reconciles in hash maps
//! too): on each reconcile of an input ConfigMap it remembers the input in
//! a `HashMap` and then writes one mirror ConfigMap per remembered input,
//! in the map's order, so the order of the server's committed writes is
//! the hash order. Every seed runs with every perturbation kind, twice in
//! this process and once in each of two child processes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use serde_json::json;
use ward_apiserver::{ApiServer, ServerConfig};
use ward_base::{Rng, fnv1a};
use ward_campaign::{Perturber, Plan, perturbations::builtin, simulate};

const SEEDS: u64 = 200;
const INPUTS: usize = 6;
const HORIZON: Duration = Duration::from_secs(20);

struct Ctx {
    api: Api<ConfigMap>,
    /// Input name -> its latest value, iterated in hash order.
    seen: Mutex<HashMap<String, String>>,
}

async fn reconcile(cm: Arc<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
    let value = cm
        .data
        .as_ref()
        .and_then(|d| d.get("v"))
        .cloned()
        .unwrap_or_default();
    let order: Vec<String> = {
        let mut seen = ctx.seen.lock().unwrap();
        seen.insert(cm.name_any(), value);
        seen.keys().cloned().collect()
    };
    for input in order {
        let mirror = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": format!("mirror-{input}")},
            "data": {"last-reconciled": cm.name_any()},
        });
        ctx.api
            .patch(
                &format!("mirror-{input}"),
                &PatchParams::apply("hash-ordered").force(),
                &Patch::Apply(&mirror),
            )
            .await?;
    }
    Ok(Action::await_change())
}

/// The controller under test: kube-runtime's `Controller`, unmodified.
async fn hash_ordered(client: kube::Client) {
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let ctx = Arc::new(Ctx {
        api: api.clone(),
        seen: Mutex::default(),
    });
    Controller::new(api, watcher::Config::default().labels("role=input"))
        .run(
            reconcile,
            |_, _, _| Action::requeue(Duration::from_secs(1)),
            ctx,
        )
        .for_each(|_| async {})
        .await;
}

/// The run of `seed` with every kind: its plan, the perturber's history and
/// every write the server committed, as lines.
fn history(seed: u64) -> Vec<String> {
    let kinds = builtin();
    simulate(|| async move {
        let server = ApiServer::start(ServerConfig::default().seed(seed))
            .await
            .unwrap();
        let plan = Plan::draw(seed, &kinds, HORIZON, &["hash-ordered".into()]).unwrap();
        let mut lines = vec![plan.to_string()];
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = log.clone();
        let mut perturber = Perturber::new(&server, plan, move |line| {
            sink.lock().unwrap().push(line);
        });
        perturber.supervise("hash-ordered", hash_ordered);
        perturber.start().unwrap();
        // The workload: inputs created, then bumped at seeded moments.
        let api: Api<ConfigMap> = Api::default_namespaced(server.client());
        for i in 0..INPUTS {
            let input = json!({
                "metadata": {"name": format!("in-{i}"), "labels": {"role": "input"}},
                "data": {"v": "0"},
            });
            api.create(
                &PostParams::default(),
                &serde_json::from_value(input).unwrap(),
            )
            .await
            .unwrap();
        }
        let mut rng = Rng::stream(seed, "workload");
        for v in 1..=20u32 {
            tokio::time::sleep(rng.between(Duration::ZERO, Duration::from_secs(1))).await;
            let i = rng.up_to(INPUTS as u64 - 1);
            let bump = json!({"data": {"v": v.to_string()}});
            api.patch(
                &format!("in-{i}"),
                &PatchParams::default(),
                &Patch::Merge(&bump),
            )
            .await
            .unwrap();
        }
        // Past every window (each opens within the first 80% of the
        // horizon and lasts at most half of it).
        tokio::time::sleep(HORIZON * 2).await;
        lines.extend(log.lock().unwrap().drain(..));
        lines.extend(perturber.events());
        lines
    })
}

/// Each seed's history as a digest line, `seed hex`.
fn digests() -> Vec<String> {
    (0..SEEDS)
        .map(|seed| {
            let h = history(seed);
            format!("{seed} {:016x}", fnv1a(h.join("\n").as_bytes()))
        })
        .collect()
}

/// This binary's digests, computed in a child process of its own.
fn in_child() -> Vec<String> {
    let name = "replay::a_hash_ordered_controller_replays_in_other_processes";
    ward_base::testing::tagged(&ward_base::testing::run_alone(name), "digest")
}

#[test]
fn a_hash_ordered_controller_replays_in_this_process() {
    let first = history(3);
    assert!(
        first
            .iter()
            .any(|l| l.contains("configmaps default/mirror-in-")),
        "the controller wrote its mirrors: {first:#?}"
    );
    for seed in 0..SEEDS {
        let (a, b) = (history(seed), history(seed));
        assert_eq!(a, b, "seed {seed} replayed differently in one process");
    }
}

#[test]
fn a_hash_ordered_controller_replays_in_other_processes() {
    if ward_base::testing::is_child() {
        for d in digests() {
            println!("digest {d}");
        }
        return;
    }
    let here = digests();
    assert_eq!(here.len(), SEEDS as usize);
    let (one, two) = (in_child(), in_child());
    assert_eq!(one, here, "a child process's runs differ from this one's");
    assert_eq!(two, here, "the second child process's runs differ");
}

/// What exact replay leaves to the controller (docs/campaigns.md): a
/// `futures::select!` draws its branch order from a process-wide counter,
/// so two simulations in one process choose differently — here, at least
/// once in 64 runs of one select with both branches ready (the chance
/// that all 64 agree is 2^-63).
#[test]
fn an_unbiased_futures_select_is_not_seeded() {
    let pick = || {
        simulate(|| async {
            futures::select! {
                _ = futures::future::ready(()) => 0,
                _ = futures::future::ready(()) => 1,
            }
        })
    };
    let picks: Vec<u8> = (0..64).map(|_| pick()).collect();
    assert!(picks.contains(&0) && picks.contains(&1), "{picks:?}");
    // Tokio's own select!, under `--cfg tokio_unstable`, is seeded.
    let tokio_pick = || {
        simulate(|| async {
            tokio::select! {
                _ = std::future::ready(()) => 0u8,
                _ = std::future::ready(()) => 1,
            }
        })
    };
    let first = tokio_pick();
    assert!((0..64).all(|_| tokio_pick() == first));
}

/// The same for a thread the controller spawns itself: it is not a
/// simulation's thread, so its hash-map keys come from the kernel.
#[test]
fn a_thread_the_controller_spawns_is_not_seeded() {
    let order = || {
        simulate(|| async {
            std::thread::spawn(|| {
                let m: HashMap<u32, ()> = (0..64).map(|i| (i, ())).collect();
                m.into_keys().collect::<Vec<_>>()
            })
            .join()
            .unwrap()
        })
    };
    let first = order();
    assert!(
        (0..8).any(|_| order() != first),
        "8 threads' maps iterated alike"
    );
    // On the simulation's own thread, the order repeats.
    let here = || {
        simulate(|| async {
            let m: HashMap<u32, ()> = (0..64).map(|i| (i, ())).collect();
            m.into_keys().collect::<Vec<_>>()
        })
    };
    assert_eq!(here(), here());
}
