//! The differential oracle, after Sieve's: no invariant to write. A
//! scenario runs unperturbed a few times first; whatever differs between
//! those runs' end states (timestamps, generated names, a CA made at
//! start, a status a controller rewrites at its own pace) is noise. A
//! perturbed run whose end state differs from the first unperturbed run's
//! beyond that noise is reported, difference by difference.
//!
//! End states are compared normalized: resourceVersions, uids,
//! creationTimestamps, managedFields and generations are dropped (they
//! differ between any two runs, or count writes rather than state), and
//! so is every RFC 3339 time (the wall clock of a real-time run) and every
//! PEM block (keys and certificates made at run time); every
//! uid that appears as a value (an ownerReference's, a label's) becomes
//! the object it names and which incarnation of that name it was
//! (`leaderworkersets/default/test#2`: the second object called so), so a
//! child adopted by the wrong incarnation of its owner shows; a name
//! generated from `generateName` becomes `prefix*`; Events are left out.
//!
//! A race can also heal before the run settles (the naive LWS controller
//! giving the old StatefulSet the new template before the garbage
//! collector takes it), so the oracle also keeps every value each field of
//! each object took on the way — without `status`, grouped by the object's
//! name and its owner (incarnation numbers of a controller's own objects
//! differ between runs; whose they are does not) — and reports a value no
//! unperturbed run's object of that name and owner took in that field
//! ("in passing"). Fields are judged one by one (which combination an
//! object passes through depends on interleaving alone), and a field no
//! unperturbed run wrote (a retry's bookkeeping) is not judged.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;
use ward_apiserver::store::{Keyed, Store};

pub use super::leaves::Difference;
use super::leaves::{flatten, general};
use super::states::{Passing, States};

/// A run's end state, normalized (see the module docs): each object by
/// its key (`apps/statefulsets/default/test`) as leaves (`spec.replicas`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    objects: BTreeMap<String, Object>,
    /// The states every object passed through on the way.
    states: States,
}

#[derive(Debug, Clone, PartialEq)]
struct Object {
    leaves: BTreeMap<String, Value>,
    whole: Value,
}

/// The objects (uid → name and incarnation) a run created, in order.
#[derive(Debug, Default, Clone)]
pub(crate) struct Incarnations {
    by_uid: HashMap<String, String>,
    count: HashMap<String, u32>,
}

impl Incarnations {
    /// Note an object seen in an event or a snapshot.
    pub(crate) fn saw(&mut self, key: &str, uid: &str) {
        if self.by_uid.contains_key(uid) {
            return;
        }
        let n = self.count.entry(key.to_string()).or_default();
        *n += 1;
        self.by_uid.insert(uid.to_string(), format!("{key}#{n}"));
    }
}

/// The key an object is compared under.
pub(crate) fn key(group: &str, plural: &str, o: &Value) -> String {
    let meta = &o["metadata"];
    let mut name = meta["name"].as_str().unwrap_or_default().to_string();
    if let Some(prefix) = meta["generateName"]
        .as_str()
        .filter(|p| name.starts_with(*p))
    {
        name = format!("{prefix}*");
    }
    let ns = meta["namespace"]
        .as_str()
        .map_or(String::new(), |n| format!("{n}/"));
    let group = if group.is_empty() {
        String::new()
    } else {
        format!("{group}/")
    };
    format!("{group}{plural}/{ns}{name}")
}

impl Snapshot {
    /// The end state of `store` now; `seen` names the uids.
    pub(crate) fn take(store: &Store, seen: &mut Incarnations, states: States) -> Snapshot {
        let (items, _, _) = store.snapshot_all_and_subscribe();
        let mut s = Snapshot::of(&items, seen);
        s.states = states;
        s
    }

