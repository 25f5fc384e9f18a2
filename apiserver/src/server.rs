//! Running a server: the in-process tower `Service` (what
//! `kube::Client::new(service, "default")` takes), the HTTP listener, and
//! the handle a test holds to get clients and stop the server.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http::{Request, Response};
use tokio::task::JoinHandle;

use crate::controllers::gc::GarbageCollector;
use crate::controllers::pods::PodLifecycleActor;
use crate::faults::Faults;
use crate::http::handler::{self, ClientId, HandlerConfig, State};
use crate::http::listener::tls::{Ca, ClientCertificate};
use crate::machinery::clock::Clock;
use crate::registry::resources::Registry;
use crate::storage::store::{Store, StoreConfig};

/// Errors starting or running a server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The TLS certificates could not be made.
    #[error(transparent)]
    Tls(#[from] crate::http::listener::tls::TlsError),
    /// Writing the kubeconfig failed.
    #[error("cannot write kubeconfig {path}: {source}")]
    Kubeconfig {
        /// Where.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

/// How to start a server. Defaults: in-process only (no listener), seed 0,
/// 3 MiB body limit, 10 000 events of watch history.
#[derive(Debug, Clone, Default)]
pub struct ServerConfig {
    clock: Option<Clock>,
    listen: Option<SocketAddr>,
    tls: bool,
    /// Off: no namespace gets `kube-root-ca.crt` (as envtest's).
    no_root_ca: bool,
    seed: u64,
    handler: HandlerConfig,
    store: StoreConfig,
}

impl ServerConfig {
    /// Also serve HTTP on `addr` (port 0 picks a free port; see [`ApiServer::addr`]).
    #[must_use]
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = Some(addr);
        self
    }

    /// Serve HTTPS instead of HTTP on the listener, with a CA and a serving
    /// certificate made at start ([`ApiServer::ca_pem`]; the
    /// [`kubeconfig`](ApiServer::kubeconfig) trusts it). kubectl sends
    /// credentials only over TLS: turn this on to use tokens or `--as`
    /// with it.
    #[must_use]
    pub fn tls(mut self, on: bool) -> Self {
        self.tls = on;
        self
    }

    /// Whether every namespace holds the ConfigMap `kube-root-ca.crt` with
    /// the server's CA, as on a cluster (kube-controller-manager publishes
    /// it): on by default. Off, namespaces hold only what clients write,
    /// as envtest's do (it runs no controller manager) — for a test that
    /// counts a namespace's ConfigMaps or runs a controller over all of
    /// them.
    #[must_use]
    pub fn root_ca_configmaps(mut self, on: bool) -> Self {
        self.no_root_ca = !on;
        self
    }

    /// The clock the server stamps objects with (creation and deletion
    /// timestamps, managedFields, lease-like ages); by default one anchored
    /// on the whole second when the server starts
    /// ([`Clock::on_the_second`]: a seeded run stamps the same every time). Hand the same [`Clock`] to the controllers
    /// under test so that they and the server agree on "now", also under a
    /// paused tokio clock.
    #[must_use]
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The seed of every random choice the server makes: generateName
    /// suffixes, the fractions of injected faults, and uids (so the same
    /// objects fall in other shard slots under another seed; seed 0, the
    /// default, gives the uids of a server without one).
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Serve KEP-5866's `shardSelector` on lists and watches, as
    /// kube-apiserver with the feature gate `ShardedListAndWatch` on (see
    /// [`crate::machinery::shard`]). Default off: the option is ignored, as by a
    /// server without the gate.
    #[must_use]
    pub fn sharded_list_and_watch(mut self, on: bool) -> Self {
        self.handler.sharded_list_and_watch = on;
        self
    }

    /// The range Services' cluster IPs are allocated from
    /// (kube-apiserver's `--service-cluster-ip-range`). Default
    /// `10.96.0.0/12`, as kubeadm's. The `default/kubernetes` Service keeps
    /// `10.96.0.1` whatever the range.
    #[must_use]
    pub fn service_cluster_ip_range(
        mut self,
        cidr: crate::controllers::alloc::ServiceCidr,
    ) -> Self {
        self.handler.service_cidr = cidr;
        self
    }

    /// The range Services' node ports are allocated from
    /// (kube-apiserver's `--service-node-port-range`). Default `30000-32767`.
    #[must_use]
    pub fn service_node_port_range(mut self, ports: std::ops::RangeInclusive<u16>) -> Self {
        self.handler.node_ports = ports;
        self
    }

    /// How requests are authorized (kube-apiserver's
    /// `--authorization-mode`): [`AuthorizationMode::AlwaysAllow`], the
    /// default, or [`AuthorizationMode::Rbac`] (docs/apiserver.md, "Who is asking: authentication and RBAC").
    ///
    /// [`AuthorizationMode::AlwaysAllow`]: crate::auth::AuthorizationMode::AlwaysAllow
    /// [`AuthorizationMode::Rbac`]: crate::auth::AuthorizationMode::Rbac
    #[must_use]
    pub fn authorization_mode(mut self, mode: crate::auth::AuthorizationMode) -> Self {
        self.handler.auth.mode = mode;
        self
    }

    /// Bearer tokens that authenticate as the users they map to
    /// (kube-apiserver's `--token-auth-file`; parse one with
    /// [`crate::parse_token_file`]).
    #[must_use]
    pub fn static_tokens(
        mut self,
        tokens: std::collections::HashMap<String, crate::auth::UserInfo>,
    ) -> Self {
        self.handler.auth.static_tokens = tokens;
        self
    }

    /// Largest request body accepted (413 beyond). Default 3 MiB.
    #[must_use]
    pub fn max_body_bytes(mut self, n: usize) -> Self {
        self.handler.max_body_bytes = n;
        self
    }

    /// How many past events watches can resume from. Default 10 000.
    #[must_use]
    pub fn watch_history(mut self, n: usize) -> Self {
        self.store.history = n;
        self
    }

    /// Compact the watch history this often, as kube-apiserver compacts
    /// etcd every 5 minutes: a resourceVersion is then served for one to
    /// two intervals (a list at it, a watch from it, a continue token of
    /// it is 410 after). Default `None`: only [`Self::watch_history`]
    /// bounds it (the `ward-apiserver` binary compacts every 5 minutes).
    #[must_use]
    pub fn compaction_interval(mut self, every: Option<std::time::Duration>) -> Self {
        self.store.compaction_interval = every;
        self
    }

    /// How many events a watcher may lag before it is cut off with 410. Default 16 384.
    #[must_use]
    pub fn watch_buffer(mut self, n: usize) -> Self {
        self.store.watch_buffer = n;
        self
    }

    /// How often watches that allow bookmarks get one. Default 15 s.
    #[must_use]
    pub fn bookmark_interval(mut self, d: Duration) -> Self {
        self.handler.bookmark_interval = d;
        self
    }
}

/// A running ward-apiserver. Dropping it stops the HTTP listener and ends
/// open watches; [`ApiServer::shutdown`] does the same and waits.
#[derive(Debug)]
pub struct ApiServer {
    state: Arc<State>,
    stop: tokio::sync::watch::Sender<bool>,
    addr: Option<SocketAddr>,
    /// The CA of the HTTPS listener, PEM.
    ca: Ca,
    tls: bool,
    next_client: Arc<AtomicU64>,
    tasks: Vec<JoinHandle<()>>,
    gc_caught_up: tokio::sync::watch::Receiver<u64>,
    gc_pending: tokio::sync::watch::Receiver<usize>,
}

impl ApiServer {
    /// Start a server. Must be called inside a tokio runtime.
    pub async fn start(config: ServerConfig) -> Result<ApiServer, ServerError> {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let clock = config.clock.unwrap_or_else(Clock::on_the_second);
        let ca = Ca::generate()?;
        let store = Arc::new(Store::seeded(
            config.store.clone(),
            clock,
            if config.no_root_ca {
                Arc::new(crate::storage::strategy::KindRules)
            } else {
                Arc::new(crate::storage::strategy::ClusterRules::new(ca.pem()))
            },
            config.seed,
        ));

        let registry = Arc::new(Registry::with_builtins());
        let listener = match config.listen {
            Some(addr) => Some(
                tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|source| ServerError::Bind { addr, source })?,
            ),
            None => None,
        };
        let addr = listener.as_ref().and_then(|l| l.local_addr().ok());
        let tls = match addr {
            Some(addr) if config.tls => Some(crate::http::listener::tls::Tls::generate(addr, &ca)?),
            _ => None,
        };
        let mut hc = config.handler.clone();
        hc.server_address = addr.map(|a| a.to_string()).unwrap_or_default();
        let faults = Faults::new(config.seed);
        let state = Arc::new(State::new(
            store.clone(),
            registry.clone(),
            hc,
            stopped.clone(),
            faults.clone(),
            config.seed,
        ));
        let gc = GarbageCollector::new(store.clone(), registry.clone(), faults.clone());
        let gc_caught_up = gc.caught_up();
        let gc_pending = gc.pending();
        let pods = PodLifecycleActor::new(store, &registry, faults);
        let mut tasks = vec![
            tokio::spawn(crate::storage::crd::watch_deletions(
                state.registry.clone(),
                state.store.clone(),
                stopped.clone(),
            )),
            tokio::spawn(gc.run(stopped.clone())),
            tokio::spawn(pods.run(stopped.clone())),
        ];
        if let Some(listener) = listener {
            tasks.push(tokio::spawn(crate::http::listener::serve(
                listener,
                tls.clone(),
                state.clone(),
                stopped,
            )));
        }
        Ok(ApiServer {
            state,
            stop,
            addr,
            ca: ca.clone(),
            tls: tls.is_some(),
            next_client: Arc::new(AtomicU64::new(1)),
            tasks,
            gc_caught_up,
            gc_pending,
        })
    }

    /// Start an in-process server with default settings (seed 0).
    pub async fn start_in_process() -> ApiServer {
        ApiServer::start_seeded(0).await
    }

    /// Start an in-process server whose random choices come from `seed`
    /// (default settings otherwise).
    pub async fn start_seeded(seed: u64) -> ApiServer {
        ApiServer::start(ServerConfig::default().seed(seed))
            .await
            .expect("an in-process server binds nothing and cannot fail")
    }

    /// Wait until the garbage collector has observed every write made so
    /// far and has no collection due (a delayed or paused collection is not
    /// waited for); returns at once once the server is shut down.
    pub async fn gc_caught_up(&self) {
        let target = self.store().current_rv();
        let mut seen = self.gc_caught_up.clone();
        let _ = seen.wait_for(|rv| *rv >= target).await;
    }

    /// Wait until the garbage collector has caught up (as
    /// [`ApiServer::gc_caught_up`]) and has no collection queued at all —
    /// delayed ones included, and while collection is paused with work
    /// queued, until it resumes and does it; returns at once once the
    /// server is shut down.
    pub async fn gc_idle(&self) {
        self.gc_caught_up().await;
        let mut pending = self.gc_pending.clone();
        let _ = pending.wait_for(|n| *n == 0).await;
    }

    /// A new in-process tower Service, identified as a client of its own.
    #[must_use]
    pub fn service(&self) -> WardService {
        self.services().service()
    }

    /// What makes this server's in-process Services, held without
    /// borrowing the server (a campaign's perturber keeps one).
    #[must_use]
    pub fn services(&self) -> Services {
        Services {
            state: self.state.clone(),
            next_client: self.next_client.clone(),
        }
    }

    /// A kube Client talking to this server in-process (no socket), with
    /// default namespace `default`. (Feature `client`.)
    #[cfg(feature = "client")]
    #[must_use]
    pub fn client(&self) -> kube::Client {
        self.client_and_id().0
    }

    /// A kube Client like [`ApiServer::client`], with the client identity
    /// its requests carry (per-client fault views key on it). (Feature `client`.)
    #[cfg(feature = "client")]
    #[must_use]
    pub fn client_and_id(&self) -> (kube::Client, ClientId) {
        let svc = self.service();
        let id = svc.client_id();
        (kube::Client::new(svc, "default"), id)
    }

    /// The HTTP address actually bound, when listening.
    #[must_use]
    pub fn addr(&self) -> Option<SocketAddr> {
        self.addr
    }

    /// The fault knobs of this server (GC delay and pause, per-client views,
    /// write faults, pod stages).
    #[must_use]
    pub fn faults(&self) -> &Faults {
        &self.state.faults
    }

    /// The clock that stamps this server's timestamps (creation, deletion,
    /// pod conditions): hand it to anything that compares its own "now"
    /// with them, e.g. a liveness policy under paused time.
    #[must_use]
    pub fn clock(&self) -> Clock {
        *self.state.store.clock()
    }

    /// The store (for assertions in tests).
    #[must_use]
    pub fn store(&self) -> &Arc<Store> {
        &self.state.store
    }

    /// A kubeconfig pointing at the HTTP listener, or None without one.
    #[must_use]
    pub fn kubeconfig(&self) -> Option<String> {
        let addr = self.addr?;
        Some(match self.ca_pem() {
            None => kubeconfig_yaml(addr, self.admin_token()),
            Some(ca) => kubeconfig_text(
                &format!("https://{addr}"),
                Some(ca),
                &Credentials::Token(self.admin_token()),
            ),
        })
    }

    /// The CA certificate (PEM) the HTTPS listener's certificate chains
    /// to; None without [`ServerConfig::tls`]. (Every server has a CA:
    /// namespaces' `kube-root-ca.crt` ConfigMaps hold it either way.)
    #[must_use]
    pub fn ca_pem(&self) -> Option<&str> {
        self.tls.then(|| self.ca.pem())
    }

    /// A kubeconfig naming `user` (in `group`, if given) by a client
    /// certificate the server's CA signs for it (CN the user, O the
    /// group), as kind's and kubeadm's admin kubeconfigs do; None without
    /// a listener or without [`ServerConfig::tls`] (a certificate is
    /// presented only over TLS).
    ///
    /// # Errors
    /// The certificate could not be made.
    pub fn client_kubeconfig(
        &self,
        user: &str,
        group: Option<&str>,
    ) -> Result<Option<String>, ServerError> {
        let (Some(addr), true) = (self.addr, self.tls) else {
            return Ok(None);
        };
        let cert = self.ca.client_certificate(user, group)?;
        Ok(Some(kubeconfig_text(
            &format!("https://{addr}"),
            Some(self.ca.pem()),
            &Credentials::Certificate(&cert),
        )))
    }

    /// A listener of your own in front of this server, over HTTPS: an
    /// acceptor serving a certificate for `addr` (and localhost) that this
    /// server's CA signs, as its own HTTPS listener does, and a kubeconfig
    /// for `https://addr` that trusts the CA and carries `token`.
    /// `ward-campaign` serves each controller's listener with it: client-go
    /// sends credentials only over TLS. Works with or without
    /// [`ServerConfig::tls`] (every server has a CA).
    ///
    /// # Errors
    /// The certificate could not be made.
    pub fn tls_front(
        &self,
        addr: SocketAddr,
        token: &str,
    ) -> Result<(tokio_rustls::TlsAcceptor, String), ServerError> {
        let tls = crate::http::listener::tls::Tls::generate(addr, &self.ca)?;
        let kubeconfig = kubeconfig_text(
            &format!("https://{addr}"),
            Some(self.ca.pem()),
            &Credentials::Token(token),
        );
        Ok((tls.acceptor, kubeconfig))
    }

    /// The bearer token of the admin user (`ward-admin`, group
    /// `system:masters`), which [`kubeconfig`](Self::kubeconfig) carries.
    #[must_use]
    pub fn admin_token(&self) -> &str {
        self.state.auth.admin_token()
    }

    /// Stop: end watches and the listener, and wait for them.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// A kubeconfig for `http://addr`, context `ward`, namespace `default`,
/// its user authenticating with the bearer `token` (the server's
/// [`ApiServer::admin_token`]).
#[must_use]
pub fn kubeconfig_yaml(addr: SocketAddr, token: &str) -> String {
    kubeconfig_text(&format!("http://{addr}"), None, &Credentials::Token(token))
}

/// How a kubeconfig's user authenticates.
enum Credentials<'a> {
    Token(&'a str),
    Certificate(&'a ClientCertificate),
}

/// A kubeconfig for `server`, trusting `ca` (PEM) when given.
fn kubeconfig_text(server: &str, ca: Option<&str>, user: &Credentials<'_>) -> String {
    use base64::Engine as _;
    let b64 = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
    let ca = ca.map_or(String::new(), |pem| {
        format!("    certificate-authority-data: {}\n", b64(pem))
    });
    let user = match user {
        Credentials::Token(token) => format!("    token: {token}\n"),
        Credentials::Certificate(c) => format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n",
            b64(&c.cert_pem),
            b64(&c.key_pem)
        ),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: ward\n  cluster:\n    server: {server}\n{ca}contexts:\n- name: ward\n  context:\n    cluster: ward\n    user: ward\n    namespace: default\ncurrent-context: ward\nusers:\n- name: ward\n  user:\n{user}"
    )
}

/// Makes one server's in-process Services, each a client of its own (as
/// [`ApiServer::service`] does); cheap to clone.
#[derive(Debug, Clone)]
pub struct Services {
    state: Arc<State>,
    next_client: Arc<AtomicU64>,
}

impl Services {
    /// A new in-process tower Service, identified as a client of its own.
    #[must_use]
    pub fn service(&self) -> WardService {
        WardService {
            state: self.state.clone(),
            client: self.next_client.fetch_add(1, Ordering::Relaxed),
        }
    }
}

/// The in-process transport: a tower `Service` over the request handler.
#[derive(Debug, Clone)]
pub struct WardService {
    state: Arc<State>,
    client: ClientId,
}

impl WardService {
    /// The client identity requests through this service carry.
    #[must_use]
    pub fn client_id(&self) -> ClientId {
        self.client
    }
}

impl<B> tower::Service<Request<B>> for WardService
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let state = self.state.clone();
        let client = self.client;
        // In-process clients are the admin unless they send a token.
        req.extensions_mut()
            .insert(crate::auth::Identity(crate::auth::Auth::admin()));
        Box::pin(async move { Ok(handler::handle(state, client, req).await) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_server_stamps_with_the_clock_it_is_given() {
        let clock = Clock::new();
        tokio::time::advance(Duration::from_secs(3600)).await;
        let config = ServerConfig::default().clock(clock);
        let s = ApiServer::start(config).await.unwrap();
        assert_eq!(s.store().clock().now(), clock.now());
        // A clock anchored now would be an hour behind the one handed over.
        let fresh = Clock::new().now();
        assert!(clock.now().duration_since(fresh).as_secs() >= 3599);
    }
}
