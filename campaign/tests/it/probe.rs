//! Each perturbation kind changes what a controller sees, shown against a
//! probe controller: it watches the ConfigMap `in` (which the workload
//! bumps every half second), records each value it sees, reads the
//! ConfigMap `out` and writes the value back to it. The workload also creates owners and
//! their dependents and deletes the owners, to show the GC's lag. Every
//! kind's run is compared with the same seed's run without perturbation.
//! This file is also the complete example of a campaign over a controller
//! Ward has never seen.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use tokio::time::Instant;
use ward_apiserver::{ApiServer, ServerConfig};
use ward_campaign::{
    Perturber, Plan,
    perturbations::{builtin, select},
    simulate,
};

const HORIZON: Duration = Duration::from_secs(60);
const BUMPS: u32 = 200; // one per 500 ms: 100 s, past every window's end

/// What the probe saw in one run.
#[derive(Debug, Default, Clone, PartialEq)]
struct Seen {
    /// Each value of `in` the probe observed, in order.
    values: Vec<u32>,
    /// The longest time the probe's latest value lagged behind the
    /// workload's latest write, in bumps.
    max_lag: u32,
    /// How often the probe was started (a crash restarts it).
    starts: u32,
    /// The probe's writes that failed.
    write_errors: u32,
    /// The longest a dependent outlived its owner.
    max_orphan: Duration,
    /// The perturber's history.
    history: Vec<String>,
    /// Every write the server committed.
    events: Vec<String>,
}

async fn probe(client: kube::Client, seen: Arc<Mutex<Seen>>) {
    seen.lock().unwrap().starts += 1;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let _ = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "out"}})).unwrap(),
        )
        .await;
    let cfg = watcher::Config::default().fields("metadata.name=in");
    let mut events = watcher(api.clone(), cfg).applied_objects().boxed();
    while let Some(ev) = events.next().await {
        let Ok(cm) = ev else { continue };
        let v = cm
            .data
            .as_ref()
            .and_then(|d| d.get("v"))
            .cloned()
            .unwrap_or_default();
        seen.lock().unwrap().values.push(v.parse().unwrap_or(0));
        // A fresh read before the write, as a guard makes.
        if api.get_opt("out").await.is_err() {
            continue;
        }
        let patch = json!({"data": {"v": v}});
        if api
            .patch("out", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .is_err()
        {
            seen.lock().unwrap().write_errors += 1;
        }
    }
}

/// One run of `seed` with the kinds `perturb` names.
fn run(seed: u64, perturb: &str) -> Seen {
    let kinds = select(perturb, &builtin()).unwrap();
    simulate(|| async move {
        let server = ApiServer::start(ServerConfig::default().seed(seed))
            .await
            .unwrap();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let plan = Plan::draw(seed, &kinds, HORIZON, &["probe".into()]).unwrap();
        let log = seen.clone();
        let mut perturber = Perturber::new(&server, plan, move |line| {
            log.lock().unwrap().history.push(line);
        });
        let s = seen.clone();
        perturber.supervise("probe", move |client| probe(client, s.clone()));
        perturber.start().unwrap();

        let api: Api<ConfigMap> = Api::default_namespaced(server.client());
        let cm = |name: &str, v: u32| -> ConfigMap {
            serde_json::from_value(
                json!({"metadata": {"name": name}, "data": {"v": v.to_string()}}),
            )
            .unwrap()
        };
        api.create(&PostParams::default(), &cm("in", 0))
            .await
            .unwrap();
        let mut orphans: BTreeMap<String, Instant> = BTreeMap::new();
        for i in 1..=BUMPS {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let patch = json!({"data": {"v": i.to_string()}});
            api.patch("in", &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap();
            {
                let mut g = seen.lock().unwrap();
                let latest = g.values.last().copied().unwrap_or(0);
                g.max_lag = g.max_lag.max(i.saturating_sub(latest));
            }
            // Every 4th bump: an owner and its dependent; the owner goes.
            if i % 4 == 0 {
                let owner = api
                    .create(&PostParams::default(), &cm(&format!("owner-{i}"), i))
                    .await
                    .unwrap();
                let mut child = cm(&format!("child-{i}"), i);
                child.metadata.owner_references = Some(vec![
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                        api_version: "v1".into(),
                        kind: "ConfigMap".into(),
                        name: format!("owner-{i}"),
                        uid: owner.metadata.uid.clone().unwrap(),
                        ..Default::default()
                    },
                ]);
                api.create(&PostParams::default(), &child).await.unwrap();
                api.delete(&format!("owner-{i}"), &DeleteParams::default())
                    .await
                    .unwrap();
                orphans.insert(format!("child-{i}"), Instant::now());
            }
            // Dependents still there: how long since their owner went.
            let now = Instant::now();
            let mut gone = Vec::new();
            for (name, since) in &orphans {
                if api.get_opt(name).await.unwrap().is_none() {
                    gone.push(name.clone());
                } else {
                    let mut g = seen.lock().unwrap();
                    g.max_orphan = g.max_orphan.max(now - *since);
                }
            }
            for g in gone {
                orphans.remove(&g);
            }
        }
        seen.lock().unwrap().events = perturber.events();
        drop(perturber);
        server.shutdown().await;
        seen.lock().unwrap().clone()
    })
}

