//! `whereabouts`: the ip-reconciler race of whereabouts, reproduced and
//! fixed.
//!
//! - `whereabouts scenario S1|S2|S3 --mode naive|upstream|guarded --seed N`:
//!   one seeded run in simulated time; prints the invariants and the events
//!   that led to a violation; exit 0 when all hold, 1 on a violation, 2 on
//!   a usage or setup error.
//! - `whereabouts crds`: the IPPool CRD as YAML, generated from the Rust types.
//! - `whereabouts [--mode M]` (or `whereabouts run`): the reconciler and two
//!   node agents in real time against an embedded ward-apiserver (whose
//!   kubeconfig it writes), or with `--cluster` only the reconciler against
//!   the cluster of the usual kube config (KUBECONFIG or in-cluster), as a
//!   deployment would.

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use kube::CustomResourceExt;
use ward_examples::journal::Journal;
use ward_examples::run;
use ward_examples::whereabouts::invariants::Invariant;
use ward_examples::whereabouts::model::IPPool;
use ward_examples::whereabouts::reconciler::{self, Mode, ReconcilerConfig};
use ward_examples::whereabouts::scenario::{self, GRACE, INTERVAL, Scenario};

/// The whereabouts ip-reconciler race, naive vs guarded.
#[derive(Debug, Parser)]
#[command(name = "whereabouts", version)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// Without a subcommand: run the reconciler and node agents (see `run`).
    #[command(flatten)]
    run: RunArgs,
}

/// How to run the reconciler live.
#[derive(Debug, clap::Args)]
struct RunArgs {
    /// naive, upstream or guarded.
    #[arg(long, default_value = "guarded")]
    mode: Mode,
    /// Use the cluster of the usual kube config instead of an embedded server.
    #[arg(long)]
    cluster: bool,
    /// Namespace of the IPPools.
    #[arg(long, default_value = "default")]
    namespace: String,
    /// Seconds between reconciler runs.
    #[arg(long, default_value_t = 60)]
    interval_secs: u64,
    /// Liveness grace bound, seconds (guarded).
    #[arg(long, default_value_t = 30)]
    grace_secs: u64,
    /// Where to write the embedded server's kubeconfig.
    #[arg(long, default_value = "whereabouts.kubeconfig")]
    kubeconfig: std::path::PathBuf,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one seeded scenario in simulated time and check the invariants.
    Scenario {
        /// S1 (the seed race), S2 (node crash) or S3 (stuck Pending).
        scenario: Scenario,
        /// naive, upstream or guarded.
        #[arg(long, default_value = "guarded")]
        mode: Mode,
        /// The seed of every random choice.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Print the IPPool CRD (YAML).
    Crds,
    /// Run the reconciler (and, embedded, two node agents) in real time
    /// (the default without a subcommand).
    Run(RunArgs),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    match args.command.unwrap_or(Command::Run(args.run)) {
        Command::Scenario {
            scenario,
            mode,
            seed,
        } => run_scenario(scenario, mode, seed),
        Command::Crds => match serde_saphyr::to_string(&IPPool::crd()) {
            Ok(yaml) => {
                ward_base::out!("{yaml}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("whereabouts: cannot render the CRD: {e}");
                ExitCode::from(2)
            }
        },
        Command::Run(RunArgs {
            mode,
            cluster,
            namespace,
            interval_secs,
            grace_secs,
            kubeconfig,
        }) => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .expect("a tokio runtime");
            let config = ReconcilerConfig {
                mode,
                interval: Duration::from_secs(interval_secs.max(1)),
                grace: Duration::from_secs(grace_secs),
                first_run: Duration::ZERO,
                namespace,
                clock: ward::clock::Clock::new(),
            };
            rt.block_on(run_live(config, cluster, kubeconfig))
        }
    }
}

fn run_scenario(s: Scenario, mode: Mode, seed: u64) -> ExitCode {
    let report = match scenario::run_blocking(s, mode, seed) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("whereabouts: scenario setup failed: {e}");
            return ExitCode::from(2);
        }
    };
    ward_base::outln!(
        "scenario {s}, mode {mode}, seed {seed} (reconciler every {INTERVAL:?}, grace {GRACE:?})"
    );
    run::print_invariants(&Invariant::ALL, &report.violations);
    let Some(first) = report.violations.first() else {
        ward_base::outln!("all invariants hold");
        return ExitCode::SUCCESS;
    };
    // The history up to the first duplicate IP if there is one, else the first violation.
    let until = report
        .violations
        .iter()
        .find(|v| v.invariant == Invariant::I1)
        .unwrap_or(first)
        .at;
    run::print_events(&report.journal, Some(until));
    ExitCode::from(1)
}

async fn run_live(
    mut config: ReconcilerConfig,
    cluster: bool,
    kubeconfig: std::path::PathBuf,
) -> ExitCode {
    let journal = Journal::echo();
    if cluster {
        let client = match kube::Client::try_default().await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("whereabouts: no usable kube config: {e}");
                return ExitCode::from(2);
            }
        };
        ward_base::outln!(
            "whereabouts reconciler ({}) against the configured cluster",
            config.mode
        );
        let task = tokio::spawn(reconciler::run(client, config, journal.clone()));
        run::until_signal().await;
        task.abort();
        return ExitCode::SUCCESS;
    }
    let server = match ward_apiserver::ApiServer::start(
        ward_apiserver::ServerConfig::default().listen(([127, 0, 0, 1], 0).into()),
    )
    .await
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("whereabouts: {e}");
            return ExitCode::from(2);
        }
    };
    config.clock = server.clock();
    let client = server.client();
    let nets = scenario::networks();
    if let Err(e) = scenario::install(&client, &nets).await {
        eprintln!("whereabouts: {e}");
        return ExitCode::from(2);
    }
    if let Some(kc) = server.kubeconfig()
        && let Err(e) = std::fs::write(&kubeconfig, kc)
    {
        eprintln!("whereabouts: cannot write {}: {e}", kubeconfig.display());
        return ExitCode::from(2);
    }
    ward_base::outln!(
        "embedded ward-apiserver on http://{} (kubeconfig {}); reconciler ({}) and node agents for node-a, node-b running; create pods with spec.nodeName node-a|node-b",
        server.addr().map(|a| a.to_string()).unwrap_or_default(),
        kubeconfig.display(),
        config.mode
    );
    let mut tasks = vec![tokio::spawn(reconciler::run(
        client.clone(),
        config,
        journal.clone(),
    ))];
    for node in ["node-a", "node-b"] {
        let cfg = ward_examples::whereabouts::agent::AgentConfig {
            node: node.into(),
            networks: nets.clone(),
            annotate_after: (Duration::from_millis(100), Duration::from_millis(2000)),
            stuck: Default::default(),
            seed: 0,
            clock: server.clock(),
        };
        tasks.push(tokio::spawn(ward_examples::whereabouts::agent::run(
            server.client(),
            cfg,
        )));
    }
    run::until_signal().await;
    for t in tasks {
        t.abort();
    }
    server.shutdown().await;
    ExitCode::SUCCESS
}
