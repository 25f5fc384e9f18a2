//! The metrics and health endpoint: Prometheus text at `GET /metrics`,
//! liveness at `GET /healthz`, readiness at `GET /readyz`.
//!
//! [`Observability::start`] binds the listener (127.0.0.1:9090 unless told
//! otherwise; port 0 picks a free one), installs a Prometheus recorder as the
//! process-wide `metrics` recorder (Ward's histogram buckets, every metric
//! described: see [`catalog`]), and serves until the returned
//! [`ObserveHandle`] is shut down or dropped.
//!
//! **`/readyz` means "a healthy candidate that can do its job"**, not "the
//! leader": the [`Readiness`] it reports is a set of named checks, each
//! driven by the part it speaks for —
//! [`GuardedController::readiness`](crate::GuardedController::readiness)
//! passes once the controller's watches have synced,
//! [`LeaderElection::readiness`](crate::LeaderElection::readiness) once the
//! candidate reaches the API server (followers included, so a Deployment's
//! rolling update is not stalled by unready followers; leadership shows in
//! the `ward_leader` gauge). Nothing registered: not ready. `/readyz` answers
//! 200 `ok`, or 503 listing each check (`[+]name ok` / `[-]name failed`).
//! A part that stops (a controller's stream dropped, an election's `run`
//! returned) removes its check. Start the endpoint (which installs the
//! recorder) before the controller or election, so their metrics are
//! described and present at zero from the start (a controller records its
//! per-kind series through handles it registers when it starts: a
//! recorder installed after that never sees them).
//!
//! ```no_run
//! # async fn demo(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use futures::StreamExt;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::Api;
//! use kube::runtime::{controller::Action, watcher};
//! use ward_runtime::GuardedController;
//! use ward_runtime::observe::Observability;
//!
//! let obs = Observability::new()
//!     .listen("0.0.0.0:9090".parse().unwrap())
//!     .start()
//!     .await?;
//! GuardedController::new(Api::<ConfigMap>::all(client), watcher::Config::default())
//!     .readiness(obs.readiness()) // ready once the ConfigMap watch has synced
//!     .shutdown_on_signal()
//!     .run(
//!         |_, _: Arc<()>| async { Ok::<_, kube::Error>(Action::await_change()) },
//!         |_, _, _| Action::await_change(),
//!         Arc::new(()),
//!     )
//!     .for_each(|_| async {})
//!     .await;
//! obs.shutdown().await?;
//! # Ok(())
//! # }
//! ```
//!
//! Only one recorder can be installed per process: a second `start` fails
//! with [`ObserveError::RecorderInstalled`]. To serve a recorder installed
//! elsewhere (or a local one, in tests), pass its handle with
//! [`Observability::prometheus`]; nothing is installed then (build it from
//! [`catalog::prometheus_builder`] for Ward's buckets).

pub mod catalog;
pub(crate) mod readiness;

pub use readiness::{Readiness, ReadyCheck};

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use metrics_exporter_prometheus::{BuildError, PrometheusHandle};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The content type of Prometheus' text exposition format.
pub const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// How often histogram and summary buckets are maintained between scrapes.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// Errors from the metrics and health endpoint.
#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// A global `metrics` recorder is already installed in this process;
    /// pass its [`PrometheusHandle`] with [`Observability::prometheus`].
    #[error("a global metrics recorder is already installed")]
    RecorderInstalled,
    /// The Prometheus recorder could not be built.
    #[error("cannot build the Prometheus recorder: {0}")]
    Recorder(#[source] BuildError),
    /// The server failed while serving.
    #[error("the metrics server failed: {0}")]
    Serve(#[source] std::io::Error),
    /// The server task panicked or was aborted.
    #[error("the metrics server task ended abnormally: {0}")]
    Task(String),
}

/// Install a Prometheus recorder as the process-wide `metrics` recorder and
/// return its handle (for [`Observability::prometheus`], when metrics must
/// be recorded before the endpoint starts).
///
/// The recorder has Ward's histogram buckets
/// ([`catalog::prometheus_builder`]) and every Ward metric described
/// ([`catalog::register`]).
pub fn install_recorder() -> Result<PrometheusHandle, ObserveError> {
    let handle = catalog::prometheus_builder()
        .install_recorder()
        .map_err(|e| match e {
            BuildError::FailedToSetGlobalRecorder(_) => ObserveError::RecorderInstalled,
            e => ObserveError::Recorder(e),
        })?;
    catalog::register();
    Ok(handle)
}

/// The metrics and health endpoint's settings (see the [module docs](self)).
#[derive(Clone)]
pub struct Observability {
    listen: SocketAddr,
    prometheus: Option<PrometheusHandle>,
    readiness: Readiness,
}

impl fmt::Debug for Observability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observability")
            .field("listen", &self.listen)
            .field("prometheus", &self.prometheus.is_some())
            .field("ready", &self.readiness.is_ready())
            .finish()
    }
}

impl Default for Observability {
    fn default() -> Self {
        Self::new()
    }
}

