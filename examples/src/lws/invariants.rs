//! The invariants an LWS scenario checks from the server's own store (not
//! from any controller's cache):
//!
//! - **I1** (continuously) no ControllerRevision owned by an LWS carries a
//!   hash taken from elsewhere: its hash label is the hash of the template
//!   it stores (under a collision count up to its LWS's);
//! - **I2** (after settling) exactly one revision per LWS, the current one,
//!   keyed by the hash of its own template;
//! - **I3** (after settling) the leader StatefulSet is controlled by the
//!   live LWS's uid and labelled with that hash;
//! - **I4** (continuously) the controller never writes to a StatefulSet it
//!   does not control: every version of a StatefulSet is stamped for the
//!   LWS that created it;
//! - **I5** (after settling) the status claims no more than the children
//!   show: `readyReplicas` is at most the groups ready by the definition in
//!   [`super::readiness`], and `Available=True` only when every group is.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::run::{Parsed, key};
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use serde::de::DeserializeOwned;
use ward_apiserver::store::{Event, EventType, Store, StoredObject};

use super::model::{HASH_LABEL, LeaderWorkerSet, WRITTEN_FOR};
use super::{readiness, revision};
use crate::meta::controller_uid;

crate::journal::invariants! {
    "LWS":
    /// Revisions carry their own template's hash.
    I1 => "I1 (revision with a foreign hash)",
    /// One current revision per LWS, of its own template.
    I2 => "I2 (not exactly one current revision of the own template)",
    /// The StatefulSet is the live LWS's, with its hash.
    I3 => "I3 (StatefulSet not the live LWS's)",
    /// No write to a StatefulSet the controller does not control.
    I4 => "I4 (write to a StatefulSet of another LWS)",
    /// The status claims no more ready groups than the children show.
    I5 => "I5 (status claims readiness the children do not show)",
}

fn list<T: DeserializeOwned>(store: &Store, group: &str, plural: &str) -> Vec<T> {
    store
        .list(&key(group, plural), None, None, None, |_| true)
        .items
        .iter()
        .filter_map(|o| parse(o))
        .collect()
}

fn parse<T: DeserializeOwned>(o: &StoredObject) -> Option<T> {
    serde_json::from_value(o.value()).ok()
}

/// `parse` of every object of `group`/`plural`, each version parsed once
/// (`seen` keeps them).
fn list_seen<T>(
    store: &Store,
    seen: &mut Parsed<T>,
    group: &str,
    plural: &str,
    parse: impl FnMut(&StoredObject) -> T,
) -> Vec<Arc<T>> {
    let page = store.list(&key(group, plural), None, None, None, |_| true);
    seen.all(&page.items, parse)
}

/// The checker.
#[derive(Debug)]
pub struct Checker {
    store: Arc<Store>,
    violations: Violations,
    /// The uid of the LWS each StatefulSet (by uid) was created for.
    created_for: HashMap<String, String>,
    /// Each LWS version's uid and collision count.
    lws: Parsed<Option<(String, i32)>>,
    /// Each revision and StatefulSet version, parsed.
    revisions: Parsed<Option<ControllerRevision>>,
    sets: Parsed<Option<StatefulSet>>,
}

impl Checker {
    /// A checker over `store`.
    #[must_use]
    pub fn new(store: Arc<Store>, violations: Violations) -> Self {
        Checker {
            store,
            violations,
            created_for: HashMap::new(),
            lws: Parsed::default(),
            revisions: Parsed::default(),
            sets: Parsed::default(),
        }
    }

    /// The collision count of every LWS, by uid.
    fn collisions(&mut self) -> BTreeMap<String, i32> {
        let lws = list_seen(
            &self.store,
            &mut self.lws,
            "leaderworkerset.x-k8s.io",
            "leaderworkersets",
            |o| {
                parse::<LeaderWorkerSet>(o).map(|l| {
                    let c = l.status.as_ref().and_then(|s| s.collision_count);
                    (l.uid().unwrap_or_default(), c.unwrap_or(0))
                })
            },
        );
        lws.iter().filter_map(|l| l.as_ref().clone()).collect()
    }

    /// I1 on one revision.
    fn revision(&self, r: &ControllerRevision, collisions: &BTreeMap<String, i32>) {
        let owner = controller_uid(&r.metadata);
        let Some(max) = collisions.get(&owner) else {
            return;
        };
        if !revision::label_matches_data(r, *max) {
            self.violations.violate(
                Invariant::I1,
                r.uid().unwrap_or_default(),
                format!(
                    "revision {} of LWS uid {owner} is labelled {} but stores another template",
                    r.name_any(),
                    r.labels().get(HASH_LABEL).cloned().unwrap_or_default()
                ),
            );
        }
    }

    /// I4 on one version of a StatefulSet.
    fn set(&mut self, s: &StatefulSet) {
        let uid = s.uid().unwrap_or_default();
        let first = self
            .created_for
            .entry(uid.clone())
            .or_insert_with(|| controller_uid(&s.metadata))
            .clone();
        let written = s
            .annotations()
            .get(WRITTEN_FOR)
            .cloned()
            .unwrap_or_default();
        if written != first {
            self.violations.violate(
                Invariant::I4,
                uid.clone(),
                format!(
                    "StatefulSet {} (uid {uid}) of LWS uid {first} was written for LWS uid {written}",
                    s.name_any()
                ),
            );
        }
    }

