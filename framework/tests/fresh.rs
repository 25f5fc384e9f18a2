//! Coalesced fresh reads against ward-apiserver: concurrent checks of one
//! object share a read, but never one that was sent before they began — a
//! check that starts after a write sees that write.

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
