//! Scenarios, each a seeded run in simulated time against an embedded
//! ward-apiserver, with the invariants checked throughout. One node,
//! `node-a`, with the overlay prefix [`PREFIX`](super::PREFIX):
//!
//! - **S1** the seed: pods hold IPs; the node's VM is replaced — Node
//!   deleted and recreated under the same name while the GC is paused, the
//!   host forgets its NCs — and CNS restarts inside that window, with new
//!   pods waiting; then the GC removes the stale NNC and the network
//!   controller writes the new one, same prefix, new NC.
//! - **S2** an NC replaced inside a valid NNC (new NC id, same prefix),
//!   with pods holding IPs and more arriving — what the merged upstream fix
//!   does not cover.
//! - **S3** CNS restarts while pods hold IPs: its state is rebuilt from the
//!   NNC and the pods; nothing lost, nothing assigned twice.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use ward_apiserver::{ApiServer, ServerConfig};
use ward_base::Rng;
use ward_campaign::{Controller, Perturbation};

use super::agent::{Cns, Mode};
use super::cluster::{Host, Writer};
use super::invariants::{Checker, Violations};
use super::kubelet::Kubelet;
use super::{AzureCns, NODE, install, writer_config};
use crate::example::Report;
use crate::journal::Journal;
use crate::run::{Scenario, ScenarioError};

/// How long the part of a run worth perturbing lasts (plans are drawn over it).
pub const HORIZON: Duration = Duration::from_secs(90);

/// Everything running on and for the node.
struct Site {
    cns: Cns,
    /// The CNS agent, the controller under test (a plan may crash it).
    agent: Controller,
    kubelet: Kubelet,
    journal: Journal,
}

impl Site {
    /// CNS dies: its memory is gone and it serves nothing until restarted.
    fn kill_cns(&mut self) {
        self.agent.stop();
        self.cns.reset();
        self.journal.log("cns: killed (its state is lost)");
    }

    fn restart_cns(&mut self) {
        self.journal.log("cns: starting");
        self.agent.start();
    }

    /// Wait (bounded, in simulated time) until no pod waits for an IP.
    async fn served(&self, within: Duration) -> bool {
        let mut waiting = self.kubelet.waiting().subscribe();
        let empty = waiting.wait_for(BTreeMap::is_empty);
        matches!(tokio::time::timeout(within, empty).await, Ok(Ok(_)))
    }

    async fn create_pods(
        &self,
        round: usize,
        n: usize,
        rng: &mut Rng,
    ) -> Result<(), ScenarioError> {
        for i in 0..n {
            self.kubelet.create(&format!("web-{round}-{i}")).await?;
            tokio::time::sleep(rng.between(Duration::from_millis(200), Duration::from_secs(2)))
                .await;
        }
        Ok(())
    }
}

async fn create_node(nodes: &Api<Node>, journal: &Journal) -> Result<String, ScenarioError> {
    let mut node = Node::default();
    node.metadata.name = Some(NODE.into());
    let uid = nodes
        .create(&PostParams::default(), &node)
        .await?
        .uid()
        .unwrap_or_default();
    journal.log(format!("node {NODE} created (uid {uid})"));
    Ok(uid)
}

