//! How a collection orders and finds its objects: by (namespace, name),
//! with a prefix of that key kept inline next to each object's pointer, so
//! most comparisons of a walk never follow the pointer.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::sync::Arc;

use super::object::StoredObject;

/// The size of the key prefix a collection's index holds inline, next to
/// the pointer to the object: most comparisons of a walk end within it
/// without following the pointer (at 100k objects, each such pointer is a
/// cache miss), and a key that fits whole is never followed at all.
const INLINE: usize = 24;

/// `esc(namespace) 0x00 name` (`esc` maps byte 0 to `1 1` and byte 1 to
/// `1 2`, so the encoded namespace holds no 0 byte and keeps its order):
/// its first 23 bytes, zero-padded, then its length if it fits (<= 23),
/// else 255. Comparing prefixes is a coarsening of comparing (namespace,
/// name) tuples — where two prefixes differ, the tuples differ the same
/// way — and equal prefixes of keys that fit mean equal keys. This holds
/// for any bytes, validated names or not (a test checks it exhaustively
/// over awkward ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Prefix([u8; INLINE]);

impl Prefix {
    const LONG: u8 = u8::MAX;

    fn of(ns: &[u8], name: &[u8]) -> Self {
        let mut p = [0u8; INLINE];
        let mut at = 0;
        let mut put = |b: u8| {
            if let Some(slot) = p[..INLINE - 1].get_mut(at) {
                *slot = b;
            }
            at += 1;
        };
        for &b in ns.iter().take(INLINE) {
            match b {
                0 | 1 => {
                    put(1);
                    put(b + 1);
                }
                b => put(b),
            }
        }
        put(0);
        name.iter().take(INLINE).for_each(|&b| put(b));
        p[INLINE - 1] = u8::try_from(at)
            .ok()
            .filter(|&n| usize::from(n) < INLINE)
            .unwrap_or(Self::LONG);
        Prefix(p)
    }

    /// Whether the whole key is in the prefix.
    fn whole(&self) -> bool {
        self.0[INLINE - 1] != Self::LONG
    }
}

/// Something with a (namespace, name): a collection's order and lookup key.
pub(crate) trait Named {
    /// (namespace, name) as bytes.
    fn key(&self) -> (&[u8], &[u8]);
    /// The key's inline prefix (see [`Prefix`]).
    fn prefix(&self) -> Prefix;
}

/// A (namespace, name) to look up or start a range at, its prefix computed once.
pub(crate) struct Id<'a> {
    ns: &'a str,
    name: &'a str,
    prefix: Prefix,
}

impl<'a> Id<'a> {
    pub(crate) fn new(ns: &'a str, name: &'a str) -> Self {
        Id {
            ns,
            name,
            prefix: Prefix::of(ns.as_bytes(), name.as_bytes()),
        }
    }
}

impl Named for Id<'_> {
    fn key(&self) -> (&[u8], &[u8]) {
        (self.ns.as_bytes(), self.name.as_bytes())
    }
    fn prefix(&self) -> Prefix {
        self.prefix
    }
}

impl PartialEq for dyn Named + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for dyn Named + '_ {}

impl PartialOrd for dyn Named + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for dyn Named + '_ {
    fn cmp(&self, other: &Self) -> Ordering {
        let (a, b) = (self.prefix(), other.prefix());
        match a.cmp(&b) {
            Ordering::Equal if a.whole() => Ordering::Equal,
            Ordering::Equal => self.key().cmp(&other.key()),
            unequal => unequal,
        }
    }
}

/// An object in its collection, ordered by (namespace, name) read from the
/// object itself (so the key is not stored twice), with the key's first
/// bytes inline.
#[derive(Debug, Clone)]
pub(crate) struct Slot(pub(crate) Arc<StoredObject>, Prefix);

impl Slot {
    pub(crate) fn new(obj: Arc<StoredObject>) -> Self {
        let (ns, name) = obj.ns_name();
        let prefix = Prefix::of(ns, name);
        Slot(obj, prefix)
    }
}

impl Named for Slot {
    fn key(&self) -> (&[u8], &[u8]) {
        self.0.ns_name()
    }
    fn prefix(&self) -> Prefix {
        self.1
    }
}

impl<'a> Borrow<dyn Named + 'a> for Slot {
    fn borrow(&self) -> &(dyn Named + 'a) {
        self
    }
}

impl PartialEq for Slot {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Slot {}

impl PartialOrd for Slot {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Slot {
    fn cmp(&self, other: &Self) -> Ordering {
        (self as &dyn Named).cmp(other as &dyn Named)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::json;

    use super::*;

    #[test]
    fn slots_order_and_find_by_namespace_then_name() {
        let obj = |ns: &str, name: &str| {
            Slot::new(StoredObject::from_value(
                &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}}),
                1,
            ))
        };
        let set: BTreeSet<Slot> = [obj("b", "a"), obj("a", "z"), obj("a", "b")]
            .into_iter()
            .collect();
        let order: Vec<_> = set.iter().map(|s| (s.0.namespace(), s.0.name())).collect();
        assert_eq!(order, [("a", "b"), ("a", "z"), ("b", "a")]);
        assert!(set.contains(&Id::new("a", "z") as &dyn Named));
        assert!(!set.contains(&Id::new("a", "y") as &dyn Named));
    }

    /// Prefixes order as (namespace, name) tuples do wherever they differ,
    /// for any bytes: shared and long prefixes, namespaces that are
    /// prefixes of each other, bytes 0 and 1, the empty namespace.
    #[test]
    fn prefixes_order_as_namespace_name_tuples() {
        let strs = [
            "",
            "a",
            "a\u{0}",
            "a\u{1}",
            "a\u{2}",
            "ab",
            "b",
            "\u{0}",
            "\u{1}",
            "\u{1}\u{0}",
            "default",
            "default-x",
            "cm-000123",
            "cm-000124",
            "kube-system",
            "a-very-long-name-of-more-than-twenty-four-bytes-1",
            "name-of-exactly-21-by",
            "name-of-exactly-22-byt",
            "name-of-exactly-22-byt\u{0}",
            "x\u{0}",
            "a-very-long-name-of-more-than-twenty-four-bytes-2",
        ];
        for ns1 in strs {
            for n1 in strs {
                for ns2 in strs {
                    for n2 in strs {
                        let (a, b) = (Id::new(ns1, n1), Id::new(ns2, n2));
                        let by_tuple =
                            (ns1.as_bytes(), n1.as_bytes()).cmp(&(ns2.as_bytes(), n2.as_bytes()));
                        let by_prefix = a.prefix().cmp(&b.prefix());
                        assert!(
                            by_prefix == Ordering::Equal || by_prefix == by_tuple,
                            "({ns1:?}, {n1:?}) vs ({ns2:?}, {n2:?}): prefix {by_prefix:?}, tuple {by_tuple:?}"
                        );
                        assert_eq!((&a as &dyn Named).cmp(&b as &dyn Named), by_tuple);
                    }
                }
            }
        }
    }
}
