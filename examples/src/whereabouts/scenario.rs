//! Scenarios, each a seeded run in simulated time against an embedded
//! ward-apiserver, with the invariants checked throughout:
//!
//! - **S1** the seed: a StatefulSet-like sequence creates web-0..web-9 a few
//!   seconds apart on two nodes, on two networks, three times over (delete
//!   and recreate, as in the bug report); the reconciler runs every
//!   simulated minute; annotations land 0.1–2 s after CNI ADD.
//! - **S2** node crash: node-b's agent dies and its pods vanish without
//!   CNI DEL; the pods are recreated on node-a under the same names.
//! - **S3** stuck Pending (upstream #182): one pod's sandbox never comes up;
//!   its allocation must not leak forever.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::json;
use ward_apiserver::{ApiServer, ServerConfig};
use ward_base::Rng;
use ward_campaign::Perturbation;

use super::agent::{self, AgentConfig};
use super::invariants::{Checker, Violations};
use super::reconciler::{self, Mode, ReconcilerConfig};
use super::{GRACE, INTERVAL, Whereabouts, install, networks};
use crate::example::Report;
use crate::journal::Journal;
use crate::run::{Scenario, ScenarioError};

/// How soon a crashed reconciler runs again: a CronJob's Job replaces its
/// failed pod after the Job controller's first backoff, 10 s (its first
/// start waits for the schedule's phase instead, drawn per seed).
pub const RESTART: Duration = Duration::from_secs(10);

/// How long the part of a run worth perturbing lasts (plans are drawn over it).
pub const HORIZON: Duration = Duration::from_secs(180);

