//! One stored object: its JSON, and the few fields the server filters,
//! orders and collects by — packed, so that an object costs little more
//! than its JSON.
//!
//! The JSON is the object; everything else is an index over it: the uid as
//! 128 bits, and namespace, name, apiVersion, labels, selectable fields,
//! finalizers and owner references as strings packed into one allocation.
//! How a collection orders its objects is `order.rs`'s.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

use crate::registry::kind::KindStrategy;

/// A server-assigned UID: 128 bits (kept as bytes, so it packs without
/// padding), written as a version-4-shaped UUID (`8-4-4-4-12` lowercase hex
/// digits).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Uid([u8; 16]);

impl Uid {
    /// The uid with these 128 bits.
    #[must_use]
    pub fn from_u128(v: u128) -> Uid {
        Uid(v.to_be_bytes())
    }

    /// Its 128 bits.
    #[must_use]
    pub fn as_u128(&self) -> u128 {
        u128::from_be_bytes(self.0)
    }

    /// Parse the canonical lowercase form; `None` for anything else (such a
    /// string never names an object of this server).
    #[must_use]
    pub fn parse(s: &str) -> Option<Uid> {
        let b = s.as_bytes();
        if b.len() != 36 {
            return None;
        }
        let mut v: u128 = 0;
        for (i, &c) in b.iter().enumerate() {
            if matches!(i, 8 | 13 | 18 | 23) {
                if c != b'-' {
                    return None;
                }
                continue;
            }
            let d = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                _ => return None,
            };
            v = (v << 4) | u128::from(d);
        }
        Some(Uid::from_u128(v))
    }

    /// Whether `s` is this uid written out.
    #[must_use]
    pub fn is(&self, s: &str) -> bool {
        Uid::parse(s) == Some(*self)
    }
}

impl fmt::Display for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.as_u128();
        write!(
            f,
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            (v >> 96) as u32,
            (v >> 80) as u16,
            (v >> 64) as u16,
            (v >> 48) as u16,
            (v as u64) & 0xffff_ffff_ffff
        )
    }
}

impl fmt::Debug for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The uid an owner reference names: canonical ones are kept as 128 bits,
/// anything else as written (it names no object of this server).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefUid<'a> {
    /// A canonical uid.
    Canonical(Uid),
    /// Any other string.
    Other(&'a str),
}

impl RefUid<'_> {
    /// The uid, when canonical.
    #[must_use]
    pub fn uid(&self) -> Option<Uid> {
        match self {
            RefUid::Canonical(u) => Some(*u),
            RefUid::Other(_) => None,
        }
    }
}

impl fmt::Display for RefUid<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RefUid::Canonical(u) => fmt::Display::fmt(u, f),
            RefUid::Other(s) => f.write_str(s),
        }
    }
}

/// Strings in one allocation, each a LEB128 length then its UTF-8 bytes.
#[derive(Default, PartialEq, Eq)]
struct Packed(Box<[u8]>);

impl Packed {
    fn new<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> Packed {
        let mut out = Vec::new();
        for s in items {
            let mut n = s.len();
            loop {
                let byte = (n & 0x7f) as u8;
                n >>= 7;
                if n == 0 {
                    out.push(byte);
                    break;
                }
                out.push(byte | 0x80);
            }
            out.extend_from_slice(s);
        }
        Packed(out.into_boxed_slice())
    }

    /// Every item, as bytes.
    fn raw(&self) -> RawItems<'_> {
        RawItems(&self.0)
    }

    /// Every item as a string (an item that is not UTF-8 reads as "").
    fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        self.raw().map(text)
    }
}

struct RawItems<'a>(&'a [u8]);

impl<'a> Iterator for RawItems<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let (mut n, mut shift, mut i) = (0usize, 0u32, 0usize);
        loop {
            let byte = *self.0.get(i)?;
            n |= usize::from(byte & 0x7f) << shift;
            i += 1;
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        let item = self.0.get(i..i + n)?;
        self.0 = &self.0[i + n..];
        Some(item)
    }
}

fn text(b: &[u8]) -> &str {
    std::str::from_utf8(b).unwrap_or_default()
}

impl fmt::Debug for Packed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// One stored object: its JSON and the fields needed to filter it without parsing.
#[derive(Debug)]
pub struct StoredObject {
    /// The object as JSON.
    pub raw: Bytes,
    /// Its resourceVersion.
    pub rv: u64,
    /// `metadata.uid`.
    pub uid: Uid,
    /// Whether `metadata.deletionTimestamp` is set.
    pub terminating: bool,
    /// namespace, name, apiVersion, label pairs, field pairs, finalizers,
    /// owner references (five items each: flags, apiVersion, kind, name,
    /// uid — 16 bytes when the flags say canonical).
    strings: Packed,
    labels: u32,
    fields: u8,
    finalizers: u32,
    owners: u32,
}

