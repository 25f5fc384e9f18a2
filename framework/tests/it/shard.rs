//! Sharded controllers against ward-apiserver, under tokio's paused clock:
//! replicas split the objects, hand slots over on a graceful leave, a
//! crash and a join, reconcile every object on its new owner, and never
//! run two reconciles of one object at once; with and without the
//! server's KEP-5866 filtering.

use crate::common::{prometheus, until};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use ward_apiserver::{ApiServer, ServerConfig};
use ward_runtime::clock::Clock;
use ward_runtime::shard::{Member, Shard, ShardError, Slots};
use ward_runtime::{Guard, GuardContext, GuardError, GuardedController, Verdict};

const LEASE: Duration = Duration::from_secs(10);
const RENEW: Duration = Duration::from_secs(2);
const OBJECTS: usize = 120;

/// One reconcile: who ran it, on which object, from when to when (`None`:
/// still running).
#[derive(Debug, Clone)]
struct Run {
    who: &'static str,
    object: String,
    start: Instant,
    end: Option<Instant>,
}

type Journal = Arc<Mutex<Vec<Run>>>;

/// Records a reconcile's end when dropped (also when it is cancelled).
struct Ending(Journal, usize);

impl Drop for Ending {
    fn drop(&mut self) {
        self.0.lock().unwrap()[self.1].end = Some(Instant::now());
    }
}

/// I1: no two replicas ran reconciles of one object at overlapping times.
fn assert_no_overlap(journal: &Journal) {
    let runs = journal.lock().unwrap().clone();
    let mut by_object: BTreeMap<&str, Vec<&Run>> = BTreeMap::new();
    for r in &runs {
        by_object.entry(&r.object).or_default().push(r);
    }
    for (object, runs) in by_object {
        for (i, a) in runs.iter().enumerate() {
            for b in &runs[i + 1..] {
                let (a_end, b_end) = (
                    a.end.unwrap_or(Instant::now()),
                    b.end.unwrap_or(Instant::now()),
                );
                assert!(
                    a.who == b.who || a_end <= b.start || b_end <= a.start,
                    "{object}: {} and {} reconciled it at once ({a:?} / {b:?})",
                    a.who,
                    b.who
                );
            }
        }
    }
}

/// Every object has a finished reconcile by `who` that started after `since`.
fn reconciled_by(
    journal: &Journal,
    objects: &[String],
    who: impl Fn(&str) -> &'static str,
    since: Instant,
) -> bool {
    let runs = journal.lock().unwrap();
    objects.iter().all(|o| {
        runs.iter()
            .any(|r| r.object == *o && r.who == who(o) && r.start >= since && r.end.is_some())
    })
}

/// A server that filters lists and watches by shard (KEP-5866).
async fn sharded_server() -> ApiServer {
    ApiServer::start(ServerConfig::default().sharded_list_and_watch(true))
        .await
        .unwrap()
}

/// `who` in `ring`, with the tests' Lease timings.
fn member(client: Client, clock: &Clock, ring: &str, who: &'static str) -> Member {
    Member::new(client, "default", ring, who)
        .lease_duration(LEASE)
        .renew_every(RENEW)
        .retry_every(Duration::from_secs(1))
        .clock(*clock)
}

struct Replica {
    who: &'static str,
    shard: Arc<Mutex<Option<Shard>>>,
    shutdown: Option<oneshot::Sender<()>>,
    /// The controller's cache, once it runs.
    store: Arc<Mutex<Option<Store<ConfigMap>>>>,
    run: JoinHandle<Result<(), ShardError>>,
}

/// Record in `journal` that `who` started reconciling `cm`; the end is
/// recorded when the returned guard drops (finished or cancelled).
fn recorded(journal: &Journal, who: &'static str, cm: &ConfigMap) -> Ending {
    let mut j = journal.lock().unwrap();
    j.push(Run {
        who,
        object: cm.name_any(),
        start: Instant::now(),
        end: None,
    });
    Ending(journal.clone(), j.len() - 1)
}

/// A reconcile: the object, and the controller's `Api` to write with.
type Reconcile = Arc<
    dyn Fn(Arc<ConfigMap>, Api<ConfigMap>) -> futures::future::BoxFuture<'static, Action>
        + Send
        + Sync,
>;

