//! The CNS agent of one node: a `GuardedController` over the node's
//! NodeNetworkConfig feeding the in-memory IPAM state, a sync loop that
//! marks IPs Available once the host reports their NC programmed, and the
//! CNI calls ([`Cns::add`], [`Cns::del`]) pods make.
//!
//! Variants (`--mode`):
//! - `naive`: upstream before its fixes. At startup it GETs the NNC by name
//!   and ingests it, whoever controls it; IPAM state [`ByAddress`].
//! - `upstream`: the merged fix (#4199): startup goes through the reconcile
//!   path, which ingests only an NNC whose controller uid is the Node's uid
//!   (read once, at startup); IPAM state still [`ByAddress`].
//! - `guarded`: [`OwnerUid`] as the controller's guard (not terminating,
//!   controller uid = the live Node's uid, read fresh for every check) and
//!   IPAM state [`ByContainer`], which holds the other three fixes by
//!   construction.
//!
//! A restarted agent restores which pod holds which address before it
//! serves. CNS has two sources for that: the pods the API lists on the node
//! (its Kubernetes pod-info provider) and the CNI's own endpoint state (its
//! CNI provider, `InitializeFromCNI`). `naive` and `upstream` restore from
//! the pods; `guarded` from the node's CNI state — the [`Sandboxes`] that
//! hold an address, from CNI ADD to CNI DEL. The pods are the wrong source
//! twice over: a terminating pod's record must be restored (its sandbox
//! may still be up), yet a restart between its CNI DEL and the kubelet's
//! final delete then restores an address no CNI DEL will ever release — a
//! leak, which invariant I5 judges. The data plane has neither problem.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use kube::runtime::controller::Action;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use ward_guards::owner_uid::OwnerUid;
use ward_runtime::{Guard, GuardContext, GuardError, GuardedController, Verdict};

use super::cluster::Host;
use super::ipam::{ByAddress, ByContainer, IpConfig, Ipam, IpamError};
use super::model::{NAMESPACE, NodeNetworkConfig, POD_IP};
use crate::journal::Journal;

pub use crate::run::Mode;

/// The node's pod sandboxes that hold an address — the CNI's endpoint
/// state: pod key -> IP, from the CNI ADD that gave it to the CNI DEL that
/// freed it (kept by the [kubelet](super::kubelet)).
pub type Sandboxes = Arc<Mutex<std::collections::BTreeMap<String, String>>>;

/// A fresh, empty IPAM state of `mode`'s model: upstream's for naive and
/// upstream, Ward's for guarded.
#[must_use]
pub fn fresh_ipam(mode: Mode) -> Box<dyn Ipam> {
    match mode {
        Mode::Naive | Mode::Upstream => Box::new(ByAddress::default()),
        Mode::Guarded => Box::new(ByContainer::default()),
    }
}

/// Errors of the agent.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// An API call failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// The IPAM state refused the NNC.
    #[error(transparent)]
    Ipam(#[from] IpamError),
    /// The agent is not serving (it has not ingested its NNC yet).
    #[error("CNS is not ready")]
    NotReady,
}

/// The agent's in-memory state: lost when the agent restarts.
#[derive(Debug)]
pub struct State {
    /// The IPAM state.
    pub ipam: Box<dyn Ipam>,
    /// Whether it has ingested an NNC and restored its pods (it serves
    /// CNI calls only then).
    pub ready: bool,
}

/// One node's CNS: its state, shared by the reconciler, the sync loop, the
/// CNI calls and the invariant checker.
#[derive(Debug, Clone)]
pub struct Cns {
    node: String,
    mode: Mode,
    state: Arc<Mutex<State>>,
    /// The node's CNI endpoint state (what `guarded` restores from).
    cni: Sandboxes,
    journal: Journal,
    /// Where the state is written after each change, if anywhere.
    state_file: Option<Arc<std::path::Path>>,
}

impl Cns {
    /// CNS for `node` in `mode`, not running yet; `cni` is the node's CNI
    /// endpoint state (the kubelet's [`Sandboxes`]; empty where no CNI
    /// calls this agent).
    #[must_use]
    pub fn new(node: &str, mode: Mode, cni: Sandboxes, journal: Journal) -> Self {
        Cns {
            node: node.into(),
            mode,
            state: Arc::new(Mutex::new(State {
                ipam: fresh_ipam(mode),
                ready: false,
            })),
            cni,
            journal,
            state_file: None,
        }
    }

