//! The RBAC authorizer's answers, remembered per (user, groups, verb, API
//! group, resource, subresource, namespace, name) for one snapshot of the
//! RBAC objects: a role with many rules (`edit` has dozens) is walked once
//! per question, not once per request. A new snapshot (any RBAC write)
//! starts with none. Lookups hash the question as asked and compare it
//! field by field with what was stored: no allocation on a hit, and no
//! answer given for another question that hashes alike.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::RwLock;

use super::rbac::{Attributes, UserInfo};

/// Questions remembered before the memory is cleared.
const MAX: usize = 16_384;

/// One question, owned.
#[derive(Debug)]
struct Question {
    user: String,
    groups: Vec<String>,
    attrs: Attributes,
}

impl Question {
    fn is(&self, user: &UserInfo, attrs: &Attributes) -> bool {
        self.user == user.name && self.groups == user.groups && self.attrs == *attrs
    }
}

/// Answers to questions, by the hash of the question.
#[derive(Debug, Default)]
pub(super) struct Decisions {
    answers: RwLock<HashMap<u64, Vec<(Question, bool)>>>,
}

impl Decisions {
    /// The answer given before to `user` asking `attrs`, if any.
    pub(super) fn get(&self, user: &UserInfo, attrs: &Attributes) -> Option<bool> {
        let answers = self.answers.read().unwrap_or_else(|e| e.into_inner());
        answers
            .get(&hash(user, attrs))?
            .iter()
            .find(|(q, _)| q.is(user, attrs))
            .map(|(_, allowed)| *allowed)
    }

    /// Remember `allowed` as the answer to `user` asking `attrs`.
    pub(super) fn put(&self, user: &UserInfo, attrs: &Attributes, allowed: bool) {
        let mut answers = self.answers.write().unwrap_or_else(|e| e.into_inner());
        if answers.len() >= MAX {
            answers.clear();
        }
        let question = Question {
            user: user.name.clone(),
            groups: user.groups.clone(),
            attrs: attrs.clone(),
        };
        answers
            .entry(hash(user, attrs))
            .or_default()
            .push((question, allowed));
    }
}

/// The hash of a question (what RBAC reads of it: extras and uids are not).
fn hash(user: &UserInfo, attrs: &Attributes) -> u64 {
    let mut h = DefaultHasher::new();
    user.name.hash(&mut h);
    user.groups.hash(&mut h);
    attrs.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_found_for_the_same_question_only() {
        let d = Decisions::default();
        let alice = UserInfo {
            name: "alice".into(),
            groups: vec!["dev".into()],
            ..UserInfo::default()
        };
        let get = Attributes {
            verb: "get".into(),
            resource_request: true,
            resource: "pods".into(),
            namespace: "a".into(),
            ..Attributes::default()
        };
        assert_eq!(d.get(&alice, &get), None);
        d.put(&alice, &get, true);
        assert_eq!(d.get(&alice, &get), Some(true));
        let elsewhere = Attributes {
            namespace: "b".into(),
            ..get.clone()
        };
        assert_eq!(d.get(&alice, &elsewhere), None);
        let other_groups = UserInfo {
            groups: vec!["ops".into()],
            ..alice.clone()
        };
        assert_eq!(d.get(&other_groups, &get), None);
    }
}
