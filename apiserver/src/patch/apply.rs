//! Server-side apply and `managedFields` bookkeeping (approximate).
//!
//! Field sets are kept in the real `fieldsV1` shape: `f:<field>` for map
//! fields, `k:{"<mergeKey>":<value>}` for items of keyed lists (with a `.`
//! child marking the item itself), `v:<json>` for members of primitive set
//! lists (`finalizers`); every other list is a leaf. List strategies come
//! from the same merge-key table as the strategic merge patch, for every kind.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::PatchError;
use super::strategic::{self, ListStrategy, Mode, Path};

/// Metadata fields the server owns: never part of a field set, and stripped
/// from an applied configuration before merging.
const SERVER_METADATA: [&str; 8] = [
    "managedFields",
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// A set of field paths in `fieldsV1` form: each key (`f:`, `k:`, `v:`, `i:`
/// or `.`) maps to its children; an empty node is a leaf.
#[derive(Debug, Clone, Default, PartialEq)]
struct FieldSet(BTreeMap<String, FieldSet>);

static EMPTY: FieldSet = FieldSet(BTreeMap::new());

impl FieldSet {
    fn from_json(v: &Value, depth: usize) -> FieldSet {
        match v {
            Value::Object(m) if depth < strategic::MAX_DEPTH => FieldSet(
                m.iter()
                    .map(|(k, c)| (k.clone(), FieldSet::from_json(c, depth + 1)))
                    .collect(),
            ),
            _ => FieldSet::default(),
        }
    }

    fn to_json(&self) -> Value {
        Value::Object(
            self.0
                .iter()
                .map(|(k, c)| (k.clone(), c.to_json()))
                .collect(),
        )
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn union_with(&mut self, other: &FieldSet) {
        for (k, c) in &other.0 {
            self.0.entry(k.clone()).or_default().union_with(c);
        }
    }

    /// Paths of the leaves that stand for field values (not `.` markers nor
    /// set members).
    fn value_leaves(&self) -> Vec<Vec<String>> {
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

    /// Removes the node at `path` and any ancestors it leaves childless.
    fn remove_path(&mut self, path: &[String]) {
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
    fn subtract(&mut self, other: &FieldSet) {
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

    /// Keeps only the paths that also exist in `existing`.
    fn retain_existing(&mut self, existing: &FieldSet) {
        self.0.retain(|k, c| match existing.0.get(k) {
            None => false,
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
fn excluded(path: &Path, k: &str) -> bool {
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
fn fields_of(m: &Map<String, Value>, path: &Path) -> FieldSet {
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
fn list_fields(items: &[Value], old: Option<&[Value]>, parent: &Path, field: &str) -> FieldSet {
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
fn changed_fields(
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

fn child<'v>(v: &'v Value, seg: &str) -> Option<&'v Value> {
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

fn get_path<'v>(v: &'v Value, path: &[String]) -> Option<&'v Value> {
    path.iter().try_fold(v, |cur, seg| child(cur, seg))
}

/// `.spec.containers[name="nginx"].image` style rendering of a set path.
fn display_path(path: &[String]) -> String {
    let mut out = String::new();
    for seg in path {
        match decode(seg) {
            Some(Seg::Field(f)) => {
                out.push('.');
                out.push_str(&f);
            }
            Some(Seg::Key(k)) => {
                let parts: Vec<String> = k.iter().map(|(n, v)| format!("{n}={v}")).collect();
                out.push_str(&format!("[{}]", parts.join(",")));
            }
            Some(Seg::Member(m)) => out.push_str(&format!("[={m}]")),
            Some(Seg::Index(i)) => out.push_str(&format!("[{i}]")),
            None => {
                out.push('.');
                out.push_str(seg);
            }
        }
    }
    out
}

/// Removes from `obj` what `old` owned, `new` no longer sets and nobody in
/// `others` owns.
fn prune(obj: &mut Value, old: &FieldSet, new: &FieldSet, others: Option<&FieldSet>) {
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
            (None, None) => remove_child(obj, k),
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
struct Entry {
    raw: Value,
    set: Option<FieldSet>,
}

impl Entry {
    fn new(
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

    fn is(&self, manager: &str, operation: &str, subresource: Option<&str>) -> bool {
        self.set.is_some()
            && self.str_field("manager") == manager
            && self.str_field("operation") == operation
            && self.str_field("subresource") == subresource.unwrap_or("")
    }

    fn touch(&mut self, api_version: &str, now: &str) {
        if let Value::Object(m) = &mut self.raw {
            m.insert("apiVersion".to_string(), json!(api_version));
            m.insert("time".to_string(), json!(now));
        }
    }

    /// How conflict messages name this manager, like kube-apiserver does.
    fn describe(&self) -> String {
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

fn parse_entries(managed: Option<&Value>) -> Vec<Entry> {
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

/// Drops stale paths and empty entries, then stores the entries in
/// `obj.metadata.managedFields` (removing the key when none are left).
fn write_entries(obj: &mut Value, entries: Vec<Entry>) {
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
    let Value::Object(root) = obj else { return };
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(meta) = meta else { return };
    if out.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".to_string(), Value::Array(out));
    }
}

fn parse_applied(body: &[u8]) -> Result<Value, PatchError> {
    let trimmed = body.trim_ascii_start();
    let json_first = trimmed.first() == Some(&b'{');
    let parsed = match json_first.then(|| serde_json::from_slice::<Value>(body)) {
        Some(Ok(v)) => v,
        _ => serde_saphyr::from_slice::<Value>(body)
            .map_err(|e| PatchError::Malformed(format!("error decoding YAML: {e}")))?,
    };
    Ok(parsed)
}

/// Server-side apply of `applied_body` (YAML, or JSON which is YAML) by
/// field manager `manager`, returning the new object with
/// `metadata.managedFields` updated.
///
/// **Approximation** of Kubernetes' structured-merge-diff, without schemas:
/// - The body must be an object with `apiVersion`, `kind` (equal to `kind`
///   when that is non-empty) and `metadata.name`, else
///   [`PatchError::Malformed`]; `$` directives are [`PatchError::Invalid`].
///   Server-owned metadata (`uid`, `resourceVersion`, `creationTimestamp`,
///   `managedFields`, …) in the body is ignored: resourceVersion
///   preconditions are the caller's job.
/// - `live == None`: the applied object (without `null`s) becomes the object
///   and `manager` owns every field it sets. (Applying to `/status` of a
///   missing object should be refused by the caller with 404.)
/// - Otherwise the applied configuration is merged into `live` with the
///   strategic-merge rules and merge-key table of
///   [`apply_strategic_merge_patch`](super::apply_strategic_merge_patch) (for
///   every kind; lists whose items lack the key are atomic), then fields this
///   manager's previous `Apply` entry owned but the new configuration no
///   longer sets are removed unless another manager owns them.
/// - Conflicts: a field is in conflict when another manager's entry (`Apply`
///   or `Update`) owns it as a leaf and merging changes its value (exact for
///   scalars and atomic lists; ownership below a replaced value is reported
///   at the leaf path). Without `force` that is [`PatchError::Conflict`]
///   (`Apply failed with 1 conflict: conflict with "kubectl-client-side-apply"
///   using v1: .spec.replicas`); with `force` ownership moves to `manager`.
///   Equal values are shared ownership, as in Kubernetes.
/// - Keyed list items are keyed by the single merge key of the table (real
///   Kubernetes uses e.g. `containerPort`+`protocol`); merged items keep live
///   order with new items appended, where Kubernetes would follow the
///   applied order.
/// - `subresource == Some("status")`: only `status` of the body is applied
///   and owned, and the entry carries `"subresource": "status"`. For the main
///   resource the body's `status` is applied as given: resetting it for kinds
///   with a status subresource is the caller's job.
/// - Managers are identified by (manager, operation, subresource); an entry
///   left owning nothing is dropped.
#[allow(clippy::too_many_arguments)]
pub fn server_side_apply(
    live: Option<&Value>,
    applied_body: &[u8],
    manager: &str,
    force: bool,
    now: &str,
    api_version: &str,
    kind: &str,
    subresource: Option<&str>,
) -> Result<Value, PatchError> {
    let mut applied = parse_applied(applied_body)?;
    let Value::Object(body) = &mut applied else {
        return Err(PatchError::Malformed(
            "applied configuration must be an object".to_string(),
        ));
    };
    let non_empty_str = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .is_some()
    };
    if !non_empty_str(body.get("apiVersion")) {
        return Err(PatchError::Malformed(
            "apiVersion must be set in the applied configuration".to_string(),
        ));
    }
    let body_kind = body.get("kind").and_then(Value::as_str).unwrap_or("");
    if body_kind.is_empty() {
        return Err(PatchError::Malformed(
            "kind must be set in the applied configuration".to_string(),
        ));
    }
    if !kind.is_empty() && body_kind != kind {
        return Err(PatchError::Malformed(format!(
            "the kind {body_kind:?} in the applied configuration does not match {kind:?}"
        )));
    }
    let Some(Value::Object(meta)) = body.get_mut("metadata") else {
        return Err(PatchError::Malformed(
            "metadata.name must be set in the applied configuration".to_string(),
        ));
    };
    if !non_empty_str(meta.get("name")) {
        return Err(PatchError::Malformed(
            "metadata.name must be set in the applied configuration".to_string(),
        ));
    }
    for f in SERVER_METADATA {
        meta.remove(f);
    }
    let Value::Object(body) = applied else {
        return Err(PatchError::Malformed(String::new()));
    };

    let status_only = subresource == Some("status");
    let effective: Map<String, Value> = if status_only {
        body.get("status")
            .map(|s| ("status".to_string(), s.clone()))
            .into_iter()
            .collect()
    } else {
        body.clone()
    };
    let new_set = fields_of(&effective, &Path::ROOT);
    let mut mine = Entry::new(manager, "Apply", api_version, now, subresource);

    let Some(live) = live.filter(|l| l.is_object()) else {
        let mut obj = Value::Object(Map::new());
        strategic::merge_object(&mut obj, &body, Mode::Apply)?;
        mine.set = Some(new_set);
        write_entries(&mut obj, vec![mine]);
        return Ok(obj);
    };

    let mut entries = parse_entries(live.pointer("/metadata/managedFields"));
    let me = entries
        .iter()
        .position(|e| e.is(manager, "Apply", subresource));
    let old_set = me.and_then(|i| entries[i].set.clone()).unwrap_or_default();

    let mut merged = live.clone();
    strategic::merge_object(&mut merged, &effective, Mode::Apply)?;

    let mut conflicts: Vec<(usize, Vec<String>)> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let (Some(set), false) = (&e.set, Some(i) == me) else {
            continue;
        };
        for leaf in set.value_leaves() {
            if get_path(live, &leaf) != get_path(&merged, &leaf) {
                conflicts.push((i, leaf));
            }
        }
    }
    if !conflicts.is_empty() {
        if !force {
            return Err(PatchError::Conflict(conflict_message(&entries, &conflicts)));
        }
        for (i, leaf) in &conflicts {
            if let Some(set) = entries.get_mut(*i).and_then(|e| e.set.as_mut()) {
                set.remove_path(leaf);
            }
        }
    }

    let mut others = FieldSet::default();
    for (i, e) in entries.iter().enumerate() {
        if let (Some(set), false) = (&e.set, Some(i) == me) {
            others.union_with(set);
        }
    }
    prune(&mut merged, &old_set, &new_set, Some(&others));

    mine.set = Some(new_set);
    match me {
        Some(i) => entries[i] = mine,
        None => entries.push(mine),
    }
    write_entries(&mut merged, entries);
    Ok(merged)
}

fn conflict_message(entries: &[Entry], conflicts: &[(usize, Vec<String>)]) -> String {
    let describe = |i: usize| entries.get(i).map(Entry::describe).unwrap_or_default();
    if let [(i, path)] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            describe(*i),
            display_path(path)
        );
    }
    let mut lines = Vec::new();
    let mut seen: Vec<usize> = Vec::new();
    for (i, _) in conflicts {
        if seen.contains(i) {
            continue;
        }
        seen.push(*i);
        lines.push(format!("conflicts with {}:", describe(*i)));
        for (_, path) in conflicts.iter().filter(|(j, _)| j == i) {
            lines.push(format!("- {}", display_path(path)));
        }
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// Records an `Update` operation by `manager` on the fields that differ
/// between `old` and `new` (PUT/PATCH/create with `?fieldManager=` or a
/// default manager), updating `new`'s `metadata.managedFields` in place.
///
/// Approximate: the changed fields (new or different values; `old == None`
/// means every field) are added to the (manager, `Update`, subresource) entry
/// and taken away from every other manager; paths that no longer exist are
/// dropped from all entries, and entries left empty are removed. If `new`
/// carries a `managedFields` list different from `old`'s, the client's list
/// is used as the starting point (as Kubernetes allows). Unlike Kubernetes,
/// one entry per manager is kept regardless of `apiVersion` (it is updated to
/// `api_version`). Does nothing when `new` is not an object.
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    now: &str,
    api_version: &str,
    subresource: Option<&str>,
) {
    let Value::Object(new_map) = &*new else {
        return;
    };
    let old_managed = old.and_then(|o| o.pointer("/metadata/managedFields"));
    let new_managed = new.pointer("/metadata/managedFields");
    let mut entries = match new_managed {
        Some(m) if Some(m) != old_managed => parse_entries(Some(m)),
        _ => parse_entries(old_managed),
    };
    let changed = changed_fields(old.and_then(Value::as_object), new_map, &Path::ROOT);
    let me = entries
        .iter()
        .position(|e| e.is(manager, "Update", subresource));
    for (i, e) in entries.iter_mut().enumerate() {
        if let (Some(set), false) = (&mut e.set, Some(i) == me) {
            set.subtract(&changed);
        }
    }
    if !changed.is_empty() {
        let idx = match me {
            Some(i) => i,
            None => {
                entries.push(Entry::new(manager, "Update", api_version, now, subresource));
                entries.len() - 1
            }
        };
        if let Some(e) = entries.get_mut(idx) {
            e.touch(api_version, now);
            if let Some(set) = &mut e.set {
                set.union_with(&changed);
            }
        }
    }
    write_entries(new, entries);
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2024-01-01T00:00:00Z";
    const LATER: &str = "2024-01-02T00:00:00Z";

    fn apply(
        live: Option<&Value>,
        body: &str,
        manager: &str,
        force: bool,
    ) -> Result<Value, PatchError> {
        server_side_apply(
            live,
            body.as_bytes(),
            manager,
            force,
            NOW,
            "apps/v1",
            "Deployment",
            None,
        )
    }

    fn entry<'v>(obj: &'v Value, manager: &str) -> Option<&'v Value> {
        obj["metadata"]["managedFields"]
            .as_array()?
            .iter()
            .find(|e| e["manager"] == manager)
    }

    const DEPLOY_V1: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    app: web
    tier: front
  creationTimestamp: null
spec:
  replicas: 2
  template:
    spec:
      containers:
      - name: nginx
        image: nginx:1
        args: ["-g", "daemon off;"]
      - name: sidecar
        image: side:1
"#;

    #[test]
    fn create_from_yaml() {
        let obj = apply(None, DEPLOY_V1, "kubectl", false).unwrap();
        assert_eq!(obj["metadata"]["name"], "web");
        assert!(
            obj["metadata"].get("creationTimestamp").is_none(),
            "null/server fields dropped"
        );
        assert_eq!(obj["spec"]["replicas"], 2);
        let e = entry(&obj, "kubectl").unwrap();
        assert_eq!(e["operation"], "Apply");
        assert_eq!(e["apiVersion"], "apps/v1");
        assert_eq!(e["time"], NOW);
        assert_eq!(e["fieldsType"], "FieldsV1");
        assert!(e.get("subresource").is_none());
        assert_eq!(
            e["fieldsV1"],
            json!({
                "f:metadata": {"f:labels": {"f:app": {}, "f:tier": {}}},
                "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
                    "k:{\"name\":\"nginx\"}": {".": {}, "f:name": {}, "f:image": {}, "f:args": {}},
                    "k:{\"name\":\"sidecar\"}": {".": {}, "f:name": {}, "f:image": {}}
                }}}}
            })
        );
        assert_eq!(
            obj["metadata"]["managedFields"].as_array().unwrap().len(),
            1
        );
    }

    #[test]
    fn create_from_json_body() {
        let body =
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"k":"v"}}"#;
        let obj = server_side_apply(
            None,
            body.as_bytes(),
            "m",
            false,
            NOW,
            "v1",
            "ConfigMap",
            None,
        )
        .unwrap();
        assert_eq!(obj["data"], json!({"k": "v"}));
        assert_eq!(
            entry(&obj, "m").unwrap()["fieldsV1"],
            json!({"f:data": {"f:k": {}}})
        );
    }

    #[test]
    fn update_and_removal_of_dropped_fields() {
        let live = apply(None, DEPLOY_V1, "kubectl", false).unwrap();
        // Another controller adds an annotation and a status.
        let mut live2 = live.clone();
        live2["metadata"]["annotations"] = json!({"note": "x"});
        live2["status"] = json!({"replicas": 2});
        record_update(Some(&live), &mut live2, "controller", NOW, "apps/v1", None);
        let v2 = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    app: web
spec:
  template:
    spec:
      containers:
      - name: nginx
        image: nginx:2
"#;
        let obj = apply(Some(&live2), v2, "kubectl", false).unwrap();
        assert_eq!(
            obj["metadata"]["labels"],
            json!({"app": "web"}),
            "tier dropped"
        );
        assert!(obj["spec"].get("replicas").is_none(), "replicas dropped");
        let containers = obj["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap();
        assert_eq!(containers.len(), 1, "sidecar dropped");
        assert_eq!(
            containers[0],
            json!({"name": "nginx", "image": "nginx:2"}),
            "args dropped"
        );
        assert_eq!(
            obj["metadata"]["annotations"],
            json!({"note": "x"}),
            "others' fields kept"
        );
        assert_eq!(obj["status"], json!({"replicas": 2}));
        let e = entry(&obj, "kubectl").unwrap();
        assert_eq!(
            e["fieldsV1"],
            json!({"f:metadata": {"f:labels": {"f:app": {}}},
                   "f:spec": {"f:template": {"f:spec": {"f:containers": {
                       "k:{\"name\":\"nginx\"}": {".": {}, "f:name": {}, "f:image": {}}}}}}})
        );
        assert_eq!(
            entry(&obj, "controller").unwrap()["fieldsV1"],
            json!({"f:metadata": {"f:annotations": {"f:note": {}}}, "f:status": {"f:replicas": {}}})
        );
    }

    #[test]
    fn dropped_field_owned_by_another_manager_is_kept() {
        let live = apply(None, DEPLOY_V1, "a", false).unwrap();
        let same_replicas =
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 2}\n";
        let live = apply(Some(&live), same_replicas, "b", false).unwrap();
        let both = live["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(
            both.len(),
            2,
            "shared ownership of an equal value is not a conflict"
        );
        let without = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n";
        let obj = apply(Some(&live), without, "a", false).unwrap();
        assert_eq!(obj["spec"]["replicas"], 2, "still owned by b");
        assert!(obj["metadata"].get("labels").is_none());
        assert!(entry(&obj, "a").is_none(), "a owns nothing any more");
    }

    fn live_with_csa_owner() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "managedFields": [{
                "manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "v1",
                "time": NOW, "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:replicas": {}, "f:paused": {}}}
            }]},
            "spec": {"replicas": 1, "paused": false}
        })
    }

    #[test]
    fn conflict_without_force() {
        let live = live_with_csa_owner();
        let body =
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 3}\n";
        match apply(Some(&live), body, "kubectl", false).unwrap_err() {
            PatchError::Conflict(m) => assert_eq!(
                m,
                "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using v1: .spec.replicas"
            ),
            other => panic!("{other:?}"),
        }
        let body = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 3, paused: true}\n";
        match apply(Some(&live), body, "kubectl", false).unwrap_err() {
            PatchError::Conflict(m) => assert_eq!(
                m,
                "Apply failed with 2 conflicts: conflicts with \"kubectl-client-side-apply\" using v1:\n- .spec.paused\n- .spec.replicas"
            ),
            other => panic!("{other:?}"),
        }
        // Same value: shared, no conflict.
        let body =
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 1}\n";
        assert!(apply(Some(&live), body, "kubectl", false).is_ok());
    }

    #[test]
    fn force_takes_ownership() {
        let live = live_with_csa_owner();
        let body =
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 3}\n";
        let obj = apply(Some(&live), body, "kubectl", true).unwrap();
        assert_eq!(obj["spec"]["replicas"], 3);
        assert_eq!(
            entry(&obj, "kubectl-client-side-apply").unwrap()["fieldsV1"],
            json!({"f:spec": {"f:paused": {}}})
        );
        assert_eq!(
            entry(&obj, "kubectl").unwrap()["fieldsV1"],
            json!({"f:spec": {"f:replicas": {}}})
        );
        // Forcing every field away removes the entry.
        let body = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 4, paused: true}\n";
        let obj = apply(Some(&obj), body, "kubectl", true).unwrap();
        assert!(entry(&obj, "kubectl-client-side-apply").is_none());
        assert_eq!(obj["spec"], json!({"replicas": 4, "paused": true}));
    }

    #[test]
    fn conflict_inside_keyed_list_item() {
        let live = apply(None, DEPLOY_V1, "a", false).unwrap();
        let body = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},
            "spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:9"}]}}}}"#;
        match apply(Some(&live), body, "b", false).unwrap_err() {
            PatchError::Conflict(m) => assert_eq!(
                m,
                "Apply failed with 1 conflict: conflict with \"a\": .spec.template.spec.containers[name=\"nginx\"].image"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn status_subresource() {
        let live = apply(None, DEPLOY_V1, "kubectl", false).unwrap();
        let body = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec: {replicas: 100}
status:
  conditions:
  - {type: Available, status: "True"}
"#;
        let obj = server_side_apply(
            Some(&live),
            body.as_bytes(),
            "ctrl",
            false,
            LATER,
            "apps/v1",
            "Deployment",
            Some("status"),
        )
        .unwrap();
        assert_eq!(obj["spec"]["replicas"], 2, "spec untouched through /status");
        assert_eq!(
            obj["status"]["conditions"],
            json!([{"type": "Available", "status": "True"}])
        );
        let e = entry(&obj, "ctrl").unwrap();
        assert_eq!(e["subresource"], "status");
        assert_eq!(e["time"], LATER);
        assert_eq!(
            e["fieldsV1"],
            json!({"f:status": {"f:conditions": {"k:{\"type\":\"Available\"}": {".": {}, "f:type": {}, "f:status": {}}}}})
        );
        assert!(entry(&obj, "kubectl").unwrap().get("subresource").is_none());
    }

    #[test]
    fn finalizers_owned_as_set_members() {
        let body = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, finalizers: [a, b]}\n";
        let obj = server_side_apply(
            None,
            body.as_bytes(),
            "m",
            false,
            NOW,
            "v1",
            "ConfigMap",
            None,
        )
        .unwrap();
        assert_eq!(
            entry(&obj, "m").unwrap()["fieldsV1"],
            json!({"f:metadata": {"f:finalizers": {"v:\"a\"": {}, "v:\"b\"": {}}}})
        );
        let mut live = obj.clone();
        live["metadata"]["finalizers"] = json!(["a", "b", "other"]);
        let body = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, finalizers: [a]}\n";
        let obj = server_side_apply(
            Some(&live),
            body.as_bytes(),
            "m",
            false,
            NOW,
            "v1",
            "ConfigMap",
            None,
        )
        .unwrap();
        assert_eq!(obj["metadata"]["finalizers"], json!(["a", "other"]));
    }

    #[test]
    fn custom_resource_lists_without_keys_are_atomic() {
        let body = "apiVersion: ex.com/v1\nkind: Widget\nmetadata: {name: w}\nspec:\n  env: [{value: x}]\n  items: [1, 2]\n";
        let obj = server_side_apply(
            None,
            body.as_bytes(),
            "m",
            false,
            NOW,
            "ex.com/v1",
            "Widget",
            None,
        )
        .unwrap();
        assert_eq!(
            entry(&obj, "m").unwrap()["fieldsV1"],
            json!({"f:spec": {"f:env": {}, "f:items": {}}})
        );
        let body = "apiVersion: ex.com/v1\nkind: Widget\nmetadata: {name: w}\nspec:\n  env: [{value: z}]\n";
        let obj = server_side_apply(
            Some(&obj),
            body.as_bytes(),
            "m",
            false,
            NOW,
            "ex.com/v1",
            "Widget",
            None,
        )
        .unwrap();
        assert_eq!(obj["spec"], json!({"env": [{"value": "z"}]}));
    }

    #[test]
    fn malformed_and_invalid_bodies() {
        let cases = [
            "",
            "- a\n- b\n",
            "just a string",
            "kind: Deployment\nmetadata: {name: a}\n",
            "apiVersion: apps/v1\nmetadata: {name: a}\n",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {}\n",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: 5\n",
            "apiVersion: apps/v1\nkind: Pod\nmetadata: {name: a}\n",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a\n",
            "{\"apiVersion\": ",
        ];
        for body in cases {
            let err = apply(None, body, "m", false).unwrap_err();
            assert!(matches!(err, PatchError::Malformed(_)), "{body:?}: {err:?}");
        }
        let body =
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec: {$patch: replace}\n";
        assert!(matches!(
            apply(None, body, "m", false).unwrap_err(),
            PatchError::Invalid(_)
        ));
    }

    #[test]
    fn odd_live_objects_do_not_panic() {
        let body =
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 3}\n";
        for live in [
            json!(null),
            json!([1, 2]),
            json!({"metadata": 5}),
            json!({"metadata": {"managedFields": "nope"}}),
            json!({"metadata": {"managedFields": [1, {"manager": 5}, {"manager": "x", "fieldsV1": [1]},
                {"manager": "y", "operation": "Update", "fieldsV1": {"f:spec": {"k:notjson": {}, "f:replicas": {}}}}]},
                "spec": {"replicas": 1}}),
        ] {
            let out = apply(Some(&live), body, "m", true);
            let obj = out.unwrap();
            assert_eq!(obj["spec"]["replicas"], 3);
            let mut new = live.clone();
            record_update(Some(&live), &mut new, "u", NOW, "v1", None);
            let mut scalar = json!(7);
            record_update(Some(&live), &mut scalar, "u", NOW, "v1", None);
            assert_eq!(scalar, json!(7));
        }
    }

    #[test]
    fn record_update_tracks_changes() {
        let mut created = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "uid": "u", "labels": {"a": "1"}}, "data": {"x": "1", "y": "2"}});
        record_update(None, &mut created, "creator", NOW, "v1", None);
        let e = entry(&created, "creator").unwrap();
        assert_eq!(e["operation"], "Update");
        assert_eq!(
            e["fieldsV1"],
            json!({"f:metadata": {"f:labels": {"f:a": {}}}, "f:data": {"f:x": {}, "f:y": {}}})
        );

        let mut updated = created.clone();
        updated["data"] = json!({"x": "changed", "z": "3"});
        record_update(Some(&created), &mut updated, "editor", LATER, "v1", None);
        assert_eq!(
            entry(&updated, "creator").unwrap()["fieldsV1"],
            json!({"f:metadata": {"f:labels": {"f:a": {}}}}),
            "changed field moved, removed field dropped"
        );
        let ed = entry(&updated, "editor").unwrap();
        assert_eq!(ed["fieldsV1"], json!({"f:data": {"f:x": {}, "f:z": {}}}));
        assert_eq!(ed["time"], LATER);

        // No change: nothing recorded for a new manager.
        let mut same = updated.clone();
        record_update(Some(&updated), &mut same, "idle", LATER, "v1", None);
        assert!(entry(&same, "idle").is_none());
        assert_eq!(same, updated);

        // Status subresource entries are separate.
        let mut st = updated.clone();
        st["status"] = json!({"phase": "Ok"});
        record_update(
            Some(&updated),
            &mut st,
            "editor",
            LATER,
            "v1",
            Some("status"),
        );
        let list = st["metadata"]["managedFields"].as_array().unwrap();
        let status_entry = list.iter().find(|e| e["subresource"] == "status").unwrap();
        assert_eq!(status_entry["manager"], "editor");
        assert_eq!(
            status_entry["fieldsV1"],
            json!({"f:status": {"f:phase": {}}})
        );
    }

    #[test]
    fn record_update_keyed_lists_and_apply_interplay() {
        let live = apply(None, DEPLOY_V1, "kubectl", false).unwrap();
        let mut edited = live.clone();
        edited["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:edited");
        edited["spec"]["template"]["spec"]["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "debug", "image": "busybox"}));
        record_update(
            Some(&live),
            &mut edited,
            "kubectl-edit",
            NOW,
            "apps/v1",
            None,
        );
        assert_eq!(
            entry(&edited, "kubectl-edit").unwrap()["fieldsV1"],
            json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"nginx\"}": {"f:image": {}},
                "k:{\"name\":\"debug\"}": {".": {}, "f:name": {}, "f:image": {}}
            }}}}})
        );
        // The applier no longer owns the image, so re-applying its old value conflicts.
        match apply(Some(&edited), DEPLOY_V1, "kubectl", false).unwrap_err() {
            PatchError::Conflict(m) => assert!(
                m.contains("conflict with \"kubectl-edit\" using apps/v1: .spec.template.spec.containers[name=\"nginx\"].image"),
                "{m}"
            ),
            other => panic!("{other:?}"),
        }
        // A client that clears managedFields gets a fresh list.
        let mut cleared = edited.clone();
        cleared["metadata"]["managedFields"] = json!([]);
        cleared["metadata"]["labels"]["new"] = json!("1");
        record_update(Some(&edited), &mut cleared, "me", NOW, "apps/v1", None);
        let list = cleared["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(
            list[0]["fieldsV1"],
            json!({"f:metadata": {"f:labels": {"f:new": {}}}})
        );
    }

    #[test]
    fn deep_yaml_does_not_crash() {
        let mut body = String::from("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: ");
        body.push_str(&"[".repeat(5000));
        body.push_str(&"]".repeat(5000));
        let res = server_side_apply(
            None,
            body.as_bytes(),
            "m",
            false,
            NOW,
            "v1",
            "ConfigMap",
            None,
        );
        assert!(matches!(res, Err(PatchError::Malformed(_))), "{res:?}");
    }
}
