//! Which groups of a LeaderWorkerSet are ready, from its children as the
//! API shows them — what the controller writes to `status.readyReplicas`
//! and its conditions, and what invariant I5 holds the status to.
//!
//! A group is a leader pod and, when the group has more than one pod, a
//! worker StatefulSet named like the leader pod. Upstream LWS counts group
//! `i` ready when its worker StatefulSet has `readyReplicas ==
//! spec.replicas` and its leader pod is Running and Ready; here, as
//! everywhere in Ward, "its" means controlled by uid, not named alike:
//!
//! - the leader StatefulSet (named like the LWS) is controlled by the live
//!   LWS's uid and not terminating;
//! - leader pod `<lws>-<i>` (the StatefulSet controller's name for ordinal
//!   `i`) is controlled by that StatefulSet's uid, not terminating, in
//!   phase Running with condition Ready True;
//! - for a group of `size > 1`, worker StatefulSet `<lws>-<i>` is controlled
//!   by that pod's uid, not terminating, and has `spec.replicas == size -
//!   1 == status.readyReplicas` (upstream checks only the last equality;
//!   requiring the size too never counts a group upstream would not).
//!
//! A predecessor's children — a StatefulSet the GC has not reached, pods of
//! an old set — never count for the new LWS.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use serde_json::{Value, json};

use super::model::LeaderWorkerSet;
use crate::meta::controller_uid;

/// The name of group `i`'s leader pod (and of its worker StatefulSet).
#[must_use]
pub fn group_name(lws: &str, i: i32) -> String {
    format!("{lws}-{i}")
}

fn live_child_of(meta: &kube::api::ObjectMeta, uid: &str) -> bool {
    meta.deletion_timestamp.is_none() && !uid.is_empty() && controller_uid(meta) == uid
}

