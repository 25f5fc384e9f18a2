//! `ward-apiserver`: serve the embedded Kubernetes API server over HTTP.
//!
//! ```text
//! ward-apiserver --listen 127.0.0.1:0 --kubeconfig /tmp/kc
//! KUBECONFIG=/tmp/kc kubectl get ns
//! curl -X PUT --data '{"gc":{"paused":true}}' http://127.0.0.1:PORT/ward/v1/faults
//! ```

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use ward_apiserver::{ApiServer, FaultConfig, ServerConfig};

/// An embedded Kubernetes API server that kube-rs and kubectl use unmodified.
#[derive(Debug, Parser)]
#[command(name = "ward-apiserver", version)]
struct Args {
    /// Address to listen on (plain HTTP). Port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Write a kubeconfig pointing at the server to this path.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Seed of every random choice the server makes.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Largest request body accepted, in bytes.
    #[arg(long, default_value_t = 3 * 1024 * 1024)]
    max_body_bytes: usize,
    /// Past events kept for watches to resume from.
    #[arg(long, default_value_t = 10_000)]
    watch_history: usize,
    /// Compact the history every N seconds, as kube-apiserver compacts
    /// etcd (`--etcd-compaction-interval`, 5 minutes): a resourceVersion
    /// older than one to two intervals is then 410. 0: never (only
    /// --watch-history bounds it).
    #[arg(long, default_value_t = 300)]
    compaction_interval_seconds: u64,
    /// Start with this fault configuration (JSON, the body `PUT /ward/v1/faults` takes).
    #[arg(long)]
    faults: Option<PathBuf>,
    /// Wait this long before each garbage collection (milliseconds).
    #[arg(long)]
    gc_delay_ms: Option<u64>,
    /// Add a random 0..=N ms to each GC delay (seeded).
    #[arg(long)]
    gc_jitter_ms: Option<u64>,
    /// Start with garbage collection paused.
    #[arg(long)]
    gc_paused: bool,
    /// Move pods through kwok-like stages: scheduled, then Running with a podIP.
    #[arg(long)]
    pod_stages: bool,
    /// Publish no `kube-root-ca.crt` ConfigMap in each namespace: namespaces
    /// hold only what clients write, as under envtest (which runs no
    /// controller manager).
    #[arg(long)]
    no_root_ca_configmaps: bool,
    /// The range Services' cluster IPs are allocated from (IPv4 CIDR).
    #[arg(long, default_value = "10.96.0.0/12")]
    service_cluster_ip_range: ward_apiserver::ServiceCidr,
    /// The range Services' node ports are allocated from (`first-last`).
    #[arg(long, default_value = "30000-32767", value_parser = port_range)]
    service_node_port_range: std::ops::RangeInclusive<u16>,
    /// Feature gates, as kube-apiserver takes them: `ShardedListAndWatch=true`
    /// serves KEP-5866's `shardSelector` (comma-separated; off by default).
    #[arg(long, value_parser = feature_gates, action = clap::ArgAction::Append)]
    feature_gates: Vec<Gates>,
    /// How requests are authorized: AlwaysAllow (every request) or RBAC
    /// (kube-apiserver's RBAC authorizer over the cluster's Roles and bindings).
    #[arg(long, default_value = "AlwaysAllow")]
    authorization_mode: ward_apiserver::AuthorizationMode,
    /// Serve HTTPS with a CA and certificate made at start (the kubeconfig
    /// trusts the CA). kubectl sends tokens and impersonation only over TLS.
    #[arg(long)]
    tls: bool,
    /// Bearer tokens, as kube-apiserver's: CSV lines `token,user,uid,"group1,group2"`.
    #[arg(long)]
    token_auth_file: Option<PathBuf>,
}

/// The feature gates this server knows, as one `--feature-gates` sets them
/// (None: not named).
#[derive(Debug, Clone, Default)]
struct Gates {
    sharded_list_and_watch: Option<bool>,
}

/// Parse `Name=bool,...`; a gate this server does not know is an error.
fn feature_gates(s: &str) -> Result<Gates, String> {
    let mut gates = Gates::default();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (name, value) = item
            .split_once('=')
            .ok_or_else(|| format!("missing bool value for {item}"))?;
        // Go's strconv.ParseBool, which kube-apiserver's flag uses.
        let on = match value.trim() {
            "1" | "t" | "T" | "TRUE" | "true" | "True" => true,
            "0" | "f" | "F" | "FALSE" | "false" | "False" => false,
            _ => {
                return Err(format!(
                    "invalid value of {name}={value}, err: expected a bool"
                ));
            }
        };
        match name.trim() {
            "ShardedListAndWatch" => gates.sharded_list_and_watch = Some(on),
            other => return Err(format!("unrecognized feature gate: {other}")),
        }
    }
    Ok(gates)
}

