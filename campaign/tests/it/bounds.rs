//! What a campaign promises whatever the controller does: a run that spins
//! ends with a livelock verdict, a plan aims only at registered
//! controllers, and judges see every write with its before and after.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use ward_apiserver::{ApiServer, ServerConfig};
use ward_campaign::{
    GcDelay, Limits, Perturbation, Perturber, Plan, PlanError, RunError, builtin, simulate,
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
            Perturber::new(&server, plan, move |l| sink.lock().unwrap().push(l)).limits(limits);
        perturber.controller(&server, "under-test", controller);
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
        perturber.controller(&server, "controller", |_| async {});
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
