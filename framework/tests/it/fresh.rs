//! Fresh reads against ward-apiserver. Coalesced reads: concurrent checks
//! of one object share a read, but never one that was sent before they
//! began — a check that starts after a write sees that write. Consistent
//! reads: the watch cache answers only once it has caught up with the
//! server's current resourceVersion, never while its watch is frozen.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::client::Body;
use serde_json::json;
use tokio::sync::{Notify, Semaphore};
use tower::ServiceExt;
use ward_apiserver::{ApiServer, WardService};
use ward_runtime::GuardContext;

/// What a request gets back from the in-process server.
type Answer = BoxFuture<'static, Result<http::Response<axum::body::Body>, Infallible>>;

/// A client of `server` whose every request goes through `hook`, which
/// is given the server to send it on: it may count it, hold the answer,
/// or answer itself.
fn client_with(
    server: WardService,
    hook: impl Fn(http::Request<Body>, WardService) -> Answer + Send + 'static,
) -> kube::Client {
    kube::Client::new(
        tower::service_fn(move |req| hook(req, server.clone())),
        "default",
    )
}

fn value(cm: &Option<Arc<ConfigMap>>) -> String {
    cm.as_ref()
        .and_then(|c| c.data.as_ref()?.get("v").cloned())
        .unwrap_or_default()
}

#[tokio::test(start_paused = true)]
async fn overlapping_checks_share_a_read_sent_after_they_began() {
    let server = ApiServer::start_in_process().await;
    let plain: Api<ConfigMap> = Api::default_namespaced(server.client());
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("owner".into());
    cm.data = Some([("v".to_string(), "old".to_string())].into());
    plain.create(&PostParams::default(), &cm).await.unwrap();

    // Counts GETs and holds each answer at a gate (the read has been
    // served by the server, its answer not yet returned): a read "in flight".
    let gets = Arc::new(AtomicUsize::new(0));
    let counted = Arc::new(Notify::new());
    let gate = Arc::new(Semaphore::new(0));
    let client = client_with(server.service(), {
        let (gets, counted, gate) = (gets.clone(), counted.clone(), gate.clone());
        move |req, server| {
            let is_get = req.method() == http::Method::GET;
            let (gets, counted, gate) = (gets.clone(), counted.clone(), gate.clone());
            async move {
                let resp = server.oneshot(req).await;
                if is_get {
                    gets.fetch_add(1, Ordering::SeqCst);
                    counted.notify_waiters();
                    gate.acquire().await.expect("gate open").forget();
                }
                resp
            }
            .boxed()
        }
    });
    let ctx = GuardContext::new(client.clone());
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let gets_reach = |n: usize| {
        let (gets, counted) = (gets.clone(), counted.clone());
        async move {
            loop {
                let notified = counted.notified();
                if gets.load(Ordering::SeqCst) >= n {
                    return;
                }
                notified.await;
            }
        }
    };

    // Check A's read is served and held: it saw "old".
    let a = tokio::spawn({
        let (ctx, api) = (ctx.clone(), api.clone());
        async move { ctx.get_fresh(&api, "owner").await.unwrap() }
    });
    tokio::time::timeout(Duration::from_secs(60), gets_reach(1))
        .await
        .unwrap();
    // A write completes; then five checks begin. None may take A's answer.
    plain
        .patch(
            "owner",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"v": "new"}})),
        )
        .await
        .unwrap();
    // Each is polled once (it registers), and waits.
    let mut later: Vec<_> = (0..5)
        .map(|_| Box::pin(ctx.get_fresh(&api, "owner")))
        .collect();
    for check in &mut later {
        assert!(futures::poll!(check.as_mut()).is_pending());
    }
    assert_eq!(
        gets.load(Ordering::SeqCst),
        1,
        "the later checks wait for A's read instead of sending their own"
    );
    gate.add_permits(100);
    assert_eq!(value(&a.await.unwrap()), "old", "A began before the write");
    for answer in futures::future::join_all(later).await {
        assert_eq!(value(&answer.unwrap()), "new", "began after the write");
    }
    assert_eq!(
        gets.load(Ordering::SeqCst),
        2,
        "six checks, two reads: the five later ones shared one"
    );
}

#[tokio::test(start_paused = true)]
async fn a_missing_object_is_none_and_sequential_checks_each_read() {
    let server = ApiServer::start_in_process().await;
    let ctx = GuardContext::new(server.client());
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    assert!(ctx.get_fresh(&api, "absent").await.unwrap().is_none());
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("absent".into());
    api.create(&PostParams::default(), &cm).await.unwrap();
    // A check that begins after the earlier one ended never reuses its answer.
    assert!(ctx.get_fresh(&api, "absent").await.unwrap().is_some());
}

