//! The CNS race against ward-apiserver: a Node deleted and recreated under
//! the same name while GC of its NodeNetworkConfig lags. A controller that
//! starts in that window and ingests the NNC found by name takes the stale
//! one; with `OwnerUid<Node>` it skips it, and ingests the new NNC once GC
//! has removed the old one.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use ward_apiserver::ApiServer;
use ward_guards::owner_uid::{Acceptance, OwnerUid, Rejection};
use ward_runtime::GuardedController;

const WAIT: Duration = Duration::from_secs(600);

/// A NodeNetworkConfig stand-in: kube-system/<node>, controlled by the Node.
fn nnc(node: &Node) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(node.name_any());
    c.metadata.labels = Some([("app".to_string(), "nnc".to_string())].into());
    c.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "Node".into(),
        name: node.name_any(),
        uid: node.uid().unwrap(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    c
}

fn node(name: &str) -> Node {
    let mut n = Node::default();
    n.metadata.name = Some(name.into());
    n
}

/// The uids ingested so far; receivers wait on changes.
type Ingested = Arc<tokio::sync::watch::Sender<Vec<String>>>;

/// Set up the window: node A (U1) with its NNC; GC lags; node A recreated
/// (U2). Returns the server, the stale NNC's uid and the new node.
async fn window() -> (ApiServer, String, Node) {
    let server = ApiServer::start_in_process().await;
    let client = server.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let nncs: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let a1 = nodes
        .create(&PostParams::default(), &node("a"))
        .await
        .unwrap();
    let stale = nncs
        .create(&PostParams::default(), &nnc(&a1))
        .await
        .unwrap();
    server.faults().pause_gc();
    nodes
        .delete("a", &DeleteParams::background())
        .await
        .unwrap();
    let a2 = nodes
        .create(&PostParams::default(), &node("a"))
        .await
        .unwrap();
    (server, stale.uid().unwrap(), a2)
}

/// A running NNC ingester: what it ingested, and how many reconciles
/// (guards and body) it has finished.
struct Ingester {
    ingested: Ingested,
    reconciled: tokio::sync::watch::Receiver<usize>,
    task: tokio::task::JoinHandle<()>,
}

impl Ingester {
    /// Wait until `n` reconciles have finished (whatever the guards decided).
    async fn reconciled(&mut self, n: usize) {
        tokio::time::timeout(WAIT, self.reconciled.wait_for(|r| *r >= n))
            .await
            .expect("reconciles finish")
            .unwrap();
    }
}

/// Start the NNC ingester ("CNS starts") inside the window.
fn ingester(client: &Client, guarded: bool) -> Ingester {
    let ingested: Ingested = Arc::new(tokio::sync::watch::channel(Vec::new()).0);
    let (done, reconciled) = tokio::sync::watch::channel(0);
    let nncs: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let mut ctl = GuardedController::new(nncs, watcher::Config::default().labels("app=nnc"));
    if guarded {
        ctl = ctl.guard(OwnerUid::<Node>::new());
    }
    let task = tokio::spawn(
        ctl.run(
            |nnc: Arc<ConfigMap>, ingested: Arc<Ingested>| async move {
                ingested.send_modify(|v| v.push(nnc.uid().unwrap()));
                Ok::<_, kube::Error>(Action::await_change())
            },
            |_, _, _| Action::requeue(Duration::from_secs(5)),
            Arc::new(ingested.clone()),
        )
        .for_each(move |_| {
            done.send_modify(|n| *n += 1);
            async {}
        }),
    );
    Ingester {
        ingested,
        reconciled,
        task,
    }
}

#[tokio::test(start_paused = true)]
async fn without_the_guard_the_stale_nnc_is_ingested() {
    let (server, stale, _) = window().await;
    let Ingester { ingested, task, .. } = ingester(&server.client(), false);
    let mut seen = ingested.subscribe();
    let done = tokio::time::timeout(WAIT, seen.wait_for(|v| v.contains(&stale))).await;
    assert!(
        done.is_ok(),
        "the bug: the NNC of the deleted node is ingested"
    );
    task.abort();
}

#[tokio::test(start_paused = true)]
async fn with_owner_uid_only_the_live_nodes_nnc_is_ingested() {
    let (server, stale, a2) = window().await;
    let client = server.client();
    let mut guarded = ingester(&client, true);
    // The stale NNC is judged inside the window: nothing is ingested.
    guarded.reconciled(1).await;
    let Ingester { ingested, task, .. } = guarded;
    assert!(ingested.borrow().is_empty(), "{:?}", ingested.borrow());
    // GC catches up; the NNC writer creates the new node's NNC.
    server.faults().resume_gc();
    let nncs: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let gone = await_condition(nncs.clone(), "a", conditions::is_deleted(&stale));
    tokio::time::timeout(WAIT, gone).await.unwrap().unwrap();
    let fresh = nncs
        .create(&PostParams::default(), &nnc(&a2))
        .await
        .unwrap()
        .uid()
        .unwrap();
    let mut seen = ingested.subscribe();
    let done = tokio::time::timeout(WAIT, seen.wait_for(|v| v.contains(&fresh))).await;
    assert!(done.is_ok(), "the live node's NNC is ingested");
    assert_eq!(*ingested.borrow(), [fresh]);
    task.abort();
}

#[tokio::test(start_paused = true)]
async fn the_plain_check_reads_the_owner_fresh() {
    let (server, _, a2) = window().await;
    let client = server.client();
    let nncs: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let stale = nncs.get("a").await.unwrap();
    let check = OwnerUid::<Node>::new();
    match check.accept(&client, &stale).await.unwrap() {
        Acceptance::Reject(Rejection::OwnerReplaced { live, .. }) => {
            assert_eq!(live, a2.uid().unwrap())
        }
        other => panic!("{other:?}"),
    }
    let mut orphan = nnc(&a2);
    orphan.metadata.owner_references = None;
    assert_eq!(
        check.accept(&client, &orphan).await.unwrap(),
        Acceptance::Reject(Rejection::NoController)
    );
}

