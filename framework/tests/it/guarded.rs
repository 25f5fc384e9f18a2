//! The guarded controller against ward-apiserver, under tokio's paused
//! clock: guards run in order, verdicts are counted, a wait is woken by a
//! DELETED event (not by polling), error backoff resets on success, and
//! a child of a replaced owner still wakes the live owner (and is counted),
//! an error policy's Action is honoured, and dynamic types and
//! reconcile_all_on work as in kube-runtime.

use crate::common::{WAIT, prometheus};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::time::Instant;
use ward_apiserver::ApiServer;
use ward_runtime::{ErrorBackoff, Guard, GuardContext, GuardError, GuardedController, Verdict};

/// What a test records, and a notification on every record.
struct Recorded<T> {
    items: Mutex<Vec<T>>,
    changed: tokio::sync::Notify,
}

impl<T> Default for Recorded<T> {
    fn default() -> Self {
        Recorded {
            items: Mutex::default(),
            changed: tokio::sync::Notify::new(),
        }
    }
}

impl<T> Recorded<T> {
    fn push(&self, item: T) {
        self.items.lock().unwrap().push(item);
        self.changed.notify_waiters();
    }

    fn lock(&self) -> std::sync::LockResult<std::sync::MutexGuard<'_, Vec<T>>> {
        self.items.lock()
    }
}

type Log = Arc<Recorded<String>>;

fn log_has(log: &Log, entry: &str) -> bool {
    log.lock().unwrap().iter().any(|e| e == entry)
}

/// Wait until `cond` holds, re-checking it each time `rec` records something.
async fn until<T>(what: &str, rec: &Recorded<T>, mut cond: impl FnMut() -> bool) {
    let ok = tokio::time::timeout(WAIT, async {
        loop {
            let changed = rec.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if cond() {
                return;
            }
            changed.await;
        }
    })
    .await;
    assert!(ok.is_ok(), "timed out waiting for {what}");
}

fn cm(name: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    c
}

/// A guard that logs `"{object}:{name}"` and returns a fixed verdict for
/// objects whose name starts with `prefix`, proceeding for the others.
struct Scripted {
    name: &'static str,
    prefix: &'static str,
    verdict: fn() -> Verdict,
    log: Log,
}

#[async_trait::async_trait]
impl Guard<ConfigMap> for Scripted {
    fn name(&self) -> &'static str {
        self.name
    }
    async fn check(&self, obj: &ConfigMap, _: &GuardContext) -> Result<Verdict, GuardError> {
        self.log.push(format!("{}:{}", obj.name_any(), self.name));
        Ok(if obj.name_any().starts_with(self.prefix) {
            (self.verdict)()
        } else {
            Verdict::proceed()
        })
    }
}

fn spawn_controller(ctl: GuardedController<ConfigMap>, log: Log) -> tokio::task::JoinHandle<()> {
    tokio::spawn(
        ctl.run(
            |obj: Arc<ConfigMap>, log: Arc<Log>| async move {
                log.push(format!("{}:reconciled", obj.name_any()));
                Ok::<_, kube::Error>(Action::await_change())
            },
            |_, _, _| Action::requeue(Duration::from_secs(3600)),
            Arc::new(log),
        )
        .for_each(|_| async {}),
    )
}

fn api(server: &ApiServer) -> (Client, Api<ConfigMap>) {
    let client = server.client();
    (client.clone(), Api::default_namespaced(client))
}

#[tokio::test(start_paused = true)]
async fn guards_run_in_order_the_first_non_proceed_wins_and_verdicts_are_counted() {
    let prom = prometheus();
    let server = without_root_ca().await;
    let (_, cms) = api(&server);
    let log: Log = Arc::default();
    let g = |name, prefix, verdict| Scripted {
        name,
        prefix,
        verdict,
        log: log.clone(),
    };
    let ctl = GuardedController::new(cms.clone(), watcher::Config::default())
        .guard(g("order-first", "~", Verdict::proceed))
        .guard(g("order-skipper", "skip-", || Verdict::skip("scripted")))
        .guard(g("order-last", "~", Verdict::proceed));
    let task = spawn_controller(ctl, log.clone());
    cms.create(&PostParams::default(), &cm("skip-me"))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &cm("go")).await.unwrap();
    until("go reconciled", &log, || log_has(&log, "go:reconciled")).await;
    until("skip-me judged", &log, || {
        log_has(&log, "skip-me:order-skipper")
    })
    .await;
    let skip_me: Vec<String> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.starts_with("skip-me:"))
        .cloned()
        .collect();
    assert_eq!(
        skip_me,
        ["skip-me:order-first", "skip-me:order-skipper"],
        "the last guard and the reconciler never ran"
    );
    let go: Vec<String> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.starts_with("go:order"))
        .cloned()
        .collect();
    assert_eq!(go, ["go:order-first", "go:order-skipper", "go:order-last"]);
    let text = prom.render();
    for line in [
        r#"ward_guard_verdicts_total{guard="order-skipper",verdict="skip"} 1"#,
        r#"ward_guard_verdicts_total{guard="order-skipper",verdict="proceed"} 1"#,
        r#"ward_guard_verdicts_total{guard="order-last",verdict="proceed"} 1"#,
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
    // Present from the start, never counted.
    let never = r#"ward_guard_verdicts_total{guard="order-last",verdict="skip"} 0"#;
    assert!(text.contains(never), "{never} missing from:\n{text}");
    task.abort();
}

