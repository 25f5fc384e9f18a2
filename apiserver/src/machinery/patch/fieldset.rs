//! The field sets of `managedFields` bookkeeping, which server-side apply
//! (`apply.rs`) and `Update` operations (`managed_fields.rs`) share
//! (approximate, see docs/apiserver.md).
//!
//! Field sets are kept in the real `fieldsV1` shape: `f:<field>` for map
//! fields, `k:{"<mergeKey>":<value>}` for items of keyed lists (with a `.`
//! child marking the item itself), `v:<json>` for members of primitive set
//! lists (`finalizers`); every other list is a leaf. List strategies come
//! from the same merge-key table as the strategic merge patch, for every kind.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::strategic::{self, ListStrategy, Mode, Path};

/// Metadata fields the server owns: never part of a field set, and stripped
/// from an applied configuration before merging.
#[rustfmt::skip]
pub(super) const SERVER_METADATA: [&str; 8] = [
    "managedFields", "resourceVersion", "uid", "creationTimestamp", "generation", "selfLink",
    "deletionTimestamp", "deletionGracePeriodSeconds",
];

/// A set of field paths in `fieldsV1` form: each key (`f:`, `k:`, `v:`, `i:`
/// or `.`) maps to its children; an empty node is a leaf.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct FieldSet(pub(super) BTreeMap<String, FieldSet>);

static EMPTY: FieldSet = FieldSet(BTreeMap::new());

impl FieldSet {
    pub(super) fn from_json(v: &Value, depth: usize) -> FieldSet {
        match v {
            Value::Object(m) if depth < strategic::MAX_DEPTH => FieldSet(
                m.iter()
                    .map(|(k, c)| (k.clone(), FieldSet::from_json(c, depth + 1)))
                    .collect(),
            ),
            _ => FieldSet::default(),
        }
    }

