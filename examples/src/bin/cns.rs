//! `cns`: the stale-NodeNetworkConfig race of Azure CNS, reproduced and
//! fixed.
//!
//! - `cns scenario S1|S2|S3 --mode naive|upstream|guarded --seed N`: one
//!   seeded run in simulated time; prints the invariants and the events
//!   that led to a violation; exit 0 when all hold, 1 on a violation, 2 on
//!   a usage or setup error.
//! - `cns crds`: the NodeNetworkConfig CRD as YAML, generated from the Rust
//!   types.
//! - `cns [--mode M] [--node N]` (or `cns run`): the CNS agent of one node
//!   in real time against an embedded ward-apiserver (whose kubeconfig it
//!   writes), with the network controller and host agent simulated; or
//!   with `--cluster` only the agent, against the cluster of the usual kube
//!   config (KUBECONFIG or in-cluster), as the DaemonSet runs it.

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kube::CustomResourceExt;
use ward_examples::cns::agent::{Cns, Mode};
use ward_examples::cns::cluster::{Host, Writer};
use ward_examples::cns::invariants::{Invariant, RECOVERY};
use ward_examples::cns::model::NodeNetworkConfig;
use ward_examples::cns::scenario::{self, Scenario};
use ward_examples::journal::Journal;
use ward_examples::run;

/// The CNS stale-NNC race, naive vs upstream vs guarded.
#[derive(Debug, Parser)]
#[command(name = "cns", version)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// Without a subcommand: run the agent (see `run`).
    #[command(flatten)]
    run: RunArgs,
}

/// How to run the agent live.
#[derive(Debug, clap::Args)]
struct RunArgs {
    /// naive, upstream or guarded.
    #[arg(long, default_value = "guarded")]
    mode: Mode,
    /// Use the cluster of the usual kube config instead of an embedded server.
    #[arg(long)]
    cluster: bool,
    /// The node this agent serves (on a cluster: the DaemonSet passes
    /// spec.nodeName).
    #[arg(long, default_value = scenario::NODE)]
    node: String,
    /// Where to write the embedded server's kubeconfig.
    #[arg(long, default_value = "cns.kubeconfig")]
    kubeconfig: std::path::PathBuf,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one seeded scenario in simulated time and check the invariants.
    Scenario {
        /// S1 (the seed race), S2 (NC replaced) or S3 (CNS restart).
        scenario: Scenario,
        /// naive, upstream or guarded.
        #[arg(long, default_value = "guarded")]
        mode: Mode,
        /// The seed of every random choice.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Print the NodeNetworkConfig CRD (YAML).
    Crds,
    /// Run the agent in real time (the default without a subcommand).
    Run(RunArgs),
}

fn main() -> ExitCode {
    let args = Args::parse();
    // A scenario tells its story in its journal; reconcile failures the
    // naive variants run into are part of it, not warnings.
    let quiet = matches!(args.command, Some(Command::Scenario { .. }));
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| if quiet { "error" } else { "warn" }.into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match args.command.unwrap_or(Command::Run(args.run)) {
        Command::Scenario {
            scenario,
            mode,
            seed,
        } => run_scenario(scenario, mode, seed),
        Command::Crds => match serde_saphyr::to_string(&NodeNetworkConfig::crd()) {
            Ok(yaml) => {
                ward_base::out!("{yaml}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("cns: cannot render the CRD: {e}");
                ExitCode::from(2)
            }
        },
        Command::Run(a) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime")
            .block_on(run_live(a)),
    }
}

fn run_scenario(s: Scenario, mode: Mode, seed: u64) -> ExitCode {
    let report = match scenario::run_blocking(s, mode, seed) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cns: scenario setup failed: {e}");
            return ExitCode::from(2);
        }
    };
    ward_base::outln!("scenario {s}, mode {mode}, seed {seed} (recovery bound {RECOVERY:?})");
    run::print_invariants(&Invariant::ALL, &report.violations);
    if report.violations.is_empty() {
        ward_base::outln!("all invariants hold");
    }
    // The history up to the last violation (the node that never recovers).
    run::print_events(
        &report.journal,
        report.violations.iter().map(|v| v.at).max(),
    );
    if report.violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

async fn run_live(args: RunArgs) -> ExitCode {
    let journal = Journal::echo();
    let host = Host::default();
    let cns = Cns::new(&args.node, args.mode, journal.clone());
    if args.cluster {
        let client = match kube::Client::try_default().await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("cns: no usable kube config: {e}");
                return ExitCode::from(2);
            }
        };
        ward_base::outln!(
            "cns agent ({}) for node {} against the configured cluster (no host agent: NCs stay PendingProgramming)",
            args.mode,
            args.node
        );
        return serve(cns.run(client, host)).await;
    }
    let server = match ward_apiserver::ApiServer::start(
        ward_apiserver::ServerConfig::default().listen(([127, 0, 0, 1], 0).into()),
    )
    .await
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cns: {e}");
            return ExitCode::from(2);
        }
    };
    let client = server.client();
    if let Err(e) = scenario::install(&client).await {
        eprintln!("cns: {e}");
        return ExitCode::from(2);
    }
    if let Some(kc) = server.kubeconfig()
        && let Err(e) = std::fs::write(&args.kubeconfig, kc)
    {
        eprintln!("cns: cannot write {}: {e}", args.kubeconfig.display());
        return ExitCode::from(2);
    }
    let mut config = scenario::writer_config(0);
    config.prefixes = [(args.node.clone(), scenario::PREFIX.to_string())].into();
    let writer = tokio::spawn(Writer::new(client.clone(), host.clone(), config, journal).run());
    ward_base::outln!(
        "embedded ward-apiserver on http://{} (kubeconfig {}); network controller, host agent and CNS ({}) for node {} running; create Node {} to get its NodeNetworkConfig",
        server.addr().map(|a| a.to_string()).unwrap_or_default(),
        args.kubeconfig.display(),
        args.mode,
        args.node,
        args.node
    );
    let code = serve(cns.run(client, host)).await;
    writer.abort();
    server.shutdown().await;
    code
}

/// Run the agent until Ctrl-C or SIGTERM.
async fn serve(
    agent: impl Future<Output = Result<(), ward_examples::cns::agent::AgentError>>,
) -> ExitCode {
    tokio::select! {
        r = agent => match r {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("cns: {e}");
                ExitCode::from(2)
            }
        },
        () = run::until_signal() => ExitCode::SUCCESS,
    }
}
