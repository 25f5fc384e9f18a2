//! A port allocator, as a controller author would write one from the
//! guide (docs/guide.md): a `PortPool` custom resource maps ports to pods, four allocator
//! tasks race to hand ports out with [`OccPatch::update_with`] (the chosen
//! port returned by the decision), and a reclaimer frees the ports of dead
//! pods with [`liveness`] — while pods are still Pending, under injected
//! 409s and write latency, on tokio's paused clock with a seeded server.
//!
//! A port is not an IP: a pod never "shows" it. The old defaults judged
//! every Running pod dead once the grace bound passed (the IP-only check
//! said "not shown") and gave up an allocation after 5 conflicting
//! attempts. [`Variant::OldDefaults`] reproduces exactly that and loses live
//! pods' ports and allocations; [`Variant::Defaults`] (the policy's named
//! `PhaseOnly` check, OccPatch's deadline) loses nothing and still frees
//! the ports of deleted pods.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{CustomResource, CustomResourceExt, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use ward_apiserver::{ApiServer, Delay, PodLifecycle, Verb, WriteAction, WriteFault};
use ward_guards::liveness::{self, LivenessPolicy, Record, ResourceCheck, Shown};
use ward_guards::occ_patch::{Change, Decision, OccError, OccPatch, UpdateOutcome, json_pointer};

use crate::common::pod;

/// Ports by number, each held by one pod.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(group = "ward.example", version = "v1", kind = "PortPool", namespaced)]
pub struct PortPoolSpec {
    /// Port number -> holder. Skipped when empty, as such maps usually are:
    /// the first allocation adds the map itself.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocations: BTreeMap<String, Holder>,
}

/// Who holds a port, and since when.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Holder {
    /// `namespace/name`.
    pub podref: String,
    /// The pod's uid.
    pub pod_uid: String,
    /// RFC 3339, by the server's clock.
    pub allocated_at: String,
}

const POOL: &str = "ports";
const FIRST_PORT: u16 = 30000;
const PODS: usize = 100;
const GRACE: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// What a user got from the defaults before: liveness asked whether a
    /// pod shows the port as an IP (it never does), OccPatch gave up after
    /// 5 attempts.
    OldDefaults,
    /// Today's defaults: the named `PhaseOnly` check for a resource pods do
    /// not publish, OccPatch re-deciding until its deadline.
    Defaults,
}

impl Variant {
    fn policy(self, server: &ApiServer) -> LivenessPolicy {
        let check = match self {
            // The old IP-only default: "not shown as an IP" meant "not shown".
            Variant::OldDefaults => ResourceCheck::custom(|pod, port| {
                Shown::from(liveness::shows_ip(pod, port) == Shown::Yes)
            }),
            Variant::Defaults => ResourceCheck::PhaseOnly,
        };
        LivenessPolicy::new(check)
            .grace(GRACE)
            .clock(server.clock())
    }

    fn occ(self, api: &Api<PortPool>, seed: u64) -> OccPatch<PortPool> {
        let occ = OccPatch::new(api.clone()).seed(seed);
        match self {
            Variant::OldDefaults => occ.max_attempts(5),
            Variant::Defaults => occ,
        }
    }
}

/// What one run shows.
#[derive(Debug, Default, PartialEq, Eq)]
struct Report {
    /// Allocations handed out.
    handed_out: usize,
    /// ... of them to pods that were not deleted.
    live: usize,
    /// Allocations that failed (gave up on conflicts).
    failed: usize,
    /// Live pods whose port is no longer theirs in the pool.
    lost: Vec<String>,
    /// Deleted pods whose port is still held for them.
    leaked: Vec<String>,
    /// Ports the reclaimer freed.
    freed: usize,
}

/// CNI-ADD-like allocation for `pod`: the lowest free port, decided on
/// each fresh read; the decision returns it.
async fn allocate(occ: &OccPatch<PortPool>, pod: &Pod, now: String) -> Result<u16, OccError> {
    let podref = format!("default/{}", pod.name_any());
    let uid = pod.uid().unwrap();
    let out = occ
        .update_with(POOL, |pool: &PortPool| {
            let held = &pool.spec.allocations;
            if let Some((port, _)) = held.iter().find(|(_, h)| h.pod_uid == uid) {
                return (Decision::Nothing, port.parse().unwrap());
            }
            let port = (FIRST_PORT..).find(|p| !held.contains_key(&p.to_string()));
            let port = port.expect("a free port");
            let holder = Holder {
                podref: podref.clone(),
                pod_uid: uid.clone(),
                allocated_at: now.clone(),
            };
            let path = json_pointer(["spec", "allocations", &port.to_string()]);
            let add = Change::add(path, serde_json::to_value(holder).unwrap());
            (Decision::Patch(vec![add]), port)
        })
        .await?;
    Ok(out.into_value().expect("the pool exists"))
}