    fn of(items: &[Keyed], seen: &mut Incarnations) -> Snapshot {
        let values: Vec<(String, Value)> = items
            .iter()
            .filter(|(k, _)| k.plural != "events")
            .map(|(k, o)| {
                let v = o.value();
                (key(&k.group, &k.plural, &v), v)
            })
            .collect();
        for ((_, o), (k, _)) in items.iter().zip(&values) {
            seen.saw(k, &o.uid.to_string());
        }
        let mut objects = BTreeMap::new();
        for (k, mut v) in values {
            normalize(&mut v, seen);
            let mut leaves = BTreeMap::new();
            flatten(&v, String::new(), &mut leaves);
            let k = unique(&objects, k);
            objects.insert(k, Object { leaves, whole: v });
        }
        Snapshot {
            objects,
            states: States::default(),
        }
    }

    /// How many objects it holds.
    #[must_use]
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Whether it holds none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }
}

/// `k`, or `k#2`, `k#3`… when generated names collide.
fn unique(objects: &BTreeMap<String, Object>, k: String) -> String {
    if !objects.contains_key(&k) {
        return k;
    }
    (2..)
        .map(|i| format!("{k}#{i}"))
        .find(|c| !objects.contains_key(c))
        .expect("a free suffix")
}

pub(crate) fn normalize(v: &mut Value, seen: &Incarnations) {
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for noise in [
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "managedFields",
            "generation",
            "selfLink",
        ] {
            meta.remove(noise);
        }
        if meta.contains_key("deletionTimestamp") {
            meta.insert("deletionTimestamp".into(), Value::String("set".into()));
        }
        if let (Some(prefix), Some(Value::String(name))) = (
            meta.get("generateName")
                .and_then(Value::as_str)
                .map(str::to_string),
            meta.get_mut("name"),
        ) && name.starts_with(&prefix)
        {
            *name = format!("{prefix}*");
        }
    }
    rename_uids(v, seen);
}

fn rename_uids(v: &mut Value, seen: &Incarnations) {
    match v {
        Value::String(s) => {
            if let Some(named) = seen.by_uid.get(s.as_str()) {
                *s = format!("uid of {named}");
            } else if is_timestamp(s) {
                *s = "<timestamp>".into();
            } else if (s.starts_with('{') || s.starts_with('['))
                && let Ok(mut inner) = serde_json::from_str::<Value>(s)
            {
                // JSON kept in a string (an annotation kopf or kubectl
                // writes): its times and uids are as noisy as anyone's.
                rename_uids(&mut inner, seen);
                *s = inner.to_string();
            } else if s.starts_with("-----BEGIN ") {
                // A certificate or key made at run time (the server's CA
                // in every namespace's kube-root-ca.crt).
                *s = "<PEM>".into();
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|v| rename_uids(v, seen)),
        Value::Object(o) => o.values_mut().for_each(|v| rename_uids(v, seen)),
        _ => {}
    }
}

/// An RFC 3339 time (`2026-12-01T18:01:34Z`, `…34.123456+01:00`): the
/// wall clock of a real-time run, never the same twice.
fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    if b.len() < 20
        || !digits(0..4)
        || b[4] != b'-'
        || !digits(5..7)
        || b[7] != b'-'
        || !digits(8..10)
        || !matches!(b[10], b'T' | b't' | b' ')
        || !digits(11..13)
        || b[13] != b':'
        || !digits(14..16)
        || b[16] != b':'
        || !digits(17..19)
    {
        return false;
    }
    let mut rest = &s[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = &frac[n..];
    }
    matches!(rest, "Z" | "z")
        || (rest.len() == 6
            && matches!(rest.as_bytes()[0], b'+' | b'-')
            && rest.as_bytes()[3] == b':'
            && rest[1..3]
                .bytes()
                .chain(rest[4..].bytes())
                .all(|d| d.is_ascii_digit()))
}

