//! Running Ward as an operator would, against ward-apiserver under tokio's
//! paused clock: readiness that follows the controller's sync (no polling,
//! every waiter woken), followers that are ready without leading, a leader
//! that releases its Lease on a real SIGTERM so the other candidate takes
//! over within one retry period, and the metrics text checked line by line
//! against the Prometheus exposition format.

use crate::common::{prometheus, within};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::watcher;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use ward_apiserver::ApiServer;
use ward_runtime::clock::Clock;
use ward_runtime::leader::{LeaderElection, LeaderError, Outcome};
use ward_runtime::observe::catalog::METRICS;
use ward_runtime::{Guard, GuardContext, GuardError, GuardedController, Readiness, Verdict};

async fn create_cms(client: &Client, names: &[&str]) {
    let api = Api::<ConfigMap>::default_namespaced(client.clone());
    for name in names {
        let mut c = ConfigMap::default();
        c.metadata.name = Some((*name).into());
        api.create(&PostParams::default(), &c).await.unwrap();
    }
}

struct Proceed;

#[async_trait::async_trait]
impl Guard<ConfigMap> for Proceed {
    fn name(&self) -> &'static str {
        "always"
    }
    async fn check(&self, _: &ConfigMap, _: &GuardContext) -> Result<Verdict, GuardError> {
        Ok(Verdict::proceed())
    }
}

/// Run `ctl` in a task; the receiver counts its reconciles.
fn spawn_run(ctl: GuardedController<ConfigMap>) -> (JoinHandle<()>, watch::Receiver<usize>) {
    let (tx, rx) = watch::channel(0usize);
    let task = tokio::spawn(
        ctl.run(
            |_, tx: Arc<watch::Sender<usize>>| async move {
                tx.send_modify(|n| *n += 1);
                Ok::<_, kube::Error>(Action::await_change())
            },
            |_, _, _| Action::await_change(),
            Arc::new(tx),
        )
        .for_each(|_| async {}),
    );
    (task, rx)
}

#[tokio::test(start_paused = true)]
async fn readiness_follows_the_controllers_sync_and_wakes_every_waiter() {
    prometheus();
    let server =
        ApiServer::start(ward_apiserver::ServerConfig::default().root_ca_configmaps(false))
            .await
            .unwrap();
    let client = server.client();
    create_cms(&client, &["a", "b", "c"]).await;
    let readiness = Readiness::new();
    let ctl = GuardedController::new(
        Api::<ConfigMap>::default_namespaced(client.clone()),
        watcher::Config::default(),
    )
    .owns(
        Api::<Secret>::default_namespaced(client.clone()),
        watcher::Config::default(),
    )
    .guard(Proceed)
    .readiness(readiness.clone());
    let (synced, store) = (ctl.synced(), ctl.store());
    assert!(!synced.is_synced(), "two watches pending");
    // Several waiters at once (kube-runtime's own store readiness would
    // wake only one of them, or the controller).
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let s = synced.clone();
            tokio::spawn(async move { s.wait().await })
        })
        .collect();
    let ready_waiter = {
        let r = readiness.clone();
        tokio::spawn(async move { r.until_ready().await })
    };
    tokio::task::yield_now().await;
    assert!(!readiness.is_ready(), "no check before run");

    let (task, mut reconciles) = spawn_run(ctl);
    assert_eq!(
        readiness.report(),
        "[-]synced/ConfigMap failed\nreadyz check failed\n",
        "registered by run, failing until synced"
    );
    within("readiness", readiness.until_ready()).await;
    assert!(synced.is_synced());
    assert_eq!(
        store.state().len(),
        3,
        "synced means the cache holds every object"
    );
    assert_eq!(
        readiness.report(),
        "[+]synced/ConfigMap ok\nreadyz check passed\n"
    );
    for w in waiters {
        within("a sync waiter", w).await.unwrap();
    }
    within("the readiness waiter", ready_waiter).await.unwrap();
    within("three reconciles", reconciles.wait_for(|n| *n >= 3))
        .await
        .unwrap();

    // The controller's stream ends: its check is gone, and with it readiness.
    let mut changes = readiness.subscribe();
    task.abort();
    within("unready after the stream ended", changes.wait_for(|r| !r))
        .await
        .unwrap();
    assert_eq!(
        readiness.report(),
        "[-]no checks registered\nreadyz check failed\n"
    );
}