/// The items of an owner reference in [`StoredObject`]'s packed strings.
const OWNER_ITEMS: usize = 5;

/// One `metadata.ownerReferences` entry, borrowed from its object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnerRef<'a> {
    /// Owner's apiVersion.
    pub api_version: &'a str,
    /// Owner's kind.
    pub kind: &'a str,
    /// Owner's name.
    pub name: &'a str,
    /// Owner's uid.
    pub uid: RefUid<'a>,
    /// `controller: true`.
    pub controller: bool,
    /// `blockOwnerDeletion: true`.
    pub block_owner_deletion: bool,
}

impl StoredObject {
    /// The object's JSON as served at `api_version` (a response body, a
    /// watch event's object): the stored bytes themselves unless the object
    /// is stored under another version of its group.
    #[must_use]
    pub fn bytes_at(&self, api_version: &str) -> Bytes {
        if self.api_version() == api_version {
            return self.raw.clone();
        }
        let mut v = self.value();
        v["apiVersion"] = api_version.into();
        let (json, rv_at) = serialize_without_rv(&v, self.raw.len());
        Bytes::from(splice_rv(json, rv_at, self.rv))
    }

    /// The object's JSON as `info`'s resource serves it: its stored bytes
    /// at `api_version` (the resource's
    /// [`api_version`](crate::registry::resources::ResourceInfo::api_version),
    /// computed once by a caller rendering many), defaulted first when its
    /// schema's defaults are newer than the object
    /// (`VersionSchema::defaults_on_read`).
    #[must_use]
    pub fn served_bytes(
        &self,
        info: &crate::registry::resources::ResourceInfo,
        api_version: &str,
    ) -> Bytes {
        if let Some(c) = &info.conversion {
            if c.by_webhook() {
                // Converted by the webhook once rendered: served as stored.
                return self.raw.clone();
            }
            if let Some(b) = c.builtin.filter(|_| self.api_version() != api_version) {
                let mut v = self.value();
                b.convert(&mut v, api_version);
                return Bytes::from(serde_json::to_vec(&v).unwrap_or_default());
            }
        }
        match &info.schema {
            Some(s) if s.defaults_on_read(self.rv) => {
                let mut v = self.value();
                s.default_only(&mut v);
                v["apiVersion"] = api_version.into();
                Bytes::from(serde_json::to_vec(&v).unwrap_or_default())
            }
            _ => self.bytes_at(api_version),
        }
    }

    /// Parse the stored JSON.
    #[must_use]
    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.raw).expect("stored objects are valid JSON")
    }

    /// `metadata.namespace` (empty for cluster-scoped kinds).
    #[must_use]
    pub fn namespace(&self) -> &str {
        self.strings.iter().next().unwrap_or_default()
    }

    /// `metadata.name`.
    #[must_use]
    pub fn name(&self) -> &str {
        self.strings.iter().nth(1).unwrap_or_default()
    }

    /// `apiVersion` as stored (a custom resource served in several versions
    /// is re-labelled on the way out).
    #[must_use]
    pub fn api_version(&self) -> &str {
        self.strings.iter().nth(2).unwrap_or_default()
    }

    /// Items `skip..skip + n` of the packed strings.
    fn section(&self, skip: usize, n: usize) -> impl Iterator<Item = &str> + '_ {
        self.strings.iter().skip(skip).take(n)
    }

    /// `metadata.labels`, in key order.
    pub fn labels(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        pairs(self.section(3, self.labels as usize * 2))
    }

    /// The value of label `key`.
    #[must_use]
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// `metadata.finalizers`.
    pub fn finalizers(&self) -> impl Iterator<Item = &str> + '_ {
        let skip = 3 + self.labels as usize * 2 + usize::from(self.fields) * 2;
        self.section(skip, self.finalizers as usize)
    }

    /// Whether `metadata.finalizers` holds `f`.
    #[must_use]
    pub fn has_finalizer(&self, f: &str) -> bool {
        self.finalizers().any(|x| x == f)
    }

    /// `metadata.ownerReferences`.
    pub fn owners(&self) -> impl Iterator<Item = OwnerRef<'_>> + '_ {
        let skip =
            3 + self.labels as usize * 2 + usize::from(self.fields) * 2 + self.finalizers as usize;
        let mut items = self.strings.raw().skip(skip);
        (0..self.owners).map(move |_| {
            let mut next = || items.next().unwrap_or_default();
            let (flags, api_version, kind, name, uid) = (next(), next(), next(), next(), next());
            OwnerRef {
                api_version: text(api_version),
                kind: text(kind),
                name: text(name),
                uid: match <[u8; 16]>::try_from(uid) {
                    Ok(bits) if flags.contains(&b'u') => RefUid::Canonical(Uid(bits)),
                    _ => RefUid::Other(text(uid)),
                },
                controller: flags.contains(&b'c'),
                block_owner_deletion: flags.contains(&b'b'),
            }
        })
    }

    /// Whether it has owner references.
    #[must_use]
    pub fn has_owners(&self) -> bool {
        self.owners > 0
    }

    /// The value of a field-selector path on this object.
    #[must_use]
    pub fn field(&self, path: &str) -> Option<&str> {
        match path {
            "metadata.name" => Some(self.name()),
            "metadata.namespace" => Some(self.namespace()),
            _ => {
                let skip = 3 + self.labels as usize * 2;
                pairs(self.section(skip, usize::from(self.fields) * 2))
                    .find(|(k, _)| *k == path)
                    .map(|(_, v)| v)
            }
        }
    }

    /// Index and serialize `v` (a complete object) at resourceVersion `rv`.
    #[cfg(test)]
    pub(crate) fn from_value(v: &Value, rv: u64) -> Arc<StoredObject> {
        let s = |k: &str| v[k].as_str().unwrap_or_default();
        let kind = crate::registry::kind::by_kind(s("apiVersion"), s("kind"));
        Prepared::new(v, 0, &*kind).finish(rv)
    }

    /// (namespace, name) as bytes: the order of a collection.
    pub(super) fn ns_name(&self) -> (&[u8], &[u8]) {
        let mut it = self.strings.raw();
        (it.next().unwrap_or_default(), it.next().unwrap_or_default())
    }
}

