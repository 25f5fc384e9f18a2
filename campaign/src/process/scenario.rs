//! What a black-box campaign runs.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::workload::Workload;
use crate::world::Limits;

/// What a black-box campaign runs: one controller command, the setup,
/// the workload and the bounds of every wait.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The controller's command line (program and arguments).
    pub controller: Vec<String>,
    /// Its name: the identity the plan aims at (`controller` by default).
    pub name: String,
    /// Objects applied before the controller starts (CRDs, RBAC, initial
    /// objects), CRDs and Namespaces first.
    pub manifests: Vec<Value>,
    /// The workload.
    pub workload: Workload,
    /// A command run against the server once the run has settled
    /// (KUBECONFIG and [`RUN_DIR`](super::RUN_DIR) set): exit 0 or the
    /// run is a violation.
    pub invariant: Option<Vec<String>>,
    /// A command that judges the run's history once it has settled: every
    /// committed write, one JSON object a line (`rv`, `type`, `key`,
    /// `object`), on its standard input, KUBECONFIG set; exit 0 or the run
    /// is a violation (for what happens and heals before the end).
    pub judge: Option<Vec<String>>,
    /// How long the plan's windows are drawn over (by default the
    /// workload's sleeps, at least 5s).
    pub horizon: Option<Duration>,
    /// Settled once nothing has been written for this long after the
    /// plan is done (3s). It must outlast the controller's longest wait
    /// before a retry: a controller that requeues a failed write after 2s
    /// has not finished when nothing was written for 1s.
    pub quiet: Duration,
    /// At most this long to settle (30s).
    pub settle: Duration,
    /// The controller must make its first API call within this (20s).
    pub start_timeout: Duration,
    /// Serve the controller's listener, and the server's own (the
    /// kubeconfig of the workload's commands, the invariant and the
    /// judge), over HTTPS with the server's CA: client-go sends its
    /// credentials only over TLS. Off by default; `rbac` turns it on.
    pub tls: bool,
    /// Authorize every request with RBAC (kube-apiserver's
    /// `--authorization-mode RBAC`), over HTTPS: the controller gets only
    /// what the setup manifests' Roles and bindings grant its
    /// ServiceAccount (`system:serviceaccount:default:<name>`), and a 403
    /// shows in its timeline and under the table. Off by default (every
    /// request allowed).
    pub rbac: bool,
    /// Bounds on the controller's API calls.
    pub limits: Limits,
    /// Where each seed's kubeconfigs and the controller's output go
    /// (`<dir>/seed-N/`).
    pub dir: PathBuf,
}

impl Scenario {
    /// A scenario running `controller` under `workload`, its files under
    /// a fresh folder of the system's temporary directory.
    #[must_use]
    pub fn new(controller: Vec<String>, workload: Workload) -> Scenario {
        Scenario {
            controller,
            name: "controller".into(),
            manifests: Vec::new(),
            workload,
            invariant: None,
            judge: None,
            horizon: None,
            quiet: Duration::from_secs(3),
            settle: Duration::from_secs(30),
            start_timeout: Duration::from_secs(20),
            tls: false,
            rbac: false,
            limits: Limits {
                calls_per_instant: u64::MAX,
                calls: 200_000,
            },
            dir: std::env::temp_dir().join(format!("ward-campaign-{}", std::process::id())),
        }
    }

    /// The setup manifests.
    #[must_use]
    pub fn manifests(mut self, objects: Vec<Value>) -> Self {
        self.manifests = objects;
        self
    }

    /// The user's invariant command.
    #[must_use]
    pub fn invariant(mut self, argv: Vec<String>) -> Self {
        self.invariant = Some(argv);
        self
    }

    /// The user's judge of the history.
    #[must_use]
    pub fn judge(mut self, argv: Vec<String>) -> Self {
        self.judge = Some(argv);
        self
    }

    /// Authorize with RBAC, over HTTPS (the `rbac` field).
    #[must_use]
    pub fn rbac(mut self, on: bool) -> Self {
        self.rbac = on;
        self
    }

    /// Serve HTTPS (the `tls` field).
    #[must_use]
    pub fn tls(mut self, on: bool) -> Self {
        self.tls = on;
        self
    }

    /// Whether the listeners serve HTTPS: asked for, or needed by RBAC.
    #[must_use]
    pub fn https(&self) -> bool {
        self.tls || self.rbac
    }

    /// Where runs keep their files.
    #[must_use]
    pub fn dir(mut self, dir: PathBuf) -> Self {
        self.dir = dir;
        self
    }

    /// The plan's horizon: the `horizon` field, else the workload's
    /// sleeps, at least 5s.
    #[must_use]
    pub fn horizon(&self) -> Duration {
        self.horizon
            .unwrap_or_else(|| self.workload.sleeps.max(Duration::from_secs(5)))
    }
}