/// Waits until the ConfigMap "blocker" is deleted (a watch), falling back to
/// an hour-long requeue.
struct AwaitBlocker;

#[async_trait::async_trait]
impl Guard<ConfigMap> for AwaitBlocker {
    fn name(&self) -> &'static str {
        "await-blocker"
    }
    async fn check(&self, obj: &ConfigMap, ctx: &GuardContext) -> Result<Verdict, GuardError> {
        if obj.name_any() != "target" {
            return Ok(Verdict::proceed());
        }
        let api: Api<ConfigMap> = Api::default_namespaced(ctx.client().clone());
        let Some(blocker) = api.get_opt("blocker").await? else {
            return Ok(Verdict::proceed());
        };
        let uid = blocker.uid().unwrap();
        let wake = async move {
            let _ = await_condition(api, "blocker", conditions::is_deleted(&uid)).await;
        };
        Ok(Verdict::wait("blocker exists")
            .until(wake)
            .fallback(Duration::from_secs(3600))
            .into())
    }
}

#[tokio::test(start_paused = true)]
async fn a_wait_is_woken_by_the_deleted_event_not_by_polling() {
    let server = ApiServer::start_in_process().await;
    let (_, cms) = api(&server);
    let log: Log = Arc::default();
    cms.create(&PostParams::default(), &cm("blocker"))
        .await
        .unwrap();
    let ctl = GuardedController::new(cms.clone(), watcher::Config::default()).guard(AwaitBlocker);
    let task = spawn_controller(ctl, log.clone());
    cms.create(&PostParams::default(), &cm("target"))
        .await
        .unwrap();
    until("blocker reconciled", &log, || {
        log_has(&log, "blocker:reconciled")
    })
    .await;
    // Nothing happens to the target while the blocker exists, however long.
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert!(!log_has(&log, "target:reconciled"));
    let t0 = Instant::now();
    cms.delete("blocker", &DeleteParams::default())
        .await
        .unwrap();
    until("target reconciled", &log, || {
        log_has(&log, "target:reconciled")
    })
    .await;
    assert!(
        t0.elapsed() < Duration::from_secs(1),
        "woken after {:?}, not by the 1h fallback",
        t0.elapsed()
    );
    task.abort();
}

#[tokio::test(start_paused = true)]
async fn error_backoff_doubles_and_resets_on_success() {
    let server = without_root_ca().await;
    let (_, cms) = api(&server);
    let times: Arc<Recorded<(String, Instant)>> = Arc::default();
    let backoff = ErrorBackoff {
        base: Duration::from_secs(1),
        max: Duration::from_secs(60),
    };
    let ctl =
        GuardedController::new(cms.clone(), watcher::Config::default()).error_backoff(backoff);
    let t = times.clone();
    let task = tokio::spawn(
        ctl.run(
            move |obj: Arc<ConfigMap>, ctx: Arc<Mutex<usize>>| {
                let t = t.clone();
                async move {
                    let n = {
                        let mut n = ctx.lock().unwrap();
                        *n += 1;
                        *n
                    };
                    t.push((format!("attempt{n}"), Instant::now()));
                    // Fail 3 times, succeed, then fail once more when told to.
                    let told = obj.data.as_ref().is_some_and(|d| d.contains_key("fail"));
                    if n <= 3 || (told && n == 5) {
                        Err(kube::Error::Service("scripted failure".into()))
                    } else {
                        Ok(Action::await_change())
                    }
                }
            },
            |_, _, _| Action::requeue(Duration::from_secs(3600)),
            Arc::new(Mutex::new(0usize)),
        )
        .for_each(|_| async {}),
    );
    cms.create(&PostParams::default(), &cm("flaky"))
        .await
        .unwrap();
    until("4 attempts", &times, || times.lock().unwrap().len() >= 4).await;
    cms.patch(
        "flaky",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"fail": "1"}})),
    )
    .await
    .unwrap();
    until("6 attempts", &times, || times.lock().unwrap().len() >= 6).await;
    let at: Vec<Instant> = times.lock().unwrap().iter().map(|(_, t)| *t).collect();
    let gaps: Vec<Duration> = at.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(gaps[0], Duration::from_secs(1));
    assert_eq!(gaps[1], Duration::from_secs(2));
    assert_eq!(gaps[2], Duration::from_secs(4));
    // After the success, the next failure backs off from the base again.
    assert_eq!(
        gaps[4],
        Duration::from_secs(1),
        "backoff resets after a success: {gaps:?}"
    );
    task.abort();
}