    pub(super) fn to_json(&self) -> Value {
        Value::Object(
            self.0
                .iter()
                .map(|(k, c)| (k.clone(), c.to_json()))
                .collect(),
        )
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(super) fn union_with(&mut self, other: &FieldSet) {
        for (k, c) in &other.0 {
            self.0.entry(k.clone()).or_default().union_with(c);
        }
    }

    /// Paths of the leaves that stand for field values (not `.` markers nor
    /// set members).
    pub(super) fn value_leaves(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        self.collect_leaves(&mut Vec::new(), &mut out);
        out
    }

    fn collect_leaves(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        for (k, c) in &self.0 {
            if k == "." || k.starts_with("v:") {
                continue;
            }
            prefix.push(k.clone());
            if c.is_empty() {
                out.push(prefix.clone());
            } else {
                c.collect_leaves(prefix, out);
            }
            prefix.pop();
        }
    }

    /// The set holding the one field at `path`.
    pub(super) fn of_path(path: &[String]) -> FieldSet {
        path.iter().rev().fold(FieldSet::default(), |inner, seg| {
            FieldSet(BTreeMap::from([(seg.clone(), inner)]))
        })
    }

    /// Whether the field at `path` is in the set (owned as itself or as a
    /// whole parent; a `.` marker's parent counts).
    pub(super) fn has_path(&self, path: &[String]) -> bool {
        let Some((first, rest)) = path.split_first() else {
            return true;
        };
        self.0
            .get(first)
            .is_some_and(|c| rest.is_empty() || c.has_path(rest))
    }

    /// Removes the node at `path` and any ancestors it leaves childless.
    pub(super) fn remove_path(&mut self, path: &[String]) {
        let Some((first, rest)) = path.split_first() else {
            return;
        };
        if rest.is_empty() {
            self.0.remove(first);
            return;
        }
        if let Some(c) = self.0.get_mut(first) {
            c.remove_path(rest);
            if c.is_empty() {
                self.0.remove(first);
            }
        }
    }

    /// Removes everything `other` contains (a leaf in `other` removes the
    /// whole subtree here).
    pub(super) fn subtract(&mut self, other: &FieldSet) {
        for (k, oc) in &other.0 {
            let Some(c) = self.0.get_mut(k) else { continue };
            if oc.is_empty() {
                self.0.remove(k);
            } else if !c.is_empty() {
                c.subtract(oc);
                if c.is_empty() {
                    self.0.remove(k);
                }
            }
        }
    }

    /// Keeps only the paths that also exist in `existing` (and the `.` of a
    /// node that exists: an `Update` that added it owns it).
    fn retain_existing(&mut self, existing: &FieldSet) {
        self.0.retain(|k, c| match existing.0.get(k) {
            None => k == "." && c.is_empty(),
            Some(e) if e.is_empty() => {
                *c = FieldSet::default();
                true
            }
            Some(e) => {
                if c.is_empty() {
                    return true;
                }
                c.retain_existing(e);
                !c.is_empty()
            }
        });
    }
}

/// Whether field `k` of the map at `path` is server-owned / identity metadata
/// that no manager owns.
pub(super) fn excluded(path: &Path, k: &str) -> bool {
    (path.is_root() && (k == "apiVersion" || k == "kind"))
        || (path.is_top_level("metadata")
            && (k == "name" || k == "namespace" || SERVER_METADATA.contains(&k)))
}

fn key_of(key: &str, v: &Value) -> String {
    let mut m = Map::new();
    m.insert(key.to_string(), v.clone());
    format!("k:{}", Value::Object(m))
}

fn set_member(v: &Value) -> String {
    format!("v:{v}")
}

/// The field set of every (non-null) field in `m`.
pub(super) fn fields_of(m: &Map<String, Value>, path: &Path) -> FieldSet {
    let mut set = FieldSet::default();
    for (k, v) in m {
        if v.is_null() || excluded(path, k) {
            continue;
        }
        let child = path.child(k);
        let node = match v {
            Value::Object(cm) if !cm.is_empty() && !child.too_deep() => {
                let sub = fields_of(cm, &child);
                if sub.is_empty() {
                    // Only server-owned or null fields inside: nothing to own.
                    continue;
                }
                sub
            }
            Value::Array(a) if !a.is_empty() && !child.too_deep() => list_fields(a, None, path, k),
            _ => FieldSet::default(),
        };
        set.0.insert(format!("f:{k}"), node);
    }
    set
}

/// Field set of list `field` (in the map at `parent`); with `old`, only the
/// items that differ from / are missing in `old`.
pub(super) fn list_fields(
    items: &[Value],
    old: Option<&[Value]>,
    parent: &Path,
    field: &str,
) -> FieldSet {
    let item_path = parent.child(field);
    let item_path = item_path.item();
    let mut node = FieldSet::default();
    match strategic::list_strategy(parent, field, items, Mode::Apply) {
        Ok(ListStrategy::Keyed(key)) => {
            for item in items {
                let (Some(kv), Value::Object(im)) = (item.get(key), item) else {
                    continue;
                };
                let before = old.and_then(|o| o.iter().find(|x| x.get(key) == Some(kv)));
                let mut sub = match (old, before) {
                    (None, _) => fields_of(im, &item_path),
                    (Some(_), Some(b)) if b == item => continue,
                    (Some(_), b) => changed_fields(b.and_then(Value::as_object), im, &item_path),
                };
                if old.is_none() || before.is_none() {
                    sub.0.insert(".".to_string(), FieldSet::default());
                }
                if !sub.is_empty() {
                    node.0.entry(key_of(key, kv)).or_default().union_with(&sub);
                }
            }
        }
        Ok(ListStrategy::Set) => {
            for item in items {
                if old.is_none_or(|o| !o.contains(item)) {
                    node.0.insert(set_member(item), FieldSet::default());
                }
            }
        }
        Ok(ListStrategy::Atomic) | Err(_) => {}
    }
    node
}

/// Field set of the values in `new` that are new or differ from `old`.
pub(super) fn changed_fields(
    old: Option<&Map<String, Value>>,
    new: &Map<String, Value>,
    path: &Path,
) -> FieldSet {
    let mut set = FieldSet::default();
    for (k, nv) in new {
        let ov = old.and_then(|o| o.get(k));
        if nv.is_null() || excluded(path, k) || ov == Some(nv) {
            continue;
        }
        let child = path.child(k);
        let node = match nv {
            Value::Object(nm) if !nm.is_empty() && !child.too_deep() => {
                let sub = changed_fields(ov.and_then(Value::as_object), nm, &child);
                if sub.is_empty() {
                    continue;
                }
                sub
            }
            Value::Array(na) if !na.is_empty() && !child.too_deep() => {
                let old_items = ov
                    .and_then(Value::as_array)
                    .map(Vec::as_slice)
                    .unwrap_or(&[]);
                match strategic::list_strategy(path, k, na, Mode::Apply) {
                    Ok(ListStrategy::Atomic) | Err(_) => FieldSet::default(),
                    Ok(_) => {
                        let sub = list_fields(na, Some(old_items), path, k);
                        if sub.is_empty() {
                            continue;
                        }
                        sub
                    }
                }
            }
            _ => FieldSet::default(),
        };
        set.0.insert(format!("f:{k}"), node);
    }
    set
}

/// One segment of a field-set path, decoded.
enum Seg {
    Field(String),
    Key(Map<String, Value>),
    Member(Value),
    Index(usize),
}

fn decode(seg: &str) -> Option<Seg> {
    if let Some(f) = seg.strip_prefix("f:") {
        Some(Seg::Field(f.to_string()))
    } else if let Some(k) = seg.strip_prefix("k:") {
        serde_json::from_str(k).ok().map(Seg::Key)
    } else if let Some(v) = seg.strip_prefix("v:") {
        serde_json::from_str(v).ok().map(Seg::Member)
    } else if let Some(i) = seg.strip_prefix("i:") {
        i.parse().ok().map(Seg::Index)
    } else {
        None
    }
}

fn key_matches(item: &Value, key: &Map<String, Value>) -> bool {
    key.iter().all(|(k, v)| item.get(k) == Some(v))
}

/// The value at segment `seg` (`f:`, `k:`, `v:` or `i:`) of `v`.
pub(super) fn child<'v>(v: &'v Value, seg: &str) -> Option<&'v Value> {
    match decode(seg)? {
        Seg::Field(f) => v.as_object()?.get(&f),
        Seg::Key(k) => v.as_array()?.iter().find(|i| key_matches(i, &k)),
        Seg::Member(m) => v.as_array()?.iter().find(|i| **i == m),
        Seg::Index(i) => v.as_array()?.get(i),
    }
}

