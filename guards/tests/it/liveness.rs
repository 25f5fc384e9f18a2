//! Phase-aware liveness against ward-apiserver, under tokio's paused clock:
//! the whereabouts race (a Pending pod before its network-status lands),
//! a pod stuck Pending past the grace bound, a pod recreated under the same
//! name, and why records are read before pods.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, ResourceExt};
use serde_json::json;
use ward_apiserver::ApiServer;

use crate::common::pod;
use ward_guards::liveness::{
    Liveness, LivenessPolicy, NETWORK_STATUS_ANNOTATION, Phase, Reason, Record, ResourceCheck,
    is_alive, list_pod_index, snapshot,
};

const IP: &str = "10.128.40.47";
const WAIT: Duration = Duration::from_secs(60);

/// The rule whereabouts' reconciler used before #166: the pod exists and
/// its network-status annotation shows the IP.
async fn naive_alive(client: &Client, record: &Record) -> bool {
    let api: Api<Pod> = Api::namespaced(client.clone(), &record.pod_namespace);
    let Some(pod) = api.get_opt(&record.pod_name).await.unwrap() else {
        return false;
    };
    let Some(raw) = pod.annotations().get(NETWORK_STATUS_ANNOTATION) else {
        return false;
    };
    let nets: Vec<serde_json::Value> = serde_json::from_str(raw).unwrap_or_default();
    nets.iter()
        .filter_map(|n| n["ips"].as_array())
        .flatten()
        .any(|ip| ip == IP)
}