/// An object indexed and serialized ahead of its resourceVersion, so that
/// the work happens outside the store's lock; [`Prepared::finish`] splices
/// the resourceVersion in.
pub(crate) struct Prepared {
    json: Vec<u8>,
    rv_at: Option<usize>,
    object: StoredObject,
}

impl Prepared {
    /// Index and serialize `v` (a complete object of `kind`), but for its
    /// resourceVersion; `size_hint` is the JSON size expected.
    pub(crate) fn new(v: &Value, size_hint: usize, kind: &dyn KindStrategy) -> Prepared {
        let meta = &v["metadata"];
        fn s(x: &Value) -> &str {
            x.as_str().unwrap_or_default()
        }
        fn b(x: &Value) -> &[u8] {
            s(x).as_bytes()
        }
        let mut items: Vec<&[u8]> =
            vec![b(&meta["namespace"]), b(&meta["name"]), b(&v["apiVersion"])];
        let mut labels = 0u32;
        if let Some(m) = meta["labels"].as_object() {
            for (k, val) in m {
                items.extend([k.as_bytes(), b(val)]);
                labels += 1;
            }
        }
        let mut fields = 0u8;
        for path in kind.selectable_fields() {
            let value: &[u8] = match kind.field_value(v, path) {
                Value::Bool(true) => b"true",
                Value::Bool(false) => b"false",
                other => b(other),
            };
            items.extend([path.as_bytes(), value]);
            fields += 1;
        }
        let mut finalizers = 0u32;
        for f in meta["finalizers"].as_array().into_iter().flatten() {
            if let Some(f) = f.as_str() {
                items.push(f.as_bytes());
                finalizers += 1;
            }
        }
        let refs = meta["ownerReferences"]
            .as_array()
            .map_or(&[][..], Vec::as_slice);
        let flags: Vec<(Vec<u8>, Option<Uid>)> = refs
            .iter()
            .map(|r| {
                let uid = Uid::parse(s(&r["uid"]));
                let set = [
                    (r["controller"] == true, b'c'),
                    (r["blockOwnerDeletion"] == true, b'b'),
                    (uid.is_some(), b'u'),
                ];
                (
                    set.iter().filter(|(on, _)| *on).map(|(_, f)| *f).collect(),
                    uid,
                )
            })
            .collect();
        for (r, (f, uid)) in refs.iter().zip(&flags) {
            let uid = match uid {
                Some(u) => &u.0[..],
                None => b(&r["uid"]),
            };
            items.extend([
                &f[..],
                b(&r["apiVersion"]),
                b(&r["kind"]),
                b(&r["name"]),
                uid,
            ]);
        }
        let owners = refs.len() as u32;
        debug_assert_eq!(
            items.len(),
            3 + 2 * (labels as usize + usize::from(fields))
                + finalizers as usize
                + OWNER_ITEMS * owners as usize
        );
        let (json, rv_at) = serialize_without_rv(v, size_hint);
        Prepared {
            json,
            rv_at,
            object: StoredObject {
                raw: Bytes::new(),
                rv: 0,
                uid: Uid::parse(s(&meta["uid"])).unwrap_or_default(),
                terminating: !meta["deletionTimestamp"].is_null(),
                strings: Packed::new(items),
                labels,
                fields,
                finalizers,
                owners,
            },
        }
    }

