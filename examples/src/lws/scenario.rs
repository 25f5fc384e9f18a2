//! Scenarios, each a seeded run in simulated time against an embedded
//! ward-apiserver, with the invariants checked throughout and after
//! settling. One LWS, `test`, in `default`:
//!
//! - **S1** the seed: the LWS is deleted and at once recreated with a new
//!   template while its StatefulSet is terminating (a finalizer holds it for
//!   a few seconds).
//! - **S2** the same with background deletion and a jittered GC delay, so
//!   the old StatefulSet may outlive the old revisions without a
//!   deletionTimestamp — what upstream #733 misses.
//! - **S3** a template change during a rollout (two changes a moment
//!   apart), no deletion: the guard must not slow the normal path; the
//!   journal records when each run settled.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::json;
use ward_apiserver::faults::Delay;
use ward_apiserver::{ApiServer, ServerConfig};
use ward_base::Rng;
use ward_campaign::Perturbation;

use super::controller::{self, Mode};
use super::invariants::{Checker, Violations};
use super::model::{LeaderWorkerSet, LeaderWorkerSetSpec, LeaderWorkerTemplate};
use super::{Lws, Measured, NAMESPACE, install, revision};
use crate::example::Report;
use crate::journal::Journal;
use crate::run::{Scenario, ScenarioError};

/// The LWS every scenario runs.
pub const NAME: &str = "test";
/// A finalizer the scenario holds the old StatefulSet with (S1).
pub const HOLD: &str = "lws.ward.dev/hold";

/// How long the part of a run worth perturbing lasts (plans are drawn over it).
pub const HORIZON: Duration = Duration::from_secs(60);

async fn within<T>(what: &'static str, f: impl Future<Output = T>) -> Result<T, ScenarioError> {
    tokio::time::timeout(Duration::from_secs(300), f)
        .await
        .map_err(|_| ScenarioError::Timeout(what))
}

/// A template running `image`.
#[must_use]
pub fn template(image: &str) -> LeaderWorkerTemplate {
    LeaderWorkerTemplate {
        size: 2,
        leader_template: None,
        worker_template: json!({"spec": {"containers": [{"name": "worker", "image": image}]}}),
    }
}

fn lws(image: &str) -> LeaderWorkerSet {
    LeaderWorkerSet::new(
        NAME,
        LeaderWorkerSetSpec {
            replicas: 2,
            leader_worker_template: template(image),
            rollout_strategy: Default::default(),
        },
    )
}

/// Wait (up to 300 s) until the LWS's status names the revision of
/// `image`'s template; whether it did.
async fn settled(api: &Api<LeaderWorkerSet>, image: &str) -> bool {
    let want = template(image);
    let cond = await_condition(api.clone(), NAME, move |l: Option<&LeaderWorkerSet>| {
        l.is_some_and(|l| {
            let c = l
                .status
                .as_ref()
                .and_then(|s| s.collision_count)
                .unwrap_or(0);
            let name = revision::name(NAME, &revision::hash(&want, c));
            l.status
                .as_ref()
                .and_then(|s| s.current_revision.as_deref())
                == Some(name.as_str())
        })
    });
    matches!(within("the LWS to settle", cond).await, Ok(Ok(_)))
}