    /// I1 and I4 on every object in the store now.
    pub fn check(&mut self) {
        let collisions = self.collisions();
        let revisions = list_seen(
            &self.store,
            &mut self.revisions,
            "apps",
            "controllerrevisions",
            parse,
        );
        for r in revisions.iter().filter_map(|r| r.as_ref().as_ref()) {
            self.revision(r, &collisions);
        }
        let sets = list_seen(&self.store, &mut self.sets, "apps", "statefulsets", parse);
        for s in sets.iter().filter_map(|s| s.as_ref().as_ref()) {
            self.set(s);
        }
    }

    /// I1 and I4 on the object a store event carries: every version is
    /// judged, even one a later write replaced before a list could see it.
    fn event(&mut self, e: &Event) {
        if e.kind == EventType::Deleted || e.key.group != "apps" {
            return;
        }
        match e.key.plural.as_str() {
            "controllerrevisions" => {
                if let Some(r) = self.revisions.get(&e.object, parse).as_ref() {
                    let collisions = self.collisions();
                    self.revision(r, &collisions);
                }
            }
            "statefulsets" => {
                if let Some(s) = self.sets.get(&e.object, parse).as_ref() {
                    self.set(s);
                }
            }
            _ => {}
        }
    }

    /// I2, I3 and I5, once settled.
    pub fn settled(&self) {
        let lws: Vec<LeaderWorkerSet> =
            list(&self.store, "leaderworkerset.x-k8s.io", "leaderworkersets");
        let revs: Vec<ControllerRevision> = list(&self.store, "apps", "controllerrevisions");
        let sets: Vec<StatefulSet> = list(&self.store, "apps", "statefulsets");
        let pods: Vec<Pod> = list(&self.store, "", "pods");
        for l in lws
            .iter()
            .filter(|l| l.metadata.deletion_timestamp.is_none())
        {
            self.status_is_true(l, &sets, &pods);
            let (name, uid) = (l.name_any(), l.uid().unwrap_or_default());
            let c = l
                .status
                .as_ref()
                .and_then(|s| s.collision_count)
                .unwrap_or(0);
            let own = revision::hash(&l.spec.leader_worker_template, c);
            let current = l.status.as_ref().and_then(|s| s.current_revision.clone());
            let mine: Vec<String> = revs
                .iter()
                .filter(|r| controller_uid(&r.metadata) == uid)
                .map(|r| {
                    format!(
                        "{}={}",
                        r.name_any(),
                        r.labels().get(HASH_LABEL).cloned().unwrap_or_default()
                    )
                })
                .collect();
            let want = format!("{}={own}", revision::name(&name, &own));
            if mine != [want.clone()] || current.as_deref() != Some(&revision::name(&name, &own)) {
                self.violations.violate(
                    Invariant::I2,
                    uid.clone(),
                    format!("LWS {name} (uid {uid}) has revisions {mine:?}, current {current:?}; want only {want}"),
                );
            }
            let set = sets.iter().find(|s| s.name_any() == name);
            let ok = set.is_some_and(|s| {
                controller_uid(&s.metadata) == uid && s.labels().get(HASH_LABEL) == Some(&own)
            });
            if !ok {
                let what = set.map_or("none".to_string(), |s| {
                    format!(
                        "controller {}, hash {:?}",
                        controller_uid(&s.metadata),
                        s.labels().get(HASH_LABEL)
                    )
                });
                self.violations.violate(
                    Invariant::I3,
                    uid.clone(),
                    format!("StatefulSet {name}: {what}; want controller {uid}, hash {own}"),
                );
            }
        }
    }

    /// I5 on one LWS: its status against its children in the store.
    fn status_is_true(&self, l: &LeaderWorkerSet, sets: &[StatefulSet], pods: &[Pod]) {
        let Some(status) = &l.status else { return };
        let (name, ns) = (l.name_any(), l.namespace().unwrap_or_default());
        let sets: Vec<StatefulSet> = sets
            .iter()
            .filter(|s| s.namespace().as_deref() == Some(&ns))
            .cloned()
            .collect();
        let pods: Vec<Pod> = pods
            .iter()
            .filter(|p| p.namespace().as_deref() == Some(&ns))
            .cloned()
            .collect();
        let leader = sets.iter().find(|s| s.name_any() == name);
        let ready = readiness::ready_groups(l, leader, &pods, &sets);
        let available = readiness::claims_available(&status.conditions);
        if status.ready_replicas > ready || (available && ready < l.spec.replicas) {
            self.violations.violate(
                Invariant::I5,
                l.uid().unwrap_or_default(),
                format!(
                    "LWS {name} says readyReplicas {}{} but its children show {ready} of {} groups ready",
                    status.ready_replicas,
                    if available { " and Available" } else { "" },
                    l.spec.replicas
                ),
            );
        }
    }

    /// Judge every revision and StatefulSet version a store event carries,
    /// and the whole store every second, until aborted.
    pub async fn run(mut self) {
        let store = self.store.clone();
        crate::run::follow_store(&store, |e| match e {
            Some(e) => self.event(e),
            None => self.check(),
        })
        .await;
    }
}
