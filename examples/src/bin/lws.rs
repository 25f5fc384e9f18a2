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
//!   or in-cluster), as the Deployment runs it: `--metrics-addr` serves
//!   `/metrics`, `/healthz` and `/readyz` (ready once the controller's
//!   watches have synced, or — with `--leader-elect` — while this replica
//!   is a healthy candidate); `--leader-elect` runs the controller only
//!   while this replica holds the Lease `ward-lws`; `--shard RING` instead
//!   runs it on every replica, each reconciling the LeaderWorkerSets of the
//!   slots it holds in the ring (see `ward_runtime::shard`). SIGTERM or SIGINT
//!   stops it gracefully and releases the Lease (or leaves the ring).
//!
//! The commands and the options every example binary has are
//! [`ward_examples::cli`]'s; this file is the live run.

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;
use std::time::Duration;

use ward_examples::cli::{self, Help, Live};
use ward_examples::journal::Journal;
use ward_examples::lws::controller;
use ward_examples::lws::model::LeaderWorkerSet;
use ward_examples::lws::{self as example, Lws};
use ward_runtime::leader::{LeaderElection, Outcome};
use ward_runtime::{Observability, Readiness};

/// The Lease replicas elect a leader on.
const LEASE: &str = "ward-lws";

/// How to run the controller live.
#[derive(Debug, clap::Args)]
struct RunArgs {
    #[command(flatten)]
    live: Live,
    /// The namespace of the LeaderWorkerSets.
    #[arg(long, default_value = example::NAMESPACE)]
    namespace: String,
    /// Where to write the embedded server's kubeconfig (refused when the
    /// file exists and is not one an embedded server wrote; with
    /// --cluster, unused: the cluster's comes from KUBECONFIG).
    #[arg(long, default_value = "lws.kubeconfig")]
    kubeconfig: std::path::PathBuf,
    /// Serve /metrics, /healthz and /readyz here (0.0.0.0:9090 in a pod, so
    /// the kubelet's probes reach it).
    #[arg(long)]
    metrics_addr: Option<std::net::SocketAddr>,
    /// Reconcile only while holding the Lease `ward-lws` (run two replicas).
    #[arg(long, conflicts_with = "shard")]
    leader_elect: bool,
    /// Run as a member of the sharded ring RING (Leases `RING-<identity>`):
    /// every replica reconciles its share of the LeaderWorkerSets, by uid.
    #[arg(long, value_name = "RING")]
    shard: Option<String>,
    /// This replica's identity in the election or the ring [default:
    /// $POD_NAME, else the host name].
    #[arg(long)]
    identity: Option<String>,
    /// The Lease's namespace [default: $POD_NAMESPACE, else default].
    #[arg(long)]
    lease_namespace: Option<String>,
    /// How long the Lease (the election's, or this member's in the ring)
    /// stays valid after its last renew: how soon another replica takes
    /// over from one that died [default: 15].
    #[arg(long, value_name = "SECONDS")]
    lease_duration: Option<u64>,
    /// How often the Lease is renewed; with the clock skew (1 s) less than
    /// the lease duration [default: 5].
    #[arg(long, value_name = "SECONDS")]
    renew_every: Option<u64>,
}

fn main() -> ExitCode {
    cli::main::<Lws, LeaderWorkerSet, _, _>(
        Help {
            about: "The LWS revision race, naive vs upstream vs guarded",
            scenarios: "S1 (terminating StatefulSet), S2 (GC lag) or S3 (template change)",
            run: "Run the controller in real time (the default without a subcommand)",
        },
        run_live,
    )
}