/// Whether a pod is Running with condition Ready True (upstream's
/// `PodRunningAndReady`).
#[must_use]
pub fn running_and_ready(pod: &Pod) -> bool {
    let Some(status) = &pod.status else {
        return false;
    };
    status.phase.as_deref() == Some("Running")
        && status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// How many of `lws`'s groups are ready, given its leader StatefulSet (if
/// any), the pods and the StatefulSets of its namespace (any superset of
/// its children: the rest are ignored).
#[must_use]
pub fn ready_groups(
    lws: &LeaderWorkerSet,
    leader: Option<&StatefulSet>,
    pods: &[Pod],
    sets: &[StatefulSet],
) -> i32 {
    let name = lws.name_any();
    let Some(leader) = leader.filter(|s| {
        s.name_any() == name && live_child_of(&s.metadata, &lws.uid().unwrap_or_default())
    }) else {
        return 0;
    };
    let leader_uid = leader.uid().unwrap_or_default();
    let size = lws.spec.leader_worker_template.size;
    let ready = (0..lws.spec.replicas).filter(|&i| {
        let group = group_name(&name, i);
        let Some(pod) = pods.iter().find(|p| {
            p.name_any() == group && live_child_of(&p.metadata, &leader_uid) && running_and_ready(p)
        }) else {
            return false;
        };
        if size <= 1 {
            return true;
        }
        let pod_uid = pod.uid().unwrap_or_default();
        sets.iter().any(|s| {
            let replicas = s.spec.replicas.unwrap_or(1);
            let ready = s.status.as_ref().and_then(|s| s.ready_replicas);
            s.name_any() == group
                && live_child_of(&s.metadata, &pod_uid)
                && replicas == size - 1
                && ready == Some(replicas)
        })
    });
    i32::try_from(ready.count()).unwrap_or(i32::MAX)
}

/// The reason of both conditions while some group is not ready.
pub const PROGRESSING: &str = "GroupsAreProgressing";
/// The reason of both conditions once every group is ready.
pub const ALL_READY: &str = "AllGroupsReady";

/// The conditions for `ready` of `replicas` groups: `Available=True` only
/// when every group is ready (and `Progressing=False` then), otherwise
/// `Progressing=True` with how many are (and `Available=False`).
#[must_use]
pub fn conditions(ready: i32, replicas: i32) -> Vec<Value> {
    let cond = |type_: &str, on: bool, reason: &str, message: &str| {
        json!({"type": type_, "status": if on { "True" } else { "False" },
               "reason": reason, "message": message})
    };
    if ready >= replicas {
        let m = "All replicas are ready";
        vec![
            cond("Available", true, ALL_READY, m),
            cond("Progressing", false, ALL_READY, m),
        ]
    } else {
        let m = format!("{ready} of {replicas} groups are ready");
        vec![
            cond("Available", false, PROGRESSING, &m),
            cond("Progressing", true, PROGRESSING, &m),
        ]
    }
}

/// Whether `conditions` say `Available=True`.
#[must_use]
pub fn claims_available(conditions: &[Value]) -> bool {
    conditions
        .iter()
        .any(|c| c["type"] == "Available" && c["status"] == "True")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lws::model::{LeaderWorkerSetSpec, LeaderWorkerTemplate};
    use kube::Resource;

    fn lws(size: i32) -> LeaderWorkerSet {
        let mut l = LeaderWorkerSet::new(
            "test",
            LeaderWorkerSetSpec {
                replicas: 2,
                leader_worker_template: LeaderWorkerTemplate {
                    size,
                    leader_template: None,
                    worker_template: json!({}),
                },
                rollout_strategy: Default::default(),
            },
        );
        l.meta_mut().uid = Some("L".into());
        l
    }

    fn owned<T: Resource>(mut o: T, name: &str, uid: &str, owner: &str) -> T {
        let m = o.meta_mut();
        m.name = Some(name.into());
        m.uid = Some(uid.into());
        m.owner_references = Some(vec![
            serde_json::from_value(json!({"apiVersion": "v1", "kind": "X", "name": "x",
                "uid": owner, "controller": true}))
            .unwrap(),
        ]);
        o
    }

    fn pod(i: i32, owner: &str, phase: &str, ready: &str) -> Pod {
        let mut p = owned(
            Pod::default(),
            &group_name("test", i),
            &format!("P{i}"),
            owner,
        );
        p.status = serde_json::from_value(json!({"phase": phase,
            "conditions": [{"type": "Ready", "status": ready}]}))
        .unwrap();
        p
    }

    fn workers(i: i32, owner: &str, replicas: i32, ready: i32) -> StatefulSet {
        let mut s = owned(StatefulSet::default(), &group_name("test", i), "W", owner);
        s.spec = serde_json::from_value(json!({"replicas": replicas, "serviceName": "test",
            "selector": {}, "template": {}}))
        .unwrap();
        s.status =
            serde_json::from_value(json!({"replicas": replicas, "readyReplicas": ready})).unwrap();
        s
    }

    #[test]
    fn a_group_is_ready_only_with_a_ready_leader_and_ready_workers_of_its_own() {
        let l = lws(2);
        let leader = owned(StatefulSet::default(), "test", "S", "L");
        let table: [(&str, Vec<Pod>, Vec<StatefulSet>, i32); 8] = [
            ("nothing yet", vec![], vec![], 0),
            (
                "pods ready, no workers",
                vec![
                    pod(0, "S", "Running", "True"),
                    pod(1, "S", "Running", "True"),
                ],
                vec![],
                0,
            ),
            (
                "both groups ready",
                vec![
                    pod(0, "S", "Running", "True"),
                    pod(1, "S", "Running", "True"),
                ],
                vec![workers(0, "P0", 1, 1), workers(1, "P1", 1, 1)],
                2,
            ),
            (
                "a leader not Ready",
                vec![
                    pod(0, "S", "Running", "False"),
                    pod(1, "S", "Running", "True"),
                ],
                vec![workers(0, "P0", 1, 1), workers(1, "P1", 1, 1)],
                1,
            ),
            (
                "a leader Pending",
                vec![
                    pod(0, "S", "Pending", "True"),
                    pod(1, "S", "Running", "True"),
                ],
                vec![workers(0, "P0", 1, 1), workers(1, "P1", 1, 1)],
                1,
            ),
            (
                "workers not ready",
                vec![
                    pod(0, "S", "Running", "True"),
                    pod(1, "S", "Running", "True"),
                ],
                vec![workers(0, "P0", 1, 0), workers(1, "P1", 1, 1)],
                1,
            ),
            (
                "a predecessor's pod and workers",
                vec![
                    pod(0, "OLD", "Running", "True"),
                    pod(1, "S", "Running", "True"),
                ],
                vec![workers(0, "P0", 1, 1), workers(1, "OTHER", 1, 1)],
                0,
            ),
            (
                "workers sized for another template",
                vec![
                    pod(0, "S", "Running", "True"),
                    pod(1, "S", "Running", "True"),
                ],
                vec![workers(0, "P0", 3, 3), workers(1, "P1", 1, 1)],
                1,
            ),
        ];
        for (what, pods, sets, want) in table {
            assert_eq!(
                ready_groups(&l, Some(&leader), &pods, &sets),
                want,
                "{what}"
            );
        }
    }

    #[test]
    fn nothing_counts_under_a_leader_set_of_another_lws_or_without_one() {
        let pods = vec![
            pod(0, "S", "Running", "True"),
            pod(1, "S", "Running", "True"),
        ];
        let foreign = owned(StatefulSet::default(), "test", "S", "OLD-LWS");
        assert_eq!(ready_groups(&lws(1), Some(&foreign), &pods, &[]), 0);
        assert_eq!(ready_groups(&lws(1), None, &pods, &[]), 0);
        let own = owned(StatefulSet::default(), "test", "S", "L");
        assert_eq!(ready_groups(&lws(1), Some(&own), &pods, &[]), 2);
    }

    #[test]
    fn available_only_when_every_group_is_ready() {
        assert!(!claims_available(&conditions(0, 2)));
        assert!(!claims_available(&conditions(1, 2)));
        assert!(claims_available(&conditions(2, 2)));
        assert_eq!(conditions(1, 2)[1]["message"], "1 of 2 groups are ready");
        assert_eq!(conditions(1, 2)[1]["status"], "True");
    }
}