/// A candidate in a task; `leading` fires when its work starts.
struct Candidate {
    leading: oneshot::Receiver<Instant>,
    run: JoinHandle<Result<Outcome, LeaderError>>,
}

fn candidate<S>(election: LeaderElection, shutdown: S) -> Candidate
where
    S: Future + Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    let run = tokio::spawn(election.run(
        move |lost| async move {
            let _ = tx.send(Instant::now());
            lost.await;
        },
        shutdown,
    ));
    Candidate { leading: rx, run }
}

fn election(server: &ApiServer, clock: Clock, lease: &str, who: &str) -> LeaderElection {
    LeaderElection::new(server.client(), "default", lease, who)
        .clock(clock)
        .retry_every(Duration::from_millis(500))
}

async fn holder(server: &ApiServer, lease: &str) -> Option<String> {
    Api::<Lease>::namespaced(server.client(), "default")
        .get(lease)
        .await
        .unwrap()
        .spec
        .and_then(|s| s.holder_identity)
}

#[tokio::test(start_paused = true)]
async fn followers_are_ready_unless_asked_to_be_ready_only_when_leading() {
    prometheus();
    let server = ApiServer::start_seeded(7).await;
    let clock = Clock::new();
    let (ra, rb, rc) = (Readiness::new(), Readiness::new(), Readiness::new());
    let (stop_a, a_stop) = oneshot::channel::<()>();
    let mut a = candidate(
        election(&server, clock, "ready", "a")
            .readiness(ra.clone())
            .ready_only_when_leading(),
        a_stop,
    );
    within("a leads", &mut a.leading).await.unwrap();
    within("a ready", ra.until_ready()).await;

    let b = candidate(
        election(&server, clock, "ready", "b").readiness(rb.clone()),
        std::future::pending::<()>(),
    );
    within("b, a follower, ready", rb.until_ready()).await;
    assert_eq!(holder(&server, "ready").await.as_deref(), Some("a"));
    assert_eq!(
        rb.report(),
        "[+]leader-election/default/ready ok\nreadyz check passed\n"
    );

    let c = candidate(
        election(&server, clock, "ready", "c")
            .readiness(rc.clone())
            .ready_only_when_leading(),
        std::future::pending::<()>(),
    );
    // c has tried several times and found the Lease held each time.
    within("c's attempts", async {
        while held_attempts("default/ready", "c") < 3.0 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(
        !rc.is_ready(),
        "c follows and was asked to be ready only when leading"
    );
    assert!(rb.is_ready());

    let _ = stop_a.send(());
    assert_eq!(
        within("a stops", a.run).await.unwrap().unwrap(),
        Outcome::Released
    );
    assert_eq!(
        ra.report(),
        "[-]no checks registered\nreadyz check failed\n",
        "a stopped: its check is gone"
    );
    b.run.abort();
    c.run.abort();
}

#[tokio::test(start_paused = true)]
async fn a_sigtermed_leader_releases_and_the_follower_takes_over_within_a_retry() {
    prometheus();
    let server = ApiServer::start_seeded(8).await;
    let clock = Clock::new();
    // Installed before the signal is sent, so SIGTERM cannot kill the test.
    let signal = ward_runtime::shutdown::signal().expect("signal handlers");
    let (signalled_tx, signalled) = oneshot::channel();
    let mut a = candidate(election(&server, clock, "term", "a"), async move {
        signal.await;
        let _ = signalled_tx.send(Instant::now());
    });
    within("a leads", &mut a.leading).await.unwrap();
    let rb = Readiness::new();
    let mut b = candidate(
        election(&server, clock, "term", "b").readiness(rb.clone()),
        std::future::pending::<()>(),
    );
    within("b ready as a follower", rb.until_ready()).await;

    let status = std::process::Command::new("kill")
        .args(["-TERM", &std::process::id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let t0 = within("the signal", signalled).await.unwrap();
    assert_eq!(
        within("a stops", a.run).await.unwrap().unwrap(),
        Outcome::Released
    );
    let took = within("b leads", &mut b.leading).await.unwrap() - t0;
    assert!(
        took <= Duration::from_millis(500),
        "b took over {took:?} after SIGTERM (retry period 500 ms)"
    );
    assert_eq!(holder(&server, "term").await.as_deref(), Some("b"));
    b.run.abort();
}

/// `ward_leader_acquire_attempts_total{result="held"}` of one candidate, from
/// the metrics text.
fn held_attempts(lease: &str, identity: &str) -> f64 {
    let text = prometheus().render();
    let (_, samples) = parse_exposition(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    samples
        .iter()
        .find(|(n, l, _)| {
            n == "ward_leader_acquire_attempts_total"
                && l.get("lease").map(String::as_str) == Some(lease)
                && l.get("identity").map(String::as_str) == Some(identity)
                && l.get("result").map(String::as_str) == Some("held")
        })
        .map_or(0.0, |(_, _, v)| *v)
}

/// One parsed sample line: name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

/// Each family's type and help.
type Families = BTreeMap<String, (String, String)>;

/// Parse Prometheus' text exposition format strictly: `# HELP`/`# TYPE`
/// before a family's samples (once each), well-formed names, labels and
/// values. Returns each family's type and help, and the samples.
fn parse_exposition(text: &str) -> Result<(Families, Vec<Sample>), String> {
    let name_ok = |n: &str| {
        !n.is_empty()
            && !n.starts_with(|c: char| c.is_ascii_digit())
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut helps: BTreeMap<String, String> = BTreeMap::new();
    let mut sampled: BTreeSet<String> = BTreeSet::new();
    let mut samples = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let err = |m: &str| format!("line {}: {m}: {line:?}", i + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (kw, name, arg) = (parts.next(), parts.next(), parts.next());
            let name = name.filter(|n| name_ok(n)).ok_or_else(|| err("bad name"))?;
            if sampled.contains(name) {
                return Err(err("metadata after the family's samples"));
            }
            match kw {
                Some("TYPE") => {
                    let t = arg.ok_or_else(|| err("no type"))?;
                    if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&t) {
                        return Err(err("unknown type"));
                    }
                    if types.insert(name.into(), t.into()).is_some() {
                        return Err(err("second TYPE"));
                    }
                }
                Some("HELP")
                    if helps
                        .insert(name.into(), arg.unwrap_or("").into())
                        .is_some() =>
                {
                    return Err(err("second HELP"));
                }
                _ => {}
            }
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').ok_or_else(|| err("no value"))?;
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            "NaN" => f64::NAN,
            v => v.parse().map_err(|_| err("bad value"))?,
        };
        let (name, labels) = match series.split_once('{') {
            None => (series, BTreeMap::new()),
            Some((name, rest)) => {
                let body = rest
                    .strip_suffix('}')
                    .ok_or_else(|| err("unclosed labels"))?;
                (name, parse_labels(body).map_err(|m| err(&m))?)
            }
        };
        if !name_ok(name) {
            return Err(err("bad metric name"));
        }
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s)
                    .filter(|f| types.get(*f).is_some_and(|t| t == "histogram"))
            })
            .unwrap_or(name);
        if !types.contains_key(family) {
            return Err(err("a sample before its TYPE"));
        }
        sampled.insert(family.to_string());
        samples.push((name.to_string(), labels, value));
    }
    let families = types
        .into_iter()
        .map(|(n, t)| {
            let h = helps.get(&n).cloned().unwrap_or_default();
            (n, (t, h))
        })
        .collect();
    Ok((families, samples))
}

/// `a="x",b="y\"z"` with Prometheus' escapes (`\\`, `\"`, `\n`).
fn parse_labels(body: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    let mut chars = body.chars().peekable();
    while chars.peek().is_some() {
        let name: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("bad label name {name:?}"));
        }
        if chars.next() != Some('"') {
            return Err(format!("label {name} is not quoted"));
        }
        let mut value = String::new();
        loop {
            match chars.next() {
                Some('"') => break,
                Some('\\') => match chars.next() {
                    Some('\\') => value.push('\\'),
                    Some('"') => value.push('"'),
                    Some('n') => value.push('\n'),
                    c => return Err(format!("bad escape {c:?}")),
                },
                Some(c) => value.push(c),
                None => return Err(format!("label {name} unterminated")),
            }
        }
        if out.insert(name.clone(), value).is_some() {
            return Err(format!("label {name} twice"));
        }
        match chars.next() {
            None | Some(',') => {}
            Some(c) => return Err(format!("unexpected {c:?} after label {name}")),
        }
    }
    Ok(out)
}

