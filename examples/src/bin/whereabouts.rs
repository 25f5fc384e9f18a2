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
//!
//! The commands and the options every example binary has are
//! [`ward_examples::cli`]'s; this file is the live run.

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;
use std::time::Duration;

use ward_examples::cli::{self, Help, Live};
use ward_examples::journal::Journal;
use ward_examples::run;
use ward_examples::whereabouts::agent::{self, AgentConfig};
use ward_examples::whereabouts::model::IPPool;
use ward_examples::whereabouts::reconciler::{self, ReconcilerConfig};
use ward_examples::whereabouts::{self as example, Whereabouts};

/// How to run the reconciler live.
#[derive(Debug, clap::Args)]
struct RunArgs {
    #[command(flatten)]
    live: Live,
    /// Namespace of the IPPools.
    #[arg(long, default_value = "default")]
    namespace: String,
    /// Seconds between reconciler runs.
    #[arg(long, default_value_t = 60)]
    interval_secs: u64,
    /// Liveness grace bound, seconds (guarded).
    #[arg(long, default_value_t = 30)]
    grace_secs: u64,
    /// Where to write the embedded server's kubeconfig (refused when the
    /// file exists and is not one an embedded server wrote; with
    /// --cluster, unused: the cluster's comes from KUBECONFIG).
    #[arg(long, default_value = "whereabouts.kubeconfig")]
    kubeconfig: std::path::PathBuf,
}

fn main() -> ExitCode {
    cli::main::<Whereabouts, IPPool, _, _>(
        Help {
            about: "The whereabouts ip-reconciler race, naive vs guarded",
            scenarios: "S1 (the seed race), S2 (node crash) or S3 (stuck Pending)",
            run: "Run the reconciler (and, embedded, two node agents) in real time (the default without a subcommand)",
        },
        run_live,
    )
}

async fn run_live(args: RunArgs) -> ExitCode {
    let name = "whereabouts";
    let mut config = ReconcilerConfig {
        mode: args.live.mode,
        interval: Duration::from_secs(args.interval_secs.max(1)),
        grace: Duration::from_secs(args.grace_secs),
        first_run: Duration::ZERO,
        namespace: args.namespace,
        clock: ward_runtime::clock::Clock::new(),
    };
    let journal = Journal::echo();
    if args.live.cluster {
        let client = match cli::cluster(name).await {
            Ok(c) => c,
            Err(code) => return code,
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
    let nets = example::networks();
    let kubeconfig = &args.kubeconfig;
    let installed = nets.clone();
    let server = match cli::embedded(name, kubeconfig, |c| async move {
        example::install(&c, &installed).await
    })
    .await
    {
        Ok(s) => s,
        Err(code) => return code,
    };
    config.clock = server.clock();
    ward_base::outln!(
        "embedded ward-apiserver on http://{} (kubeconfig {}); reconciler ({}) and node agents for node-a, node-b running; create pods with spec.nodeName node-a|node-b",
        cli::address(&server),
        kubeconfig.display(),
        config.mode
    );
    let mut tasks = vec![tokio::spawn(reconciler::run(
        server.client(),
        config,
        journal.clone(),
    ))];
    for node in ["node-a", "node-b"] {
        let cfg = AgentConfig {
            node: node.into(),
            networks: nets.clone(),
            annotate_after: (Duration::from_millis(100), Duration::from_millis(2000)),
            stuck: Default::default(),
            seed: 0,
            clock: server.clock(),
        };
        tasks.push(tokio::spawn(agent::run(server.client(), cfg)));
    }
    run::until_signal().await;
    for t in tasks {
        t.abort();
    }
    server.shutdown().await;
    ExitCode::SUCCESS
}
