//! Reading what liveness judges: records before pods, pods fresh.

use std::collections::HashMap;
use std::future::Future;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use super::{Liveness, LivenessError, LivenessPolicy, Record};

/// Pods by (namespace, name).
pub type PodIndex = HashMap<(String, String), Pod>;

/// Index `pods` by (namespace, name).
#[must_use]
pub fn index_pods(pods: impl IntoIterator<Item = Pod>) -> PodIndex {
    let key = |p: &Pod| (p.namespace().unwrap_or_default(), p.name_any());
    pods.into_iter().map(|p| (key(&p), p)).collect()
}

/// List the pods of `api` with quorum reads (no resourceVersion, so never
/// from a cache), page by page, into a [`PodIndex`].
pub async fn list_pod_index(api: &Api<Pod>) -> Result<PodIndex, kube::Error> {
    let mut pods = Vec::new();
    let mut lp = ListParams::default().limit(500);
    loop {
        let page = api.list(&lp).await?;
        pods.extend(page.items);
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    Ok(index_pods(pods))
}

/// Records and the pods read after them.
#[derive(Debug, Clone)]
pub struct Snapshot<R> {
    /// The records, as read first.
    pub records: R,
    /// The pods, read after the records.
    pub pods: PodIndex,
}

impl<R> Snapshot<R> {
    /// The pod `record` names, if the pod read found it.
    #[must_use]
    pub fn pod(&self, record: &Record) -> Option<&Pod> {
        self.pods
            .get(&(record.pod_namespace.clone(), record.pod_name.clone()))
    }

    /// Judge `record` against this snapshot's pods, now by the policy's
    /// clock (call it after the snapshot is taken).
    #[must_use]
    pub fn decide(&self, policy: &LivenessPolicy, record: &Record) -> Liveness {
        policy.decide_now(record, self.pod(record))
    }
}

/// Read the records, THEN the pods, and keep both.
///
/// The order is the point. A record is written after its pod exists (CNI
/// ADD runs for a created pod), so a pod read that starts after the record
/// read finished sees every pod a record in it names, unless that pod
/// really is gone. Read the other way round — pods, then records — a pod
/// created and given an allocation between the two reads has a record but
/// no pod in the snapshot, and is judged [`Reason::PodAbsent`]: its IP is
/// freed while it starts. `list_pods` must be a fresh read (a quorum list
/// such as [`list_pod_index`], or a cache known to be synced past the
/// record read).
///
/// [`Reason::PodAbsent`]: super::Reason::PodAbsent
pub async fn snapshot<R, E, FR, FP>(
    read_records: impl FnOnce() -> FR,
    list_pods: impl FnOnce() -> FP,
) -> Result<Snapshot<R>, E>
where
    FR: Future<Output = Result<R, E>>,
    FP: Future<Output = Result<PodIndex, E>>,
{
    let records = read_records().await?;
    let pods = list_pods().await?;
    Ok(Snapshot { records, pods })
}

/// Judge `record` against a fresh read of its pod (a quorum GET, never a
/// cache), at the policy clock's time once the read returned.
pub async fn is_alive(
    client: &Client,
    record: &Record,
    policy: &LivenessPolicy,
) -> Result<Liveness, LivenessError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &record.pod_namespace);
    let pod = api.get_opt(&record.pod_name).await?;
    Ok(policy.decide_now(record, pod.as_ref()))
}
