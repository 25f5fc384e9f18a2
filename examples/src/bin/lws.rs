//! `lws`: the LeaderWorkerSet revision race, reproduced and fixed.
//!
//! - `lws scenario S1|S2|S3 --mode naive|upstream|guarded --seed N`: one
//!   seeded run in simulated time; prints the invariants and the events
//!   that led to a violation; exit 0 when all hold, 1 on a violation, 2 on
//!   a usage or setup error.
//! - `lws crds`: the LeaderWorkerSet CRD as YAML, generated from the Rust
//!   types.
//! - `lws [--mode M]` (or `lws run`): the controller in real time against
//!   an embedded ward-apiserver (whose kubeconfig it writes), or with
//!   `--cluster` against the cluster of the usual kube config (KUBECONFIG
//!   or in-cluster), as the Deployment runs it.

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kube::CustomResourceExt;
use ward_examples::journal::Journal;
use ward_examples::lws::controller::{self, Mode};
use ward_examples::lws::invariants::Invariant;
use ward_examples::lws::model::LeaderWorkerSet;
use ward_examples::lws::scenario::{self, Scenario};
use ward_examples::run;

/// The LWS revision race, naive vs upstream vs guarded.
#[derive(Debug, Parser)]
#[command(name = "lws", version)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// Without a subcommand: run the controller (see `run`).
    #[command(flatten)]
    run: RunArgs,
}

/// How to run the controller live.
#[derive(Debug, clap::Args)]
struct RunArgs {
    /// naive, upstream or guarded.
    #[arg(long, default_value = "guarded")]
    mode: Mode,
    /// Use the cluster of the usual kube config instead of an embedded server.
    #[arg(long)]
    cluster: bool,
    /// The namespace of the LeaderWorkerSets.
    #[arg(long, default_value = scenario::NAMESPACE)]
    namespace: String,
    /// Where to write the embedded server's kubeconfig.
    #[arg(long, default_value = "lws.kubeconfig")]
    kubeconfig: std::path::PathBuf,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one seeded scenario in simulated time and check the invariants.
    Scenario {
        /// S1 (terminating StatefulSet), S2 (GC lag) or S3 (template change).
        scenario: Scenario,
        /// naive, upstream or guarded.
        #[arg(long, default_value = "guarded")]
        mode: Mode,
        /// The seed of every random choice.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Print the LeaderWorkerSet CRD (YAML).
    Crds,
    /// Run the controller in real time (the default without a subcommand).
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
        Command::Crds => match serde_saphyr::to_string(&LeaderWorkerSet::crd()) {
            Ok(yaml) => {
                ward_base::out!("{yaml}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("lws: cannot render the CRD: {e}");
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
            eprintln!("lws: scenario setup failed: {e}");
            return ExitCode::from(2);
        }
    };
    ward_base::outln!("scenario {s}, mode {mode}, seed {seed}");
    run::print_invariants(&Invariant::ALL, &report.violations);
    match report.settled_after {
        Some(d) => ward_base::outln!("  settled {d:?} after the last change"),
        None => ward_base::outln!("  never settled"),
    }
    if report.violations.is_empty() {
        ward_base::outln!("all invariants hold");
    }
    run::print_events(&report.journal, None);
    if report.violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

async fn run_live(args: RunArgs) -> ExitCode {
    let journal = Journal::echo();
    if args.cluster {
        let client = match kube::Client::try_default().await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("lws: no usable kube config: {e}");
                return ExitCode::from(2);
            }
        };
        ward_base::outln!(
            "lws controller ({}) in namespace {} against the configured cluster",
            args.mode,
            args.namespace
        );
        tokio::select! {
            () = controller::run(client, &args.namespace, args.mode, journal) => {}
            () = shutdown() => {}
        }
        return ExitCode::SUCCESS;
    }
    let server = match ward_apiserver::ApiServer::start(
        ward_apiserver::ServerConfig::default().listen(([127, 0, 0, 1], 0).into()),
    )
    .await
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("lws: {e}");
            return ExitCode::from(2);
        }
    };
    let client = server.client();
    if let Err(e) = scenario::install(&client).await {
        eprintln!("lws: {e}");
        return ExitCode::from(2);
    }
    if let Some(kc) = server.kubeconfig()
        && let Err(e) = std::fs::write(&args.kubeconfig, kc)
    {
        eprintln!("lws: cannot write {}: {e}", args.kubeconfig.display());
        return ExitCode::from(2);
    }
    ward_base::outln!(
        "embedded ward-apiserver on http://{} (kubeconfig {}); lws controller ({}) running in namespace {}",
        server.addr().map(|a| a.to_string()).unwrap_or_default(),
        args.kubeconfig.display(),
        args.mode,
        args.namespace
    );
    tokio::select! {
        () = controller::run(client, &args.namespace, args.mode, journal) => {}
        () = shutdown() => {}
    }
    server.shutdown().await;
    ExitCode::SUCCESS
}

async fn shutdown() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