    /// The stored object at resourceVersion `rv`.
    pub(crate) fn finish(self, rv: u64) -> Arc<StoredObject> {
        let Prepared {
            json,
            rv_at,
            mut object,
        } = self;
        object.raw = Bytes::from(splice_rv(json, rv_at, rv));
        object.rv = rv;
        Arc::new(object)
    }
}

/// `json` with `rv`'s digits written at `rv_at` (where
/// [`serialize_without_rv`] left them out).
fn splice_rv(json: Vec<u8>, rv_at: Option<usize>, rv: u64) -> Vec<u8> {
    let Some(at) = rv_at else { return json };
    let digits = rv.to_string();
    // One exact-size allocation: a stored copy lives as long as the object.
    let mut raw = Vec::with_capacity(json.len() + digits.len());
    raw.extend_from_slice(&json[..at]);
    raw.extend_from_slice(digits.as_bytes());
    raw.extend_from_slice(&json[at..]);
    raw
}

/// The keys an object's JSON starts with, in Kubernetes' order (Go writes
/// TypeMeta's `kind`, `apiVersion`, then ObjectMeta); the rest follow in
/// key order.
const LEADING: [&str; 3] = ["kind", "apiVersion", "metadata"];

/// An object's top-level entries in the order its JSON is written.
fn in_kubernetes_order(
    top: &serde_json::Map<String, Value>,
) -> impl Iterator<Item = (&String, &Value)> {
    let leading = LEADING.iter().filter_map(|k| top.get_key_value(*k));
    leading.chain(top.iter().filter(|(k, _)| !LEADING.contains(&k.as_str())))
}

/// `v` as compact JSON (what `serde_json::to_vec` writes, but for the
/// top-level order: `kind`, `apiVersion`, `metadata` first), with
/// `metadata.resourceVersion` written as `""`; returns where its digits go.
fn serialize_without_rv(v: &Value, size_hint: usize) -> (Vec<u8>, Option<usize>) {
    fn put(out: &mut Vec<u8>, v: &impl serde::Serialize) {
        serde_json::to_writer(out, v).expect("JSON values serialize");
    }
    let mut out = Vec::with_capacity(size_hint.max(256));
    let Some(top) = v.as_object() else {
        put(&mut out, v);
        return (out, None);
    };
    let mut at = None;
    out.push(b'{');
    for (i, (k, val)) in in_kubernetes_order(top).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        put(&mut out, k);
        out.push(b':');
        match (k.as_str(), val.as_object()) {
            ("metadata", Some(meta)) if meta.contains_key("resourceVersion") => {
                out.push(b'{');
                for (j, (mk, mv)) in meta.iter().enumerate() {
                    if j > 0 {
                        out.push(b',');
                    }
                    put(&mut out, mk);
                    out.push(b':');
                    if mk == "resourceVersion" {
                        out.push(b'"');
                        at = Some(out.len());
                        out.push(b'"');
                    } else {
                        put(&mut out, mv);
                    }
                }
                out.push(b'}');
            }
            _ => put(&mut out, val),
        }
    }
    out.push(b'}');
    (out, at)
}