fn diff(a: &Snapshot, b: &Snapshot) -> Vec<Difference> {
    let keys: BTreeSet<&String> = a.objects.keys().chain(b.objects.keys()).collect();
    let mut out = Vec::new();
    for k in keys {
        match (a.objects.get(k), b.objects.get(k)) {
            (Some(x), Some(y)) => {
                let paths: BTreeSet<&String> = x.leaves.keys().chain(y.leaves.keys()).collect();
                for p in paths {
                    let (l, r) = (x.leaves.get(p), y.leaves.get(p));
                    if l != r {
                        out.push(Difference {
                            object: k.clone(),
                            path: p.clone(),
                            reference: l.cloned(),
                            got: r.cloned(),
                            passing: false,
                        });
                    }
                }
            }
            (x, y) => out.push(Difference {
                object: k.clone(),
                path: String::new(),
                reference: x.map(|o| o.whole.clone()),
                got: y.map(|o| o.whole.clone()),
                passing: false,
            }),
        }
    }
    out
}

/// What the unperturbed runs taught: the reference end state and what
/// varies anyway.
#[derive(Debug, Clone)]
pub struct Oracle {
    reference: Snapshot,
    /// (object, generalized path) pairs that differed between unperturbed runs.
    noise: BTreeSet<(String, String)>,
    /// Objects present in some unperturbed runs only.
    varying: BTreeSet<String>,
    /// The states unperturbed runs passed through.
    passing: Passing,
    runs: usize,
}

impl Oracle {
    /// Learn from unperturbed runs' end states (and the states their
    /// objects passed through); the first is the reference.
    ///
    /// # Panics
    /// If `runs` is empty.
    #[must_use]
    pub fn learn(runs: &[Snapshot]) -> Oracle {
        let reference = runs.first().expect("at least one unperturbed run").clone();
        let mut oracle = Oracle {
            passing: Passing::learn(&reference.states),
            reference,
            noise: BTreeSet::new(),
            varying: BTreeSet::new(),
            runs: 1,
        };
        for r in &runs[1..] {
            oracle.absorb(r);
        }
        oracle
    }

    /// Count one more unperturbed run's differences as noise.
    pub fn absorb(&mut self, run: &Snapshot) {
        for d in diff(&self.reference, run) {
            if d.path.is_empty() {
                self.varying.insert(d.object);
            } else {
                self.noise.insert((d.object, general(&d.path)));
            }
        }
        self.passing.absorb(&run.states);
        self.runs += 1;
    }

    /// How `run` differs from the reference beyond the noise.
    #[must_use]
    pub fn judge(&self, run: &Snapshot) -> Vec<Difference> {
        let mut out: Vec<Difference> = diff(&self.reference, run)
            .into_iter()
            .filter(|d| {
                !self.varying.contains(&d.object)
                    && !self.noise.contains(&(d.object.clone(), general(&d.path)))
            })
            .collect();
        let reported: BTreeSet<String> = out.iter().map(|d| d.object.clone()).collect();
        out.extend(self.passing.judge(&run.states, &self.noise, &reported));
        out
    }

    /// The fields learned as noise (`object path`), for the report.
    #[must_use]
    pub fn noise(&self) -> Vec<String> {
        self.noise
            .iter()
            .map(|(o, p)| format!("{o} {p}"))
            .chain(
                self.varying
                    .iter()
                    .map(|o| format!("{o} (present in some runs only)")),
            )
            .collect()
    }