/// A controller under load starts several reconciles per scheduler turn
/// (a turn ends when the worker has run its ready tasks): the read stays
/// open while each turn brings checks, so fifteen checks begun over five
/// turns share one read; after a turn with no newcomer it is sent, and a
/// check begun after that reads again.
#[tokio::test(start_paused = true)]
async fn a_read_stays_open_while_checks_keep_joining() {
    use futures::StreamExt;
    let server = ApiServer::start_in_process().await;
    let (ctx, api, gets) = counting_ctx(&server);
    create_owner(&server).await;

    let mut checks = futures::stream::FuturesUnordered::new();
    for _ in 0..5 {
        // Three checks start in this turn, each polled as it starts.
        for _ in 0..3 {
            checks.push(ctx.get_fresh(&api, "owner"));
            assert!(futures::poll!(checks.next()).is_pending());
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(
        gets.load(Ordering::SeqCst),
        0,
        "still open: checks kept joining"
    );
    let answers: Vec<_> = checks.collect().await;
    assert_eq!(answers.len(), 15);
    assert!(answers.iter().all(|a| a.as_ref().unwrap().is_some()));
    assert_eq!(gets.load(Ordering::SeqCst), 1, "fifteen checks, one read");
    ctx.get_fresh(&api, "owner").await.unwrap();
    assert_eq!(gets.load(Ordering::SeqCst), 2, "a later check reads again");
}

/// A check that joined a read waits for its answer without being polled
/// again at every turn the read stays open (a read's waiters are woken
/// once, when it answers).
#[tokio::test(start_paused = true)]
async fn a_joined_check_is_woken_by_the_answer_not_by_every_open_turn() {
    use futures::StreamExt;
    let server = ApiServer::start_in_process().await;
    let (ctx, api, gets) = counting_ctx(&server);
    create_owner(&server).await;

    // A first check opens the read; a check on a task of its own, counting
    // how often it is polled, joins it; more join over four more turns.
    let mut joiners = futures::stream::FuturesUnordered::new();
    joiners.push(ctx.get_fresh(&api, "owner"));
    assert!(futures::poll!(joiners.next()).is_pending());
    let polls = Arc::new(AtomicUsize::new(0));
    let check = tokio::spawn({
        let (ctx, api, polls) = (ctx.clone(), api.clone(), polls.clone());
        let mut read = Box::pin(async move { ctx.get_fresh(&api, "owner").await });
        futures::future::poll_fn(move |cx| {
            polls.fetch_add(1, Ordering::SeqCst);
            read.as_mut().poll(cx)
        })
    });
    tokio::task::yield_now().await;
    assert_eq!(polls.load(Ordering::SeqCst), 1, "the check joined the read");
    for _ in 0..4 {
        joiners.push(ctx.get_fresh(&api, "owner"));
        assert!(futures::poll!(joiners.next()).is_pending());
        tokio::task::yield_now().await;
    }
    assert_eq!(gets.load(Ordering::SeqCst), 0, "still open");
    assert!(check.await.unwrap().unwrap().is_some());
    assert_eq!(joiners.collect::<Vec<_>>().await.len(), 5);
    assert_eq!(gets.load(Ordering::SeqCst), 1, "one read");
    assert_eq!(
        polls.load(Ordering::SeqCst),
        2,
        "polled when it began and when the answer came, not at every turn the read stayed open"
    );
}

/// The ConfigMap `owner`, created straight through the server's client.
async fn create_owner(server: &ApiServer) {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("owner".into());
    Api::<ConfigMap>::default_namespaced(server.client())
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
}

/// A context over a [`counting`] client of `server`, an `Api` of
/// ConfigMaps through it, and its count of GETs of `owner`.
fn counting_ctx(server: &ApiServer) -> (GuardContext, Api<ConfigMap>, Arc<AtomicUsize>) {
    let (client, gets, _) = counting(server.service(), "owner");
    let ctx = GuardContext::new(client);
    let api = Api::default_namespaced(ctx.client().clone());
    (ctx, api, gets)
}

/// A client of `server` counting its GETs of the object `name` and its
/// one-item LISTs (the current-rv reads).
fn counting(
    server: WardService,
    name: &'static str,
) -> (kube::Client, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let (gets, rv_reads) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let client = client_with(server, {
        let (gets, rv_reads) = (gets.clone(), rv_reads.clone());
        move |req, server| {
            let uri = req.uri();
            if req.method() == http::Method::GET {
                if uri.path().ends_with(&format!("/{name}")) {
                    gets.fetch_add(1, Ordering::SeqCst);
                } else if uri.query().is_some_and(|q| q.contains("limit=1")) {
                    rv_reads.fetch_add(1, Ordering::SeqCst);
                }
            }
            server.oneshot(req).boxed()
        }
    });
    (client, gets, rv_reads)
}

#[tokio::test(start_paused = true)]
async fn consistent_reads_answer_from_a_current_cache_and_never_from_a_frozen_one() {
    let server = ApiServer::start_in_process().await;
    let svc = server.service();
    let id = svc.client_id();
    let (client, gets, rv_reads) = counting(svc, "owner");
    let ctx = GuardContext::new(client);
    let writer: Api<ConfigMap> = Api::default_namespaced(server.client());
    let api: Api<ConfigMap> = Api::default_namespaced(ctx.client().clone());
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("owner".into());
    let u1 = writer.create(&PostParams::default(), &cm).await.unwrap();
    let uid = |m: Option<Arc<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>>| {
        m.and_then(|m| m.uid.clone()).unwrap_or_default()
    };

    // Nothing is written between the checks: the server's rv stands still,
    // the cache has seen it, every check is answered from the cache.
    for _ in 0..10 {
        assert_eq!(
            uid(ctx.get_consistent(&api, "owner").await.unwrap()),
            u1.metadata.uid.clone().unwrap()
        );
    }
    assert_eq!(gets.load(Ordering::SeqCst), 0, "no GET of the owner");
    assert_eq!(
        rv_reads.load(Ordering::SeqCst),
        10,
        "one current rv per check"
    );
    assert!(ctx.get_consistent(&api, "absent").await.unwrap().is_none());

    // The cache's watch is frozen, then the owner is deleted and recreated:
    // the cache still shows U1, and must not be believed.
    let now: u64 = writer
        .list_metadata(&Default::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
        .parse()
        .unwrap();
    server.faults().update_view(id, |v| v.frozen_at = Some(now));
    writer.delete("owner", &Default::default()).await.unwrap();
    let u2 = writer.create(&PostParams::default(), &cm).await.unwrap();
    assert_ne!(u1.metadata.uid, u2.metadata.uid);
    let (gets_before, rvs_before) = (gets.load(Ordering::SeqCst), rv_reads.load(Ordering::SeqCst));
    assert_eq!(
        uid(ctx.get_consistent(&api, "owner").await.unwrap()),
        u2.metadata.uid.clone().unwrap(),
        "a frozen cache fooled the read"
    );
    assert_eq!(
        gets.load(Ordering::SeqCst),
        gets_before + 1,
        "it fell back to a GET"
    );
    // While the watch has not moved, asking for the current rv again is
    // useless: the next check goes straight to the GET.
    assert_eq!(
        uid(ctx.get_consistent(&api, "owner").await.unwrap()),
        u2.metadata.uid.clone().unwrap()
    );
    assert_eq!(gets.load(Ordering::SeqCst), gets_before + 2);
    assert_eq!(rv_reads.load(Ordering::SeqCst), rvs_before + 1);

    // Released, the watch delivers the deletion and the creation; the
    // cache is current again and answers with U2 (a check that begins
    // before the watch has moved still goes to the GET).
    server.faults().update_view(id, |v| v.frozen_at = None);
    let mut from_cache = false;
    for _ in 0..10 {
        let before = gets.load(Ordering::SeqCst);
        assert_eq!(
            uid(ctx.get_consistent(&api, "owner").await.unwrap()),
            u2.metadata.uid.clone().unwrap()
        );
        if gets.load(Ordering::SeqCst) == before {
            from_cache = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(from_cache, "the released cache caught up and answered");
}

#[tokio::test(start_paused = true)]
async fn without_list_rights_consistent_reads_are_gets() {
    let server = ApiServer::start_in_process().await;
    // Every LIST and WATCH of ConfigMaps is refused (RBAC granting `get`
    // only); the refused one-item LISTs (current-rv reads) are counted.
    let refused = Arc::new(AtomicUsize::new(0));
    let client = client_with(server.service(), {
        let refused = refused.clone();
        move |req, server| {
            if !req.uri().path().ends_with("/configmaps") {
                return server.oneshot(req).boxed();
            }
            if req.uri().query().is_some_and(|q| q.contains("limit=1")) {
                refused.fetch_add(1, Ordering::SeqCst);
            }
            let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "reason": "Forbidden", "code": 403, "message": "configmaps is forbidden"});
            let resp = http::Response::builder()
                .status(403)
                .header("content-type", "application/json")
                .body(axum::body::Body::from(status.to_string()))
                .expect("a response");
            async move { Ok(resp) }.boxed()
        }
    });
    let ctx = GuardContext::new(client);
    let api: Api<ConfigMap> = Api::default_namespaced(ctx.client().clone());
    create_owner(&server).await;
    for _ in 0..10 {
        let meta = ctx
            .get_consistent(&api, "owner")
            .await
            .expect("a GET answers");
        assert_eq!(meta.unwrap().name.as_deref(), Some("owner"));
    }
    // One current-rv read was refused; while the cache cannot move, no
    // check asks again.
    assert_eq!(refused.load(Ordering::SeqCst), 1);
}