/// Multus writes the network-status annotation.
async fn annotate(api: &Api<Pod>, name: &str, ip: &str) {
    let status = json!([{
        "name": "ovn-kubernetes", "interface": "eth0", "ips": [ip],
        "mac": "0a:58:0a:80:28:2f", "default": true
    }])
    .to_string();
    let patch = json!({"metadata": {"annotations": {NETWORK_STATUS_ANNOTATION: status}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// IPs, a 30 s grace, the server's clock.
fn policy(server: &ApiServer) -> LivenessPolicy {
    LivenessPolicy::new(ResourceCheck::Ips)
        .grace(Duration::from_secs(30))
        .clock(server.clock())
}

#[tokio::test(start_paused = true)]
async fn a_pending_pod_keeps_its_ip_until_the_annotation_lands() {
    let server = ApiServer::start_seeded(1).await;
    let client = server.client();
    let clock = server.clock();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());

    // 1-2. web-2 is created Pending, without IPs; CNI ADD allocates .47.
    let web2 = pods
        .create(&PostParams::default(), &pod("web-2"))
        .await
        .unwrap();
    assert_eq!(
        web2.status.as_ref().unwrap().phase.as_deref(),
        Some("Pending")
    );
    let record = Record::new("default", "web-2", IP)
        .pod_uid(web2.uid().unwrap())
        .allocated_at(clock.now());

    // 3-4. The reconciler judges it before multus writes the annotation.
    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(
        !naive_alive(&client, &record).await,
        "the naive rule frees the IP"
    );
    let verdict = is_alive(&client, &record, &policy(&server)).await.unwrap();
    assert!(
        matches!(verdict, Liveness::Alive(Reason::PendingWithinGrace(_))),
        "{verdict:?}"
    );

    // 6. The annotation lands: both agree.
    annotate(&pods, "web-2", IP).await;
    assert!(naive_alive(&client, &record).await);
    let verdict = is_alive(&client, &record, &policy(&server)).await.unwrap();
    assert_eq!(
        verdict,
        Liveness::Alive(Reason::ShowsResource(Phase::Pending))
    );

    // Much later, still showing .47: alive whatever its age.
    tokio::time::advance(Duration::from_secs(3600)).await;
    assert!(
        is_alive(&client, &record, &policy(&server))
            .await
            .unwrap()
            .is_alive()
    );
}

#[tokio::test(start_paused = true)]
async fn a_pod_stuck_pending_releases_its_ip_after_the_grace_bound() {
    let server = ApiServer::start_seeded(2).await;
    let client = server.client();
    let clock = server.clock();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let web3 = pods
        .create(&PostParams::default(), &pod("web-3"))
        .await
        .unwrap();
    let record = Record::new("default", "web-3", IP)
        .pod_uid(web3.uid().unwrap())
        .allocated_at(clock.now());

    tokio::time::advance(Duration::from_secs(29)).await;
    assert!(
        is_alive(&client, &record, &policy(&server))
            .await
            .unwrap()
            .is_alive()
    );
    tokio::time::advance(Duration::from_secs(2)).await;
    let verdict = is_alive(&client, &record, &policy(&server)).await.unwrap();
    assert!(
        matches!(verdict, Liveness::Dead(Reason::PendingPastGrace(age)) if age.as_secs() == 31),
        "{verdict:?}"
    );

    // Without a recorded allocation time the pod's creationTimestamp
    // (whole seconds, so up to 1 s earlier) starts the clock.
    let unaged = Record::new("default", "web-3", IP);
    assert!(
        is_alive(&client, &unaged, &policy(&server))
            .await
            .unwrap()
            .is_dead()
    );
    let long = policy(&server).grace(Duration::from_secs(40));
    assert!(is_alive(&client, &unaged, &long).await.unwrap().is_alive());
}

#[tokio::test(start_paused = true)]
async fn a_pod_recreated_under_the_same_name_does_not_own_the_old_record() {
    let server = ApiServer::start_seeded(3).await;
    let client = server.client();
    let clock = server.clock();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let old = pods
        .create(&PostParams::default(), &pod("web-2"))
        .await
        .unwrap();
    let old_uid = old.uid().unwrap();
    annotate(&pods, "web-2", IP).await;
    let record = Record::new("default", "web-2", IP)
        .pod_uid(&old_uid)
        .allocated_at(clock.now());
    assert!(
        is_alive(&client, &record, &policy(&server))
            .await
            .unwrap()
            .is_alive()
    );

    pods.delete("web-2", &DeleteParams::default())
        .await
        .unwrap();
    tokio::time::timeout(
        WAIT,
        await_condition(pods.clone(), "web-2", conditions::is_deleted(&old_uid)),
    )
    .await
    .expect("deleted in time")
    .unwrap();
    assert_eq!(
        is_alive(&client, &record, &policy(&server)).await.unwrap(),
        Liveness::Dead(Reason::PodAbsent)
    );

    // Recreated under the same name, even showing the same IP: not ours.
    let new = pods
        .create(&PostParams::default(), &pod("web-2"))
        .await
        .unwrap();
    annotate(&pods, "web-2", IP).await;
    assert!(
        naive_alive(&client, &record).await,
        "the naive rule is fooled"
    );
    assert_eq!(
        is_alive(&client, &record, &policy(&server)).await.unwrap(),
        Liveness::Dead(Reason::UidMismatch {
            recorded: old_uid,
            live: new.uid().unwrap()
        })
    );
}

/// The pool: a ConfigMap whose data maps IPs to pod references.
async fn read_pool(api: &Api<ConfigMap>) -> Result<Vec<Record>, kube::Error> {
    let pool = api.get("pool").await?;
    Ok(pool
        .data
        .unwrap_or_default()
        .iter()
        .map(|(ip, podref)| Record::from_pod_ref(podref, ip).unwrap())
        .collect())
}

#[tokio::test(start_paused = true)]
async fn records_are_read_before_pods() {
    let server = ApiServer::start_seeded(4).await;
    let client = server.client();
    let clock = server.clock();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let pools: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("pool".into());
    cm.data = Some(BTreeMap::new());
    pools.create(&PostParams::default(), &cm).await.unwrap();

    // CNI ADD: the pod exists, then its allocation is recorded.
    let cni_add = |name: &'static str, ip: &'static str| {
        let (pods, pools) = (pods.clone(), pools.clone());
        async move {
            pods.create(&PostParams::default(), &pod(name))
                .await
                .unwrap();
            let add = json!({"data": {ip: format!("default/{name}")}});
            pools
                .patch("pool", &PatchParams::default(), &Patch::Merge(&add))
                .await
                .unwrap();
        }
    };

    // Wrong order: pods listed, CNI ADD for web-4 runs, the pool is read.
    let early_pods = list_pod_index(&pods).await.unwrap();
    cni_add("web-4", IP).await;
    let records = read_pool(&pools).await.unwrap();
    let r = &records[0];
    let pod = early_pods.get(&(r.pod_namespace.clone(), r.pod_name.clone()));
    assert_eq!(
        policy(&server).decide(r, pod, clock.now()),
        Liveness::Dead(Reason::PodAbsent),
        "a pod list older than the record frees a live pod's IP"
    );

    // Right order, with CNI ADD for web-5 between the two reads: web-5's
    // record is not in this snapshot (judged next round), and every record
    // that is finds its pod.
    let snap = snapshot(
        || async {
            let records = read_pool(&pools).await;
            cni_add("web-5", "10.128.40.48").await;
            records
        },
        || list_pod_index(&pods),
    )
    .await
    .unwrap();
    assert_eq!(snap.records.len(), 1);
    assert_eq!(snap.pods.len(), 2);
    let verdict = snap.decide(&policy(&server), &snap.records[0]);
    assert!(
        matches!(verdict, Liveness::Alive(Reason::PendingWithinGrace(_))),
        "{verdict:?}"
    );
}
