//! Optimistic-concurrency patches and deletes against ward-apiserver, under
//! tokio's paused clock: the whereabouts reconciler race (a stale "remove
//! 47" replayed under a fresh rv), injected 409s, and a delete racing a
//! same-name recreate.
//!
//! Windows between an `OccPatch` read and its write are opened with a
//! latency write fault on the guarded client only: `decide` signals, the
//! test makes the interfering write, then the held write goes through.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::time::Instant;
use ward_apiserver::{ApiServer, Delay, Verb, WriteAction, WriteFault};
use ward_guards::occ_patch::{
    Change, Decision, DeleteDecision, DeleteOutcome, OccError, OccPatch, UpdateOutcome,
    json_pointer,
};

const WAIT: Duration = Duration::from_secs(60);
const HOLD: Duration = Duration::from_secs(10);

async fn create(api: &Api<ConfigMap>, name: &str, data: &[(&str, &str)]) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.data = Some(
        data.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    );
    api.create(&PostParams::default(), &cm).await.unwrap()
}

fn entry(cm: &ConfigMap, key: &str) -> Option<String> {
    cm.data.as_ref()?.get(key).cloned()
}

/// Hold the next write of `verb` by client `id` for [`HOLD`].
fn hold_next(server: &ApiServer, id: u64, verb: Verb) {
    server
        .faults()
        .add_write_fault(
            WriteFault::next(1, WriteAction::Latency(Delay::fixed(HOLD)))
                .verbs(&[verb])
                .client(id),
        )
        .unwrap();
}

/// The reconciler's rule: free 47 only while web-2 (dead) owns it.
fn free_47_of_web_2(pool: &ConfigMap) -> Decision {
    match entry(pool, "47").as_deref() {
        Some("default/web-2") => {
            Decision::Patch(vec![Change::remove(json_pointer(["data", "47"]))])
        }
        _ => Decision::Nothing,
    }
}