async fn run_live(args: RunArgs) -> ExitCode {
    let name = "lws";
    let journal = Journal::echo();
    if args.live.cluster {
        let client = match cli::cluster(name).await {
            Ok(c) => c,
            Err(code) => return code,
        };
        ward_base::outln!(
            "lws controller ({}) in namespace {} against the configured cluster",
            args.live.mode,
            args.namespace
        );
        return serve(client, &args, journal).await;
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
    ward_base::outln!(
        "embedded ward-apiserver on http://{} (kubeconfig {}); lws controller ({}) running in namespace {}",
        cli::address(&server),
        kubeconfig.display(),
        args.live.mode,
        args.namespace
    );
    let code = serve(server.client(), &args, journal).await;
    server.shutdown().await;
    code
}

/// Run the controller until SIGTERM or SIGINT: behind leader election if
/// asked (the Lease released before returning), with the metrics and health
/// endpoint if asked.
async fn serve(client: kube::Client, args: &RunArgs, journal: Journal) -> ExitCode {
    let fail = |what: String| cli::fail("lws", what);
    let stop = match ward_runtime::shutdown::signal() {
        Ok(s) => s,
        Err(e) => return fail(format!("cannot install signal handlers: {e}")),
    };
    let readiness = Readiness::new();
    let endpoint = match args.metrics_addr {
        None => None,
        Some(addr) => match Observability::new()
            .listen(addr)
            .readiness(readiness.clone())
            .start()
            .await
        {
            Ok(h) => {
                ward_base::outln!(
                    "serving /metrics, /healthz and /readyz on http://{}",
                    h.addr()
                );
                Some(h)
            }
            Err(e) => return fail(e.to_string()),
        },
    };
    let (ns, mode) = (args.namespace.clone(), args.live.mode);
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let identity = args
        .identity
        .clone()
        .or_else(|| env("POD_NAME"))
        .or_else(|| env("HOSTNAME"))
        .unwrap_or_else(|| format!("lws-{}", std::process::id()));
    let lease_ns = args
        .lease_namespace
        .clone()
        .or_else(|| env("POD_NAMESPACE"))
        .unwrap_or_else(|| "default".into());
    let code = if let Some(ring) = &args.shard {
        ward_base::outln!("member {identity} of ring {lease_ns}/{ring}");
        let work = {
            let (client, readiness) = (client.clone(), readiness.clone());
            move |shard: ward_runtime::shard::Shard| async move {
                let stopping = shard.stopping();
                controller::run_sharded(
                    client,
                    &ns,
                    mode,
                    journal,
                    Some(readiness),
                    stopping,
                    Some(shard),
                )
                .await
            }
        };
        let mut member =
            ward_runtime::shard::Member::new(client, &lease_ns, ring.as_str(), identity)
                .readiness(readiness);
        if let Some(s) = args.lease_duration {
            member = member.lease_duration(Duration::from_secs(s));
        }
        if let Some(s) = args.renew_every {
            member = member.renew_every(Duration::from_secs(s));
        }
        match member.run(work, stop).await {
            Ok(()) => {
                ward_base::outln!("left the ring");
                ExitCode::SUCCESS
            }
            Err(e) => fail(e.to_string()),
        }
    } else if args.leader_elect {
        ward_base::outln!("leader election on Lease {lease_ns}/{LEASE} as {identity}");
        let work = {
            let (client, readiness) = (client.clone(), readiness.clone());
            move |lost| async move {
                controller::run_until(client, &ns, mode, journal, Some(readiness), lost).await
            }
        };
        let mut election =
            LeaderElection::new(client, &lease_ns, LEASE, identity).readiness(readiness);
        if let Some(s) = args.lease_duration {
            election = election.lease_duration(Duration::from_secs(s));
        }
        if let Some(s) = args.renew_every {
            election = election.renew_every(Duration::from_secs(s));
        }
        match election.run(work, stop).await {
            Ok(Outcome::Lost(reason)) => {
                // Exit so the pod restarts as a fresh candidate.
                eprintln!("lws: leadership lost: {reason}");
                ExitCode::from(1)
            }
            Ok(Outcome::Released) => {
                ward_base::outln!("released the Lease");
                ExitCode::SUCCESS
            }
            Ok(Outcome::NeverLed) => ExitCode::SUCCESS,
            Err(e) => fail(e.to_string()),
        }
    } else {
        controller::run_until(client, &ns, mode, journal, Some(readiness), stop).await;
        ExitCode::SUCCESS
    };
    if let Some(h) = endpoint
        && let Err(e) = h.shutdown().await
    {
        eprintln!("lws: {e}");
    }
    code
}