/// Run a scenario (inside a runtime with a paused clock), carrying out the
/// seed's plan of `kinds` against the CNS agent.
pub async fn run(
    scenario: Scenario,
    mode: Mode,
    seed: u64,
    kinds: &[Arc<dyn Perturbation>],
) -> Result<Report<AzureCns>, ScenarioError> {
    let server = ApiServer::start(ServerConfig::default().seed(seed)).await?;
    let client = server.client();
    install(&client).await?;
    let mut rng = Rng::stream(seed, "cns-scenario");
    let journal = Journal::new();
    let violations = Violations::new(journal.clone());
    let host = Host::default();
    let nodes: Api<Node> = Api::all(client.clone());
    create_node(&nodes, &journal).await?;
    let writer = Writer::new(
        client.clone(),
        host.clone(),
        writer_config(seed),
        journal.clone(),
    );
    let mut tasks = vec![tokio::spawn(writer.run())];
    let kubelet = Kubelet::new(client.clone(), NODE, journal.clone(), violations.clone());
    let cns = Cns::new(NODE, mode, kubelet.sandboxes(), journal.clone());
    let (mut perturber, plan_text) =
        crate::run::perturber(&server, seed, kinds, HORIZON, "cns", &journal);
    let (c, h, log) = (cns.clone(), host.clone(), journal.clone());
    let agent = perturber.supervise("cns", move |client| {
        let (cns, host, journal) = (c.clone(), h.clone(), log.clone());
        async move {
            // `run` starts from a reset state: a restart loses everything.
            if let Err(e) = cns.run(client, host).await {
                journal.log(format!("cns: failed to start: {e}"));
            }
        }
    });
    let mut node = Site {
        agent,
        cns: cns.clone(),
        kubelet: kubelet.clone(),
        journal: journal.clone(),
    };
    tasks.push(tokio::spawn(kubelet.clone().run(cns.clone())));
    let checker = Checker {
        store: server.store().clone(),
        node: NODE.into(),
        cns: cns.clone(),
        host: host.clone(),
        waiting: kubelet.waiting(),
        sandboxes: kubelet.sandboxes(),
        violations: violations.clone(),
        parsed: Default::default(),
    };
    tasks.push(tokio::spawn(checker.clone().run()));

    // Every scenario starts from a node serving pods.
    node.create_pods(0, 5, &mut rng).await?;
    if !node.served(Duration::from_secs(60)).await {
        journal.log("setup: the first pods did not all get IPs within 60 s");
    }
    perturber
        .start()
        .expect("the scenario registered the plan's target");
    let workload = async {
        tokio::time::sleep(rng.between(Duration::from_secs(5), Duration::from_secs(20))).await;
        act(scenario, &server, &mut node, &host, &mut rng).await?;
        // Long enough for the new NC to be programmed and the recovery
        // bound to pass.
        tokio::time::sleep(Duration::from_secs(90)).await;
        checker.settled();
        Ok::<_, ScenarioError>(())
    };
    let (_, livelock) = crate::run::bounded(&perturber, &journal, workload).await?;
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

/// The scenario's own script, from a node serving pods.
async fn act(
    scenario: Scenario,
    server: &ApiServer,
    node: &mut Site,
    host: &Host,
    rng: &mut Rng,
) -> Result<(), ScenarioError> {
    let client = server.client();
    let journal = node.journal.clone();
    let nodes: Api<Node> = Api::all(client.clone());
    match scenario {
        Scenario::S1 => {
            journal.log("node-a's VM is replaced; the GC is paused");
            server.faults().pause_gc();
            node.kill_cns();
            node.kubelet.forget_all();
            let pods: Api<k8s_openapi::api::core::v1::Pod> =
                Api::namespaced(client.clone(), super::kubelet::NAMESPACE);
            for i in 0..5 {
                pods.delete(
                    &format!("web-0-{i}"),
                    &DeleteParams::default().grace_period(0),
                )
                .await?;
            }
            nodes.delete(NODE, &DeleteParams::background()).await?;
            journal.log(format!("node {NODE} deleted"));
            host.reimage(NODE);
            create_node(&nodes, &journal).await?;
            let window = rng.between(Duration::from_secs(20), Duration::from_secs(60));
            let restart = rng.between(Duration::from_secs(1), window / 2);
            tokio::time::sleep(restart).await;
            node.restart_cns();
            node.create_pods(1, 4, rng).await?;
            tokio::time::sleep(window.saturating_sub(restart)).await;
            journal.log("the GC resumes");
            server.faults().resume_gc();
        }
        Scenario::S2 => {
            let mut operator = Writer::new(
                client.clone(),
                host.clone(),
                writer_config(rng.next_u64()),
                journal.clone(),
            );
            journal.log("the network controller replaces node-a's NC (same prefix)");
            operator
                .replace_nc(NODE)
                .await
                .map_err(|e| ScenarioError::Component(e.into()))?;
            node.create_pods(1, 4, rng).await?;
        }
        Scenario::S3 => {
            node.kill_cns();
            tokio::time::sleep(rng.between(Duration::from_secs(1), Duration::from_secs(5))).await;
            node.restart_cns();
            node.create_pods(1, 4, rng).await?;
            for i in 0..2 {
                node.kubelet
                    .delete(&node.cns, &format!("web-0-{i}"))
                    .await?;
            }
            node.create_pods(2, 2, rng).await?;
        }
    }
    Ok(())
}