fn child_mut<'v>(v: &'v mut Value, seg: &str) -> Option<&'v mut Value> {
    match decode(seg)? {
        Seg::Field(f) => v.as_object_mut()?.get_mut(&f),
        Seg::Key(k) => v.as_array_mut()?.iter_mut().find(|i| key_matches(i, &k)),
        Seg::Member(_) => None,
        Seg::Index(i) => v.as_array_mut()?.get_mut(i),
    }
}

fn remove_child(v: &mut Value, seg: &str) {
    match (decode(seg), v) {
        (Some(Seg::Field(f)), Value::Object(m)) => {
            m.remove(&f);
        }
        (Some(Seg::Key(k)), Value::Array(a)) => a.retain(|i| !key_matches(i, &k)),
        (Some(Seg::Member(x)), Value::Array(a)) => a.retain(|i| *i != x),
        _ => {}
    }
}

pub(super) fn get_path<'v>(v: &'v Value, path: &[String]) -> Option<&'v Value> {
    path.iter().try_fold(v, |cur, seg| child(cur, seg))
}

/// `.spec.containers[name="nginx"].image` style rendering of a set path.
pub(super) fn display_path(path: &[String]) -> String {
    let mut out = String::new();
    for seg in path {
        let part = match decode(seg) {
            Some(Seg::Field(f)) => format!(".{f}"),
            Some(Seg::Key(k)) => {
                let parts: Vec<String> = k.iter().map(|(n, v)| format!("{n}={v}")).collect();
                format!("[{}]", parts.join(","))
            }
            Some(Seg::Member(m)) => format!("[={m}]"),
            Some(Seg::Index(i)) => format!("[{i}]"),
            None => format!(".{seg}"),
        };
        out.push_str(&part);
    }
    out
}

