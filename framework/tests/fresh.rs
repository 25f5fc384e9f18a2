//! Fresh reads against ward-apiserver. Coalesced reads: concurrent checks
//! of one object share a read, but never one that was sent before they
//! began — a check that starts after a write sees that write. Consistent
//! reads: the watch cache answers only once it has caught up with the
//! server's current resourceVersion, never while its watch is frozen.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::client::Body;
use serde_json::json;
use tokio::sync::{Notify, Semaphore};
use ward::GuardContext;
use ward_apiserver::{ApiServer, WardService};

/// Counts GETs and holds each answer at a gate (the read has been served
/// by the server, its answer not yet returned): a read "in flight".
#[derive(Clone)]
struct Gated {
    inner: WardService,
    gets: Arc<AtomicUsize>,
    counted: Arc<Notify>,
    gate: Arc<Semaphore>,
}

impl tower::Service<http::Request<Body>> for Gated {
    type Response = http::Response<axum::body::Body>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        tower::Service::<http::Request<Body>>::poll_ready(&mut self.inner, cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let is_get = req.method() == http::Method::GET;
        let answer = self.inner.call(req);
        let (gets, counted, gate) = (self.gets.clone(), self.counted.clone(), self.gate.clone());
        async move {
            let resp = answer.await;
            if is_get {
                gets.fetch_add(1, Ordering::SeqCst);
                counted.notify_waiters();
                gate.acquire().await.expect("gate open").forget();
            }
            resp
        }
        .boxed()
    }
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

    let gated = Gated {
        inner: server.service(),
        gets: Arc::default(),
        counted: Arc::new(Notify::new()),
        gate: Arc::new(Semaphore::new(0)),
    };
    let client = kube::Client::new(gated.clone(), "default");
    let ctx = GuardContext::new(client.clone());
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let gets_reach = |n: usize| {
        let g = gated.clone();
        async move {
            loop {
                let counted = g.counted.notified();
                if g.gets.load(Ordering::SeqCst) >= n {
                    return;
                }
                counted.await;
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
        gated.gets.load(Ordering::SeqCst),
        1,
        "the later checks wait for A's read instead of sending their own"
    );
    gated.gate.add_permits(100);
    assert_eq!(value(&a.await.unwrap()), "old", "A began before the write");
    for answer in futures::future::join_all(later).await {
        assert_eq!(value(&answer.unwrap()), "new", "began after the write");
    }
    assert_eq!(
        gated.gets.load(Ordering::SeqCst),
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
    let counting = Counting {
        inner: server.service(),
        name: "owner",
        gets: Arc::default(),
        rv_reads: Arc::default(),
    };
    let gets = counting.gets.clone();
    let ctx = GuardContext::new(kube::Client::new(counting, "default"));
    let api: Api<ConfigMap> = Api::default_namespaced(ctx.client().clone());
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("owner".into());
    Api::<ConfigMap>::default_namespaced(server.client())
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();

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

/// Counts object GETs of `name` and one-item LISTs (the current-rv reads).
#[derive(Clone)]
struct Counting {
    inner: WardService,
    name: &'static str,
    gets: Arc<AtomicUsize>,
    rv_reads: Arc<AtomicUsize>,
}

impl tower::Service<http::Request<Body>> for Counting {
    type Response = http::Response<axum::body::Body>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        tower::Service::<http::Request<Body>>::poll_ready(&mut self.inner, cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let uri = req.uri();
        if req.method() == http::Method::GET {
            if uri.path().ends_with(&format!("/{}", self.name)) {
                self.gets.fetch_add(1, Ordering::SeqCst);
            } else if uri.query().is_some_and(|q| q.contains("limit=1")) {
                self.rv_reads.fetch_add(1, Ordering::SeqCst);
            }
        }
        self.inner.call(req).boxed()
    }
}

#[tokio::test(start_paused = true)]
async fn consistent_reads_answer_from_a_current_cache_and_never_from_a_frozen_one() {
    let server = ApiServer::start_in_process().await;
    let svc = server.service();
    let id = svc.client_id();
    let counting = Counting {
        inner: svc,
        name: "owner",
        gets: Arc::default(),
        rv_reads: Arc::default(),
    };
    let (gets, rv_reads) = (counting.gets.clone(), counting.rv_reads.clone());
    let ctx = GuardContext::new(kube::Client::new(counting, "default"));
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

/// Answers 403 to every LIST and WATCH (RBAC granting `get` only), and
/// counts the refused one-item LISTs (current-rv reads).
#[derive(Clone)]
struct GetOnly {
    inner: WardService,
    refused_rv_reads: Arc<AtomicUsize>,
}

impl tower::Service<http::Request<Body>> for GetOnly {
    type Response = http::Response<axum::body::Body>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        tower::Service::<http::Request<Body>>::poll_ready(&mut self.inner, cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        if req.uri().path().ends_with("/configmaps") {
            if req.uri().query().is_some_and(|q| q.contains("limit=1")) {
                self.refused_rv_reads.fetch_add(1, Ordering::SeqCst);
            }
            let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "reason": "Forbidden", "code": 403, "message": "configmaps is forbidden"});
            let resp = http::Response::builder()
                .status(403)
                .header("content-type", "application/json")
                .body(axum::body::Body::from(status.to_string()))
                .expect("a response");
            return async move { Ok(resp) }.boxed();
        }
        self.inner.call(req).boxed()
    }
}

#[tokio::test(start_paused = true)]
async fn without_list_rights_consistent_reads_are_gets() {
    let server = ApiServer::start_in_process().await;
    let refused = Arc::new(AtomicUsize::new(0));
    let svc = GetOnly {
        inner: server.service(),
        refused_rv_reads: refused.clone(),
    };
    let ctx = GuardContext::new(kube::Client::new(svc, "default"));
    let api: Api<ConfigMap> = Api::default_namespaced(ctx.client().clone());
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("owner".into());
    Api::<ConfigMap>::default_namespaced(server.client())
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
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