/// A CNI ADD elsewhere hands 47 to web-9.
async fn reallocate_47(api: &Api<ConfigMap>, pool: &str) {
    let p = json!({"data": {"47": "default/web-9"}});
    api.patch(pool, &PatchParams::default(), &Patch::Merge(&p))
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_stale_removal_is_re_decided_not_replayed() {
    let server = ApiServer::start_seeded(1).await;
    let (reconciler, rid) = server.client_and_id();
    let (cni, _) = server.client_and_id();
    let pools: Api<ConfigMap> = Api::default_namespaced(reconciler);
    let other: Api<ConfigMap> = Api::default_namespaced(cni);

    // Naive: decide on a read, the world moves, patch with the old rv.
    let stale = create(&pools, "pool", &[("47", "default/web-2")]).await;
    let Decision::Patch(_) = free_47_of_web_2(&stale) else {
        panic!("web-2 is dead: the reconciler frees 47");
    };
    reallocate_47(&other, "pool").await;
    let rv = stale.resource_version().unwrap();
    let naive = |rv: &str| {
        Patch::<()>::Json(
            serde_json::from_value(json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
                {"op": "remove", "path": "/data/47"}
            ]))
            .unwrap(),
        )
    };
    let err = pools
        .patch("pool", &PatchParams::default(), &naive(&rv))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(status.code, 422, "a failed test op is 422, not 409");
    // As kube-apiserver answers it: no word of which test failed.
    assert_eq!(
        status.message,
        ward_guards::occ_patch::GENERIC_INVALID_PATCH
    );
    // Naive replay: the same decision under the fresh rv frees web-9's IP.
    let fresh = pools.get("pool").await.unwrap();
    assert_eq!(entry(&fresh, "47").as_deref(), Some("default/web-9"));
    let replayed = pools
        .patch(
            "pool",
            &PatchParams::default(),
            &naive(&fresh.resource_version().unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(
        entry(&replayed, "47"),
        None,
        "the replay removed a live allocation"
    );

    // Guarded: the same interleaving, inside OccPatch::update.
    create(&pools, "pool-b", &[("47", "default/web-2")]).await;
    hold_next(&server, rid, Verb::Patch);
    let calls = Arc::new(AtomicU32::new(0));
    let (decided, mut on_decide) = mpsc::unbounded_channel();
    let occ = OccPatch::new(pools.clone()).seed(1);
    let task = {
        let calls = calls.clone();
        tokio::spawn(async move {
            occ.update("pool-b", move |pool| {
                calls.fetch_add(1, Ordering::SeqCst);
                decided.send(entry(pool, "47")).ok();
                free_47_of_web_2(pool)
            })
            .await
        })
    };
    let first = tokio::time::timeout(WAIT, on_decide.recv()).await.unwrap();
    assert_eq!(first.flatten().as_deref(), Some("default/web-2"));
    reallocate_47(&other, "pool-b").await; // while the removal is in flight
    let outcome = tokio::time::timeout(WAIT, task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "decided again on fresh state"
    );
    let UpdateOutcome::Unchanged(seen, ()) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(entry(&seen, "47").as_deref(), Some("default/web-9"));
    let live = pools.get("pool-b").await.unwrap();
    assert_eq!(
        entry(&live, "47").as_deref(),
        Some("default/web-9"),
        "web-9 keeps .47"
    );
}

#[tokio::test(start_paused = true)]
async fn without_the_rv_pin_only_the_entry_itself_conflicts() {
    let server = ApiServer::start_seeded(2).await;
    let (c, id) = server.client_and_id();
    let (cni, _) = server.client_and_id();
    let pools: Api<ConfigMap> = Api::default_namespaced(c);
    let other: Api<ConfigMap> = Api::default_namespaced(cni);
    create(&pools, "pool", &[("47", "default/web-2")]).await;
    hold_next(&server, id, Verb::Patch);
    let calls = Arc::new(AtomicU32::new(0));
    let (decided, mut on_decide) = mpsc::unbounded_channel();
    let occ = OccPatch::new(pools.clone()).test_resource_version(false);
    let task = {
        let calls = calls.clone();
        tokio::spawn(async move {
            occ.update("pool", move |pool| {
                calls.fetch_add(1, Ordering::SeqCst);
                decided.send(()).ok();
                free_47_of_web_2(pool)
            })
            .await
        })
    };
    tokio::time::timeout(WAIT, on_decide.recv()).await.unwrap();
    // Another key changes meanwhile: no conflict for the entry at 47.
    let p = json!({"data": {"48": "default/web-3"}});
    other
        .patch("pool", &PatchParams::default(), &Patch::Merge(&p))
        .await
        .unwrap();
    let outcome = tokio::time::timeout(WAIT, task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let UpdateOutcome::Patched(pool, ()) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(entry(&pool, "47"), None);
    assert_eq!(entry(&pool, "48").as_deref(), Some("default/web-3"));
}

#[tokio::test(start_paused = true)]
async fn injected_conflicts_are_retried_with_a_fresh_decision() {
    let server = ApiServer::start_seeded(3).await;
    let (c, _) = server.client_and_id();
    let api: Api<ConfigMap> = Api::default_namespaced(c);
    create(&api, "lease", &[("holder", "a")]).await;
    let take = |calls: &AtomicU32, cm: &ConfigMap| {
        calls.fetch_add(1, Ordering::SeqCst);
        match entry(cm, "holder").as_deref() {
            Some("a") => Decision::Patch(vec![Change::replace("/data/holder", json!("b"))]),
            _ => Decision::Abort("not a's to give".into()),
        }
    };

    server
        .faults()
        .add_write_fault(WriteFault::next(2, WriteAction::Conflict).verbs(&[Verb::Patch]))
        .unwrap();
    let calls = AtomicU32::new(0);
    let t0 = Instant::now();
    let occ = OccPatch::new(api.clone())
        .seed(7)
        .backoff(Duration::from_millis(100));
    let outcome = occ.update("lease", |cm| take(&calls, cm)).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 3, "decided once per attempt");
    let UpdateOutcome::Patched(cm, ()) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(entry(&cm, "holder").as_deref(), Some("b"));
    // Waits of [50, 100] ms and [100, 200] ms.
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(150) && waited <= Duration::from_millis(300),
        "{waited:?}"
    );

    // Two attempts, two conflicts: give up, nothing written.
    api.patch(
        "lease",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"holder": "a"}})),
    )
    .await
    .unwrap();
    server
        .faults()
        .add_write_fault(WriteFault::next(2, WriteAction::Conflict).verbs(&[Verb::Patch]))
        .unwrap();
    let calls = AtomicU32::new(0);
    let err = OccPatch::new(api.clone())
        .seed(7)
        .max_attempts(2)
        .update("lease", |cm| take(&calls, cm))
        .await
        .unwrap_err();
    assert!(
        matches!(err, OccError::Conflict { attempts: 2, .. }),
        "{err:?}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(
        entry(&api.get("lease").await.unwrap(), "holder").as_deref(),
        Some("a")
    );

    // Abort, nothing to do, no such object, another error: no retries.
    let before = api.get("lease").await.unwrap().resource_version();
    let err = OccPatch::new(api.clone())
        .update("lease", |_| Decision::Abort("no".into()))
        .await
        .unwrap_err();
    assert!(matches!(err, OccError::Aborted(r) if r.to_string() == "no"));
    let out = OccPatch::new(api.clone())
        .update("lease", |_| Decision::Nothing)
        .await
        .unwrap();
    assert!(matches!(out, UpdateOutcome::Unchanged(cm, ()) if cm.resource_version() == before));
    let out = OccPatch::new(api.clone())
        .update("missing", |_| Decision::Nothing)
        .await
        .unwrap();
    assert_eq!(out, UpdateOutcome::Gone);
    server
        .faults()
        .add_write_fault(WriteFault::next(1, WriteAction::InternalError).verbs(&[Verb::Patch]))
        .unwrap();
    let calls = AtomicU32::new(0);
    let err = OccPatch::new(api.clone())
        .update("lease", |cm| take(&calls, cm))
        .await
        .unwrap_err();
    assert!(matches!(err, OccError::Kube(_)), "{err:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_delete_never_hits_a_same_named_successor() {
    let server = ApiServer::start_seeded(4).await;
    let (c, id) = server.client_and_id();
    let (o, _) = server.client_and_id();
    let api: Api<ConfigMap> = Api::default_namespaced(c);
    let other: Api<ConfigMap> = Api::default_namespaced(o);

    // Delete the lease while its holder is the dead pod web-2.
    let holder_is_web_2 = |cm: &ConfigMap| match entry(cm, "holder").as_deref() {
        Some("default/web-2") => DeleteDecision::Delete,
        _ => DeleteDecision::Keep,
    };
    let replace = |uid: String| {
        let other = other.clone();
        async move {
            other
                .delete("lease", &DeleteParams::default())
                .await
                .unwrap();
            tokio::time::timeout(
                WAIT,
                await_condition(other.clone(), "lease", conditions::is_deleted(&uid)),
            )
            .await
            .unwrap()
            .unwrap();
            create(&other, "lease", &[("holder", "default/web-9")]).await
        }
    };

    for pin_uid in [false, true] {
        let old = create(&api, "lease", &[("holder", "default/web-2")]).await;
        let old_uid = old.uid().unwrap();
        hold_next(&server, id, Verb::Delete);
        let calls = Arc::new(AtomicU32::new(0));
        let (decided, mut on_decide) = mpsc::unbounded_channel();
        let mut occ = OccPatch::new(api.clone()).seed(3);
        if pin_uid {
            occ = occ.expect_uid(&old_uid);
        }
        let task = {
            let calls = calls.clone();
            tokio::spawn(async move {
                occ.delete("lease", move |cm| {
                    calls.fetch_add(1, Ordering::SeqCst);
                    decided.send(()).ok();
                    holder_is_web_2(cm)
                })
                .await
            })
        };
        tokio::time::timeout(WAIT, on_decide.recv()).await.unwrap();
        let new = replace(old_uid.clone()).await; // while the delete is in flight
        let res = tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
        if pin_uid {
            let Err(OccError::Replaced { expected, found }) = res else {
                panic!("{res:?}")
            };
            assert_eq!((expected, Some(found)), (old_uid, new.uid()));
            assert_eq!(calls.load(Ordering::SeqCst), 1);
        } else {
            let Ok(DeleteOutcome::Kept(seen)) = res else {
                panic!("{res:?}")
            };
            assert_eq!(seen.uid(), new.uid(), "re-decided on the successor");
            assert_eq!(calls.load(Ordering::SeqCst), 2);
        }
        let live = api.get("lease").await.unwrap();
        assert_eq!(live.uid(), new.uid(), "the successor survives");
        api.delete("lease", &DeleteParams::default()).await.unwrap();
    }

    // The naive delete, decided on the old read, takes the successor.
    let old = create(&api, "lease", &[("holder", "default/web-2")]).await;
    assert!(matches!(holder_is_web_2(&old), DeleteDecision::Delete));
    let new = replace(old.uid().unwrap()).await;
    api.delete("lease", &DeleteParams::default()).await.unwrap();
    assert!(
        api.get_opt("lease").await.unwrap().is_none(),
        "{new:?} was deleted"
    );
}