/// Run a scenario (inside a runtime with a paused clock), carrying out the
/// seed's plan of `kinds` against the LWS controller.
pub async fn run(
    scenario: Scenario,
    mode: Mode,
    seed: u64,
    kinds: &[Arc<dyn Perturbation>],
) -> Result<Report<Lws>, ScenarioError> {
    let server = ApiServer::start(ServerConfig::default().seed(seed)).await?;
    let client = server.client();
    install(&client).await?;
    let mut rng = Rng::stream(seed, "lws-scenario");
    let journal = Journal::new();
    let violations = Violations::new(journal.clone());
    let checker = Checker::new(server.store().clone(), violations.clone());
    let tasks = vec![tokio::spawn(checker.run())];
    let (mut perturber, plan_text) =
        crate::run::perturber(&server, seed, kinds, HORIZON, "lws", &journal);
    let log = journal.clone();
    perturber.supervise("lws", move |client| {
        controller::run(client, NAMESPACE, mode, log.clone())
    });
    let api: Api<LeaderWorkerSet> = Api::namespaced(client.clone(), NAMESPACE);
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), NAMESPACE);
    let l1 = api.create(&PostParams::default(), &lws("v1")).await?;
    journal.log(format!(
        "LWS {NAME} created (uid {}, image v1)",
        l1.uid().unwrap_or_default()
    ));
    if !settled(&api, "v1").await {
        return Err(ScenarioError::Timeout("the first LWS to settle"));
    }
    perturber
        .start()
        .expect("the scenario registered the plan's target");
    let workload = async {
        tokio::time::sleep(rng.between(Duration::from_secs(1), Duration::from_secs(10))).await;
        let (last_change, final_image) =
            change(scenario, &server, &api, &sets, &l1, &mut rng, &journal).await?;
        let settled_after = settled(&api, final_image)
            .await
            .then(|| last_change.elapsed());
        match settled_after {
            Some(d) => journal.log(format!("settled on {final_image} after {d:?}")),
            None => journal.log(format!("did not settle on {final_image} within 300 s")),
        }
        // Let any late GC or write land, then judge the settled state.
        server.faults().set_gc_delay(Delay::default());
        tokio::time::sleep(Duration::from_secs(60)).await;
        Checker::new(server.store().clone(), violations.clone()).settled();
        Ok::<_, ScenarioError>(settled_after)
    };
    let (settled, livelock) = crate::run::bounded(&perturber, &journal, workload).await?;
    let settled_after = settled.flatten();
    let events = crate::run::finish(server, perturber, &tasks).await;
    Ok(Report {
        scenario,
        mode,
        seed,
        plan: plan_text,
        events,
        violations: violations.all(),
        journal: journal.entries(),
        measured: Measured { settled_after },
        livelock,
    })
}

/// The scenario's change to the LWS after its first settling: the
/// instant of the last change and the image it ends on.
async fn change(
    scenario: Scenario,
    server: &ApiServer,
    api: &Api<LeaderWorkerSet>,
    sets: &Api<StatefulSet>,
    l1: &LeaderWorkerSet,
    rng: &mut Rng,
    journal: &Journal,
) -> Result<(tokio::time::Instant, &'static str), ScenarioError> {
    let last_change;
    let final_image;
    match scenario {
        Scenario::S1 | Scenario::S2 => {
            if scenario == Scenario::S1 {
                let hold = json!({"metadata": {"finalizers": [HOLD]}});
                sets.patch(NAME, &PatchParams::default(), &Patch::Merge(hold))
                    .await?;
            } else {
                server.faults().set_gc_delay(Delay::jittered(
                    Duration::from_secs(1),
                    Duration::from_secs(20),
                ));
            }
            api.delete(NAME, &DeleteParams::background()).await?;
            journal.log(format!("LWS {NAME} deleted (background)"));
            if scenario == Scenario::S1 {
                let terminating = await_condition(sets.clone(), NAME, |s: Option<&StatefulSet>| {
                    s.is_some_and(|s| s.metadata.deletion_timestamp.is_some())
                });
                within("the StatefulSet to terminate", terminating)
                    .await?
                    .map_err(|_| ScenarioError::Timeout("the StatefulSet to terminate"))?;
                journal.log("StatefulSet test is terminating (held by a finalizer)");
            } else {
                let uid = l1.uid().unwrap_or_default();
                let gone = await_condition(api.clone(), NAME, conditions::is_deleted(&uid));
                within("the LWS to go", gone)
                    .await?
                    .map_err(|_| ScenarioError::Timeout("the LWS to go"))?;
            }
            let l2 = api.create(&PostParams::default(), &lws("v2")).await?;
            last_change = tokio::time::Instant::now();
            final_image = "v2";
            journal.log(format!(
                "LWS {NAME} recreated (uid {}, image v2)",
                l2.uid().unwrap_or_default()
            ));
            if scenario == Scenario::S1 {
                tokio::time::sleep(rng.between(Duration::from_secs(3), Duration::from_secs(20)))
                    .await;
                let release = json!({"metadata": {"finalizers": null}});
                sets.patch(NAME, &PatchParams::default(), &Patch::Merge(release))
                    .await?;
                journal.log("the finalizer is removed: StatefulSet test goes");
            }
        }
        Scenario::S3 => {
            let change = |image: &str| json!({"spec": {"leaderWorkerTemplate": template(image)}});
            api.patch(NAME, &PatchParams::default(), &Patch::Merge(change("v2")))
                .await?;
            journal.log("template changed to v2");
            tokio::time::sleep(rng.between(Duration::from_millis(100), Duration::from_secs(3)))
                .await;
            api.patch(NAME, &PatchParams::default(), &Patch::Merge(change("v3")))
                .await?;
            last_change = tokio::time::Instant::now();
            final_image = "v3";
            journal.log("template changed to v3 (during the rollout of v2)");
        }
    }
    Ok((last_change, final_image))
}