/// Removes from `obj` what `old` owned, `new` no longer sets and nobody in
/// `others` owns (maps and lists emptied that way go too; values nobody owns
/// are kept).
pub(super) fn prune(obj: &mut Value, old: &FieldSet, new: &FieldSet, others: Option<&FieldSet>) {
    for (k, oc) in &old.0 {
        if k == "." {
            continue;
        }
        let xc = others.and_then(|o| o.0.get(k));
        match (new.0.get(k), xc) {
            (Some(nc), _) => {
                if !oc.is_empty()
                    && let Some(c) = child_mut(obj, k)
                {
                    prune(c, oc, nc, xc);
                }
            }
            // Owned as a whole (a leaf or a keyed item) and by nobody else.
            (None, None) if oc.is_empty() || oc.0.contains_key(".") => remove_child(obj, k),
            // Only parts owned: remove those, then the container if emptied.
            (None, None) => {
                let Some(c) = child_mut(obj, k) else { continue };
                prune(c, oc, &EMPTY, None);
                if c.as_object().is_some_and(Map::is_empty)
                    || c.as_array().is_some_and(Vec::is_empty)
                {
                    remove_child(obj, k);
                }
            }
            (None, Some(xc)) => {
                if !oc.is_empty()
                    && !xc.is_empty()
                    && let Some(c) = child_mut(obj, k)
                {
                    prune(c, oc, &EMPTY, Some(xc));
                }
            }
        }
    }
}

/// A `metadata.managedFields` entry; `set` is `None` for entries this module
/// does not understand (kept verbatim).
pub(super) struct Entry {
    raw: Value,
    pub(super) set: Option<FieldSet>,
}

impl Entry {
    /// The entry's `apiVersion`, when it has one.
    pub(super) fn api_version(&self) -> Option<&str> {
        self.raw.get("apiVersion").and_then(Value::as_str)
    }

    pub(super) fn new(
        manager: &str,
        operation: &str,
        api_version: &str,
        now: &str,
        subresource: Option<&str>,
    ) -> Entry {
        let mut raw = json!({
            "manager": manager,
            "operation": operation,
            "apiVersion": api_version,
            "time": now,
            "fieldsType": "FieldsV1",
        });
        if let (Some(s), Value::Object(m)) = (subresource.filter(|s| !s.is_empty()), &mut raw) {
            m.insert("subresource".to_string(), json!(s));
        }
        Entry {
            raw,
            set: Some(FieldSet::default()),
        }
    }

    fn str_field(&self, f: &str) -> &str {
        self.raw.get(f).and_then(Value::as_str).unwrap_or("")
    }

    pub(super) fn is(&self, manager: &str, operation: &str, subresource: Option<&str>) -> bool {
        self.set.is_some()
            && self.str_field("manager") == manager
            && self.str_field("operation") == operation
            && self.str_field("subresource") == subresource.unwrap_or("")
    }

    /// This entry's manager at `api_version`, owning `set`.
    pub(super) fn with(&self, api_version: &str, set: FieldSet) -> Entry {
        let mut raw = self.raw.clone();
        if let Value::Object(m) = &mut raw {
            m.insert("apiVersion".to_string(), json!(api_version));
        }
        Entry {
            raw,
            set: Some(set),
        }
    }