    /// Write the state to `path` (JSON, replaced whole) whenever it
    /// changes, as real CNS persists its own: how a process outside the
    /// agent (an operator, a campaign's invariant) sees what it holds.
    #[must_use]
    pub fn state_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.state_file = Some(Arc::from(path.into()));
        self
    }

    /// The state as the file holds it: `{"node", "mode", "ready", "ncs":
    /// {id: {version, hostVersion, ips}}, "ips": [{ip, nc, state, pod}]}`.
    fn json_of(&self, s: &State) -> serde_json::Value {
        serde_json::json!({
            "node": self.node,
            "mode": self.mode.to_string(),
            "ready": s.ready,
            "ncs": s.ipam.ncs(),
            "ips": s.ipam.configs(),
        })
    }

    /// Write the state file, if there is one (a failure is journaled: the
    /// agent serves on). The state stays locked until the file is in
    /// place, so writers take turns and the last one wrote the latest.
    fn persist(&self) {
        let Some(path) = &self.state_file else {
            return;
        };
        let s = self.state();
        let tmp = path.with_extension("tmp");
        let body = self.json_of(&s).to_string();
        let written = std::fs::write(&tmp, body).and_then(|()| std::fs::rename(&tmp, path));
        drop(s);
        if let Err(e) = written {
            self.journal.log(format!(
                "cns ({}): cannot write {}: {e}",
                self.mode,
                path.display()
            ));
        }
    }

    /// The state, locked.
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forget everything (the agent died): empty state, not serving.
    pub fn reset(&self) {
        *self.state() = State {
            ipam: fresh_ipam(self.mode),
            ready: false,
        };
    }

    /// CNI ADD for `pod`: the IP it holds or a new one. Also returns how
    /// many IPs were Available when the call came.
    pub fn add(&self, pod: &str) -> (Result<IpConfig, AgentError>, usize) {
        let mut s = self.state();
        if !s.ready {
            return (Err(AgentError::NotReady), 0);
        }
        let available = s.ipam.available();
        let r = s.ipam.request(pod).map_err(Into::into);
        drop(s);
        if r.is_ok() {
            self.persist();
        }
        (r, available)
    }

    /// CNI DEL for `pod`.
    pub fn del(&self, pod: &str) -> Option<IpConfig> {
        let mut s = self.state();
        if !s.ready {
            return None;
        }
        let r = s.ipam.release(pod);
        drop(s);
        if r.is_some() {
            self.persist();
        }
        r
    }

    /// Run the agent until aborted: it starts from empty state (a restart
    /// loses everything in memory), ingests its NNC through the controller
    /// and keeps syncing with the host. Errors only on setup.
    pub async fn run(self, client: Client, host: Host) -> Result<(), AgentError> {
        self.reset();
        self.persist();
        let me = Arc::new(self);
        let nncs: Api<NodeNetworkConfig> = Api::namespaced(client.clone(), NAMESPACE);
        let node_uid = match me.mode {
            Mode::Naive => {
                // Startup reads the NNC by name and takes whatever it finds.
                if let Some(nnc) = nncs.get_opt(&me.node).await? {
                    me.journal.log(format!(
                        "cns ({}): startup GET found NNC {} (uid {})",
                        me.mode,
                        me.node,
                        nnc.uid().unwrap_or_default()
                    ));
                    me.ingest(&client, &nnc).await?;
                }
                None
            }
            Mode::Upstream => {
                // Its Node's uid, read once (waiting for the Node to exist).
                let nodes: Api<Node> = Api::all(client.clone());
                loop {
                    if let Some(n) = nodes.get_opt(&me.node).await? {
                        break Some(n.uid().unwrap_or_default());
                    }
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
            }
            Mode::Guarded => None,
        };
        let mut ctl = GuardedController::new(
            nncs,
            watcher::Config::default().fields(&format!("metadata.name={}", me.node)),
        );
        if me.mode == Mode::Guarded {
            ctl = ctl.guard(Journaled {
                inner: OwnerUid::<Node>::new(),
                cns: me.clone(),
            });
        }
        let ctx = Arc::new(Ctx {
            cns: me.clone(),
            client,
            node_uid,
        });
        // One task: aborting the agent stops its sync loop too.
        tokio::select! {
            () = ctl.run(reconcile, error_policy, ctx).for_each(|_| async {}) => {}
            () = me.clone().sync(host) => {}
        }
        Ok(())
    }

    /// Ingest `nnc` and, the first time, restore the pods of this node.
    async fn ingest(&self, client: &Client, nnc: &NodeNetworkConfig) -> Result<(), AgentError> {
        let ready = self.state().ready;
        let restore = match (ready, self.mode) {
            (true, _) => Vec::new(),
            (false, Mode::Guarded) => self.cni_endpoints(),
            (false, Mode::Naive | Mode::Upstream) => self.held_ips(client).await?,
        };
        let mut s = self.state();
        let notes = s.ipam.ingest(nnc.containers())?;
        for n in notes {
            self.journal.log(format!("cns ({}): {n}", self.mode));
        }
        if !s.ready {
            for (pod, ip) in restore {
                match s.ipam.restore(&pod, &ip) {
                    Ok(()) => self
                        .journal
                        .log(format!("cns ({}): restored {pod} -> {ip}", self.mode)),
                    Err(e) => self.journal.log(format!("cns ({}): {e}", self.mode)),
                }
            }
            s.ready = true;
        }
        drop(s);
        self.persist();
        Ok(())
    }

    /// The IPs the node's sandboxes hold, from the CNI's endpoint state.
    fn cni_endpoints(&self) -> Vec<(String, String)> {
        let cni = self.cni.lock().unwrap_or_else(|e| e.into_inner());
        cni.iter().map(|(p, ip)| (p.clone(), ip.clone())).collect()
    }

    /// The IPs the node's pods hold, from their records. Terminating pods
    /// count: the kubelet tears a sandbox down (CNI DEL) only after the
    /// pod's deletion is marked, so a terminating pod's address may still
    /// be in use and must not be handed on before its CNI DEL. (The price:
    /// a restart between a pod's CNI DEL and the kubelet's final delete
    /// restores an address nobody will release — a leak, never a
    /// duplicate; see the module docs.)
    async fn held_ips(&self, client: &Client) -> Result<Vec<(String, String)>, AgentError> {
        let pods: Api<Pod> = Api::all(client.clone());
        let lp = ListParams::default().fields(&format!("spec.nodeName={}", self.node));
        Ok(pods
            .list(&lp)
            .await?
            .into_iter()
            .filter_map(|p| {
                let ip = p.annotations().get(POD_IP)?.clone();
                Some((pod_key(&p), ip))
            })
            .collect())
    }

    /// Every second: NCs the host reports programmed make their IPs
    /// Available.
    async fn sync(self: Arc<Self>, host: Host) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            let mut s = self.state();
            let ids: Vec<String> = s.ipam.ncs().keys().cloned().collect();
            let mut changed = false;
            for id in ids {
                if let Some(v) = host.programmed(&self.node, &id) {
                    let n = s.ipam.mark_programmed(&id, v);
                    changed |= n > 0;
                    if n > 0 {
                        self.journal.log(format!(
                            "cns ({}): host programmed NC {id} v{v}: {n} IPs Available",
                            self.mode
                        ));
                    }
                }
            }
            drop(s);
            if changed {
                self.persist();
            }
        }
    }
}