/// A guard that reads the object itself as an owner guard reads its owner:
/// consistently (from the context's watch cache when it is current), and
/// skips it when the read says it is gone — as `AwaitDeletion` and
/// `OwnerUid` do.
struct Exists;

#[async_trait::async_trait]
impl Guard<ConfigMap> for Exists {
    fn name(&self) -> &'static str {
        "exists"
    }

    async fn check(&self, cm: &ConfigMap, ctx: &GuardContext) -> Result<Verdict, GuardError> {
        let api: Api<ConfigMap> = Api::default_namespaced(ctx.client().clone());
        Ok(match ctx.get_consistent(&api, &cm.name_any()).await? {
            Some(_) => Verdict::proceed(),
            None => Verdict::skip("gone"),
        })
    }
}

impl Replica {
    /// `member`, running a sharded controller of ConfigMaps whose LISTs
    /// and WATCHes go through the shard's client over `client`.
    fn spawn(member: Member, who: &'static str, client: Client, reconcile: Reconcile) -> Replica {
        Replica::spawn_guarded(member, who, client, reconcile, false)
    }

    /// [`spawn`](Self::spawn), with the [`Exists`] guard when `guarded`.
    fn spawn_guarded(
        member: Member,
        who: &'static str,
        client: Client,
        reconcile: Reconcile,
        guarded: bool,
    ) -> Replica {
        let (tx, rx) = oneshot::channel::<()>();
        let seen = Arc::new(Mutex::new(None));
        let slot = seen.clone();
        let store = Arc::new(Mutex::new(None));
        let cache = store.clone();
        let run = tokio::spawn(member.run(
            move |shard: Shard| async move {
                *slot.lock().unwrap() = Some(shard.clone());
                let api: Api<ConfigMap> = Api::default_namespaced(shard.client(client));
                let writer = api.clone();
                let mut controller = GuardedController::new(api, watcher::Config::default());
                *cache.lock().unwrap() = Some(controller.store());
                if guarded {
                    controller = controller.guard(Exists);
                }
                controller
                    .shard(shard.clone())
                    .graceful_shutdown_on(shard.stopping())
                    .run(
                        move |cm: Arc<ConfigMap>, _: Arc<()>| {
                            let done = reconcile(cm, writer.clone());
                            async move { Ok::<_, kube::Error>(done.await) }
                        },
                        |_, _, _| Action::requeue(Duration::from_secs(1)),
                        Arc::new(()),
                    )
                    .for_each(|_| async {})
                    .await;
            },
            async move {
                let _ = rx.await;
            },
        ));
        Replica {
            who,
            shard: seen,
            store,
            shutdown: Some(tx),
            run,
        }
    }

    /// `who` in `ring`, each reconcile journaled and taking 300 ms.
    fn start(
        server: &ApiServer,
        clock: &Clock,
        ring: &str,
        who: &'static str,
        journal: &Journal,
    ) -> Replica {
        let client = server.client();
        let member = member(client.clone(), clock, ring, who).drain_timeout(Duration::from_secs(3));
        let journal = journal.clone();
        let reconcile: Reconcile = Arc::new(move |cm, _| {
            let running = recorded(&journal, who, &cm);
            Box::pin(async move {
                let _running = running;
                tokio::time::sleep(Duration::from_millis(300)).await;
                Action::requeue(Duration::from_secs(1))
            })
        });
        Replica::spawn(member, who, client, reconcile)
    }

    fn slots(&self) -> Slots {
        self.shard
            .lock()
            .unwrap()
            .as_ref()
            .map_or(Slots::NONE, Shard::slots)
    }
}

/// The replicas' slots cover the space exactly once.
fn partition(replicas: &[&Replica]) -> bool {
    let mut all = Slots::NONE;
    for r in replicas {
        let s = r.slots();
        if !all.intersection(s).is_empty() {
            return false;
        }
        all = all.union(s);
    }
    all == Slots::ALL
}

async fn objects(client: &Client) -> (Vec<String>, BTreeMap<String, u64>) {
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let mut names = Vec::new();
    for i in 0..OBJECTS {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(format!("cm-{i:03}"));
        cms.create(&PostParams::default(), &cm).await.unwrap();
        names.push(format!("cm-{i:03}"));
    }
    let hashes = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|cm| {
            (
                cm.name_any(),
                ward_base::fnv1a(cm.uid().unwrap().as_bytes()),
            )
        })
        .collect();
    (names, hashes)
}