/// What one reclaimer pass did: how many entries it judged dead, and how
/// many of them it freed (None: its reads failed).
type Pass = Option<(usize, usize)>;

/// One reclaimer pass: read the pool, then the pods; free what liveness
/// judges dead, re-deciding on the fresh pool (only the exact entry).
async fn reclaim(
    pools: &Api<PortPool>,
    pods: &Api<Pod>,
    policy: &LivenessPolicy,
    occ: &OccPatch<PortPool>,
) -> Pass {
    let snap = liveness::snapshot(
        || async { pools.get(POOL).await },
        || liveness::list_pod_index(pods),
    )
    .await
    .ok()?;
    let dead: Vec<(String, Holder)> = snap
        .records
        .spec
        .allocations
        .iter()
        .filter(|(port, h)| {
            let r = Record::from_pod_ref(&h.podref, port)
                .unwrap()
                .pod_uid(&h.pod_uid);
            snap.decide(policy, &r).is_dead()
        })
        .map(|(p, h)| (p.clone(), h.clone()))
        .collect();
    if dead.is_empty() {
        return Some((0, 0));
    }
    let out = occ
        .update_with(POOL, |fresh: &PortPool| {
            let still: Vec<Change> = dead
                .iter()
                .filter(|(p, h)| fresh.spec.allocations.get(p) == Some(h))
                .map(|(p, _)| Change::remove(json_pointer(["spec", "allocations", p])))
                .collect();
            let n = still.len();
            (Decision::Patch(still), n)
        })
        .await;
    match out {
        Ok(UpdateOutcome::Patched(_, n)) => Some((dead.len(), n)),
        _ => Some((dead.len(), 0)),
    }
}

