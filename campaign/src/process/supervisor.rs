//! A controller process under test: started in a process group of its
//! own with a kubeconfig that reaches the server only through a loopback
//! listener of its own — so everything it sends is counted, can be cut
//! off, and is answered as its identity (views and write faults aim at
//! it) — SIGKILLed with its whole group when a crash fires or the run
//! ends, and restarted after a crash with its memory and watches gone.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::sync::watch;

use ward_apiserver::ApiServer;

use crate::perturber::Perturber;
use crate::world::Counted;

use super::timeline::{Lane, Timeline};

/// A started controller: how the run learns it exited on its own.
pub(crate) struct Supervised {
    /// Set once the process exited without being killed: its status and
    /// the tail of its output.
    pub(crate) exited: watch::Receiver<Option<String>>,
    /// Requests it has sent.
    pub(crate) requests: watch::Receiver<u64>,
    /// Its output (stdout and stderr, every incarnation).
    pub(crate) log: PathBuf,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Supervised {
    /// Kill the controller's process group and wait until it is gone.
    pub(crate) async fn stop(&mut self) {
        self.stop.send_replace(true);
        if tokio::time::timeout(Duration::from_secs(10), &mut self.task)
            .await
            .is_err()
        {
            self.task.abort();
        }
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        // Aborted, its process group is killed as the task drops it.
        self.task.abort();
    }
}

/// Start `argv` as controller `name` of `perturber`'s run: bind its
/// listener (HTTPS with `https`'s CA when given), write its kubeconfig
/// into `dir`, and supervise it.
pub(crate) async fn start(
    perturber: &mut Perturber,
    name: &str,
    argv: &[String],
    token: &str,
    https: Option<&ApiServer>,
    dir: &Path,
    timeline: Timeline,
) -> std::io::Result<Supervised> {
    let (svc, target) = perturber.target(name);
    let world = perturber.world().clone();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    let (tls, config) = match https {
        Some(server) => {
            let (acceptor, config) = server
                .tls_front(addr, token)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            (Some(acceptor), config)
        }
        None => (None, ward_apiserver::kubeconfig_yaml(addr, token)),
    };
    let kubeconfig = dir.join(format!("{name}.kubeconfig"));
    std::fs::write(&kubeconfig, config)?;
    let log = dir.join(format!("{name}.log"));
    // Bumped at every crash: the connections of the killed process close.
    let (generation, _) = watch::channel(0u64);
    let (requests, requests_rx) = watch::channel(0u64);
    let service = Counted {
        inner: svc,
        target: target.clone(),
        world: world.clone(),
    };
    let accept_generation = generation.clone();
    let tl = timeline.clone();
    perturber.hold(tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                // Out of descriptors, say: try again shortly, not at once.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let (service, tl) = (service.clone(), tl.clone());
            let requests = requests.clone();
            let mut gen_rx = accept_generation.subscribe();
            gen_rx.mark_unchanged();
            let (tls, handshakes) = (tls.clone(), tl.clone());
            tokio::spawn(async move {
                let svc =
                    hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        requests.send_modify(|n| *n += 1);
                        let what = format!("{} {}", req.method(), req.uri());
                        let call = tower::Service::call(&mut service.clone(), req);
                        let tl = tl.clone();
                        async move {
                            // A transport error: hyper closes the connection.
                            let resp = call.await.map_err(|e| std::io::Error::other(e.to_string()));
                            match &resp {
                                Ok(r) => tl.push(
                                    Lane::Controller,
                                    format!("{what} → {}", r.status().as_u16()),
                                ),
                                Err(e) => tl.push(Lane::Controller, format!("{what} → {e}")),
                            }
                            resp
                        }
                    });
                let http = hyper::server::conn::http1::Builder::new();
                let conn = async {
                    match tls {
                        // A failed handshake closes the connection, as
                        // the server's own HTTPS listener does.
                        Some(acceptor) => match acceptor.accept(tcp).await {
                            Ok(stream) => {
                                let _ = http.serve_connection(TokioIo::new(stream), svc).await;
                            }
                            Err(e) => {
                                handshakes.push(Lane::Controller, format!("TLS handshake: {e}"));
                            }
                        },
                        None => {
                            let _ = http.serve_connection(TokioIo::new(tcp), svc).await;
                        }
                    }
                };
                tokio::select! {
                    _ = conn => {}
                    _ = gen_rx.changed() => {}
                }
            });
        }
    }));
    let (exited_tx, exited) = watch::channel(None);
    let argv = argv.to_vec();
    let (name, log_path) = (name.to_string(), log.clone());
    // This run's output only (a restart appends to it).
    std::fs::write(&log_path, b"")?;
    // The process is spawned here, so a missing binary is an error now.
    let mut child = Some(spawn(&argv, &kubeconfig, &log_path)?);
    let (stop, mut stopping) = watch::channel(false);
    let task = tokio::spawn(async move {
        loop {
            let mut running = match child.take() {
                Some(c) => c,
                None => match spawn(&argv, &kubeconfig, &log_path) {
                    Ok(c) => c,
                    Err(e) => {
                        exited_tx.send_replace(Some(format!("could not start again: {e}")));
                        return;
                    }
                },
            };
            tokio::select! {
                _ = async { let _ = stopping.wait_for(|s| *s).await; } => {
                    running.kill().await;
                    return;
                }
                status = running.child.wait() => {
                    let status = status.map_or_else(|e| e.to_string(), |s| s.to_string());
                    timeline.push(Lane::Controller, format!("{name} exited on its own ({status})"));
                    exited_tx.send_replace(Some(format!("{status}; its output ends:\n{}", tail(&log_path))));
                    return;
                }
                () = target.crashed.notified() => {
                    running.kill().await;
                    generation.send_modify(|g| *g += 1);
                    timeline.push(Lane::Perturbation, format!(
                        "crash: {name} SIGKILLed after {} reads and {} writes; restarted with its memory lost",
                        target.counts[0].load(std::sync::atomic::Ordering::SeqCst),
                        target.counts[1].load(std::sync::atomic::Ordering::SeqCst),
                    ));
                }
            }
        }
    });
    Ok(Supervised {
        exited,
        requests: requests_rx,
        log,
        stop,
        task,
    })
}