async fn scenario(server_filters: bool) {
    let metrics = prometheus();
    let server = ApiServer::start(ServerConfig::default().sharded_list_and_watch(server_filters))
        .await
        .unwrap();
    let client = server.client();
    let clock = Clock::new();
    // Tests run at once and share the metrics recorder: a ring of their own.
    let ring = if server_filters { "server" } else { "client" };
    let journal: Journal = Arc::default();
    let (names, hashes) = objects(&client).await;
    let owner = |replicas: &[&Replica]| {
        let map: BTreeMap<String, &'static str> = hashes
            .iter()
            .map(|(n, h)| {
                let who = replicas
                    .iter()
                    .find(|r| r.slots().contains_hash(*h))
                    .map_or("", |r| r.who);
                (n.clone(), who)
            })
            .collect();
        move |o: &str| map[o]
    };

    let a = Replica::start(&server, &clock, ring, "a", &journal);
    let mut b = Replica::start(&server, &clock, ring, "b", &journal);
    let mut c = Replica::start(&server, &clock, ring, "c", &journal);
    let settled = until("three replicas to split the slots", || {
        partition(&[&a, &b, &c]) && [&a, &b, &c].iter().all(|r| r.slots().len() >= 42)
    })
    .await;
    let who = owner(&[&a, &b, &c]);
    until("every object reconciled by its owner", || {
        reconciled_by(&journal, &names, &who, settled)
    })
    .await;
    let filtering = metrics.render();
    let gauge = format!(
        "ward_shard_server_filtering{{ring=\"{ring}\",identity=\"a\"}} {}",
        u8::from(server_filters)
    );
    assert!(filtering.contains(&gauge), "{gauge} in\n{filtering}");

    // Graceful leave: c drains, deletes its Lease; a and b take its slots.
    let c_slots = c.slots();
    let left = Instant::now();
    c.shutdown.take().unwrap().send(()).unwrap();
    c.run.await.unwrap().unwrap();
    let leases: Api<Lease> = Api::default_namespaced(client.clone());
    assert!(
        leases
            .get_opt(&format!("{ring}-c"))
            .await
            .unwrap()
            .is_none(),
        "c deleted its Lease"
    );
    let moved = until("a and b to take c's slots", || partition(&[&a, &b])).await;
    // Watch-driven: the others' rounds start at c's DELETE, not their
    // timers (550 ms here with a 300 ms reconcile drained; 2.4 s on timers).
    assert!(
        moved - left <= RENEW / 2,
        "graceful hand-over took {:?}",
        moved - left
    );
    let who = owner(&[&a, &b]);
    let of_c: Vec<String> = names
        .iter()
        .filter(|n| c_slots.contains_hash(hashes[*n]))
        .cloned()
        .collect();
    until("c's objects reconciled by their new owners", || {
        reconciled_by(&journal, &of_c, &who, left)
    })
    .await;

    // Crash: b stops without a word; its Lease expires, a takes everything.
    let crashed = Instant::now();
    b.run.abort();
    let _ = (&mut b.run).await;
    let taken = until("a to take every slot", || a.slots() == Slots::ALL).await;
    assert!(
        taken - crashed >= LEASE - RENEW,
        "a took b's slots before its Lease could expire"
    );
    assert!(
        taken - crashed <= LEASE + RENEW * 2,
        "takeover after a crash took {:?}",
        taken - crashed
    );
    until("everything reconciled by a", || {
        reconciled_by(&journal, &names, |_| "a", taken)
    })
    .await;

    // Join: d takes about half.
    let joining = Instant::now();
    let d = Replica::start(&server, &clock, ring, "d", &journal);
    let joined = until("a and d to split the slots", || {
        partition(&[&a, &d]) && d.slots().len() == 64
    })
    .await;
    // Watch-driven too: a releases at d's Lease's ADDED, d claims at a's
    // release (550 ms here; 2.05 s on timers).
    assert!(
        joined - joining <= RENEW / 2,
        "a join's hand-over took {:?}",
        joined - joining
    );
    let who = owner(&[&a, &d]);
    until(
        "every object reconciled by its owner after the join",
        || reconciled_by(&journal, &names, &who, joined),
    )
    .await;

    assert_no_overlap(&journal);
    let metrics = metrics.render();
    let owned = format!("ward_shard_slots_owned{{ring=\"{ring}\",identity=\"d\"}} 64");
    assert!(metrics.contains(&owned), "{owned} in\n{metrics}");
    drop(a);
    drop(d);
}