/// Seeds to try a kind with: a kind shows its effect in at least one.
const SEEDS: [u64; 3] = [1, 2, 3];

fn show(kind: &str, effect: impl Fn(&Seen, &Seen) -> bool) {
    let mut tried = Vec::new();
    for seed in SEEDS {
        let (base, perturbed) = (run(seed, "none"), run(seed, kind));
        assert!(
            !perturbed.history.is_empty(),
            "{kind}: the plan did nothing"
        );
        if effect(&base, &perturbed) {
            return;
        }
        tried.push((seed, base, perturbed));
    }
    panic!("{kind} changed nothing the probe saw: {tried:#?}");
}

#[test]
fn without_perturbation_the_probe_sees_every_value_at_once() {
    let s = run(1, "none");
    assert_eq!(s.values, (0..=BUMPS).collect::<Vec<_>>());
    assert!(s.max_lag <= 1, "{}", s.max_lag);
    assert_eq!((s.starts, s.write_errors), (1, 0));
    assert!(s.history.is_empty());
}

#[test]
fn a_stale_view_makes_the_probe_lag_then_catch_up() {
    show("stale-view", |b, p| {
        p.max_lag > b.max_lag + 2 && p.values.last() == Some(&BUMPS)
    });
}

#[test]
fn unobserved_states_are_never_seen() {
    show("unobserved", |b, p| {
        p.values.len() + 2 < b.values.len() && p.values.last() == Some(&BUMPS)
    });
}

#[test]
fn a_crash_restarts_the_probe_with_nothing_remembered() {
    show("crash", |_, p| {
        // Restarted: it starts again and re-lists, seeing a value twice.
        p.starts == 2 && p.values.windows(2).any(|w| w[1] <= w[0])
    });
}

#[test]
fn a_crash_follows_a_read_or_a_write() {
    let mut after = Vec::new();
    for seed in 1..=12 {
        let p = run(seed, "crash");
        if p.starts == 2 {
            for op in ["read", "write"] {
                if p.history
                    .iter()
                    .any(|l| l.contains(&format!("more {op}(s)")))
                {
                    after.push(op);
                }
            }
        }
    }
    assert!(
        after.contains(&"read") && after.contains(&"write"),
        "{after:?}"
    );
}

#[test]
fn write_faults_fail_or_slow_the_probes_writes() {
    show("write-faults", |b, p| {
        p.write_errors > 0 || p.max_lag > b.max_lag + 1
    });
}

#[test]
fn gc_delay_and_pause_let_dependents_outlive_their_owners() {
    show("gc-delay", |b, p| {
        p.max_orphan >= b.max_orphan + Duration::from_millis(500)
    });
    show("gc-pause", |b, p| {
        p.max_orphan >= b.max_orphan + Duration::from_millis(500)
    });
}

#[test]
fn a_seed_replays_the_identical_run() {
    let a = run(7, "all");
    // The history holds every committed write with its resourceVersion.
    assert!(a.events.len() > BUMPS as usize, "{}", a.events.len());
    assert!(
        a.events
            .iter()
            .any(|e| e.contains(" MODIFIED configmaps default/in "))
    );
    assert!(
        a.events.iter().all(|e| e.starts_with("rv ")),
        "{:?}",
        &a.events[..3]
    );
    assert_eq!(a, run(7, "all"));
}

#[test]
fn unknown_kinds_are_refused_by_name() {
    let e = select("stale-view,bogus", &builtin()).err().unwrap();
    assert!(e.to_string().contains("\"bogus\""), "{e}");
    assert!(e.to_string().contains("stale-view, unobserved"), "{e}");
    assert_eq!(select("none", &builtin()).unwrap().len(), 0);
    assert_eq!(select("all", &builtin()).unwrap().len(), 6);
    assert_eq!(select("crash,crash", &builtin()).unwrap().len(), 1);
}