/// Run a scenario (inside a runtime with a paused clock), carrying out the
/// seed's plan of `kinds` against the reconciler.
pub async fn run(
    scenario: Scenario,
    mode: Mode,
    seed: u64,
    kinds: &[Arc<dyn Perturbation>],
) -> Result<Report<Whereabouts>, ScenarioError> {
    let server = ApiServer::start(ServerConfig::default().seed(seed)).await?;
    let client = server.client();
    let nets = networks();
    install(&client, &nets).await?;
    let nodes: Api<Node> = Api::all(client.clone());
    for n in ["node-a", "node-b"] {
        let mut node = Node::default();
        node.metadata.name = Some(n.into());
        nodes.create(&PostParams::default(), &node).await?;
    }
    let journal = Journal::new();
    let violations = Violations::new(journal.clone());
    let ranges = nets.iter().map(|n| n.range).collect();
    let checker = Checker::new(
        server.store().clone(),
        ranges,
        INTERVAL,
        GRACE,
        journal.clone(),
        violations.clone(),
    );
    let tasks = vec![tokio::spawn(checker.run())];
    let stuck: HashSet<String> = if scenario == Scenario::S3 {
        ["web-2".to_string()].into()
    } else {
        HashSet::new()
    };
    let agent_config = |node: &str| AgentConfig {
        node: node.into(),
        networks: nets.clone(),
        annotate_after: (Duration::from_millis(100), Duration::from_millis(2000)),
        stuck: stuck.clone(),
        seed,
        clock: server.clock(),
    };
    let agent_a = tokio::spawn(agent::run(server.client(), agent_config("node-a")));
    let mut agent_b = tokio::spawn(agent::run(server.client(), agent_config("node-b")));
    let mut rng = Rng::stream(seed, "scenario");
    let rc = ReconcilerConfig {
        mode,
        interval: INTERVAL,
        grace: GRACE,
        first_run: rng.between(Duration::ZERO, INTERVAL),
        namespace: "default".into(),
        clock: server.clock(),
    };
    let (mut perturber, plan_text) =
        crate::run::perturber(&server, seed, kinds, HORIZON, "reconciler", &journal);
    let log = journal.clone();
    let started = AtomicBool::new(false);
    perturber.supervise("reconciler", move |client| {
        let mut rc = rc.clone();
        if started.swap(true, Ordering::Relaxed) {
            rc.first_run = RESTART;
        }
        reconciler::run(client, rc, log.clone())
    });
    perturber
        .start()
        .expect("the scenario registered the plan's target");
    let workload = async {
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        let driver = Driver {
            pods: &pods,
            journal: &journal,
        };
        match scenario {
            Scenario::S1 => {
                for round in 0..3 {
                    journal.log(format!("statefulset: round {round}"));
                    for i in 0..10 {
                        driver
                            .create(
                                &format!("web-{i}"),
                                if i % 2 == 0 { "node-a" } else { "node-b" },
                            )
                            .await?;
                        tokio::time::sleep(
                            rng.between(Duration::from_secs(1), Duration::from_secs(3)),
                        )
                        .await;
                    }
                    tokio::time::sleep(
                        rng.between(Duration::from_secs(10), Duration::from_secs(30)),
                    )
                    .await;
                    for i in (0..10).rev() {
                        driver.delete(&format!("web-{i}")).await?;
                    }
                    tokio::time::sleep(
                        rng.between(Duration::from_secs(2), Duration::from_secs(10)),
                    )
                    .await;
                }
            }
            Scenario::S2 => {
                for i in 0..6 {
                    driver
                        .create(
                            &format!("web-{i}"),
                            if i % 2 == 0 { "node-a" } else { "node-b" },
                        )
                        .await?;
                    tokio::time::sleep(rng.between(Duration::from_secs(1), Duration::from_secs(3)))
                        .await;
                }
                tokio::time::sleep(rng.between(Duration::from_secs(5), Duration::from_secs(40)))
                    .await;
                journal.log("node-b crashes: its agent dies, its pods vanish without CNI DEL");
                agent_b.abort();
                for i in (1..6).step_by(2) {
                    let name = format!("web-{i}");
                    pods.delete(
                        &name,
                        &DeleteParams {
                            grace_period_seconds: Some(0),
                            ..DeleteParams::default()
                        },
                    )
                    .await?;
                    journal.log(format!("pod {name} force-deleted"));
                }
                for i in (1..6).step_by(2) {
                    driver.create(&format!("web-{i}"), "node-a").await?;
                    tokio::time::sleep(rng.between(Duration::from_secs(1), Duration::from_secs(3)))
                        .await;
                }
                tokio::time::sleep(rng.between(Duration::from_secs(30), Duration::from_secs(120)))
                    .await;
                journal.log("node-b's agent restarts with fresh state");
                agent_b = tokio::spawn(agent::run(server.client(), agent_config("node-b")));
            }
            Scenario::S3 => {
                for i in 0..5 {
                    driver
                        .create(
                            &format!("web-{i}"),
                            if i % 2 == 0 { "node-a" } else { "node-b" },
                        )
                        .await?;
                    tokio::time::sleep(rng.between(Duration::from_secs(1), Duration::from_secs(3)))
                        .await;
                }
            }
        }
        // Long enough for any leak to outlive its bound (I3: 3 intervals; I4:
        // the grace bound plus 3 intervals).
        tokio::time::sleep(GRACE + INTERVAL * 4).await;
        Ok::<_, ScenarioError>(())
    };
    let (_, livelock) = crate::run::bounded(&perturber, &journal, workload).await?;
    agent_a.abort();
    agent_b.abort();
    let events = crate::run::finish(server, perturber, &tasks).await;
    Ok(Report {
        scenario,
        mode,
        seed,
        plan: plan_text,
        events,
        violations: violations.all(),
        journal: journal.entries(),
        measured: (),
        livelock,
    })
}

/// Creates and deletes the StatefulSet's pods.
struct Driver<'a> {
    pods: &'a Api<Pod>,
    journal: &'a Journal,
}

impl Driver<'_> {
    /// Create a pod on `node` and wait (bounded) for it to run.
    async fn create(&self, name: &str, node: &str) -> Result<(), ScenarioError> {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"app": "web"}},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "nginx", "image": "nginx"}]}}))
        .expect("a valid pod");
        let created = self.pods.create(&PostParams::default(), &pod).await?;
        self.journal.log(format!(
            "pod {name} created on {node} (uid {})",
            created.uid().unwrap_or_default()
        ));
        // OrderedReady: the next pod waits for this one (at most 10 s).
        let running = await_condition(self.pods.clone(), name, conditions::is_pod_running());
        if tokio::time::timeout(Duration::from_secs(10), running)
            .await
            .is_ok()
        {
            self.journal.log(format!("pod {name} running"));
        }
        Ok(())
    }

    /// Delete a pod and wait (bounded) for it to go.
    async fn delete(&self, name: &str) -> Result<(), ScenarioError> {
        let Some(p) = self.pods.get_opt(name).await? else {
            return Ok(());
        };
        self.pods.delete(name, &DeleteParams::default()).await?;
        self.journal.log(format!("pod {name} deleted"));
        let uid = p.uid().unwrap_or_default();
        let gone = await_condition(self.pods.clone(), name, conditions::is_deleted(&uid));
        let _ = tokio::time::timeout(Duration::from_secs(30), gone).await;
        Ok(())
    }
}