#[tokio::test(start_paused = true)]
async fn replicas_hand_slots_over_without_overlap_with_server_filtering() {
    scenario(true).await;
}

#[tokio::test(start_paused = true)]
async fn replicas_hand_slots_over_without_overlap_filtering_client_side() {
    scenario(false).await;
}

/// A client whose requests hang while `cut` says so (a partition: nothing
/// reaches the server; a request abandoned meanwhile never does).
fn cut_client(server: &ApiServer, cut: tokio::sync::watch::Receiver<bool>) -> Client {
    #[derive(Clone)]
    struct Cut {
        inner: ward_apiserver::WardService,
        cut: tokio::sync::watch::Receiver<bool>,
    }
    impl tower::Service<http::Request<kube::client::Body>> for Cut {
        type Response = <ward_apiserver::WardService as tower::Service<
            http::Request<kube::client::Body>,
        >>::Response;
        type Error = std::convert::Infallible;
        type Future = futures::future::BoxFuture<'static, Result<Self::Response, Self::Error>>;
        fn poll_ready(
            &mut self,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Self::Error>> {
            std::task::Poll::Ready(Ok(()))
        }
        fn call(&mut self, req: http::Request<kube::client::Body>) -> Self::Future {
            let (mut inner, mut cut) = (self.inner.clone(), self.cut.clone());
            Box::pin(async move {
                let _ = cut.wait_for(|c| !*c).await;
                inner.call(req).await
            })
        }
    }
    Client::new(
        Cut {
            inner: server.service(),
            cut,
        },
        "default",
    )
}

/// A client that records the path and query of every request it sends.
fn recording_client(server: &ApiServer, log: Arc<Mutex<Vec<String>>>) -> Client {
    #[derive(Clone)]
    struct Recording {
        inner: ward_apiserver::WardService,
        log: Arc<Mutex<Vec<String>>>,
    }
    impl tower::Service<http::Request<kube::client::Body>> for Recording {
        type Response = <ward_apiserver::WardService as tower::Service<
            http::Request<kube::client::Body>,
        >>::Response;
        type Error = std::convert::Infallible;
        type Future = <ward_apiserver::WardService as tower::Service<
            http::Request<kube::client::Body>,
        >>::Future;
        fn poll_ready(
            &mut self,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Self::Error>> {
            tower::Service::<http::Request<kube::client::Body>>::poll_ready(&mut self.inner, cx)
        }
        fn call(&mut self, req: http::Request<kube::client::Body>) -> Self::Future {
            self.log.lock().unwrap().push(req.uri().to_string());
            self.inner.call(req)
        }
    }
    Client::new(
        Recording {
            inner: server.service(),
            log,
        },
        "default",
    )
}

/// A member cut off from the server while it leaves: its drain cannot
/// finish (its reconciles hang on their writes), yet they are cancelled
/// before its Lease can expire — before the other member takes the slots.
#[tokio::test(start_paused = true)]
async fn a_partitioned_member_leaving_stops_its_reconciles_before_its_lease_expires() {
    let server = sharded_server().await;
    let clock = Clock::new();
    let journal: Journal = Arc::default();
    let (names, _) = objects(&server.client()).await;
    let (cut_tx, cut_rx) = tokio::sync::watch::channel(false);
    let start = |who: &'static str, client: Client| {
        let member =
            member(client.clone(), &clock, "cut", who).drain_timeout(Duration::from_secs(5));
        let journal = journal.clone();
        let reconcile: Reconcile = Arc::new(move |cm, writer| {
            let running = recorded(&journal, who, &cm);
            Box::pin(async move {
                let _running = running;
                tokio::time::sleep(Duration::from_millis(300)).await;
                // Hangs while cut off.
                let _ = writer
                    .replace(&cm.name_any(), &PostParams::default(), &cm)
                    .await;
                Action::requeue(Duration::from_secs(1))
            })
        });
        Replica::spawn(member, who, client, reconcile)
    };
    let mut a = start("a", cut_client(&server, cut_rx));
    let b = start("b", server.client());
    until("a and b to split the slots", || {
        partition(&[&a, &b]) && a.slots().len() == 64
    })
    .await;
    until("a to be reconciling", || {
        journal
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.who == "a" && r.end.is_none())
    })
    .await;

    // Cut off, a cannot renew; it leaves before its deadline, and its
    // drain (patience 5 s) would outlast the Lease.
    cut_tx.send_replace(true);
    let cut = Instant::now();
    tokio::time::sleep(Duration::from_secs(6)).await;
    a.shutdown.take().unwrap().send(()).unwrap();
    let taken = until("b to take every slot", || b.slots() == Slots::ALL).await;
    assert!(
        taken - cut >= LEASE - RENEW,
        "b took over before a's Lease could expire"
    );
    let left = a.run.await.unwrap();
    assert!(
        matches!(left, Err(ShardError::LeaveTimeout { .. })),
        "{left:?}"
    );
    until("b to reconcile everything", || {
        reconciled_by(&journal, &names, |_| "b", taken)
    })
    .await;
    assert_no_overlap(&journal);
    assert!(
        journal
            .lock()
            .unwrap()
            .iter()
            .all(|r| r.who != "a" || r.end.is_some_and(|e| e < taken)),
        "a's reconciles ended before b took over"
    );
}