/// Parse `first-last` (inclusive), as kube-apiserver's `--service-node-port-range`.
fn port_range(s: &str) -> Result<std::ops::RangeInclusive<u16>, String> {
    let bad = || format!("invalid port range {s:?} (want e.g. 30000-32767)");
    let (a, b) = s.split_once('-').ok_or_else(bad)?;
    let (a, b): (u16, u16) = (
        a.trim().parse().map_err(|_| bad())?,
        b.trim().parse().map_err(|_| bad())?,
    );
    if a == 0 || a > b {
        return Err(bad());
    }
    Ok(a..=b)
}

/// The fault configuration the flags ask for.
fn fault_config(args: &Args) -> Result<FaultConfig, String> {
    let mut config = match &args.faults {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            serde_json::from_str(&text)
                .map_err(|e| format!("invalid fault configuration in {}: {e}", path.display()))?
        }
        None => FaultConfig::default(),
    };
    if let Some(ms) = args.gc_delay_ms {
        config.gc.delay.base_ms = ms;
    }
    if let Some(ms) = args.gc_jitter_ms {
        config.gc.delay.jitter_ms = ms;
    }
    config.gc.paused |= args.gc_paused;
    config.pods.enabled |= args.pod_stages;
    Ok(config)
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    if !args.listen.ip().is_loopback()
        && args.authorization_mode == ward_apiserver::AuthorizationMode::AlwaysAllow
    {
        tracing::warn!(addr = %args.listen, "listening on a non-loopback address with --authorization-mode AlwaysAllow: anyone who reaches it may do anything");
    }
    let tokens = match &args.token_auth_file {
        None => Default::default(),
        Some(path) => match std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|text| ward_apiserver::parse_token_file(&text).map_err(|e| e.to_string()))
        {
            Ok(tokens) => tokens,
            Err(e) => {
                eprintln!("ward-apiserver: --token-auth-file {}: {e}", path.display());
                return ExitCode::from(2);
            }
        },
    };
    let faults = match fault_config(&args) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("ward-apiserver: {e}");
            return ExitCode::from(2);
        }
    };
    // Real time: stamped with the wall clock, as kube-apiserver stamps
    // (the library's default clock, anchored on the whole second the
    // server started, lags it by that second's fraction: for seeded runs).
    let config = ServerConfig::default()
        .clock(ward_apiserver::Clock::new())
        .listen(args.listen)
        .seed(args.seed)
        .max_body_bytes(args.max_body_bytes)
        .watch_history(args.watch_history)
        .compaction_interval(
            (args.compaction_interval_seconds > 0)
                .then(|| std::time::Duration::from_secs(args.compaction_interval_seconds)),
        )
        .service_cluster_ip_range(args.service_cluster_ip_range)
        .service_node_port_range(args.service_node_port_range.clone())
        .tls(args.tls)
        .root_ca_configmaps(!args.no_root_ca_configmaps)
        .authorization_mode(args.authorization_mode)
        .static_tokens(tokens)
        // A gate named again (in the same flag or a later one) takes the
        // last value, as kube-apiserver's flag does.
        .sharded_list_and_watch(
            args.feature_gates
                .iter()
                .filter_map(|g| g.sharded_list_and_watch)
                .next_back()
                .unwrap_or(false),
        );
    let server = match ApiServer::start(config).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ward-apiserver: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = server.faults().set_config(faults) {
        eprintln!("ward-apiserver: invalid fault configuration: {e}");
        return ExitCode::from(2);
    }
    let addr = server.addr().expect("a listener was configured");
    if let Some(path) = &args.kubeconfig {
        let kc = server.kubeconfig().expect("a listener was configured");
        if let Err(e) = std::fs::write(path, kc) {
            eprintln!(
                "ward-apiserver: cannot write kubeconfig {}: {e}",
                path.display()
            );
            return ExitCode::from(2);
        }
    }
    let scheme = if args.tls { "https" } else { "http" };
    ward_base::outln!("ward-apiserver listening on {scheme}://{addr}");
    if let Some(path) = &args.kubeconfig {
        ward_base::outln!("kubeconfig written to {}", path.display());
    }
    if tokio::signal::ctrl_c().await.is_err() {
        eprintln!("ward-apiserver: cannot wait for Ctrl-C");
    }
    ward_base::outln!("ward-apiserver stopping");
    server.shutdown().await;
    ExitCode::SUCCESS
}