async fn run(seed: u64, variant: Variant) -> Report {
    let server = ApiServer::start_seeded(seed).await;
    let client = server.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &PortPool::crd())
        .await
        .unwrap();
    let established = await_condition(
        crds,
        "portpools.ward.example",
        conditions::is_crd_established(),
    );
    tokio::time::timeout(Duration::from_secs(30), established)
        .await
        .expect("the CRD is established in time")
        .unwrap();
    let pools: Api<PortPool> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    pools
        .create(
            &PostParams::default(),
            &PortPool::new(POOL, PortPoolSpec::default()),
        )
        .await
        .unwrap();

    // Pods take 3-20 s to start; 15% of pool writes conflict, every one
    // of them slow, and the allocators race one another besides.
    server
        .faults()
        .set_pod_lifecycle(PodLifecycle {
            enabled: true,
            schedule: Delay::fixed(Duration::from_millis(200)),
            run: Delay::jittered(Duration::from_secs(3), Duration::from_secs(17)),
            nodes: vec!["node-a".into()],
        })
        .add_write_fault(
            WriteFault::fraction(0.15, WriteAction::Conflict)
                .kind::<PortPool>()
                .verbs(&[Verb::Patch])
                .latency(Delay::jittered(
                    Duration::from_millis(5),
                    Duration::from_millis(40),
                )),
        )
        .unwrap()
        .add_write_fault(
            WriteFault::fraction(
                1.0,
                WriteAction::Latency(Delay::jittered(
                    Duration::from_millis(5),
                    Duration::from_millis(40),
                )),
            )
            .kind::<PortPool>()
            .verbs(&[Verb::Patch]),
        )
        .unwrap();

    // Four allocators take pods from one queue.
    let (tx, rx) = mpsc::unbounded_channel::<Pod>();
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    let handed: Arc<Mutex<HashMap<String, u16>>> = Arc::default();
    let failed = Arc::new(Mutex::new(0));
    let mut allocators = Vec::new();
    for a in 0..4u64 {
        let (rx, handed, failed) = (rx.clone(), handed.clone(), failed.clone());
        let occ = variant.occ(&pools, seed * 10 + a);
        let clock = server.clock();
        allocators.push(tokio::spawn(async move {
            loop {
                let Some(pod) = rx.lock().await.recv().await else {
                    return;
                };
                match allocate(&occ, &pod, clock.rfc3339()).await {
                    Ok(port) => {
                        handed.lock().unwrap().insert(pod.name_any(), port);
                    }
                    Err(OccError::Conflict { .. }) => *failed.lock().unwrap() += 1,
                    Err(e) => panic!("allocating for {}: {e}", pod.name_any()),
                }
            }
        }));
    }

    // The reclaimer, every 2 s from the start: pods are Pending meanwhile.
    // Each pass reports when it started and what it did.
    let freed = Arc::new(Mutex::new(0));
    let (passes, mut passed) = watch::channel((Instant::now(), None::<(usize, usize)>));
    let reclaimer = {
        let (pools, pods, freed) = (pools.clone(), pods.clone(), freed.clone());
        let policy = variant.policy(&server);
        let occ = variant.occ(&pools, seed * 10 + 9);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(2));
            loop {
                let started = tick.tick().await;
                let pass = reclaim(&pools, &pods, &policy, &occ).await;
                *freed.lock().unwrap() += pass.map_or(0, |(_, n)| n);
                passes.send_replace((started, pass));
            }
        })
    };

    // The workload: a scale-up of PODS replicas at once (so the allocators
    // contend); a minute later, every fifth pod is deleted.
    let mut uids = HashMap::new();
    for i in 0..PODS {
        let p = pods
            .create(&PostParams::default(), &pod(&format!("web-{i}")))
            .await
            .unwrap();
        uids.insert(p.name_any(), p.uid().unwrap());
        tx.send(p).unwrap();
    }
    drop(tx);
    for a in allocators {
        a.await.unwrap();
    }
    tokio::time::sleep(Duration::from_secs(60)).await;
    let deleted: Vec<String> = (0..PODS).step_by(5).map(|i| format!("web-{i}")).collect();
    let now = DeleteParams::default().grace_period(0);
    for name in &deleted {
        pods.delete(name, &now).await.unwrap();
    }
    // Every pod is past the grace bound (allocated over a minute ago) and
    // the deletes are done: wait until a pass that started after this
    // finds nothing left to free.
    let settled = Instant::now();
    let converged = passed.wait_for(|(started, pass)| *started >= settled && *pass == Some((0, 0)));
    tokio::time::timeout(Duration::from_secs(600), converged)
        .await
        .expect("the reclaimer converges")
        .unwrap();
    reclaimer.abort();

    let pool = pools.get(POOL).await.unwrap();
    let held = &pool.spec.allocations;
    let handed = handed.lock().unwrap().clone();
    let mut report = Report {
        handed_out: handed.len(),
        failed: *failed.lock().unwrap(),
        freed: *freed.lock().unwrap(),
        ..Report::default()
    };
    for (name, port) in &handed {
        report.live += usize::from(!deleted.contains(name));
        let ours = held
            .get(&port.to_string())
            .is_some_and(|h| h.pod_uid == uids[name]);
        match (deleted.contains(name), ours) {
            (false, false) => report.lost.push(name.clone()),
            (true, true) => report.leaked.push(name.clone()),
            _ => {}
        }
    }
    report.lost.sort();
    report.leaked.sort();
    report
}

#[tokio::test(start_paused = true)]
async fn the_defaults_lose_no_port_of_a_live_pod() {
    for seed in 1..=3 {
        let r = run(seed, Variant::Defaults).await;
        assert_eq!(r.failed, 0, "seed {seed}: no allocation given up: {r:?}");
        assert_eq!(r.handed_out, PODS, "seed {seed}: {r:?}");
        assert!(
            r.lost.is_empty(),
            "seed {seed}: live pods lost their port: {r:?}"
        );
        assert!(
            r.leaked.is_empty(),
            "seed {seed}: deleted pods' ports leaked: {r:?}"
        );
        assert_eq!(
            r.freed,
            PODS / 5,
            "seed {seed}: exactly the deleted pods' ports freed"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn the_old_defaults_free_running_pods_ports_and_drop_allocations() {
    let r = run(1, Variant::OldDefaults).await;
    assert_eq!(r, run(1, Variant::OldDefaults).await, "a seed replays");
    // Every Running pod "does not show" its port: all freed past the grace.
    assert_eq!(r.lost.len(), r.live, "every live pod lost its port: {r:?}");
    assert!(r.live > 0);
    assert!(
        r.failed > 0,
        "5 attempts give up under this contention: {r:?}"
    );
}