fn reconciles_of(log: &Log, name: &str) -> usize {
    let entry = format!("{name}:reconciled");
    log.lock().unwrap().iter().filter(|e| **e == entry).count()
}

/// The value of a counter line in the Prometheus text (0 when absent).
fn counter(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0)
}

/// Consistent reads are counted by where they were answered from: the
/// watch cache once it has caught up, a GET when its watch is behind (here
/// frozen, while the server moves on).
#[tokio::test(start_paused = true)]
async fn consistent_reads_are_counted_by_where_they_were_answered() {
    let prom = prometheus();
    let server = ApiServer::start_in_process().await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let owner = cms
        .create(&PostParams::default(), &cm("owner"))
        .await
        .unwrap();
    let (client, id) = server.client_and_id();
    let ctx = GuardContext::new(client);
    let api = ctx.dynamic_api::<ConfigMap>(Some("default"));
    let (cache, get) = (
        r#"ward_consistent_reads_total{from="cache"}"#,
        r#"ward_consistent_reads_total{from="get"}"#,
    );
    let counts = || {
        let text = prom.render();
        (counter(&text, cache), counter(&text, get))
    };
    let (cache0, get0) = counts();
    let read = ctx.read_metadata(ward_runtime::Reads::Consistent, &api, "owner");
    assert_eq!(read.await.unwrap().unwrap().uid, owner.metadata.uid);
    assert_eq!(counts(), (cache0 + 1, get0), "answered from the cache");
    // The context's watches freeze; the server moves on past them.
    let frozen_at = owner.resource_version().unwrap().parse().unwrap();
    server
        .faults()
        .update_view(id, |v| v.frozen_at = Some(frozen_at));
    cms.create(&PostParams::default(), &cm("later"))
        .await
        .unwrap();
    let read = ctx.read_metadata(ward_runtime::Reads::Consistent, &api, "owner");
    assert_eq!(read.await.unwrap().unwrap().uid, owner.metadata.uid);
    assert_eq!(counts(), (cache0 + 1, get0 + 1), "answered by a GET");
}

#[tokio::test(start_paused = true)]
async fn a_child_of_a_replaced_owner_wakes_the_live_owner_and_is_counted() {
    let prom = prometheus();
    let server = ApiServer::start_in_process().await;
    let (_, cms) = api(&server);
    let log: Log = Arc::default();
    let owners_api = cms.clone();
    let ctl = GuardedController::new(owners_api, watcher::Config::default().labels("role=owner"))
        .owns(cms.clone(), watcher::Config::default().labels("role=child"));
    let task = spawn_controller(ctl, log.clone());
    let mut owner = cm("o");
    owner.metadata.labels = Some([("role".to_string(), "owner".to_string())].into());
    let old = cms.create(&PostParams::default(), &owner).await.unwrap();
    until("owner reconciled", &log, || reconciles_of(&log, "o") == 1).await;
    // The owner is replaced under the same name.
    server.faults().pause_gc();
    cms.delete("o", &DeleteParams::default()).await.unwrap();
    let new = cms.create(&PostParams::default(), &owner).await.unwrap();
    until("new owner reconciled", &log, || {
        reconciles_of(&log, "o") == 2
    })
    .await;
    let child_of = |name: &str, o: &ConfigMap| {
        let mut c = cm(name);
        c.metadata.labels = Some([("role".to_string(), "child".to_string())].into());
        c.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "o".into(),
            uid: o.uid().unwrap(),
            controller: Some(true),
            block_owner_deletion: None,
        }]);
        c
    };
    let stale = r#"ward_stale_triggers_total{source="owner"}"#;
    let before = counter(&prom.render(), stale);
    // A child naming the replaced owner wakes the live owner of that name,
    // as kube-runtime maps it (its DELETED may be what frees the name) ...
    cms.create(&PostParams::default(), &child_of("stale-child", &old))
        .await
        .unwrap();
    until("the live owner woken by a stale child", &log, || {
        reconciles_of(&log, "o") == 3
    })
    .await;
    // ... and the trigger is counted as stale.
    assert!(counter(&prom.render(), stale) > before, "{stale} counted");
    let counted = counter(&prom.render(), stale);
    cms.create(&PostParams::default(), &child_of("child", &new))
        .await
        .unwrap();
    until("owner triggered by its own child", &log, || {
        reconciles_of(&log, "o") == 4
    })
    .await;
    assert_eq!(
        counter(&prom.render(), stale),
        counted,
        "a child of the live owner is not a stale trigger"
    );
    task.abort();
}