impl Observability {
    /// The default listen address, loopback only.
    pub const DEFAULT_LISTEN: SocketAddr =
        SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 9090);

    /// Listen on 127.0.0.1:9090, install a recorder, not ready.
    #[must_use]
    pub fn new() -> Self {
        Observability {
            listen: Self::DEFAULT_LISTEN,
            prometheus: None,
            readiness: Readiness::new(),
        }
    }

    /// Listen on `addr` (port 0: any free port; [`ObserveHandle::addr`] tells which).
    #[must_use]
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }

    /// Serve this recorder's metrics instead of installing one.
    #[must_use]
    pub fn prometheus(mut self, handle: PrometheusHandle) -> Self {
        self.prometheus = Some(handle);
        self
    }

    /// Share readiness with `readiness` (e.g. one created before the endpoint).
    #[must_use]
    pub fn readiness(mut self, readiness: Readiness) -> Self {
        self.readiness = readiness;
        self
    }

    /// Bind, install the recorder (unless one was given), and serve.
    pub async fn start(self) -> Result<ObserveHandle, ObserveError> {
        let listener = tokio::net::TcpListener::bind(self.listen)
            .await
            .map_err(|source| ObserveError::Bind {
                addr: self.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| ObserveError::Bind {
            addr: self.listen,
            source,
        })?;
        let prometheus = match self.prometheus {
            Some(h) => h,
            None => install_recorder()?,
        };
        let app = router(prometheus.clone(), self.readiness.clone());
        let (stop_tx, mut stop) = watch::channel(false);
        let upkeep = prometheus.clone();
        let task = tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
                let _ = stop.wait_for(|s| *s).await;
            });
            let maintain = async move {
                let mut ticks = tokio::time::interval(UPKEEP_EVERY);
                ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    ticks.tick().await;
                    upkeep.run_upkeep();
                }
            };
            // The upkeep loop never ends: the task ends when serving does.
            tokio::select! {
                served = serve => served,
                _ = maintain => Ok(()),
            }
        });
        tracing::info!(%addr, "serving /metrics, /healthz and /readyz");
        Ok(ObserveHandle {
            addr,
            readiness: self.readiness,
            prometheus,
            stop: stop_tx,
            task: Some(task),
        })
    }
}

fn router(prometheus: PrometheusHandle, readiness: Readiness) -> Router {
    Router::new()
        .route("/metrics", get(metrics_text))
        .with_state(prometheus)
        .route(
            "/readyz",
            get(move || {
                let answer = match readiness.verdict() {
                    (true, _) => (StatusCode::OK, "ok".to_string()),
                    (false, report) => (StatusCode::SERVICE_UNAVAILABLE, report),
                };
                async move { answer }
            }),
        )
        .route("/healthz", get(|| async { "ok" }))
}

async fn metrics_text(State(prometheus): State<PrometheusHandle>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, PROMETHEUS_CONTENT_TYPE)],
        prometheus.render(),
    )
}

/// A running endpoint; dropping it stops the server at once,
/// [`ObserveHandle::shutdown`] stops it gracefully.
pub struct ObserveHandle {
    addr: SocketAddr,
    readiness: Readiness,
    prometheus: PrometheusHandle,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl fmt::Debug for ObserveHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObserveHandle")
            .field("addr", &self.addr)
            .field("ready", &self.readiness.is_ready())
            .finish_non_exhaustive()
    }
}

impl ObserveHandle {
    /// The address actually bound.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Whether `/readyz` answers 200.
    #[must_use]
    pub fn is_ready(&self) -> bool {
        self.readiness.is_ready()
    }

    /// Set the check named `ready` (see [`Readiness::set_ready`]).
    #[deprecated(
        since = "0.2.0",
        note = "register a named check: `handle.readiness().check(name).set(ok)`"
    )]
    pub fn set_ready(&self, ready: bool) {
        #[allow(deprecated)]
        self.readiness.set_ready(ready);
    }

    /// A clone of the readiness checks, to hand to what drives them.
    #[must_use]
    pub fn readiness(&self) -> Readiness {
        self.readiness.clone()
    }

    /// The recorder's handle (render the metrics text without HTTP).
    #[must_use]
    pub fn prometheus(&self) -> &PrometheusHandle {
        &self.prometheus
    }

    /// Stop accepting connections, finish the requests in flight, and wait.
    pub async fn shutdown(mut self) -> Result<(), ObserveError> {
        let _ = self.stop.send(true);
        let Some(task) = self.task.take() else {
            return Ok(());
        };
        match task.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(ObserveError::Serve(e)),
            Err(e) => Err(ObserveError::Task(e.to_string())),
        }
    }
}

impl Drop for ObserveHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metrics_exporter_prometheus::PrometheusBuilder;

    #[test]
    fn defaults_listen_on_loopback_9090() {
        let o = Observability::new();
        assert_eq!(o.listen, "127.0.0.1:9090".parse::<SocketAddr>().unwrap());
        assert!(o.prometheus.is_none());
        assert!(!o.readiness.is_ready());
    }

    #[tokio::test]
    async fn metrics_are_rendered_with_the_prometheus_content_type() {
        let recorder = PrometheusBuilder::new().build_recorder();
        metrics::with_local_recorder(&recorder, || {
            metrics::counter!("ward_unit_total").increment(2);
        });
        let resp = metrics_text(State(recorder.handle())).await.into_response();
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(
            resp.headers()[header::CONTENT_TYPE],
            PROMETHEUS_CONTENT_TYPE
        );
        assert!(recorder.handle().render().contains("ward_unit_total 2"));
    }

    #[tokio::test]
    async fn a_port_already_taken_is_a_bind_error() {
        let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = taken.local_addr().unwrap();
        let handle = PrometheusBuilder::new().build_recorder().handle();
        let err = Observability::new()
            .listen(addr)
            .prometheus(handle)
            .start()
            .await
            .unwrap_err();
        assert!(
            matches!(err, ObserveError::Bind { addr: a, .. } if a == addr),
            "{err}"
        );
    }
}
