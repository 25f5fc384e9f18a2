//! The oracle's second look: every value each object held on the way,
//! not only where it ended. A race can heal before the run settles — the
//! naive LWS controller writes the new template into the old StatefulSet,
//! the garbage collector deletes it, the controller makes a new one — and
//! leave the end state exactly the unperturbed one; what the old object
//! held in between shows it.
//!
//! Values are kept per object and owner (`…/statefulsets/default/test
//! owned by …/leaderworkersets/default/test#1`: the StatefulSet of the
//! first LeaderWorkerSet of that name) and per field, without
//! `status` (what a controller observed, which changes with timing alone):
//! which *combination* of fields an object passed through depends on how
//! the workload's writes interleaved with the controller's, unperturbed or
//! not; which values a field of one group took does not. A perturbed
//! run's field that took a value no unperturbed run's same group ever
//! held in that field (beyond the fields that vary anyway) is a
//! difference "in passing"; a field unperturbed runs never wrote is not
//! (recovery writes bookkeeping of its own).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::leaves::{Difference, flatten, general};

/// Per object group, per field: the values it took.
type Fields = BTreeMap<String, BTreeSet<String>>;

/// Every value each object group's fields took during a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct States {
    by_object: BTreeMap<String, Fields>,
}

impl States {
    /// Note `normalized`, a state of the objects grouped as `object`.
    pub(crate) fn saw(&mut self, object: &str, normalized: &Value) {
        let mut v = normalized.clone();
        if let Some(o) = v.as_object_mut() {
            o.remove("status");
        }
        let mut leaves = BTreeMap::new();
        flatten(&v, String::new(), &mut leaves);
        let fields = self.by_object.entry(object.to_string()).or_default();
        for (path, value) in leaves {
            fields.entry(path).or_default().insert(value.to_string());
        }
    }
}

/// What an object's values are grouped under: its key, and the owner its
/// first ownerReference names (`apps/statefulsets/default/test owned by
/// uid of …/leaderworkersets/default/test#1`). Owners are mostly the
/// workload's objects, made the same number of times in every run; a
/// controller's own objects are not (a stale cache makes and loses a few
/// more), so their incarnation numbers cannot be compared across runs,
/// and whose they are can.
pub(crate) fn group(key: &str, normalized: &Value) -> String {
    match normalized
        .pointer("/metadata/ownerReferences/0/uid")
        .and_then(Value::as_str)
    {
        Some(owner) => format!("{key}{OWNED}{owner}"),
        None => key.to_string(),
    }
}

const OWNED: &str = " owned by ";

/// The key of a group.
fn key_of(object: &str) -> &str {
    object.split_once(OWNED).map_or(object, |(k, _)| k)
}

/// What unperturbed runs' values teach.
#[derive(Debug, Clone, Default)]
pub(crate) struct Passing {
    allowed: BTreeMap<String, Fields>,
    /// (group, generalized path) whose values differ between
    /// unperturbed runs.
    noise: BTreeSet<(String, String)>,
    /// Groups some unperturbed runs have and others not.
    varying: BTreeSet<String>,
}

impl Passing {
    pub(crate) fn learn(first: &States) -> Passing {
        Passing {
            allowed: first.by_object.clone(),
            ..Passing::default()
        }
    }

    /// Count an unperturbed run's values as allowed, and a field whose
    /// values differ from those already allowed as noise.
    pub(crate) fn absorb(&mut self, run: &States) {
        for object in self.allowed.keys() {
            if !run.by_object.contains_key(object) {
                self.varying.insert(object.clone());
            }
        }
        for (object, fields) in &run.by_object {
            let Some(allowed) = self.allowed.get_mut(object) else {
                self.varying.insert(object.clone());
                continue;
            };
            let paths: BTreeSet<String> = allowed.keys().chain(fields.keys()).cloned().collect();
            for p in paths {
                let (a, b) = (allowed.get(&p), fields.get(&p));
                if a != b {
                    self.noise.insert((object.clone(), general(&p)));
                }
                if let Some(b) = b {
                    allowed.entry(p).or_default().extend(b.iter().cloned());
                }
            }
        }
    }