#[tokio::test(start_paused = true)]
async fn delete_outcomes() {
    let server = ApiServer::start_seeded(5).await;
    let (c, _) = server.client_and_id();
    let api: Api<ConfigMap> = Api::default_namespaced(c);
    let delete = |_: &ConfigMap| DeleteDecision::Delete;

    create(&api, "plain", &[]).await;
    let out = OccPatch::new(api.clone())
        .delete("plain", delete)
        .await
        .unwrap();
    assert_eq!(out, DeleteOutcome::Deleted);
    let out = OccPatch::new(api.clone())
        .delete("plain", delete)
        .await
        .unwrap();
    assert_eq!(out, DeleteOutcome::Gone);

    let mut held = ConfigMap::default();
    held.metadata.name = Some("held".into());
    held.metadata.finalizers = Some(vec!["ward.example/hold".into()]);
    api.create(&PostParams::default(), &held).await.unwrap();
    let out = OccPatch::new(api.clone())
        .delete("held", delete)
        .await
        .unwrap();
    let DeleteOutcome::Terminating(cm) = out else {
        panic!("{out:?}")
    };
    assert!(cm.metadata.deletion_timestamp.is_some());

    // Injected 409s on deletes: re-decided each time, then done.
    create(&api, "busy", &[]).await;
    server
        .faults()
        .add_write_fault(WriteFault::next(2, WriteAction::Conflict).verbs(&[Verb::Delete]))
        .unwrap();
    let calls = AtomicU32::new(0);
    let out = OccPatch::new(api.clone())
        .seed(5)
        .delete("busy", |_| {
            calls.fetch_add(1, Ordering::SeqCst);
            DeleteDecision::Delete
        })
        .await
        .unwrap();
    assert_eq!(out, DeleteOutcome::Deleted);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let kept = OccPatch::new(api.clone())
        .delete("held", |_| DeleteDecision::Keep)
        .await
        .unwrap();
    assert!(matches!(kept, DeleteOutcome::Kept(_)));
}

