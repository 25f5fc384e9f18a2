//! What every example's scenarios share: which scenario, which variant of
//! the controller, setting the embedded server up, following its store, and
//! running in simulated time (with the `sim` feature).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, CustomResourceExt};
use ward_apiserver::store::StorageKey;

/// Errors setting a scenario (or a live run's embedded server) up, or
/// driving it.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The embedded server would not start.
    #[error("starting the embedded server: {0}")]
    Server(#[from] ward_apiserver::ServerError),
    /// An API call failed.
    #[error("API call failed: {0}")]
    Kube(#[from] kube::Error),
    /// A CRD (its kind) did not become established.
    #[error("the {0} CRD did not become established")]
    Crd(String),
    /// A step did not happen within its (simulated) time.
    #[error("timed out waiting for {0}")]
    Timeout(&'static str),
    /// The seed's plan could not be carried out.
    #[error("the plan: {0}")]
    Plan(String),
    /// A component the scenario drives failed.
    #[error(transparent)]
    Component(Box<dyn std::error::Error + Send + Sync>),
}

/// Install `K`'s CRD and wait (up to 30 s) until it is served.
pub async fn install_crd<K: CustomResourceExt>(client: &Client) -> Result<(), ScenarioError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = K::crd();
    let kind = crd.spec.names.kind.clone();
    crds.create(&PostParams::default(), &crd).await?;
    let established = await_condition(crds, K::crd_name(), conditions::is_crd_established());
    tokio::time::timeout(Duration::from_secs(30), established)
        .await
        .map_err(|_| ScenarioError::Crd(kind.clone()))?
        .map_err(|_| ScenarioError::Crd(kind))?;
    Ok(())
}

/// Where the server's store keeps objects of `group` and `plural` (what
/// the invariant checkers read).
#[must_use]
pub fn key(group: &str, plural: &str) -> StorageKey {
    StorageKey {
        group: group.into(),
        plural: plural.into(),
    }
}

/// Which variant of an example's controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    /// The controller as it was when the bug was reported.
    Naive,
    /// With the fix upstream merged.
    Upstream,
    /// Built from Ward's guards.
    Guarded,
}

impl Mode {
    /// Every mode.
    pub const ALL: [Mode; 3] = [Mode::Naive, Mode::Upstream, Mode::Guarded];
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Naive => "naive",
            Mode::Upstream => "upstream",
            Mode::Guarded => "guarded",
        })
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "naive" => Ok(Mode::Naive),
            "upstream" => Ok(Mode::Upstream),
            "guarded" => Ok(Mode::Guarded),
            other => Err(format!(
                "unknown mode {other:?}: naive, upstream or guarded"
            )),
        }
    }
}

/// Which scenario (each example's scenario module says what each does).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scenario {
    /// The seed race.
    S1,
    /// The second scenario.
    S2,
    /// The third scenario.
    S3,
}

impl Scenario {
    /// Every scenario.
    pub const ALL: [Scenario; 3] = [Scenario::S1, Scenario::S2, Scenario::S3];
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

impl FromStr for Scenario {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "S1" | "s1" => Ok(Scenario::S1),
            "S2" | "s2" => Ok(Scenario::S2),
            "S3" | "s3" => Ok(Scenario::S3),
            other => Err(format!("unknown scenario {other:?}: S1, S2 or S3")),
        }
    }
}

/// Run `fut` on its own single-threaded runtime with tokio's clock paused
/// (simulated time), as every scenario runs.
#[cfg(feature = "sim")]
pub use ward_campaign::simulate;

/// The seed's plan of `kinds` over the scenario's controller under test
/// `target`, drawn over `horizon`, and a perturber for it that journals
/// what it does; with the plan as printed (for the report).
#[cfg(feature = "sim")]
#[must_use]
pub fn perturber(
    server: &ward_apiserver::ApiServer,
    seed: u64,
    kinds: &[std::sync::Arc<dyn ward_campaign::Perturbation>],
    horizon: std::time::Duration,
    target: &str,
    journal: &crate::journal::Journal,
) -> (ward_campaign::Perturber, String) {
    let plan = ward_campaign::Plan::draw(seed, kinds, horizon, &[target.to_string()])
        .expect("every kind has its target");
    let text = plan.to_string();
    let log = journal.clone();
    (
        ward_campaign::Perturber::new(server, plan, move |line| log.log(line)),
        text,
    )
}

/// Run a scenario's `workload` inside `perturber`'s bound
/// ([`ward_campaign::Perturber::run`]): its output, or — when the
/// controllers livelock first — `None` and the verdict, journaled.
///
/// # Errors
/// The workload's own.
#[cfg(feature = "sim")]
pub async fn bounded<T>(
    perturber: &ward_campaign::Perturber,
    journal: &crate::journal::Journal,
    workload: impl Future<Output = Result<T, ScenarioError>>,
) -> Result<(Option<T>, Option<String>), ScenarioError> {
    match perturber.run(workload).await {
        Ok(done) => Ok((Some(done?), None)),
        Err(verdict) => {
            journal.log(format!("run ended early: {verdict}"));
            Ok((None, Some(verdict.to_string())))
        }
    }
}