    /// This entry without its `time` (kube-apiserver's ScaleHandler gives
    /// a manager new to the parent none).
    pub(super) fn without_time(mut self) -> Entry {
        if let Value::Object(m) = &mut self.raw {
            m.remove("time");
        }
        self
    }

    /// Whether `other` is the same manager (manager, operation, subresource).
    pub(super) fn same_manager(&self, other: &Entry) -> bool {
        ["manager", "operation", "subresource"]
            .iter()
            .all(|f| self.str_field(f) == other.str_field(f))
    }

    pub(super) fn touch(&mut self, api_version: &str, now: &str) {
        if let Value::Object(m) = &mut self.raw {
            m.insert("apiVersion".to_string(), json!(api_version));
            m.insert("time".to_string(), json!(now));
        }
    }

    /// How conflict messages name this manager, like kube-apiserver does.
    pub(super) fn describe(&self) -> String {
        let mut s = format!("{:?}", self.str_field("manager"));
        let sub = self.str_field("subresource");
        if !sub.is_empty() {
            s.push_str(&format!(" with subresource {sub:?}"));
        }
        if self.str_field("operation") == "Update" {
            s.push_str(&format!(" using {}", self.str_field("apiVersion")));
        }
        s
    }
}

pub(super) fn parse_entries(managed: Option<&Value>) -> Vec<Entry> {
    let Some(Value::Array(list)) = managed else {
        return Vec::new();
    };
    list.iter()
        .map(|raw| {
            let set = raw
                .get("manager")
                .and_then(Value::as_str)
                .map(|_| FieldSet::from_json(raw.get("fieldsV1").unwrap_or(&Value::Null), 0));
            Entry {
                raw: raw.clone(),
                set,
            }
        })
        .collect()
}

/// Sorts `managedFields` entries as kube-apiserver writes them: by
/// operation (`Apply` first), time, manager, apiVersion, subresource.
pub(super) fn sort_entries(list: &mut [Value]) {
    // Borrowed keys: most writes find the list sorted and allocate nothing.
    fn key(e: &Value) -> [&str; 5] {
        ["operation", "time", "manager", "apiVersion", "subresource"]
            .map(|k| e.get(k).and_then(Value::as_str).unwrap_or(""))
    }
    if !list.is_sorted_by_key(key) {
        list.sort_by(|a, b| key(a).cmp(&key(b)));
    }
}

/// Drops stale paths and empty entries, then stores the entries in
/// `obj.metadata.managedFields` (removing the key when none are left).
pub(super) fn write_entries(obj: &mut Value, entries: Vec<Entry>) {
    let existing = obj
        .as_object()
        .map(|m| fields_of(m, &Path::ROOT))
        .unwrap_or_default();
    let mut out = Vec::with_capacity(entries.len());
    for mut e in entries {
        if let Some(set) = &mut e.set {
            set.retain_existing(&existing);
            if set.is_empty() {
                continue;
            }
            if let Value::Object(m) = &mut e.raw {
                m.insert("fieldsType".to_string(), json!("FieldsV1"));
                m.insert("fieldsV1".to_string(), set.to_json());
            }
        }
        out.push(e.raw);
    }
    sort_entries(&mut out);
    let Value::Object(root) = obj else { return };
    if out.is_empty() {
        if let Some(Value::Object(meta)) = root.get_mut("metadata") {
            meta.remove("managedFields");
        }
    } else if let Value::Object(meta) = root.entry("metadata").or_insert_with(|| json!({})) {
        meta.insert("managedFields".to_string(), Value::Array(out));
    }
}

#[cfg(test)]
mod tests {
    //! Unit tests of the field-set machinery; end-to-end apply and
    //! `record_update` scenarios live in `apply_tests` (mod.rs).
    use super::*;

    fn set(v: Value) -> FieldSet {
        FieldSet::from_json(&v, 0)
    }