    /// `run`'s values no unperturbed run's same group held, beyond
    /// the noise (this one's, and `end_noise` — the end states', by key);
    /// objects whose key is in `skip` (reported already) are left out.
    pub(crate) fn judge(
        &self,
        run: &States,
        end_noise: &BTreeSet<(String, String)>,
        skip: &BTreeSet<String>,
    ) -> Vec<Difference> {
        let mut out = Vec::new();
        for (object, fields) in &run.by_object {
            let key = key_of(object);
            if self.varying.contains(object) || skip.contains(key) {
                continue;
            }
            let Some(allowed) = self.allowed.get(object) else {
                out.push(Difference {
                    object: object.clone(),
                    path: String::new(),
                    reference: None,
                    got: Some(Value::String("an object no unperturbed run made".into())),
                    passing: true,
                });
                continue;
            };
            for (path, values) in fields {
                let g = general(path);
                if self.noise.contains(&(object.clone(), g.clone()))
                    || end_noise.contains(&(key.to_string(), g))
                {
                    continue;
                }
                // A field no unperturbed run's group had is left
                // out: recovery writes bookkeeping of its own (kopf's
                // retry progress, a requeue count) where nothing was
                // wrong; a field that had other values is the signal.
                let Some(known) = allowed.get(path) else {
                    continue;
                };
                for v in values {
                    if known.contains(v) {
                        continue;
                    }
                    let parse = |s: &String| serde_json::from_str(s).ok();
                    out.push(Difference {
                        object: object.clone(),
                        path: path.clone(),
                        reference: known.iter().next().and_then(parse),
                        got: parse(v),
                        passing: true,
                    });
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn states(objects: &[(&str, Value)]) -> States {
        let mut s = States::default();
        for (k, v) in objects {
            s.saw(k, v);
        }
        s
    }

    fn judge(p: &Passing, s: &States) -> Vec<Difference> {
        p.judge(s, &BTreeSet::new(), &BTreeSet::new())
    }

    #[test]
    fn a_value_the_group_never_held_is_found_even_when_the_end_is_the_same() {
        let sts = |owner: u32, image: &str| {
            json!({"metadata": {"ownerReferences": [{"uid": format!("uid of lws#{owner}")}]},
                   "spec": {"image": image}})
        };
        let run = |states_: &[Value]| {
            let mut s = States::default();
            for v in states_ {
                s.saw(&group("sts", v), v);
            }
            s
        };
        // Unperturbed: the first owner's set had the old template, the
        // second owner's the new.
        let reference = run(&[sts(1, "a"), sts(2, "b")]);
        // Naive: the old owner's set was given the new template.
        let here = run(&[sts(1, "a"), sts(1, "b"), sts(2, "b")]);
        let d = judge(&Passing::learn(&reference), &here);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(
            (d[0].object.as_str(), d[0].path.as_str()),
            ("sts owned by uid of lws#1", "spec.image")
        );
        assert_eq!(d[0].got, Some(json!("b")));
        assert!(d[0].to_string().ends_with("(in passing)"), "{}", d[0]);
        // A stale cache's extra, short-lived incarnations change nothing.
        let again = run(&[sts(1, "a"), sts(1, "a"), sts(2, "b"), sts(2, "b")]);
        assert!(judge(&Passing::learn(&reference), &again).is_empty());
    }

    #[test]
    fn combinations_status_and_learned_noise_are_not_differences() {
        let cm = |n: &str, note: &str, at: &str, r: u32| json!({"data": {"n": n, "note": note, "at": at}, "status": {"r": r}});
        let a = states(&[
            ("cm#1", cm("1", "x", "t1", 1)),
            ("cm#1", cm("2", "y", "t1", 2)),
        ]);
        let b = states(&[
            ("cm#1", cm("1", "x", "t2", 3)),
            ("cm#1", cm("2", "y", "t3", 4)),
        ]);
        let mut passing = Passing::learn(&a);
        passing.absorb(&b);
        // n=2 with note x: a combination never seen, each value seen.
        let c = states(&[("cm#1", cm("2", "x", "t9", 9))]);
        assert!(judge(&passing, &c).is_empty());
        let d = states(&[("cm#1", cm("3", "x", "t9", 9))]);
        assert_eq!(judge(&passing, &d).len(), 1);
        // A field no unperturbed run wrote (a retry's bookkeeping).
        let e = states(&[("cm#1", json!({"data": {"n": "1", "retry": "3"}}))]);
        assert!(judge(&passing, &e).is_empty());
        let only_here = states(&[("other#1", json!({"data": {}}))]);
        let d = judge(&passing, &only_here);
        assert_eq!((d.len(), d[0].path.as_str()), (1, ""));
    }
}
