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
//!
//! The commands and the options every example binary has are
//! [`ward_examples::cli`]'s; this file is the live run.

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

use ward_examples::cli::{self, Help, Live};
use ward_examples::cns::agent::{AgentError, Cns};
use ward_examples::cns::cluster::{Host, Writer};
use ward_examples::cns::model::NodeNetworkConfig;
use ward_examples::cns::{self as example, AzureCns};
use ward_examples::journal::Journal;
use ward_examples::run;

/// How to run the agent live.
#[derive(Debug, clap::Args)]
struct RunArgs {
    #[command(flatten)]
    live: Live,
    /// The node this agent serves (on a cluster: the DaemonSet passes
    /// spec.nodeName).
    #[arg(long, default_value = example::NODE)]
    node: String,
    /// Where to write the embedded server's kubeconfig (refused when the
    /// file exists and is not one an embedded server wrote; with
    /// --cluster, unused: the cluster's comes from KUBECONFIG).
    #[arg(long, default_value = "cns.kubeconfig")]
    kubeconfig: std::path::PathBuf,
    /// Write the agent's IPAM state to this file (JSON, replaced whole)
    /// whenever it changes, as real CNS persists its state: what an
    /// operator or a campaign's invariant reads.
    #[arg(long)]
    state_file: Option<std::path::PathBuf>,
}

fn main() -> ExitCode {
    cli::main::<AzureCns, NodeNetworkConfig, _, _>(
        Help {
            about: "The CNS stale-NNC race, naive vs upstream vs guarded",
            scenarios: "S1 (the seed race), S2 (NC replaced) or S3 (CNS restart)",
            run: "Run the agent in real time (the default without a subcommand)",
        },
        run_live,
    )
}

async fn run_live(args: RunArgs) -> ExitCode {
    let (name, mode) = ("cns", args.live.mode);
    let journal = Journal::echo();
    let host = Host::default();
    // No CNI calls this agent: its endpoint state stays empty.
    let mut cns = Cns::new(&args.node, mode, Default::default(), journal.clone());
    if let Some(path) = args.state_file {
        cns = cns.state_file(path);
    }
    if args.live.cluster {
        let client = match cli::cluster(name).await {
            Ok(c) => c,
            Err(code) => return code,
        };
        ward_base::outln!(
            "cns agent ({mode}) for node {} against the configured cluster (no host agent: NCs stay PendingProgramming)",
            args.node
        );
        return serve(cns.run(client, host)).await;
    }
    let kubeconfig = &args.kubeconfig;
    let server = match cli::embedded(
        name,
        kubeconfig,
        |c| async move { example::install(&c).await },
    )
    .await
    {
        Ok(s) => s,
        Err(code) => return code,
    };
    let client = server.client();
    let mut config = example::writer_config(0);
    config.prefixes = [(args.node.clone(), example::PREFIX.to_string())].into();
    let writer = tokio::spawn(Writer::new(client.clone(), host.clone(), config, journal).run());
    ward_base::outln!(
        "embedded ward-apiserver on http://{} (kubeconfig {}); network controller, host agent and CNS ({mode}) for node {} running; create Node {} to get its NodeNetworkConfig",
        cli::address(&server),
        kubeconfig.display(),
        args.node,
        args.node
    );
    let code = serve(cns.run(client, host)).await;
    writer.abort();
    server.shutdown().await;
    code
}

/// Run the agent until Ctrl-C or SIGTERM.
async fn serve(agent: impl Future<Output = Result<(), AgentError>>) -> ExitCode {
    tokio::select! {
        r = agent => match r {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => cli::fail("cns", e),
        },
        () = run::until_signal() => ExitCode::SUCCESS,
    }
}