/// A child in a process group of its own, killed with its group when
/// dropped (a campaign never leaves a process behind).
struct Group {
    child: tokio::process::Child,
    group: KillGroup,
}

impl Group {
    async fn kill(&mut self) {
        self.group.kill();
        let _ = self.child.wait().await;
    }
}

fn spawn(argv: &[String], kubeconfig: &Path, log: &Path) -> std::io::Result<Group> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    let mut cmd = seed_command(argv, kubeconfig);
    cmd.stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .kill_on_drop(true);
    cmd.as_std_mut().process_group(0);
    let child = cmd
        .spawn()
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot start {:?}: {e}", argv[0])))?;
    let group = KillGroup(child.id().map(|p| p as i32));
    Ok(Group { child, group })
}

/// The last lines of a controller's output.
pub(crate) fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(12)..].join("\n")
}

/// The variable that names the seed's own folder (where the kubeconfigs
/// are) for the controller, the workload's commands, the invariant and
/// the judge: a file one of them writes there is the others' to read, and
/// no other seed's.
pub const RUN_DIR: &str = "WARD_RUN_DIR";

/// `argv` as a command of the seed whose `kubeconfig` it is given:
/// KUBECONFIG, and [`RUN_DIR`] the folder that kubeconfig is in.
fn seed_command(argv: &[String], kubeconfig: &Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .env("KUBECONFIG", kubeconfig)
        .env(RUN_DIR, kubeconfig.parent().unwrap_or(Path::new(".")));
    cmd
}

/// Run `argv` to its end with KUBECONFIG set (and `stdin` on its
/// standard input), for at most `limit`: its output, or why it failed (a
/// non-zero exit, a hang, a missing binary).
pub(crate) async fn command(
    argv: &[String],
    kubeconfig: &Path,
    limit: Duration,
    stdin: Option<&Path>,
) -> Result<String, String> {
    let input = match stdin {
        Some(p) => Stdio::from(
            std::fs::File::open(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?,
        ),
        None => Stdio::null(),
    };
    let mut cmd = seed_command(argv, kubeconfig);
    cmd.stdin(input).kill_on_drop(true);
    cmd.as_std_mut().process_group(0);
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", argv[0]))?;
    let _group = KillGroup(child.id().map(|p| p as i32));
    let out = tokio::time::timeout(limit, child.wait_with_output())
        .await
        .map_err(|_| format!("{:?} did not end within {limit:?}", argv[0]))?
        .map_err(|e| e.to_string())?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!(
            "{} ({}): {}",
            argv.join(" "),
            out.status,
            text.trim_end()
        ))
    }
}

/// A process group this module created: SIGKILLed once, at the latest
/// when dropped.
struct KillGroup(Option<i32>);

impl KillGroup {
    fn kill(&mut self) {
        if let Some(pgid) = self.0.take() {
            // SAFETY: kill(2) on a process group we created; no memory is involved.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
    }
}

impl Drop for KillGroup {
    fn drop(&mut self) {
        self.kill();
    }
}