fn pairs<'a>(mut it: impl Iterator<Item = &'a str>) -> impl Iterator<Item = (&'a str, &'a str)> {
    std::iter::from_fn(move || Some((it.next()?, it.next()?)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn uids_round_trip_and_only_the_canonical_form_parses() {
        let u = Uid::from_u128(0x0123_4567_89ab_4def_8123_4567_89ab_cdef);
        let s = u.to_string();
        assert_eq!(s, "01234567-89ab-4def-8123-456789abcdef");
        assert_eq!(Uid::parse(&s), Some(u));
        assert!(u.is(&s));
        for bad in [
            "01234567-89AB-4def-8123-456789abcdef",
            "0123456789ab-4def-8123-456789abcdef",
            "01234567-89ab-4def-8123-456789abcde",
            "01234567_89ab-4def-8123-456789abcdef",
            "",
        ] {
            assert_eq!(Uid::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn every_indexed_field_reads_back() {
        let v = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "01234567-89ab-4def-8123-456789abcdef",
                "labels": {"b": "2", "a": "1"}, "finalizers": ["x", "y"],
                "deletionTimestamp": "2020-01-01T00:00:00Z",
                "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u1", "controller": true},
                    {"apiVersion": "v1", "kind": "Node", "name": "n\u{0}é", "uid": "00000000-0000-4000-8000-00000000002a", "blockOwnerDeletion": true}]},
            "spec": {"nodeName": "node-1"}, "status": {"phase": "Running"}});
        let o = StoredObject::from_value(&v, 7);
        assert_eq!(
            (o.namespace(), o.name(), o.api_version()),
            ("ns", "p", "v1")
        );
        assert_eq!(o.rv, 7);
        assert!(o.uid.is("01234567-89ab-4def-8123-456789abcdef"));
        assert_eq!(o.labels().collect::<Vec<_>>(), [("a", "1"), ("b", "2")]);
        assert_eq!(o.label("b"), Some("2"));
        assert_eq!(o.label("c"), None);
        assert_eq!(o.field("spec.nodeName"), Some("node-1"));
        assert_eq!(o.field("status.phase"), Some("Running"));
        assert_eq!(o.field("metadata.name"), Some("p"));
        assert_eq!(o.finalizers().collect::<Vec<_>>(), ["x", "y"]);
        assert!(o.has_finalizer("y") && !o.has_finalizer("z") && o.terminating);
        let owners: Vec<_> = o.owners().collect();
        assert_eq!(owners.len(), 2);
        assert_eq!(
            (
                owners[0].kind,
                owners[0].name,
                owners[0].uid,
                owners[0].controller,
                owners[0].block_owner_deletion
            ),
            ("ReplicaSet", "rs", RefUid::Other("u1"), true, false)
        );
        assert_eq!(
            (
                owners[1].name,
                owners[1].controller,
                owners[1].block_owner_deletion
            ),
            ("n\u{0}é", false, true)
        );
        assert_eq!(o.value(), v);
    }

    #[test]
    fn the_resource_version_is_spliced_into_the_json_serde_would_write() {
        let mut v = json!({"apiVersion": "example.com/v1", "kind": "Thing",
            "aaa": {"resourceVersion": "x", "metadata": {"resourceVersion": ""}},
            "metadata": {"name": "t\"\u{1}é", "namespace": "ns", "resourceVersion": "5",
                "annotations": {"resourceVersion": "\"resourceVersion\":\"\""}},
            "spec": {"list": [1, 2.5, null, true], "resourceVersion": ""}});
        let o = StoredObject::from_value(&v, 1234);
        v["metadata"]["resourceVersion"] = "1234".into();
        // serde's bytes, with kind, apiVersion and metadata moved first.
        let part = |k: &str| format!("{:?}:{}", k, v[k]);
        let want = format!(
            "{{{},{},{},{},{}}}",
            part("kind"),
            part("apiVersion"),
            part("metadata"),
            part("aaa"),
            part("spec")
        );
        assert_eq!(std::str::from_utf8(&o.raw).unwrap(), want);
        assert_eq!(o.value(), v);
        // Without metadata.resourceVersion (or metadata) the JSON is as given.
        for v in [
            json!({"metadata": {"name": "a"}}),
            json!({"kind": "X"}),
            json!([1]),
        ] {
            let o = StoredObject::from_value(&v, 9);
            assert_eq!(&o.raw[..], &serde_json::to_vec(&v).unwrap()[..]);
        }
        let o = StoredObject::from_value(&json!({"apiVersion": "v1", "data": {}, "kind": "K"}), 9);
        assert_eq!(&o.raw[..], br#"{"kind":"K","apiVersion":"v1","data":{}}"#);
        // Served under another version of its group: the same order.
        let o = StoredObject::from_value(
            &json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"resourceVersion": "1"}, "a": 1}),
            12,
        );
        assert_eq!(
            &o.bytes_at("g/v2")[..],
            br#"{"kind":"K","apiVersion":"g/v2","metadata":{"resourceVersion":"12"},"a":1}"#
        );
    }

    #[test]
    fn a_stored_object_stays_small() {
        // JSON + this + the packed strings is the whole cost of an object;
        // 88 bytes keeps it (with Arc's counts) in a 112-byte malloc chunk.
        assert!(std::mem::size_of::<StoredObject>() <= 88);
    }

    #[test]
    fn long_strings_pack_with_multi_byte_lengths() {
        let long = "x".repeat(300);
        let p = Packed::new(["", long.as_str(), "é"].map(str::as_bytes));
        assert_eq!(p.iter().collect::<Vec<_>>(), ["", long.as_str(), "é"]);
    }
}
