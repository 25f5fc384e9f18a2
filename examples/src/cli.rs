//! What the example binaries (`whereabouts`, `cns`, `lws`) share, so that
//! each keeps only its live run: their commands — `scenario` (one seeded
//! run in simulated time, with the `sim` feature), `crds`, and `run` (live,
//! the default) —, the options every live run has ([`Live`]), starting an
//! embedded server or reaching a cluster, and how each command prints and
//! exits: 0 when all is well, 1 on a violation or a livelock, 2 on a usage or setup error.

use std::fmt;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use kube::{Client, CustomResourceExt};
use ward_apiserver::{ApiServer, ServerConfig};

use crate::example::Example;
#[cfg(feature = "sim")]
use crate::example::History;
use crate::run::{Mode, Scenario, ScenarioError};

/// An example binary's command line: a command, or without one the options
/// of `run`.
#[derive(Debug, Parser)]
#[command(version)]
struct Cli<R: clap::Args> {
    #[command(subcommand)]
    command: Option<Command<R>>,
    /// Without a subcommand: run live (see `run`).
    #[command(flatten)]
    run: R,
}

#[derive(Debug, Subcommand)]
enum Command<R: clap::Args> {
    /// Run one seeded scenario in simulated time and check the invariants.
    #[cfg(feature = "sim")]
    Scenario {
        /// The scenario.
        scenario: Scenario,
        /// naive, upstream or guarded.
        #[arg(long, default_value = "guarded")]
        mode: Mode,
        /// The seed of every random choice.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Print the CRD (YAML).
    Crds,
    /// Run live, in real time (the default without a subcommand).
    Run(R),
}

/// What an example binary's `--help` says.
#[derive(Debug, Clone, Copy)]
pub struct Help {
    /// What the binary is.
    pub about: &'static str,
    /// What `scenario` takes (e.g. `S1 (the seed race), S2 (...) or S3 (...)`).
    pub scenarios: &'static str,
    /// What `run` runs.
    pub run: &'static str,
}

/// The options every example's live run starts with; a binary flattens
/// them into its own (`--kubeconfig` too, whose default is the binary's).
#[derive(Debug, Clone, clap::Args)]
pub struct Live {
    /// naive, upstream or guarded.
    #[arg(long, default_value = "guarded")]
    pub mode: Mode,
    /// Run against the cluster of the usual kube config (KUBECONFIG,
    /// ~/.kube/config, or in-cluster) instead of an embedded
    /// ward-apiserver. Without it the binary starts its own server and
    /// writes that server's kubeconfig to --kubeconfig (never over a file
    /// it did not write).
    #[arg(long)]
    pub cluster: bool,
}

/// The whole of an example binary's `main`: parse its command line (its
/// live options `R`), set up logging, and run the command — `scenario` on
/// `E`, `crds` printing `K`'s CRD, `run` calling `live` on a multi-threaded
/// runtime.
pub fn main<E, K, R, F>(help: Help, live: impl FnOnce(R) -> F) -> ExitCode
where
    E: Example<Scenario = Scenario, Mode = Mode>,
    K: CustomResourceExt,
    R: clap::Args,
    F: Future<Output = ExitCode>,
{
    let cli = parse::<E, K, R>(help);
    let command = cli.command.unwrap_or(Command::Run(cli.run));
    // A scenario tells its story in its journal; reconcile failures the
    // naive variants run into are part of it, not warnings.
    #[cfg(feature = "sim")]
    let quiet = matches!(command, Command::Scenario { .. });
    #[cfg(not(feature = "sim"))]
    let quiet = false;
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| if quiet { "error" } else { "warn" }.into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match command {
        #[cfg(feature = "sim")]
        Command::Scenario {
            scenario,
            mode,
            seed,
        } => self::scenario::<E>(scenario, mode, seed),
        Command::Crds => crds::<K>(E::NAME),
        Command::Run(args) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime")
            .block_on(live(args)),
    }
}

/// The command line, with `E`'s name, `K`'s kind and `help`.
fn parse<E: Example, K: CustomResourceExt, R: clap::Args>(help: Help) -> Cli<R> {
    let kind = K::crd().spec.names.kind;
    let command = Cli::<R>::command()
        .name(E::NAME)
        .about(help.about)
        .mut_subcommand("crds", |c| c.about(format!("Print the {kind} CRD (YAML)")))
        .mut_subcommand("run", |c| c.about(help.run));
    #[cfg(feature = "sim")]
    let command = command.mut_subcommand("scenario", |c| {
        c.mut_arg("scenario", |a| a.help(help.scenarios))
    });
    Cli::<R>::from_arg_matches(&command.get_matches()).unwrap_or_else(|e| e.exit())
}

/// `crds`: print `K`'s CRD as YAML.
fn crds<K: CustomResourceExt>(name: &str) -> ExitCode {
    match serde_saphyr::to_string(&K::crd()) {
        Ok(yaml) => {
            ward_base::out!("{yaml}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(name, format_args!("cannot render the CRD: {e}")),
    }
}

/// `scenario`: run one, print its invariants (holds, or where and how each
/// first broke), what `E` adds and as much of its history as `E` says;
/// exit 1 on a violation or a livelock.
#[cfg(feature = "sim")]
fn scenario<E: Example>(s: E::Scenario, mode: E::Mode, seed: u64) -> ExitCode {
    use crate::journal::Invariant;
    let report = match E::run_blocking(s, mode, seed) {
        Ok(r) => r,
        Err(e) => return fail(E::NAME, format_args!("scenario setup failed: {e}")),
    };
    ward_base::outln!("scenario {s}, mode {mode}, seed {seed}{}", E::parameters());
    print_invariants(E::Invariant::ALL, &report.violations);
    for line in E::summary(&report) {
        ward_base::outln!("{line}");
    }
    if let Some(verdict) = &report.livelock {
        ward_base::outln!("the run ended early: {verdict}");
    } else if report.violations.is_empty() {
        ward_base::outln!("all invariants hold");
    }
    match E::history(&report) {
        History::Hidden => {}
        History::Until(t) => print_events(&report.journal, Some(t)),
        History::All => print_events(&report.journal, None),
    }
    if report.violations.is_empty() && report.livelock.is_none() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Print `what`, after the binary's `name`, to stderr; exit 2.
pub fn fail(name: &str, what: impl fmt::Display) -> ExitCode {
    eprintln!("{name}: {what}");
    ExitCode::from(2)
}

/// The client of the cluster the usual kube config names (KUBECONFIG or
/// in-cluster), or binary `name`'s exit without one.
pub async fn cluster(name: &str) -> Result<Client, ExitCode> {
    Client::try_default()
        .await
        .map_err(|e| fail(name, format_args!("no usable kube config: {e}")))
}

/// An embedded ward-apiserver on a free local port (serving KEP-5866's
/// `shardSelector`), with `install` done and its kubeconfig written to
/// `kubeconfig`; or binary `name`'s exit.
pub async fn embedded<F>(
    name: &str,
    kubeconfig: &std::path::Path,
    install: impl FnOnce(Client) -> F,
) -> Result<ApiServer, ExitCode>
where
    F: Future<Output = Result<(), ScenarioError>>,
{
    if let Ok(existing) = std::fs::read_to_string(kubeconfig)
        && !written_by_embedded(&existing)
    {
        return Err(fail(
            name,
            format_args!(
                "--kubeconfig {path} exists and is not a kubeconfig an embedded ward-apiserver \
                 wrote: without --cluster, {name} starts its own server and writes that \
                 server's kubeconfig there, which would overwrite it. To run against the \
                 cluster it names: KUBECONFIG={path} {name} run --cluster; to keep the \
                 embedded server, give --kubeconfig a new path",
                path = kubeconfig.display()
            ),
        ));
    }
    // KEP-5866's shardSelector served, as on a cluster with the
    // ShardedListAndWatch gate: replicas of a sharded ring (`--shard`)
    // pointed at this server list and watch only their slots. In real
    // time, stamped with the wall clock as a cluster stamps (the default
    // clock, anchored on the whole second, is for seeded simulations).
    let config = ServerConfig::default()
        .clock(ward_apiserver::Clock::new())
        .listen(([127, 0, 0, 1], 0).into())
        .sharded_list_and_watch(true);
    let server = ApiServer::start(config).await.map_err(|e| fail(name, e))?;
    install(server.client()).await.map_err(|e| fail(name, e))?;
    if let Some(kc) = server.kubeconfig()
        && let Err(e) = std::fs::write(kubeconfig, kc)
    {
        return Err(fail(
            name,
            format_args!("cannot write {}: {e}", kubeconfig.display()),
        ));
    }
    Ok(server)
}

/// Whether `text` is a kubeconfig an embedded ward-apiserver wrote (one
/// cluster, `ward`, on a loopback address): the only file `--kubeconfig`
/// may overwrite.
fn written_by_embedded(text: &str) -> bool {
    let ours = ward_apiserver::kubeconfig_yaml(([127, 0, 0, 1], 1).into(), "TOKEN");
    let Some((head, tail)) = ours.split_once("http://127.0.0.1:1\n") else {
        return false;
    };
    let Some((before_token, after_token)) = tail.split_once("TOKEN") else {
        return false;
    };
    // Any port, any admin token (one line of hex).
    text.strip_prefix(head)
        .and_then(|rest| rest.strip_prefix("http://127.0.0.1:"))
        .and_then(|rest| rest.split_once('\n'))
        .filter(|(port, _)| port.parse::<u16>().is_ok())
        .and_then(|(_, rest)| rest.strip_prefix(before_token))
        .and_then(|rest| rest.strip_suffix(after_token))
        .is_some_and(|token| !token.is_empty() && token.chars().all(|c| c.is_ascii_hexdigit()))
}

/// The embedded server's address, as the binaries print it.
#[must_use]
pub fn address(server: &ApiServer) -> String {
    server.addr().map(|a| a.to_string()).unwrap_or_default()
}

/// Print each of `all` invariants: holds, or where and how it first broke.
#[cfg(feature = "sim")]
fn print_invariants<I: Copy + PartialEq + fmt::Display>(
    all: &[I],
    violations: &[crate::journal::Violation<I>],
) {
    for inv in all {
        let broken: Vec<_> = violations.iter().filter(|v| v.invariant == *inv).collect();
        match broken.first() {
            None => ward_base::outln!("  {inv}: holds"),
            Some(v) => ward_base::outln!(
                "  {inv}: VIOLATED at {:?}: {} ({} time(s))",
                v.at,
                v.detail,
                broken.len()
            ),
        }
    }
}

/// Print the journal, up to `until` if given.
pub fn print_events(journal: &[(std::time::Duration, String)], until: Option<std::time::Duration>) {
    match until {
        Some(u) => ward_base::outln!("\nevents up to {u:?}:"),
        None => ward_base::outln!("\nevents:"),
    }
    for (at, what) in journal
        .iter()
        .filter(|(at, _)| until.is_none_or(|u| *at <= u))
    {
        ward_base::outln!("  {:>9.3}s  {what}", at.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_an_embedded_servers_kubeconfig_may_be_overwritten() {
        let ours = ward_apiserver::kubeconfig_yaml(([127, 0, 0, 1], 36117).into(), "00ff");
        assert!(super::written_by_embedded(&ours));
        assert!(!super::written_by_embedded(&ours.replace("00ff", "")));
        assert!(!super::written_by_embedded(&ours.replace("00ff", "x y")));
        let theirs = ours.replace("http://127.0.0.1:36117", "https://10.0.0.1:6443");
        assert!(!super::written_by_embedded(&theirs));
        assert!(!super::written_by_embedded(&format!(
            "{ours}- name: admin\n"
        )));
        assert!(!super::written_by_embedded(""));
    }
}
