//! Revisions, named as Kubernetes' controller history names them: the revision
//! patch (only `spec.leaderWorkerTemplate`), its hash, the revision name
//! `<lws>-<hash>`, the next `.revision` number and which revisions to keep.
//!
//! The hash: FNV-32a of the patch serialised as JSON by serde (field order
//! fixed by the Rust types, maps sorted), with the collision count folded in
//! as 4 little-endian bytes, written with `rand.SafeEncodeString` (digits
//! mapped to consonants and digits, so a hash never spells a word) as
//! Kubernetes writes it. Kubernetes' own `HashControllerRevision` differs in
//! the details: FNV-32 (not 32a) over the raw data, and the collision count
//! appended as a decimal string; the naming (`<prefix>-<hash>`, the prefix
//! cut to 223 characters) is the same.

use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::ResourceExt;
use serde_json::{Value, json};

use super::model::{HASH_LABEL, LeaderWorkerTemplate};

/// The revision patch: what a revision stores and what its hash covers.
#[must_use]
pub fn patch(template: &LeaderWorkerTemplate) -> Value {
    json!({"spec": {"leaderWorkerTemplate": template}})
}

/// FNV-32a.
#[must_use]
pub fn fnv32a(chunks: &[&[u8]]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in chunks.iter().flat_map(|c| c.iter()) {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// The characters `rand.SafeEncodeString` maps onto (no vowels, no
/// look-alikes).
const SAFE: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Kubernetes' `rand.SafeEncodeString`: each byte `b` becomes
/// `SAFE[b % 27]`.
#[must_use]
pub fn safe_encode(s: &str) -> String {
    s.bytes()
        .map(|b| char::from(SAFE[usize::from(b) % SAFE.len()]))
        .collect()
}

/// The hash of `template` with `collision_count` folded in.
#[must_use]
pub fn hash(template: &LeaderWorkerTemplate, collision_count: i32) -> String {
    let data = serde_json::to_vec(&patch(template)).expect("a template serialises");
    let probe = (collision_count as u32).to_le_bytes();
    safe_encode(&fnv32a(&[&data, &probe]).to_string())
}

/// The revision name: `<lws>-<hash>`, the prefix cut to 223 characters as
/// Kubernetes cuts it (the name stays a valid object name).
#[must_use]
pub fn name(lws: &str, hash: &str) -> String {
    let prefix: String = lws.chars().take(223).collect();
    format!("{prefix}-{hash}")
}

/// The `.revision` a new revision gets: one above the highest.
#[must_use]
pub fn next_number(revisions: &[ControllerRevision]) -> i64 {
    revisions
        .iter()
        .filter_map(|r| r.revision)
        .max()
        .unwrap_or(0)
        + 1
}

/// The revisions history truncation deletes: every one whose hash is
/// neither the current nor the update revision's.
#[must_use]
pub fn to_truncate<'a>(
    revisions: &'a [ControllerRevision],
    current: &str,
    update: &str,
) -> Vec<&'a ControllerRevision> {
    revisions
        .iter()
        .filter(|r| {
            let h = r.labels().get(HASH_LABEL).map(String::as_str);
            h != Some(current) && h != Some(update)
        })
        .collect()
}

/// The template a revision stores, if its data holds one.
#[must_use]
pub fn stored_template(r: &ControllerRevision) -> Option<LeaderWorkerTemplate> {
    serde_json::from_value(r.data.0["spec"]["leaderWorkerTemplate"].clone()).ok()
}

/// Whether a revision's hash label is the hash of the template it stores,
/// under some collision count up to `max_collisions`.
#[must_use]
pub fn label_matches_data(r: &ControllerRevision, max_collisions: i32) -> bool {
    let (Some(label), Some(t)) = (r.labels().get(HASH_LABEL), stored_template(r)) else {
        return false;
    };
    (0..=max_collisions.max(0)).any(|c| hash(&t, c) == *label)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::runtime::RawExtension;

    fn template(image: &str) -> LeaderWorkerTemplate {
        LeaderWorkerTemplate {
            size: 2,
            leader_template: None,
            worker_template: json!({"spec": {"containers": [{"name": "w", "image": image}]}}),
        }
    }

    fn revision(name: &str, hash: &str, n: i64, data: Value) -> ControllerRevision {
        let mut r = ControllerRevision {
            revision: Some(n),
            data: RawExtension(data),
            ..Default::default()
        };
        r.metadata.name = Some(name.into());
        r.metadata.labels = Some([(HASH_LABEL.to_string(), hash.to_string())].into());
        r
    }

    #[test]
    fn fnv32a_matches_the_reference_vectors() {
        assert_eq!(fnv32a(&[b""]), 0x811c_9dc5);
        assert_eq!(fnv32a(&[b"a"]), 0xe40c_292c);
        assert_eq!(fnv32a(&[b"foobar"]), 0xbf9c_f968);
        assert_eq!(fnv32a(&[b"foo", b"bar"]), fnv32a(&[b"foobar"]));
    }

    #[test]
    fn hashes_are_safe_encoded_and_stable() {
        assert_eq!(safe_encode("0123456789"), "456789bcdf");
        let h = hash(&template("v1"), 0);
        assert!(h.bytes().all(|b| SAFE.contains(&b)), "{h}");
        assert_eq!(
            h,
            hash(&template("v1"), 0),
            "the same template, the same hash"
        );
        assert_ne!(
            h,
            hash(&template("v2"), 0),
            "another template, another hash"
        );
        assert_ne!(
            h,
            hash(&template("v1"), 1),
            "a collision count moves the hash"
        );
        // Only the template counts, in the patch's shape.
        assert_eq!(
            patch(&template("v1"))["spec"]["leaderWorkerTemplate"]["size"],
            2
        );
    }

    #[test]
    fn names_and_numbers() {
        assert_eq!(name("test", "abc"), "test-abc");
        assert_eq!(name(&"x".repeat(300), "h").len(), 223 + 2);
        assert_eq!(next_number(&[]), 1);
        let rs = [
            revision("a", "h1", 1, json!({})),
            revision("b", "h2", 3, json!({})),
        ];
        assert_eq!(next_number(&rs), 4);
    }

    #[test]
    fn truncation_keeps_only_the_current_and_update_revisions() {
        let rs = [
            revision("a", "h1", 1, json!({})),
            revision("b", "h2", 2, json!({})),
            revision("c", "h3", 3, json!({})),
        ];
        let gone: Vec<_> = to_truncate(&rs, "h2", "h3")
            .iter()
            .map(|r| r.name_any())
            .collect();
        assert_eq!(gone, ["a"]);
        let gone: Vec<_> = to_truncate(&rs, "h3", "h3")
            .iter()
            .map(|r| r.name_any())
            .collect();
        assert_eq!(gone, ["a", "b"]);
    }

    #[test]
    fn a_label_taken_from_another_template_does_not_match_the_data() {
        let own = template("v2");
        let good = revision("t-x", &hash(&own, 0), 1, patch(&own));
        assert!(label_matches_data(&good, 0));
        let after_collision = revision("t-y", &hash(&own, 1), 2, patch(&own));
        assert!(!label_matches_data(&after_collision, 0));
        assert!(label_matches_data(&after_collision, 1));
        // The seed's revision: L2's template under L1's hash.
        let foreign = revision("t-z", &hash(&template("v1"), 0), 1, patch(&own));
        assert!(!label_matches_data(&foreign, 3));
    }
}