/// Record when each reconcile of "flaky" ran; fail the first three.
fn failing_three_times(
    times: Arc<Recorded<Instant>>,
) -> impl FnMut(
    Arc<ConfigMap>,
    Arc<()>,
) -> futures::future::BoxFuture<'static, Result<Action, kube::Error>> {
    let mut n = 0;
    move |_, _| {
        n += 1;
        let (times, n) = (times.clone(), n);
        Box::pin(async move {
            times.push(Instant::now());
            if n <= 3 {
                Err(kube::Error::Service("scripted failure".into()))
            } else {
                Ok(Action::await_change())
            }
        })
    }
}

#[tokio::test(start_paused = true)]
async fn error_policy_action_is_honoured_unless_ward_backoff_is_chosen() {
    let server = without_root_ca().await;
    let (_, cms) = api(&server);
    let times: Arc<Recorded<Instant>> = Arc::default();
    // An FnMut reconciler (kube-runtime's bound): it counts its calls.
    let ctl = GuardedController::new(cms.clone(), watcher::Config::default());
    let task = tokio::spawn(
        ctl.run(
            failing_three_times(times.clone()),
            |_, _, _| Action::requeue(Duration::from_secs(7)),
            Arc::new(()),
        )
        .for_each(|_| async {}),
    );
    cms.create(&PostParams::default(), &cm("flaky"))
        .await
        .unwrap();
    until("4 attempts", &times, || times.lock().unwrap().len() >= 4).await;
    let at = times.lock().unwrap().clone();
    let gaps: Vec<Duration> = at.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(gaps, [Duration::from_secs(7); 3], "the policy's Action");
    task.abort();
}

#[tokio::test(start_paused = true)]
async fn dynamic_types_and_reconcile_all_on_work_as_in_kube_runtime() {
    use kube::api::{ApiResource, DynamicObject};
    let server = ApiServer::start_in_process().await;
    let (client, cms) = api(&server);
    let ar = ApiResource::erase::<ConfigMap>(&());
    let dynamic: Api<DynamicObject> = Api::default_namespaced_with(client, &ar);
    let log: Log = Arc::default();
    let (all_tx, all_rx) = futures::channel::mpsc::unbounded();
    struct Judged(Log);
    #[async_trait::async_trait]
    impl Guard<DynamicObject> for Judged {
        fn name(&self) -> &'static str {
            "judged"
        }
        async fn check(&self, o: &DynamicObject, _: &GuardContext) -> Result<Verdict, GuardError> {
            self.0.push(format!("{}:judged", o.name_any()));
            Ok(Verdict::proceed())
        }
    }
    let ctl = GuardedController::new_with(dynamic, watcher::Config::default(), ar)
        .guard(Judged(log.clone()))
        .reconcile_all_on(all_rx);
    let task = tokio::spawn(
        ctl.run(
            |o: Arc<DynamicObject>, log: Arc<Log>| async move {
                log.push(format!("{}:reconciled", o.name_any()));
                Ok::<_, kube::Error>(Action::await_change())
            },
            |_, _, _| Action::await_change(),
            Arc::new(log.clone()),
        )
        .for_each(|_| async {}),
    );
    for name in ["a", "b"] {
        cms.create(&PostParams::default(), &cm(name)).await.unwrap();
    }
    until("both reconciled", &log, || {
        reconciles_of(&log, "a") == 1 && reconciles_of(&log, "b") == 1
    })
    .await;
    all_tx.unbounded_send(()).unwrap();
    until("both reconciled again", &log, || {
        reconciles_of(&log, "a") == 2 && reconciles_of(&log, "b") == 2
    })
    .await;
    assert!(log_has(&log, "a:judged"), "guards run on dynamic objects");
    task.abort();
}

/// A server whose namespaces hold no `kube-root-ca.crt` (as envtest's):
/// these tests' controllers reconcile every ConfigMap of `default` and
/// count the runs.
async fn without_root_ca() -> ApiServer {
    ApiServer::start(ward_apiserver::ServerConfig::default().root_ca_configmaps(false))
        .await
        .unwrap()
}
