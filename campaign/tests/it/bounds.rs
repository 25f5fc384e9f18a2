//! What a campaign promises whatever the controller does: a run that spins
//! ends with a livelock verdict, a plan aims only at registered
//! controllers, and judges see every write with its before and after.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use ward_apiserver::{ApiServer, ServerConfig};
use ward_campaign::perturbations::builtin;
use ward_campaign::{
    GcDelay, Limits, Perturbation, Perturber, Plan, PlanError, RunError, simulate,
};

const HORIZON: Duration = Duration::from_secs(30);

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
}

/// Re-creates what it has just deleted, with no timer in between: tokio's
/// paused clock never advances while it runs.
async fn spinner(client: kube::Client) {
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    loop {
        let _ = api.create(&PostParams::default(), &cm("spun")).await;
        let _ = api.delete("spun", &DeleteParams::default()).await;
    }
}

/// Polls every millisecond, forever: time advances, calls pile up.
async fn poller(client: kube::Client) {
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    loop {
        let _ = api.get_opt("anything").await;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Run `controller` under `limits` while the workload sleeps a minute; the
/// verdict and the perturber's log.
fn bounded<Fut>(
    limits: Limits,
    controller: fn(kube::Client) -> Fut,
) -> (Result<(), RunError>, Vec<String>)
where
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    simulate(|| async move {
        let server = ApiServer::start(ServerConfig::default().seed(1))
            .await
            .unwrap();
        let plan = Plan::draw(1, &[], HORIZON, &[]).unwrap();
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = log.clone();
        let mut perturber =
            Perturber::with_limits(&server, plan, limits, move |l| sink.lock().unwrap().push(l));
        perturber.supervise("under-test", controller);
        perturber.start().unwrap();
        let verdict = perturber
            .run(tokio::time::sleep(Duration::from_secs(60)))
            .await;
        assert_eq!(perturber.verdict(), verdict.clone().err());
        let lines = log.lock().unwrap().clone();
        (verdict, lines)
    })
}

#[test]
fn a_controller_spinning_at_one_instant_ends_with_a_livelock_verdict() {
    let limits = Limits {
        calls_per_instant: 2_000,
        ..Limits::default()
    };
    let (verdict, log) = bounded(limits, spinner);
    let err = verdict.unwrap_err();
    match &err {
        RunError::TimeStopped {
            controller, calls, ..
        } => {
            assert_eq!(controller, "under-test");
            assert_eq!(*calls, 2_001);
        }
        other => panic!("not a stopped clock: {other}"),
    }
    assert!(err.is_livelock());
    assert!(
        err.to_string().starts_with("livelock: 2001 API calls at "),
        "{err}"
    );
    assert_eq!(log, vec![format!("verdict: {err}")]);
}

#[test]
fn a_controller_past_the_call_limit_ends_with_a_livelock_verdict() {
    let limits = Limits {
        calls: 5_000,
        ..Limits::default()
    };
    let (verdict, _) = bounded(limits, poller);
    match verdict.unwrap_err() {
        RunError::TooManyCalls { calls, at, .. } => {
            assert_eq!(calls, 5_001);
            assert!(at >= Duration::from_secs(5), "time advanced: {at:?}");
        }
        other => panic!("not the call limit: {other}"),
    }
    // Within the limits the workload's own end is the run's.
    let (verdict, log) = bounded(Limits::default(), poller);
    assert_eq!(verdict, Ok(()));
    assert!(log.is_empty(), "{log:?}");
}

#[test]
fn a_plan_aims_only_at_registered_controllers() {
    assert_eq!(
        Plan::draw(3, &builtin(), HORIZON, &[]).unwrap_err(),
        PlanError::NoTarget { kind: "stale-view" }
    );
    let gc: Vec<std::sync::Arc<dyn Perturbation>> = vec![std::sync::Arc::new(GcDelay)];
    assert_eq!(Plan::draw(3, &gc, HORIZON, &[]).unwrap().actions.len(), 1);

    let err = simulate(|| async {
        let server = ApiServer::start(ServerConfig::default().seed(3))
            .await
            .unwrap();
        let plan = Plan::draw(3, &builtin(), HORIZON, &["contoller".into()]).unwrap();
        let mut perturber = Perturber::new(&server, plan, |_| {});
        perturber.supervise("controller", |_| async {});
        perturber.start().unwrap_err()
    });
    assert_eq!(
        err,
        RunError::UnknownTarget {
            kind: "stale-view",
            target: "contoller".into(),
            known: "controller".into(),
        }
    );
    assert!(!err.is_livelock());
    assert!(err.to_string().contains("targets \"contoller\""), "{err}");
}

#[test]
fn settled_returns_on_a_server_that_wrote_before_the_perturber_and_not_since() {
    simulate(|| async {
        let server = ApiServer::start(ServerConfig::default().seed(5))
            .await
            .unwrap();
        // The server holds its bootstrap objects: its resourceVersion is
        // past 0 before the perturber exists.
        let plan = Plan::draw(5, &[], HORIZON, &[]).unwrap();
        let perturber = Perturber::new(&server, plan, |_| {});
        tokio::time::timeout(Duration::from_secs(5), perturber.settled())
            .await
            .expect("settled() returns with nothing to record");
        // A write made right after `new`, before the recorder first ran, is
        // recorded too.
        let api: Api<ConfigMap> = Api::default_namespaced(server.client());
        api.create(&PostParams::default(), &cm("early"))
            .await
            .unwrap();
        perturber.settled().await;
        assert!(
            perturber
                .events()
                .iter()
                .any(|e| e.contains("ADDED configmaps default/early")),
            "{:?}",
            perturber.events()
        );
    });
}

#[test]
fn a_judge_sees_each_write_with_the_object_before_and_after() {
    let seen = simulate(|| async {
        let server = ApiServer::start(ServerConfig::default().seed(4))
            .await
            .unwrap();
        let plan = Plan::draw(4, &[], HORIZON, &[]).unwrap();
        let mut perturber = Perturber::new(&server, plan, |_| {});
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let s = seen.clone();
        perturber.judge("shape", move |w| {
            s.lock().unwrap().push((
                w.verb,
                w.name.to_string(),
                w.before.is_some(),
                w.after.is_some(),
            ));
            if w.verb == "DELETED" && w.name == "b" {
                return Err("b is gone".into());
            }
            Ok(())
        });
        perturber.start().unwrap();
        let api: Api<ConfigMap> = Api::default_namespaced(server.client());
        api.create(&PostParams::default(), &cm("b")).await.unwrap();
        api.delete("b", &DeleteParams::default()).await.unwrap();
        perturber.settled().await;
        let v = perturber.violations();
        assert_eq!(v.len(), 1);
        assert!(
            v[0].to_string().starts_with("shape broken at rv "),
            "{}",
            v[0]
        );
        seen.lock().unwrap().clone()
    });
    assert_eq!(
        seen,
        vec![
            ("ADDED", "b".to_string(), false, true),
            ("DELETED", "b".to_string(), true, false),
        ]
    );
}

/// `webhook-faults` (not in `builtin()`): during its window a fraction of
/// the calls to a webhook time out — under a paused clock, after its
/// `timeoutSeconds` of simulated time — and its failurePolicy decides;
/// outside the window, the call is made (here to a closed port: refused at
/// once). The plan prints what runs, the same for the same seed.
#[test]
fn webhook_faults_time_out_calls_within_their_window_only() {
    use std::sync::Arc;
    use ward_campaign::WebhookFaults;
    let kinds: Vec<Arc<dyn Perturbation>> = vec![Arc::new(WebhookFaults)];
    let plan_of = |seed| Plan::draw(seed, &kinds, HORIZON, &[]).unwrap().to_string();
    let seed = (0..64)
        .find(|s| plan_of(*s).contains("timed out"))
        .expect("some seed draws time-outs");
    assert_eq!(plan_of(seed), plan_of(seed));
    let seen = simulate(move || async move {
        let server = ApiServer::start(ServerConfig::default().seed(seed))
            .await
            .unwrap();
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "v"},
            "webhooks": [{"name": "check.example.com", "timeoutSeconds": 1,
                "clientConfig": {"url": format!("https://127.0.0.1:{closed}/")},
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                    "resources": ["configmaps"]}],
                "sideEffects": "None", "admissionReviewVersions": ["v1"]}]});
        let hooks: Api<
            k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
        > = Api::all(server.client());
        hooks
            .create(
                &PostParams::default(),
                &serde_json::from_value(config).unwrap(),
            )
            .await
            .unwrap();
        let plan = Plan::draw(seed, &kinds, HORIZON, &[]).unwrap();
        let mut perturber = Perturber::new(&server, plan, |_| {});
        perturber.start().unwrap();
        let api: Api<ConfigMap> = Api::default_namespaced(server.client());
        let start = tokio::time::Instant::now();
        // (when, whether the fault was in force, what the write met)
        let mut seen = Vec::new();
        for i in 0..(HORIZON.as_secs() * 4) {
            let in_force = !server.faults().config().webhooks.is_empty();
            let at = start.elapsed();
            let e = api
                .create(&PostParams::default(), &cm(&format!("c{i}")))
                .await;
            let message = match e {
                Err(kube::Error::Api(s)) => s.message,
                other => panic!("the webhook must refuse every write: {other:?}"),
            };
            seen.push((at, in_force, message));
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        seen
    });
    let timed_out = |m: &str| m.ends_with("context deadline exceeded");
    assert!(
        seen.iter().any(|(_, f, m)| *f && timed_out(m)),
        "no call timed out in the window"
    );
    assert!(
        seen.iter()
            .all(|(_, f, m)| *f || m.ends_with("connection refused")),
        "outside the window every call is made"
    );
    assert!(seen.iter().any(|(_, f, _)| !f), "the window closed");
}