/// End a scenario's run: stop its `tasks` and the perturber (and with it
/// the controllers), then the server; the history the perturber recorded
/// (see [`ward_campaign::Perturber::events`]).
#[cfg(feature = "sim")]
pub async fn finish(
    server: ward_apiserver::ApiServer,
    perturber: ward_campaign::Perturber,
    tasks: &[tokio::task::JoinHandle<()>],
) -> Vec<String> {
    for t in tasks {
        t.abort();
    }
    let events = perturber.events();
    drop(perturber);
    server.shutdown().await;
    events
}

/// Call `check` on every change of `store` (with the event) and at least
/// every second (without one: a lagging subscriber also lands here), until
/// the store closes: how every example's invariant checker follows the
/// server's own state.
pub async fn follow_store(
    store: &ward_apiserver::store::Store,
    mut check: impl FnMut(Option<&ward_apiserver::store::Event>),
) {
    use tokio::sync::broadcast::error::RecvError;
    let (_, _, mut rx) = store.snapshot_all_and_subscribe();
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    loop {
        tokio::select! {
            biased;
            ev = rx.recv() => match ev {
                Ok(e) => check(Some(&e)),
                Err(RecvError::Lagged(_)) => check(None),
                Err(RecvError::Closed) => return,
            },
            _ = tick.tick() => check(None),
        }
    }
}

/// What an invariant checker made of each stored object, made once per
/// version: a checker reads the store on every event, and parsing every
/// object again each time was most of a simulated run's instructions
/// (callgrind, #61: 72% of a CNS run, 47% of an LWS one). A version is
/// known by its resourceVersion, which the store gives no two writes.
#[derive(Debug)]
pub struct Parsed<T> {
    by_rv: std::collections::HashMap<u64, Arc<T>>,
}

impl<T> Default for Parsed<T> {
    fn default() -> Self {
        Parsed {
            by_rv: std::collections::HashMap::new(),
        }
    }
}

impl<T> Parsed<T> {
    /// `parse` of `o`, made only if this version of it was not parsed yet;
    /// kept until the next [`all`](Self::all) drops the versions it did not
    /// list.
    pub fn get(
        &mut self,
        o: &ward_apiserver::store::StoredObject,
        parse: impl FnOnce(&ward_apiserver::store::StoredObject) -> T,
    ) -> Arc<T> {
        self.by_rv
            .entry(o.rv)
            .or_insert_with(|| Arc::new(parse(o)))
            .clone()
    }

    /// `parse` of each of `items`, in order; afterwards only their
    /// versions are kept.
    pub fn all(
        &mut self,
        items: &[Arc<ward_apiserver::store::StoredObject>],
        mut parse: impl FnMut(&ward_apiserver::store::StoredObject) -> T,
    ) -> Vec<Arc<T>> {
        let mut kept = std::collections::HashMap::with_capacity(items.len());
        let out = items
            .iter()
            .map(|o| {
                let v = match self.by_rv.remove(&o.rv) {
                    Some(v) => v,
                    None => Arc::new(parse(o)),
                };
                kept.insert(o.rv, v.clone());
                v
            })
            .collect();
        self.by_rv = kept;
        out
    }
}

/// Complete on SIGTERM or SIGINT ([`ward_runtime::shutdown::signal`]). Should the
/// handlers fail to install, never complete: the signals then keep their
/// default action and end the process.
pub async fn until_signal() {
    match ward_runtime::shutdown::signal() {
        Ok(signal) => signal.await,
        Err(e) => {
            tracing::warn!(error = %e, "no signal handlers: SIGTERM ends the process at once");
            std::future::pending().await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Patch, PatchParams};

    #[tokio::test(start_paused = true)]
    async fn each_version_is_parsed_once_and_only_live_versions_are_kept() {
        let server = ward_apiserver::ApiServer::start_in_process().await;
        let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        for name in ["a", "b"] {
            let mut cm = ConfigMap::default();
            cm.metadata.name = Some(name.into());
            cms.create(&PostParams::default(), &cm).await.unwrap();
        }
        let list = || {
            server
                .store()
                .list(&key("", "configmaps"), Some("default"), None, None, |_| {
                    true
                })
                .items
        };
        let mut parsed = Parsed::default();
        let mut calls = 0;
        let mut names = |items: &[Arc<ward_apiserver::store::StoredObject>], calls: &mut i32| {
            parsed
                .all(items, |o| {
                    *calls += 1;
                    o.value()["metadata"]["name"].as_str().unwrap().to_string()
                })
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
        };
        // The namespace also holds the cluster's root CA ConfigMap.
        let all = ["a", "b", "kube-root-ca.crt"];
        assert_eq!(names(&list(), &mut calls), all);
        assert_eq!(names(&list(), &mut calls), all);
        assert_eq!(calls, 3, "each version once");
        let patch = serde_json::json!({"data": {"k": "v"}});
        cms.patch("a", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
        assert_eq!(names(&list(), &mut calls), all);
        assert_eq!(calls, 4, "only the new version of a");
        assert_eq!(parsed.by_rv.len(), 3, "the old version forgotten");
        server.shutdown().await;
    }
}
