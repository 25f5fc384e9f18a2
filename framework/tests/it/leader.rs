//! Leader election against ward-apiserver, under tokio's paused clock: one
//! leader among candidates with separate client identities, release on
//! shutdown with a prompt takeover, a stalled leader losing its Lease (its
//! late renew is refused), takeovers and spurious conflicts noticed, and a
//! controller gated by leadership that stops reconciling once it is lost.

use crate::common::{WAIT, prometheus, until};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use ward_apiserver::{ApiServer, Delay, WriteAction, WriteFault};
use ward_runtime::GuardedController;
use ward_runtime::clock::Clock;
use ward_runtime::leader::{LeaderElection, LeaderError, Lost, LostReason, Outcome};

const LEASE: Duration = Duration::from_secs(15);
const RETRY: Duration = Duration::from_secs(2);

/// What happened, when (simulated time).
type Log = Arc<Mutex<Vec<(String, Instant)>>>;

fn record(log: &Log, entry: String) {
    log.lock().unwrap().push((entry, Instant::now()));
}

fn when(log: &Log, entry: &str) -> Option<Instant> {
    log.lock()
        .unwrap()
        .iter()
        .find(|(e, _)| e == entry)
        .map(|(_, t)| *t)
}

/// A candidate running [`LeaderElection::run`] in a task of its own.
struct Candidate {
    id: u64,
    shutdown: Option<oneshot::Sender<()>>,
    run: JoinHandle<Result<Outcome, LeaderError>>,
}

impl Candidate {
    /// Start `who` on its own client; `work` is what it does while leading.
    fn start<F, Fut>(
        server: &ApiServer,
        clock: Clock,
        lease: &str,
        who: &'static str,
        work: F,
    ) -> Self
    where
        F: FnOnce(Client, Lost) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let svc = server.service();
        let id = svc.client_id();
        let client = Client::new(svc, "default");
        let (tx, rx) = oneshot::channel::<()>();
        let election = LeaderElection::new(client.clone(), "default", lease, who).clock(clock);
        let run = tokio::spawn(election.run(move |lost| work(client, lost), async move {
            let _ = rx.await;
        }));
        Candidate {
            id,
            shutdown: Some(tx),
            run,
        }
    }

    /// Start `who` with work that logs `who:start`, then `who:lost` or
    /// `who:stopping` when its signal fires.
    fn logging(
        server: &ApiServer,
        clock: Clock,
        lease: &str,
        who: &'static str,
        log: &Log,
    ) -> Self {
        let log = log.clone();
        Candidate::start(server, clock, lease, who, move |_, lost| async move {
            record(&log, format!("{who}:start"));
            lost.clone().await;
            let how = if lost.is_taken() { "lost" } else { "stopping" };
            record(&log, format!("{who}:{how}"));
        })
    }

    async fn stop(mut self) -> Result<Outcome, LeaderError> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.finished().await
    }

    async fn finished(self) -> Result<Outcome, LeaderError> {
        tokio::time::timeout(WAIT, self.run)
            .await
            .expect("run returns in time")
            .expect("run does not panic")
    }
}

async fn lease(server: &ApiServer, name: &str) -> Lease {
    Api::<Lease>::namespaced(server.client(), "default")
        .get(name)
        .await
        .unwrap()
}

fn holder(lease: &Lease) -> Option<&str> {
    lease.spec.as_ref()?.holder_identity.as_deref()
}

fn transitions(lease: &Lease) -> i32 {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.lease_transitions)
        .unwrap()
}

fn assert_metric(line: &str) {
    let text = prometheus().render();
    assert!(text.contains(line), "{line} missing from:\n{text}");
}

#[tokio::test(start_paused = true)]
async fn exactly_one_of_two_candidates_leads() {
    prometheus();
    let server = ApiServer::start_seeded(1).await;
    let clock = Clock::new();
    let log: Log = Arc::default();
    let leading = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let start = |who: &'static str| {
        let (log, leading, most) = (log.clone(), leading.clone(), most.clone());
        Candidate::start(
            &server,
            clock,
            "one-leader",
            who,
            move |_, lost| async move {
                let now = leading.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                record(&log, format!("{who}:start"));
                lost.await;
                leading.fetch_sub(1, Ordering::SeqCst);
            },
        )
    };
    let a = start("a");
    let b = start("b");
    until("a leader", || !log.lock().unwrap().is_empty()).await;
    // Watch a minute of renewals and retries: nobody else ever leads.
    tokio::time::sleep(Duration::from_secs(60)).await;
    let started: Vec<String> = log.lock().unwrap().iter().map(|(e, _)| e.clone()).collect();
    assert_eq!(started.len(), 1, "{started:?}");
    assert_eq!(most.load(Ordering::SeqCst), 1);
    let leader = started[0].trim_end_matches(":start").to_string();
    let l = lease(&server, "one-leader").await;
    assert_eq!(holder(&l), Some(leader.as_str()));
    assert_eq!(transitions(&l), 0);
    assert_eq!(l.spec.as_ref().unwrap().lease_duration_seconds, Some(15));
    let renewed = l.spec.as_ref().unwrap().renew_time.as_ref().unwrap().0;
    let age = clock.now().duration_since(renewed);
    assert!(
        age <= jiff::SignedDuration::from_secs(5),
        "renewed {age:?} ago"
    );
    assert_metric(&format!(
        r#"ward_leader{{lease="default/one-leader",identity="{leader}"}} 1"#
    ));

    // The follower never led: stopping it changes nothing; the leader releases.
    let (leader, follower) = if leader == "a" { (a, b) } else { (b, a) };
    assert_eq!(follower.stop().await.unwrap(), Outcome::NeverLed);
    assert_eq!(leader.stop().await.unwrap(), Outcome::Released);
    assert_eq!(holder(&lease(&server, "one-leader").await), None);
}