#[tokio::test(start_paused = true)]
async fn the_default_budget_outlasts_contention_and_a_deadline_bounds_it() {
    let server = ApiServer::start_seeded(21).await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    create(&api, "ports", &[]).await;
    let claim = |cm: &ConfigMap| {
        let taken = cm.data.clone().unwrap_or_default();
        let port = (8000..)
            .find(|p| !taken.contains_key(&p.to_string()))
            .unwrap();
        let add = Change::add(json_pointer(["data", &port.to_string()]), json!("web"));
        (Decision::Patch(vec![add]), port)
    };

    // Twelve conflicts in a row: the old default (5 attempts) gave up on
    // the fifth; the deadline rides them out and returns the port chosen
    // by the attempt that landed.
    server
        .faults()
        .add_write_fault(WriteFault::next(12, WriteAction::Conflict).verbs(&[Verb::Patch]))
        .unwrap();
    let t0 = Instant::now();
    let out = OccPatch::new(api.clone())
        .seed(2)
        .update_with("ports", claim)
        .await
        .unwrap();
    assert!(t0.elapsed() < OccPatch::<ConfigMap>::DEFAULT_DEADLINE);
    let UpdateOutcome::Patched(cm, port) = out else {
        panic!("{out:?}")
    };
    assert_eq!(port, 8000);
    assert_eq!(entry(&cm, "8000").as_deref(), Some("web"));

    // Conflicts without end: give up at the deadline, not before, and
    // write nothing.
    server
        .faults()
        .add_write_fault(WriteFault::fraction(1.0, WriteAction::Conflict).verbs(&[Verb::Patch]))
        .unwrap();
    let t0 = Instant::now();
    let err = OccPatch::new(api.clone())
        .seed(2)
        .deadline(Duration::from_secs(5))
        .update_with("ports", claim)
        .await
        .unwrap_err();
    let OccError::Conflict { attempts, elapsed } = err else {
        panic!("{err:?}")
    };
    assert_eq!(
        elapsed,
        Duration::from_secs(5),
        "the last wait is cut at the deadline"
    );
    assert_eq!(t0.elapsed(), elapsed);
    // 50 ms doubling to the 2 s cap, each drawn from its upper half.
    assert!((4..=12).contains(&attempts), "{attempts}");
    assert_eq!(api.get("ports").await.unwrap().data.unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn an_add_under_a_missing_map_creates_it() {
    let server = ApiServer::start_seeded(22).await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("empty".into());
    api.create(&PostParams::default(), &cm).await.unwrap();
    let out = OccPatch::new(api.clone())
        .update("empty", |cm: &ConfigMap| {
            assert!(cm.data.is_none(), "no data map yet");
            Decision::Patch(vec![Change::add("/data/8000", json!("web"))])
        })
        .await
        .unwrap();
    let UpdateOutcome::Patched(cm, ()) = out else {
        panic!("{out:?}")
    };
    assert_eq!(entry(&cm, "8000").as_deref(), Some("web"));
}