/// After the ring has formed (each replica's watch restarted for its
/// slots), a change to an object reaches its owner through the watch: the
/// reconcile awaits changes only, it never requeues.
#[tokio::test(start_paused = true)]
async fn changes_reach_the_owner_through_its_restarted_watch() {
    let server = sharded_server().await;
    let clock = Clock::new();
    let (names, hashes) = objects(&server.client()).await;
    let seen: Arc<Mutex<BTreeMap<String, (&'static str, String)>>> = Arc::default();
    let start = |who: &'static str| {
        let client = server.client();
        let seen = seen.clone();
        let reconcile: Reconcile = Arc::new(move |cm, _| {
            let version = cm
                .data
                .as_ref()
                .and_then(|d| d.get("v").cloned())
                .unwrap_or_default();
            seen.lock().unwrap().insert(cm.name_any(), (who, version));
            Box::pin(async { Action::await_change() })
        });
        Replica::spawn(
            member(client.clone(), &clock, "changes", who),
            who,
            client,
            reconcile,
        )
    };
    let (a, b) = (start("a"), start("b"));
    until("a and b to split the slots", || {
        partition(&[&a, &b]) && a.slots().len() == 64
    })
    .await;
    let owner = |name: &str| {
        if a.slots().contains_hash(hashes[name]) {
            "a"
        } else {
            "b"
        }
    };
    until("every object reconciled by its owner", || {
        let seen = seen.lock().unwrap();
        names
            .iter()
            .all(|n| seen.get(n).is_some_and(|(w, _)| *w == owner(n)))
    })
    .await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let patch = serde_json::json!({"data": {"v": "2"}});
    for n in &names {
        cms.patch(
            n,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
    }
    until("every change reconciled by the object's owner", || {
        let seen = seen.lock().unwrap();
        names
            .iter()
            .all(|n| seen.get(n).is_some_and(|(w, v)| *w == owner(n) && v == "2"))
    })
    .await;
}

/// Someone deletes a member's Lease under it: the others stop counting it
/// and take its slots; its next write finds the Lease gone, and it drops
/// every slot before rejoining — never reconciling alongside the new owner.
#[tokio::test(start_paused = true)]
async fn a_member_whose_lease_is_deleted_drops_its_slots_before_rejoining() {
    let server = sharded_server().await;
    let clock = Clock::new();
    let journal: Journal = Arc::default();
    let (names, _) = objects(&server.client()).await;
    let a = Replica::start(&server, &clock, "deleted", "a", &journal);
    let b = Replica::start(&server, &clock, "deleted", "b", &journal);
    until("a and b to split the slots", || {
        partition(&[&a, &b]) && a.slots().len() == 64
    })
    .await;
    let leases: Api<Lease> = Api::default_namespaced(server.client());
    leases
        .delete("deleted-a", &Default::default())
        .await
        .unwrap();
    until("a to drop its slots", || a.slots().is_empty()).await;
    let rejoined = until("a and b to split again", || {
        partition(&[&a, &b]) && a.slots().len() == 64
    })
    .await;
    until("every object reconciled after the rejoin", || {
        let runs = journal.lock().unwrap();
        names.iter().all(|n| {
            runs.iter()
                .any(|r| r.object == *n && r.start >= rejoined && r.end.is_some())
        })
    })
    .await;
    assert_no_overlap(&journal);
}

/// A slot gained means a relist, paged by 500: every object it lists is
/// reconciled, not only those of its last page (kube-runtime looks each
/// trigger up in a store the reflector fills only at the relist's end).
#[tokio::test(start_paused = true)]
async fn every_object_of_a_relist_of_many_pages_is_reconciled() {
    let server = sharded_server().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    for i in 0..1_200 {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(format!("page-{i:04}"));
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let journal: Journal = Arc::default();
    let a = Replica::start(&server, &Clock::new(), "pages", "a", &journal);
    until("every object reconciled", || {
        let runs = journal.lock().unwrap();
        let done: std::collections::BTreeSet<&str> = runs
            .iter()
            .filter(|r| r.end.is_some() && r.object.contains("page-"))
            .map(|r| r.object.as_str())
            .collect();
        done.len() == 1_200
    })
    .await;
    assert_eq!(a.slots(), Slots::ALL);
}

/// The takeover defect of #44: a guard's consistent reads go through the
/// controller's client, which adds the shard's selector to the LIST and
/// WATCH of the sharded collection — its watch cache held only the slots
/// of its first list and, kept current by bookmarks, read an object of a
/// slot gained later as gone whenever no write had landed since the last
/// bookmark: the guard skipped it, and nothing reconciled it again. Every
/// reconcile here requeues after a second; once b has taken a's slots over,
/// every object — a's old ones and those created since — keeps being
/// reconciled by b — and b collects a's expired Lease.
#[tokio::test(start_paused = true)]
async fn a_guard_reading_consistently_reconciles_what_its_replica_takes_over() {
    let server = sharded_server().await;
    let clock = Clock::new();
    let last: Arc<Mutex<BTreeMap<String, (&'static str, Instant)>>> = Arc::default();
    let start = |who: &'static str| {
        let client = server.client();
        let last = last.clone();
        let reconcile: Reconcile = Arc::new(move |cm, _| {
            last.lock()
                .unwrap()
                .insert(cm.name_any(), (who, Instant::now()));
            Box::pin(async { Action::requeue(Duration::from_secs(1)) })
        });
        Replica::spawn_guarded(
            member(client.clone(), &clock, "takeover", who),
            who,
            client,
            reconcile,
            true,
        )
    };
    let (mut names, _) = objects(&server.client()).await;
    let (a, b) = (start("a"), start("b"));
    until("a and b to split the slots", || {
        partition(&[&a, &b]) && a.slots().len() == 64
    })
    .await;
    // a crashes: its Lease expires and b takes every slot; meanwhile
    // objects are created in a's slots as in b's.
    a.run.abort();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    for i in 0..60 {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(format!("late-{i:02}"));
        cms.create(&PostParams::default(), &cm).await.unwrap();
        names.push(format!("late-{i:02}"));
    }
    until("b to hold every slot", || b.slots() == Slots::ALL).await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    // a's Lease, expired for over a lease duration, was collected by b.
    let leases: Api<Lease> = Api::default_namespaced(server.client());
    let ring: Vec<String> = leases
        .list(&ListParams::default().labels("ward.dev/ring=takeover"))
        .await
        .unwrap()
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    assert_eq!(ring, ["takeover-b"]);
    let now = Instant::now();
    let last = last.lock().unwrap();
    let stopped: Vec<String> = names
        .iter()
        .filter(|n| {
            last.get(*n)
                .is_none_or(|(who, at)| *who != "b" || now - *at > Duration::from_secs(5))
        })
        .cloned()
        .collect();
    assert!(
        stopped.is_empty(),
        "{} of {} objects not reconciled by b in the last 5 s: {stopped:?}",
        stopped.len(),
        names.len()
    );
}

/// Members started at one instant each announce a Lease listing nothing
/// before they claim, so they see each other and claim their halves at
/// once — not every slot each, withdrawn by both (a round with nobody
/// holding anything).
#[tokio::test(start_paused = true)]
async fn members_started_together_split_the_slots_in_their_first_round() {
    let metrics = prometheus();
    let server = sharded_server().await;
    let clock = Clock::new();
    let journal: Journal = Arc::default();
    let started = Instant::now();
    let a = Replica::start(&server, &clock, "together", "a", &journal);
    let b = Replica::start(&server, &clock, "together", "b", &journal);
    let split = until("a and b to split the slots", || {
        partition(&[&a, &b]) && a.slots().len() == 64
    })
    .await;
    assert!(
        split - started < RENEW,
        "the first round did not split the slots: {:?}",
        split - started
    );
    let rendered = metrics.render();
    for who in ["a", "b"] {
        let withdrawn = format!(
            "ward_shard_handovers_total{{ring=\"together\",identity=\"{who}\",event=\"withdrawn\"}} 0"
        );
        assert!(rendered.contains(&withdrawn), "{withdrawn} in\n{rendered}");
    }
    assert_no_overlap(&journal);
}

/// A graceful leave moves the leaver's slots to the survivor, which lists
/// and watches them beside the watch it has (one LIST of just those
/// slots, no relist of its own): it reconciles the objects that moved,
/// not again the ones it already held unchanged (kube-runtime would
/// trigger every object of a relist), and follows the moved slots'
/// changes from then on. A join then takes slots from it: it drops their
/// objects from its cache without a LIST.
#[tokio::test(start_paused = true)]
async fn a_replica_follows_slots_gained_and_lost_without_relisting() {
    let server = sharded_server().await;
    let client = server.client();
    let clock = Clock::new();
    let (mut names, hashes) = objects(&client).await;
    let counts: Arc<Mutex<BTreeMap<String, Vec<&'static str>>>> = Arc::default();
    let requests: Arc<Mutex<Vec<String>>> = Arc::default();
    let spawn = |who: &'static str| {
        let counts = counts.clone();
        let reconcile: Reconcile = Arc::new(move |cm, _| {
            counts
                .lock()
                .unwrap()
                .entry(cm.name_any())
                .or_default()
                .push(who);
            Box::pin(async { Action::await_change() })
        });
        let member = member(server.client(), &clock, "gain", who);
        let client = match who {
            "a" => recording_client(&server, requests.clone()),
            _ => server.client(),
        };
        Replica::spawn(member, who, client, reconcile)
    };
    let a = spawn("a");
    let mut b = spawn("b");
    until("a and b to split the slots", || {
        partition(&[&a, &b]) && a.slots().len() == 64
    })
    .await;
    let (a_slots, b_slots) = (a.slots(), b.slots());
    let owned = |hashes: &BTreeMap<String, u64>, n: &String, who: &str| {
        let h = hashes[n];
        if who == "a" {
            a_slots.contains_hash(h)
        } else {
            b_slots.contains_hash(h)
        }
    };
    let last_by = |n: &str, who: &str, times: usize| {
        counts
            .lock()
            .unwrap()
            .get(n)
            .is_some_and(|c| c.last() == Some(&who) && c.len() >= times)
    };
    until("every object reconciled by its owner", || {
        names
            .iter()
            .all(|n| last_by(n, if owned(&hashes, n, "a") { "a" } else { "b" }, 1))
    })
    .await;
    let before = counts.lock().unwrap().clone();
    let sent_before = requests.lock().unwrap().len();
    b.shutdown.take().unwrap().send(()).unwrap();
    b.run.await.unwrap().unwrap();
    until("a to hold every slot", || a.slots() == Slots::ALL).await;
    until("b's objects reconciled by a", || {
        names
            .iter()
            .filter(|n| owned(&hashes, n, "b"))
            .all(|n| last_by(n, "a", 1))
    })
    .await;
    let after = counts.lock().unwrap().clone();
    let again: Vec<&String> = names
        .iter()
        .filter(|n| owned(&hashes, n, "a") && after[*n].len() != before[*n].len())
        .collect();
    assert!(
        again.is_empty(),
        "a reconciled again what it held: {again:?}"
    );
    // The shardSelectors of a's LISTs of ConfigMaps since its `from`th request.
    let list_selectors = |from: usize| -> Vec<Vec<String>> {
        requests.lock().unwrap()[from..]
            .iter()
            .filter(|u| u.contains("/configmaps") && !u.contains("watch=true"))
            .map(|u| url_params(u.split_once('?').map_or("", |(_, q)| q), "shardSelector"))
            .collect()
    };
    // Since b left: one LIST, of b's slots alone.
    let b_selector = b_slots.selector("object.metadata.uid").unwrap();
    assert_eq!(list_selectors(sent_before), [[b_selector]]);
    // The moved slots' changes reach a through the added watch: an update
    // of one of b's old objects, and new objects wherever they hash.
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let moved = names
        .iter()
        .find(|n| owned(&hashes, n, "b"))
        .unwrap()
        .clone();
    let times = after[&moved].len();
    touch(&cms, &moved, "v").await;
    for i in 0..20 {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(format!("late-{i:02}"));
        cms.create(&PostParams::default(), &cm).await.unwrap();
        names.push(format!("late-{i:02}"));
    }
    until("the update and the new objects reconciled by a", || {
        last_by(&moved, "a", times + 1)
            && names
                .iter()
                .filter(|n| n.starts_with("late-"))
                .all(|n| last_by(n, "a", 1))
    })
    .await;
    // c joins: a loses about half its slots. It drops their objects from
    // its cache and relists nothing; what it keeps is not reconciled again.
    let held = counts.lock().unwrap().clone();
    let sent_before = requests.lock().unwrap().len();
    let c = spawn("c");
    until("a and c to split the slots", || {
        partition(&[&a, &c]) && !c.slots().is_empty()
    })
    .await;
    let cms_now = cms.list(&ListParams::default()).await.unwrap().items;
    let in_slots = |slots: Slots| -> std::collections::BTreeSet<String> {
        cms_now
            .iter()
            .filter(|cm| slots.contains_hash(ward_base::fnv1a(cm.uid().unwrap().as_bytes())))
            .map(ResourceExt::name_any)
            .collect()
    };
    let (a_now, c_now) = (in_slots(a.slots()), in_slots(c.slots()));
    until("c's objects reconciled by c", || {
        c_now.iter().all(|n| last_by(n, "c", 1))
    })
    .await;
    let cached = |r: &Replica| -> std::collections::BTreeSet<String> {
        let store = r.store.lock().unwrap().clone().unwrap();
        store.state().iter().map(|cm| cm.name_any()).collect()
    };
    until("a's cache to hold its slots' objects alone", || {
        cached(&a) == a_now
    })
    .await;
    let lists = list_selectors(sent_before);
    assert!(lists.is_empty(), "a relisted: {lists:#?}");
    let counts_now = counts.lock().unwrap().clone();
    let again: Vec<&String> = a_now
        .iter()
        .filter(|n| counts_now[*n].len() != held[*n].len())
        .collect();
    assert!(
        again.is_empty(),
        "a reconciled again what it kept: {again:?}"
    );
    // A change in a slot a lost reaches c, not a.
    let lost = c_now.iter().next().unwrap().clone();
    let times = counts_now[&lost].len();
    touch(&cms, &lost, "w").await;
    until("the change reconciled by c", || {
        last_by(&lost, "c", times + 1)
    })
    .await;
    assert_eq!(counts.lock().unwrap()[&lost][times..], ["c"]);
    // Once its watch times out, the added watch folds into a's first: one
    // LIST of every slot a holds, and nothing reconciled again.
    let quiet = counts.lock().unwrap().clone();
    let sent_before = requests.lock().unwrap().len();
    tokio::time::sleep(Duration::from_secs(300)).await;
    assert_eq!(*counts.lock().unwrap(), quiet);
    let a_selector = a.slots().selector("object.metadata.uid").unwrap();
    assert_eq!(list_selectors(sent_before), [[a_selector]]);
    assert_eq!(cached(&a), a_now);
}

/// Set `name`'s data `k` to `value`.
async fn touch(cms: &Api<ConfigMap>, name: &str, value: &str) {
    let mut cm = cms.get(name).await.unwrap();
    cm.data = Some([("k".to_string(), value.to_string())].into());
    cms.replace(name, &PostParams::default(), &cm)
        .await
        .unwrap();
}

/// The decoded values of `name` in a URI's `query`.
fn url_params(query: &str, name: &str) -> Vec<String> {
    let decode = |v: &str| {
        let (mut out, mut rest) = (Vec::new(), v.as_bytes());
        while let Some((&b, tail)) = rest.split_first() {
            if b == b'%' && tail.len() >= 2 {
                let hex = std::str::from_utf8(&tail[..2]).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
                rest = &tail[2..];
            } else {
                out.push(b);
                rest = tail;
            }
        }
        String::from_utf8(out).unwrap()
    };
    query
        .split('&')
        .filter_map(|p| p.strip_prefix(name)?.strip_prefix('='))
        .map(decode)
        .collect()
}