#[tokio::test(start_paused = true)]
async fn the_leader_releases_on_shutdown_and_the_other_takes_over_at_once() {
    prometheus();
    let server = ApiServer::start_seeded(2).await;
    let clock = Clock::new();
    let log: Log = Arc::default();
    let a = Candidate::logging(&server, clock, "release", "a", &log);
    until("a leads", || when(&log, "a:start").is_some()).await;
    let b = Candidate::logging(&server, clock, "release", "b", &log);
    // Several renew periods pass: b keeps retrying and never leads.
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(when(&log, "b:start"), None);

    let t0 = Instant::now();
    assert_eq!(a.stop().await.unwrap(), Outcome::Released);
    assert!(when(&log, "a:stopping").is_some());
    until("b leads", || when(&log, "b:start").is_some()).await;
    let took = when(&log, "b:start").unwrap() - t0;
    // b watches the Lease: the release wakes it, not its retry timer.
    assert!(
        took <= Duration::from_millis(100),
        "b took over after {took:?}"
    );
    assert!(took < LEASE / 2, "well before the lease would have expired");
    let l = lease(&server, "release").await;
    assert_eq!(holder(&l), Some("b"));
    assert_eq!(transitions(&l), 1);
    assert_metric(r#"ward_leader{lease="default/release",identity="a"} 0"#);
    assert_metric(r#"ward_leader{lease="default/release",identity="b"} 1"#);
    assert_metric(
        r#"ward_leader_transitions_total{lease="default/release",identity="a",event="released"} 1"#,
    );
    assert_eq!(b.stop().await.unwrap(), Outcome::Released);
}

#[tokio::test(start_paused = true)]
async fn a_stalled_leader_loses_its_lease_and_never_renews_over_the_new_holder() {
    prometheus();
    let server = ApiServer::start_seeded(3).await;
    let clock = Clock::new();
    let log: Log = Arc::default();
    let a = Candidate::logging(&server, clock, "stalled", "a", &log);
    until("a leads", || when(&log, "a:start").is_some()).await;
    let b = Candidate::logging(&server, clock, "stalled", "b", &log);
    let before = lease(&server, "stalled").await;

    // a's next write (its renew) hangs for far longer than the lease lasts.
    server
        .faults()
        .add_write_fault(
            WriteFault::next(1, WriteAction::Latency(Delay::fixed(LEASE * 3))).client(a.id),
        )
        .unwrap();
    let outcome = a.finished().await.unwrap();
    assert_eq!(outcome, Outcome::Lost(LostReason::Expired));
    let lost_at = when(&log, "a:lost").expect("a's lost signal fired");
    until("b leads", || when(&log, "b:start").is_some()).await;
    let b_at = when(&log, "b:start").unwrap();
    assert!(lost_at <= b_at, "a stopped before b started");
    assert!(
        b_at - lost_at <= RETRY + Duration::from_secs(2),
        "b took over promptly"
    );

    // a's renew lands long after, against the rv it read: refused.
    until("a's late renew", || {
        prometheus().render().contains(
            r#"ward_leader_late_renewals_total{lease="default/stalled",identity="a",result="conflict"} 1"#,
        )
    })
    .await;
    let after = lease(&server, "stalled").await;
    assert_eq!(holder(&after), Some("b"));
    assert_eq!(transitions(&after), transitions(&before) + 1);
    assert_eq!(when(&log, "b:lost"), None, "b still leads");
    assert_metric(r#"ward_leader{lease="default/stalled",identity="a"} 0"#);
    assert_metric(r#"ward_leader{lease="default/stalled",identity="b"} 1"#);
    assert_metric(
        r#"ward_leader_transitions_total{lease="default/stalled",identity="a",event="lost"} 1"#,
    );
    assert_eq!(b.stop().await.unwrap(), Outcome::Released);
}

#[tokio::test(start_paused = true)]
async fn a_takeover_is_noticed_and_a_spurious_conflict_is_not_a_loss() {
    prometheus();
    let server = ApiServer::start_seeded(4).await;
    let clock = Clock::new();
    let log: Log = Arc::default();
    let a = Candidate::logging(&server, clock, "intruded", "a", &log);
    until("a leads", || when(&log, "a:start").is_some()).await;

    // One renew answered 409 while the Lease is still a's: a keeps leading.
    server
        .faults()
        .add_write_fault(WriteFault::next(1, WriteAction::Conflict).client(a.id))
        .unwrap();
    tokio::time::sleep(LEASE * 2).await;
    assert_eq!(when(&log, "a:lost"), None);
    assert_eq!(holder(&lease(&server, "intruded").await), Some("a"));
    assert_metric(
        r#"ward_leader_renew_failures_total{lease="default/intruded",identity="a",reason="conflict"} 1"#,
    );

    // Someone else writes itself in: a's next renew conflicts and finds it.
    let api = Api::<Lease>::namespaced(server.client(), "default");
    let mut l = api.get("intruded").await.unwrap();
    l.spec.as_mut().unwrap().holder_identity = Some("intruder".into());
    api.replace("intruded", &PostParams::default(), &l)
        .await
        .unwrap();
    let outcome = a.finished().await.unwrap();
    assert_eq!(
        outcome,
        Outcome::Lost(LostReason::TakenOver {
            holder: Some("intruder".into())
        })
    );
    assert!(when(&log, "a:lost").is_some());
    assert_eq!(holder(&lease(&server, "intruded").await), Some("intruder"));
}

#[tokio::test(start_paused = true)]
async fn bad_timing_is_refused() {
    let server = ApiServer::start_seeded(5).await;
    let err = LeaderElection::new(server.client(), "default", "bad", "a")
        .renew_every(LEASE)
        .run(|_| async {}, std::future::pending::<()>())
        .await
        .unwrap_err();
    assert!(matches!(err, LeaderError::Config(_)), "{err}");
}

/// A ConfigMap controller that logs `who:name` for each reconcile, until `lost`.
async fn gated_controller(client: Client, lost: Lost, who: &'static str, log: Log) {
    let api = Api::<ConfigMap>::namespaced(client, "default");
    GuardedController::new(api, watcher::Config::default())
        .graceful_shutdown_on(lost)
        .run(
            move |cm: Arc<ConfigMap>, log: Arc<Log>| async move {
                record(&log, format!("{who}:{}", cm.name_any()));
                Ok::<_, kube::Error>(Action::await_change())
            },
            |_, _, _| Action::await_change(),
            Arc::new(log.clone()),
        )
        .for_each(|_| async {})
        .await;
    record(&log, format!("{who}:controller-ended"));
}

fn cm(name: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    c
}

#[tokio::test(start_paused = true)]
async fn a_controller_gated_by_leadership_stops_reconciling_when_the_lease_is_lost() {
    prometheus();
    let server = ApiServer::start_seeded(6).await;
    let clock = Clock::new();
    let log: Log = Arc::default();
    let cms = Api::<ConfigMap>::namespaced(server.client(), "default");
    let gated = |who: &'static str| {
        let log = log.clone();
        move |client, lost| gated_controller(client, lost, who, log)
    };
    let a = Candidate::start(&server, clock, "gated", "a", gated("a"));
    cms.create(&PostParams::default(), &cm("first"))
        .await
        .unwrap();
    until("a reconciles first", || when(&log, "a:first").is_some()).await;
    let b = Candidate::start(&server, clock, "gated", "b", gated("b"));
    tokio::time::sleep(LEASE).await;
    assert_eq!(
        when(&log, "b:first"),
        None,
        "b does not reconcile while a leads"
    );

    // a stalls: its lease expires, its controller stops, b's starts.
    server
        .faults()
        .add_write_fault(
            WriteFault::next(1, WriteAction::Latency(Delay::fixed(LEASE * 3))).client(a.id),
        )
        .unwrap();
    assert_eq!(
        a.finished().await.unwrap(),
        Outcome::Lost(LostReason::Expired),
        "run returns only once a's controller has stopped"
    );
    assert!(when(&log, "a:controller-ended").is_some());
    until("b reconciles first", || when(&log, "b:first").is_some()).await;
    cms.create(&PostParams::default(), &cm("second"))
        .await
        .unwrap();
    until("b reconciles second", || when(&log, "b:second").is_some()).await;
    assert_eq!(when(&log, "a:second"), None, "a no longer reconciles");
    assert_eq!(b.stop().await.unwrap(), Outcome::Released);
}