#[tokio::test(start_paused = true)]
async fn a_stale_owner_cache_cannot_fool_the_guard() {
    let (server, stale, a2) = window().await;
    // The controller's client sees the cluster frozen before node A was
    // deleted: its watches and cached lists still show node A as U1, the
    // owner the stale NNC names.
    let (client, id) = server.client_and_id();
    let (unguarded_client, unguarded_id) = server.client_and_id();
    let frozen_at: u64 = Api::<ConfigMap>::namespaced(server.client(), "kube-system")
        .get("a")
        .await
        .unwrap()
        .resource_version()
        .unwrap()
        .parse()
        .unwrap();
    for id in [id, unguarded_id] {
        server.faults().set_view(
            id,
            ward_apiserver::ClientView {
                frozen_at: Some(frozen_at),
                ..Default::default()
            },
        );
    }
    let cached = kube::runtime::reflector::store::<Node>();
    let (reader, writer) = cached;
    let nodes = kube::runtime::reflector(
        writer,
        watcher(
            Api::<Node>::all(client.clone()),
            // An informer's list at resourceVersion 0 (kube sends it only
            // without a page size): served from the frozen view.
            watcher::Config {
                page_size: None,
                ..watcher::Config::default().any_semantic()
            },
        ),
    );
    let reflect = tokio::spawn(nodes.for_each(|_| async {}));
    tokio::time::timeout(WAIT, reader.wait_until_ready())
        .await
        .unwrap()
        .unwrap();
    let cached_a = reader
        .get(&kube::runtime::reflector::ObjectRef::new("a"))
        .unwrap();
    assert_ne!(
        cached_a.uid(),
        a2.uid(),
        "the cache is fooled: it shows the deleted node"
    );

    // The same view without the guard ingests the stale NNC ...
    let unguarded = ingester(&unguarded_client, false);
    let mut seen = unguarded.ingested.subscribe();
    tokio::time::timeout(WAIT, seen.wait_for(|v| v.contains(&stale)))
        .await
        .expect("the frozen view delivers the stale NNC")
        .unwrap();
    unguarded.task.abort();
    // ... the guard, reading the owner fresh, does not.
    let mut guarded = ingester(&client, true);
    guarded.reconciled(1).await;
    assert!(
        !guarded.ingested.borrow().contains(&stale),
        "the guard read the live owner, not the cache: {:?}",
        guarded.ingested.borrow()
    );
    guarded.task.abort();
    reflect.abort();
}

#[tokio::test(start_paused = true)]
async fn a_frozen_owner_cache_cannot_fool_the_guards_consistent_reads() {
    let server = ApiServer::start_in_process().await;
    let admin = server.client();
    let nodes: Api<Node> = Api::all(admin.clone());
    let nncs: Api<ConfigMap> = Api::namespaced(admin.clone(), "kube-system");
    let a1 = nodes
        .create(&PostParams::default(), &node("a"))
        .await
        .unwrap();
    let stale = nncs
        .create(&PostParams::default(), &nnc(&a1))
        .await
        .unwrap();
    // The guard's context has judged the NNC once: its watch cache of
    // Nodes holds node A as U1.
    let (client, id) = server.client_and_id();
    let ctx = ward_runtime::GuardContext::new(client);
    let guard = OwnerUid::<Node>::new();
    let verdict = ward_runtime::Guard::<ConfigMap>::check(&guard, &stale, &ctx).await;
    assert_eq!(verdict.unwrap().label(), "proceed");
    // Its watches freeze; node A is deleted and recreated while GC lags.
    let frozen_at: u64 = nodes
        .get("a")
        .await
        .unwrap()
        .resource_version()
        .unwrap()
        .parse()
        .unwrap();
    server
        .faults()
        .update_view(id, |v| v.frozen_at = Some(frozen_at));
    server.faults().pause_gc();
    nodes
        .delete("a", &DeleteParams::background())
        .await
        .unwrap();
    nodes
        .create(&PostParams::default(), &node("a"))
        .await
        .unwrap();
    // The cache still says node A is U1, the NNC's owner; the guard must
    // not believe it.
    let verdict = ward_runtime::Guard::<ConfigMap>::check(&guard, &stale, &ctx).await;
    assert_eq!(verdict.unwrap().label(), "skip");
}

/// With consistent reads, the owner kind's watch cache starts with the
/// controller: here no NNC exists, so no check ever runs, and the Nodes
/// are watched anyway — the first checks will not wait for the cache's list.
#[tokio::test(start_paused = true)]
async fn the_owner_cache_starts_with_the_controller() {
    let server = ApiServer::start_in_process().await;
    let (watched, mut node_watches) = tokio::sync::watch::channel(0usize);
    let svc = tower::ServiceBuilder::new()
        .map_request(move |req: http::Request<kube::client::Body>| {
            let uri = req.uri();
            if uri.path() == "/api/v1/nodes"
                && uri.query().is_some_and(|q| q.contains("watch=true"))
            {
                watched.send_modify(|n| *n += 1);
            }
            req
        })
        .service(server.service());
    let ingester = ingester(&Client::new(svc, "default"), true);
    tokio::time::timeout(WAIT, node_watches.wait_for(|n| *n >= 1))
        .await
        .expect("the Nodes are watched before any check")
        .unwrap();
    ingester.task.abort();
}
