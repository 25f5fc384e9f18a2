//! The guarded controller against ward-apiserver, under tokio's paused
//! clock: guards run in order, verdicts are counted, a wait is woken by a
//! DELETED event (not by polling), error backoff resets on success, and
//! owner triggers are checked by UID.

use std::sync::{Arc, Mutex, OnceLock};
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
use ward::{ErrorBackoff, Guard, GuardContext, GuardError, GuardedController, Verdict};
use ward_apiserver::ApiServer;

const WAIT: Duration = Duration::from_secs(600);

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

fn prometheus() -> &'static metrics_exporter_prometheus::PrometheusHandle {
    static HANDLE: OnceLock<metrics_exporter_prometheus::PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .install_recorder()
            .expect("this test binary installs the only recorder")
    })
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
    let server = ApiServer::start_in_process().await;
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
    assert!(!text.contains(r#"guard="order-last",verdict="skip""#));
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
    let server = ApiServer::start_in_process().await;
    let (_, cms) = api(&server);
    let times: Arc<Recorded<(String, Instant)>> = Arc::default();
    let backoff = ErrorBackoff {
        base: Duration::from_secs(1),
        max: Duration::from_secs(60),
    };
    let ctl = GuardedController::new(cms.clone(), watcher::Config::default())
        .error_backoff(Some(backoff));
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

#[tokio::test(start_paused = true)]
async fn owner_triggers_are_checked_by_uid() {
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
    until("owner reconciled", &log, || {
        log.lock()
            .unwrap()
            .iter()
            .filter(|e| *e == "o:reconciled")
            .count()
            == 1
    })
    .await;
    // The owner is replaced under the same name; a child of the old one stays.
    server.faults().pause_gc();
    cms.delete("o", &DeleteParams::default()).await.unwrap();
    let new = cms.create(&PostParams::default(), &owner).await.unwrap();
    until("new owner reconciled", &log, || {
        log.lock()
            .unwrap()
            .iter()
            .filter(|e| *e == "o:reconciled")
            .count()
            == 2
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
    cms.create(&PostParams::default(), &child_of("stale-child", &old))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        log.lock()
            .unwrap()
            .iter()
            .filter(|e| *e == "o:reconciled")
            .count(),
        2,
        "a child of the replaced owner does not trigger the new one"
    );
    cms.create(&PostParams::default(), &child_of("child", &new))
        .await
        .unwrap();
    until("owner triggered by its own child", &log, || {
        log.lock()
            .unwrap()
            .iter()
            .filter(|e| *e == "o:reconciled")
            .count()
            == 3
    })
    .await;
    task.abort();
}