    /// How many unperturbed runs it learned from.
    #[must_use]
    pub fn runs(&self) -> usize {
        self.runs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn snap(objects: &[Value], seen: &mut Incarnations) -> Snapshot {
        let mut out = BTreeMap::new();
        for o in objects {
            let k = key("", "configmaps", o);
            if let Some(uid) = o["metadata"]["uid"].as_str() {
                seen.saw(&k, uid);
            }
        }
        for o in objects {
            let mut v = o.clone();
            normalize(&mut v, seen);
            let mut leaves = BTreeMap::new();
            flatten(&v, String::new(), &mut leaves);
            let k = unique(&out, key("", "configmaps", o));
            out.insert(k, Object { leaves, whole: v });
        }
        Snapshot {
            objects: out,
            states: States::default(),
        }
    }

    fn cm(name: &str, uid: &str, owner: Option<&str>, data: Value) -> Value {
        let mut o = json!({"metadata": {"name": name, "namespace": "default", "uid": uid,
            "resourceVersion": uid, "creationTimestamp": uid}, "data": data});
        if let Some(owner) = owner {
            o["metadata"]["ownerReferences"] = json!([{"name": "owner", "uid": owner}]);
        }
        o
    }

    #[test]
    fn noise_learned_from_unperturbed_runs_is_not_reported() {
        let mut s = Incarnations::default();
        let a = snap(
            &[cm("x", "u1", None, json!({"at": "10:00", "n": "1"}))],
            &mut s,
        );
        let b = snap(
            &[cm("x", "u2", None, json!({"at": "10:05", "n": "1"}))],
            &mut s,
        );
        let oracle = Oracle::learn(&[a.clone(), b]);
        assert!(oracle.judge(&a).is_empty());
        let c = snap(
            &[cm("x", "u3", None, json!({"at": "11:00", "n": "2"}))],
            &mut s,
        );
        let d = oracle.judge(&c);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].path, "data.n");
        assert_eq!(
            d[0].to_string(),
            "configmaps/default/x data.n: \"1\" unperturbed, \"2\" here"
        );
        assert_eq!(
            oracle.noise(),
            vec!["configmaps/default/x data.at".to_string()]
        );
    }

    #[test]
    fn an_owner_of_the_wrong_incarnation_is_a_difference() {
        // Reference: `owner` was deleted and made again, and the child
        // belongs to the second one.
        let mut s = Incarnations::default();
        s.saw("configmaps/default/owner", "o1");
        let reference = snap(
            &[
                cm("owner", "o2", None, json!({})),
                cm("child", "c1", Some("o2"), json!({})),
            ],
            &mut s,
        );
        // Here the child still names the first one.
        let mut s = Incarnations::default();
        s.saw("configmaps/default/owner", "o1");
        let here = snap(
            &[
                cm("owner", "o2", None, json!({})),
                cm("child", "c2", Some("o1"), json!({})),
            ],
            &mut s,
        );
        let d = Oracle::learn(&[reference]).judge(&here);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].path, "metadata.ownerReferences[0].uid");
        assert_eq!(d[0].got, Some(json!("uid of configmaps/default/owner#1")));
    }

    #[test]
    fn objects_in_one_run_only_and_generated_names() {
        let mut s = Incarnations::default();
        let generated = |n: &str, uid: &str| json!({"metadata": {"name": n, "generateName": "job-", "namespace": "default", "uid": uid}});
        let a = snap(&[generated("job-abcde", "1")], &mut s);
        let b = snap(&[generated("job-zzzzz", "2")], &mut s);
        let oracle = Oracle::learn(&[a, b.clone()]);
        assert!(oracle.judge(&b).is_empty(), "generated names compare equal");
        let c = snap(&[generated("job-q", "3"), generated("job-r", "4")], &mut s);
        let d = oracle.judge(&c);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].object, "configmaps/default/job-*#2");
        assert!(d[0].reference.is_none());
        assert_eq!(general("a[3].b[10]"), "a[*].b[*]");
    }

    #[test]
    fn json_in_a_string_is_normalized_too() {
        let mut v = json!({"a": "{\"started\":\"2026-12-01T18:44:41.752176+00:00\",\"n\":1}"});
        normalize(&mut v, &Incarnations::default());
        assert_eq!(v["a"], json!("{\"n\":1,\"started\":\"<timestamp>\"}"));
    }

    #[test]
    fn timestamps_are_wall_clock_noise() {
        for t in [
            "2026-12-01T18:01:34Z",
            "2026-12-01T18:01:34.123456Z",
            "2026-12-01T18:01:34+01:00",
        ] {
            assert!(is_timestamp(t), "{t}");
        }
        for t in [
            "2026-12-01",
            "2026-12-01T18:01:34",
            "2026-12-01T18:01:34.Z",
            "v2026-12-01T18:01:34Z",
            "2026-12-01T18:01:34Zs",
        ] {
            assert!(!is_timestamp(t), "{t}");
        }
    }
}