/// A guard that journals the verdicts of `inner` other than proceed (the
/// controller reports them only to tracing and metrics).
struct Journaled<G> {
    inner: G,
    cns: Arc<Cns>,
}

#[async_trait::async_trait]
impl<G: Guard<NodeNetworkConfig>> Guard<NodeNetworkConfig> for Journaled<G> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    async fn check(
        &self,
        nnc: &NodeNetworkConfig,
        ctx: &GuardContext,
    ) -> Result<Verdict, GuardError> {
        let v = self.inner.check(nnc, ctx).await?;
        if let Verdict::Skip { reason } = &v {
            self.cns.journal.log(format!(
                "cns ({}): guard {} skipped NNC uid {}: {reason}",
                self.cns.mode,
                self.inner.name(),
                nnc.uid().unwrap_or_default()
            ));
        }
        Ok(v)
    }
}

/// A pod's key in CNS: `namespace/name`.
#[must_use]
pub fn pod_key(p: &Pod) -> String {
    format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any())
}

struct Ctx {
    cns: Arc<Cns>,
    client: Client,
    /// `upstream`: the Node's uid, read at startup.
    node_uid: Option<String>,
}

async fn reconcile(nnc: Arc<NodeNetworkConfig>, ctx: Arc<Ctx>) -> Result<Action, AgentError> {
    let cns = &ctx.cns;
    if let Some(uid) = &ctx.node_uid {
        let controller = nnc.controller().map(|r| r.uid.as_str()).unwrap_or("");
        if controller != uid {
            cns.journal.log(format!(
                "cns ({}): NNC {} is controlled by {controller}, not node uid {uid}: ignored",
                cns.mode, cns.node
            ));
            return Ok(Action::await_change());
        }
    }
    cns.ingest(&ctx.client, &nnc).await?;
    Ok(Action::await_change())
}

fn error_policy(_: Arc<NodeNetworkConfig>, e: &AgentError, ctx: Arc<Ctx>) -> Action {
    ctx.cns
        .journal
        .log(format!("cns ({}): reconcile failed: {e}", ctx.cns.mode));
    Action::requeue(Duration::from_secs(2))
}