    #[test]
    fn field_set_operations() {
        let mut a = set(json!({"f:a": {"f:b": {}, "f:c": {}}, "f:d": {}}));
        a.union_with(&set(json!({"f:a": {"f:e": {}}})));
        assert_eq!(
            a.to_json(),
            json!({"f:a": {"f:b": {}, "f:c": {}, "f:e": {}}, "f:d": {}})
        );
        let leaves = set(json!({"f:l": {"k:{\"n\":1}": {".": {}, "f:x": {}}, "v:\"s\"": {}}}));
        assert_eq!(leaves.value_leaves(), [["f:l", "k:{\"n\":1}", "f:x"]]);
        a.remove_path(&["f:a".into(), "f:b".into()]);
        a.subtract(&set(json!({"f:a": {"f:c": {}, "f:e": {}}})));
        assert_eq!(
            a.to_json(),
            json!({"f:d": {}}),
            "emptied parents are dropped"
        );
        let mut b = set(json!({"f:a": {"f:b": {}}, "f:gone": {}, "f:leaf": {"f:x": {}}}));
        b.retain_existing(&set(json!({"f:a": {"f:b": {}, "f:c": {}}, "f:leaf": {}})));
        assert_eq!(b.to_json(), json!({"f:a": {"f:b": {}}, "f:leaf": {}}));
    }

    #[test]
    fn fields_and_changes_of_objects() {
        let obj = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "uid": "u", "labels": {"a": "1", "n": null}},
            "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}],
                "tolerations": [{"key": "k"}], "empty": {}}});
        let m = obj.as_object().unwrap();
        let all = fields_of(m, &Path::ROOT);
        let port = json!({"k:{\"containerPort\":80}": {".": {}, "f:containerPort": {}}});
        let want = json!({"f:metadata": {"f:labels": {"f:a": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:name": {},
                "f:ports": port}}, "f:tolerations": {}, "f:empty": {}}});
        assert_eq!(all.to_json(), want);
        assert!(changed_fields(Some(m), m, &Path::ROOT).is_empty());
        let mut new = obj.clone();
        new["spec"]["containers"][0]["image"] = json!("i");
        let changed = changed_fields(Some(m), new.as_object().unwrap(), &Path::ROOT);
        let want = json!({"f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {"f:image": {}}}}});
        assert_eq!(changed.to_json(), want);
    }

    #[test]
    fn paths_are_navigated_and_displayed() {
        let obj = json!({"spec": {"c": [{"name": "x", "v": 1}], "f": ["a", "b"], "l": [5]}});
        let path: Vec<String> = ["f:spec", "f:c", "k:{\"name\":\"x\"}", "f:v"]
            .map(String::from)
            .into();
        assert_eq!(get_path(&obj, &path), Some(&json!(1)));
        assert_eq!(display_path(&path), ".spec.c[name=\"x\"].v");
        let member: Vec<String> = ["f:spec", "f:f", "v:\"b\""].map(String::from).into();
        assert_eq!(get_path(&obj, &member), Some(&json!("b")));
        assert_eq!(display_path(&member), ".spec.f[=\"b\"]");
        assert_eq!(display_path(&["f:spec".into(), "i:0".into()]), ".spec[0]");
        assert_eq!(
            get_path(&obj, &["f:spec".into(), "k:not json".into()]),
            None
        );
        let mut pruned = obj.clone();
        let old = set(
            json!({"f:spec": {"f:c": {"k:{\"name\":\"x\"}": {".": {}, "f:v": {}}},
            "f:f": {"v:\"a\"": {}}, "f:l": {}}}),
        );
        let others = set(json!({"f:spec": {"f:l": {}}}));
        prune(&mut pruned, &old, &FieldSet::default(), Some(&others));
        assert_eq!(pruned, json!({"spec": {"f": ["b"], "l": [5]}}));
    }
}
