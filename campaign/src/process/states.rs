//! The oracle's second look: every state each object passed through, not
//! only where it ended. A race can heal before the run settles — the
//! naive LWS controller adopts the old StatefulSet, the garbage collector
//! deletes it, the controller makes a new one — and leave the end state
//! exactly the unperturbed one; the states in between show it.
//!
//! States are compared without `status` (what a controller decided, not
//! what it observed, which changes with timing alone), normalized as end
//! states are. Unperturbed runs teach which states occur and which fields
//! vary anyway; a perturbed run's state that matches none of them beyond
//! that noise is a difference "in passing".

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::oracle::{Difference, flatten, general};

type Leaves = BTreeMap<String, Value>;

/// Every distinct state each object passed through during a run, by key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct States {
    by_key: BTreeMap<String, Vec<Leaves>>,
}

impl States {
    /// Note `normalized`, a state of the object `key`.
    pub(crate) fn saw(&mut self, key: &str, normalized: &Value) {
        let mut v = normalized.clone();
        if let Some(o) = v.as_object_mut() {
            o.remove("status");
        }
        let mut leaves = Leaves::new();
        flatten(&v, String::new(), &mut leaves);
        let states = self.by_key.entry(key.to_string()).or_default();
        if !states.contains(&leaves) {
            states.push(leaves);
        }
    }

    /// How many distinct states were seen, over all objects.
    #[must_use]
    pub fn len(&self) -> usize {
        self.by_key.values().map(Vec::len).sum()
    }

    /// Whether none was.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}

/// The paths two states differ at.
fn differing(a: &Leaves, b: &Leaves) -> Vec<String> {
    let paths: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    paths
        .into_iter()
        .filter(|p| a.get(*p) != b.get(*p))
        .cloned()
        .collect()
}

/// The allowed state nearest `s` (fewest differing paths) and those paths.
fn nearest<'a>(s: &Leaves, allowed: &'a [Leaves]) -> Option<(&'a Leaves, Vec<String>)> {
    allowed
        .iter()
        .map(|a| (a, differing(a, s)))
        .min_by_key(|(_, d)| d.len())
}

/// What unperturbed runs' states teach.
#[derive(Debug, Clone, Default)]
pub(crate) struct Passing {
    allowed: BTreeMap<String, Vec<Leaves>>,
    noise: BTreeSet<(String, String)>,
    varying: BTreeSet<String>,
}

impl Passing {
    pub(crate) fn learn(first: &States) -> Passing {
        Passing {
            allowed: first.by_key.clone(),
            ..Passing::default()
        }
    }

    /// Count an unperturbed run's states as allowed, and how they differ
    /// from the nearest already allowed as noise.
    pub(crate) fn absorb(&mut self, run: &States) {
        for key in self.allowed.keys() {
            if !run.by_key.contains_key(key) {
                self.varying.insert(key.clone());
            }
        }
        for (key, states) in &run.by_key {
            let Some(allowed) = self.allowed.get_mut(key) else {
                self.varying.insert(key.clone());
                continue;
            };
            for s in states {
                if let Some((_, paths)) = nearest(s, allowed) {
                    for p in paths {
                        self.noise.insert((key.clone(), general(&p)));
                    }
                }
                if !allowed.contains(s) {
                    allowed.push(s.clone());
                }
            }
        }
    }

    /// `run`'s states that no unperturbed run passed through, beyond the
    /// noise (this one's and `end_noise`, the end states'); objects in
    /// `skip` (reported already) are left out.
    pub(crate) fn judge(
        &self,
        run: &States,
        end_noise: &BTreeSet<(String, String)>,
        skip: &BTreeSet<String>,
    ) -> Vec<Difference> {
        let mut out = Vec::new();
        for (key, states) in &run.by_key {
            if self.varying.contains(key) || skip.contains(key) {
                continue;
            }
            let Some(allowed) = self.allowed.get(key) else {
                out.push(Difference {
                    object: key.clone(),
                    path: String::new(),
                    reference: None,
                    got: serde_json::to_value(&states[0]).ok(),
                    passing: true,
                });
                continue;
            };
            for s in states {
                let Some((near, paths)) = nearest(s, allowed) else {
                    continue;
                };
                let noisy = |p: &String| {
                    let g = (key.clone(), general(p));
                    self.noise.contains(&g) || end_noise.contains(&g)
                };
                for p in paths.iter().filter(|p| !noisy(p)) {
                    out.push(Difference {
                        object: key.clone(),
                        path: p.clone(),
                        reference: near.get(p).cloned(),
                        got: s.get(p).cloned(),
                        passing: true,
                    });
                }
            }
        }
        // One line per (object, field): a field can be off in several states.
        let mut seen = BTreeSet::new();
        out.retain(|d| seen.insert((d.object.clone(), d.path.clone())));
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

    #[test]
    fn a_state_never_seen_unperturbed_is_found_even_when_the_end_is_the_same() {
        let owner = |n: u32| json!({"metadata": {"ownerReferences": [{"uid": format!("uid of lws#{n}")}]}, "spec": {"image": "b"}});
        let reference = states(&[("sts", owner(2))]);
        // The naive run: the old set (owner #1) got the new template, then
        // went, and a new one ended as the reference did.
        let here = states(&[("sts", owner(1)), ("sts", owner(2))]);
        let passing = Passing::learn(&reference);
        let d = passing.judge(&here, &BTreeSet::new(), &BTreeSet::new());
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].path, "metadata.ownerReferences[0].uid");
        assert_eq!(d[0].got, Some(json!("uid of lws#1")));
        assert!(d[0].to_string().ends_with("(in passing)"), "{}", d[0]);
    }

    #[test]
    fn status_and_learned_noise_are_not_differences() {
        let a = states(&[(
            "cm",
            json!({"data": {"n": "1", "at": "x"}, "status": {"r": 1}}),
        )]);
        let b = states(&[(
            "cm",
            json!({"data": {"n": "1", "at": "y"}, "status": {"r": 2}}),
        )]);
        let mut passing = Passing::learn(&a);
        passing.absorb(&b);
        let c = states(&[(
            "cm",
            json!({"data": {"n": "1", "at": "z"}, "status": {"r": 9}}),
        )]);
        assert!(
            passing
                .judge(&c, &BTreeSet::new(), &BTreeSet::new())
                .is_empty()
        );
        let d = states(&[("cm", json!({"data": {"n": "2", "at": "z"}}))]);
        assert_eq!(
            passing.judge(&d, &BTreeSet::new(), &BTreeSet::new()).len(),
            1
        );
        let only_here = states(&[("other", json!({"data": {}}))]);
        let d = passing.judge(&only_here, &BTreeSet::new(), &BTreeSet::new());
        assert_eq!((d.len(), d[0].path.as_str()), (1, ""));
    }
}