#[test]
fn the_parser_rejects_what_prometheus_rejects() {
    let ok = "# HELP x_total X.\n# TYPE x_total counter\nx_total{a=\"1\",b=\"q\\\"\"} 2\n";
    assert!(parse_exposition(ok).is_ok());
    for bad in [
        "x_total 1\n",                               // no TYPE
        "# TYPE x counter\nx{a=1} 1\n",              // unquoted
        "# TYPE x counter\nx 1\n# TYPE x counter\n", // metadata after samples
        "# TYPE x counter\nx{a=\"1\"} one\n",        // value
        "# TYPE x wat\n",                            // type
        "# TYPE x counter\nx{a=\"1\",a=\"2\"} 1\n",  // label twice
        "# TYPE 1x counter\n",                       // name
    ] {
        assert!(parse_exposition(bad).is_err(), "accepted {bad:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn the_metrics_text_is_valid_exposition_with_every_series_from_the_start() {
    let prom = prometheus();
    let server = ApiServer::start_in_process().await;
    let client = server.client();
    create_cms(&client, &["m"]).await;
    let ctl = GuardedController::new(
        Api::<ConfigMap>::default_namespaced(client.clone()),
        watcher::Config::default(),
    )
    .guard(Proceed);
    let (task, mut reconciles) = spawn_run(ctl);
    within("a reconcile", reconciles.wait_for(|n| *n >= 1))
        .await
        .unwrap();
    // A follower that never leads still shows its series.
    let lease = "metrics";
    let (_stop, never) = oneshot::channel::<()>();
    let mut holder_task = candidate(election(&server, Clock::new(), lease, "leader"), never);
    within("a leader", &mut holder_task.leading).await.unwrap();
    let rf = Readiness::new();
    let follower = candidate(
        election(&server, Clock::new(), lease, "follower").readiness(rf.clone()),
        std::future::pending::<()>(),
    );
    within("the follower ready", rf.until_ready()).await;
    // A shard member shows its series from the start, at zero while it
    // has handed nothing over.
    let rs = Readiness::new();
    let member = ward_runtime::shard::Member::new(client.clone(), "default", "metrics", "solo")
        .clock(Clock::new())
        .readiness(rs.clone());
    let _member = tokio::spawn(member.run(
        |_| std::future::pending::<()>(),
        std::future::pending::<()>(),
    ));
    within("the member ready", rs.until_ready()).await;

    let text = prom.render();
    let (families, samples) = parse_exposition(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    for m in METRICS {
        let (t, help) = families
            .get(m.name)
            .unwrap_or_else(|| panic!("{} has no TYPE line:\n{text}", m.name));
        assert_eq!(t, m.kind.as_str(), "{}", m.name);
        assert_eq!(help, m.help, "{}'s HELP", m.name);
    }
    let has = |name: &str, labels: &[(&str, &str)], value: f64| {
        samples.iter().any(|(n, l, v)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, want)| l.get(*k).map(String::as_str) == Some(*want))
                && *v == value
        })
    };
    // Counters at zero before anything happened to them.
    for (name, labels) in [
        (
            "ward_reconciles_total",
            vec![("kind", "ConfigMap"), ("result", "guard_error")],
        ),
        (
            "ward_guard_verdicts_total",
            vec![("guard", "always"), ("verdict", "skip")],
        ),
        ("ward_stale_triggers_total", vec![("source", "wake")]),
        ("ward_occ_gave_up_total", vec![("verb", "delete")]),
        (
            "ward_leader_renew_failures_total",
            vec![
                ("lease", "default/metrics"),
                ("identity", "follower"),
                ("reason", "timeout"),
            ],
        ),
        (
            "ward_leader_transitions_total",
            vec![
                ("lease", "default/metrics"),
                ("identity", "follower"),
                ("event", "acquired"),
            ],
        ),
        (
            "ward_shard_handovers_total",
            vec![("ring", "metrics"), ("identity", "solo"), ("event", "lost")],
        ),
    ] {
        assert!(
            has(name, &labels, 0.0),
            "{name}{labels:?} 0 missing:\n{text}"
        );
    }
    // The follower's state.
    let follower_is = [("lease", "default/metrics"), ("identity", "follower")];
    assert!(has("ward_leader", &follower_is, 0.0), "{text}");
    assert!(
        held_attempts("default/metrics", "follower") >= 1.0,
        "{text}"
    );
    assert!(has(
        "ward_ready",
        &[("check", "leader-election/default/metrics")],
        1.0
    ));
    // The lone member holds every slot.
    let solo = [("ring", "metrics"), ("identity", "solo")];
    assert!(has("ward_shard_slots_owned", &solo, 128.0), "{text}");
    assert!(has("ward_shard_members", &solo, 1.0), "{text}");
    assert!(
        has("ward_ready", &[("check", "shard/default/metrics")], 1.0),
        "{text}"
    );
    // The reconcile duration is a histogram with Ward's buckets,
    // cumulative, ending in +Inf = count.
    let buckets: Vec<(f64, f64)> = samples
        .iter()
        .filter(|(n, l, _)| {
            n == "ward_reconcile_duration_seconds_bucket"
                && l.get("kind").map(String::as_str) == Some("ConfigMap")
        })
        .map(|(_, l, v)| {
            let le = &l["le"];
            (
                if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().unwrap()
                },
                *v,
            )
        })
        .collect();
    let bounds: Vec<f64> = buckets.iter().map(|(le, _)| *le).collect();
    let mut want = ward_runtime::observe::catalog::RECONCILE_BUCKETS.to_vec();
    want.push(f64::INFINITY);
    assert_eq!(bounds, want, "{text}");
    assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "cumulative");
    let count = samples
        .iter()
        .find(|(n, l, _)| {
            n == "ward_reconcile_duration_seconds_count"
                && l.get("kind").map(String::as_str) == Some("ConfigMap")
        })
        .map(|(_, _, v)| *v)
        .expect("a _count");
    assert_eq!(buckets.last().unwrap().1, count);
    assert!(count >= 1.0);
    assert!(
        families
            .iter()
            .filter(|(n, _)| n.starts_with("ward_"))
            .all(|(n, (t, _))| METRICS.iter().any(|m| m.name == n && m.kind.as_str() == t)),
        "every ward_ family is in the catalog"
    );
    task.abort();
    holder_task.run.abort();
    follower.run.abort();
}
