//! Strategic merge patch (approximate).
//!
//! Kubernetes derives list merge strategies from struct tags of the Go types.
//! This module has no schema: it decides by the list's field name (and, for
//! `ports`, by where the list sits), using a fixed merge-key table. The same
//! table is used by server-side apply for every kind, custom resources
//! included.

use serde_json::{Map, Value};

use super::PatchError;
pub(crate) use super::path::{MAX_DEPTH, Path};

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ORDER_PREFIX: &str = "$setElementOrder/";
const DELETE_PRIMITIVE_PREFIX: &str = "$deleteFromPrimitiveList/";

/// Who is merging: a strategic merge patch honours `$` directives and rejects
/// keyed-list items without their merge key; server-side apply refuses
/// directives and treats lists whose items lack the key as atomic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Strategic,
    Apply,
}

/// How a list field is merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListStrategy {
    /// Replaced wholesale.
    Atomic,
    /// Items are maps identified by this key.
    Keyed(&'static str),
    /// Primitive values merged as a set (union, original order kept).
    Set,
}

/// `$ref` / `$schema` are real field names of CRD JSON schemas, not directives.
pub(crate) fn is_schema_key(k: &str) -> bool {
    k == "$ref" || k == "$schema"
}

/// The merge-key table's strategy for a list named `field`, where the name
/// alone decides (everything but `ports`, which depends on where it is):
/// None for a name the table does not list (atomic). Also what
/// `/openapi` advertises as the lists' patch strategies.
pub(crate) fn named_strategy(field: &str) -> Option<ListStrategy> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "schedulingGates"
        | "resourceClaims" => ListStrategy::Keyed("name"),
        "volumeMounts" => ListStrategy::Keyed("mountPath"),
        "volumeDevices" => ListStrategy::Keyed("devicePath"),
        "ownerReferences" => ListStrategy::Keyed("uid"),
        "conditions" => ListStrategy::Keyed("type"),
        "hostAliases" => ListStrategy::Keyed("ip"),
        "topologySpreadConstraints" => ListStrategy::Keyed("topologyKey"),
        "finalizers" => ListStrategy::Set,
        _ => return None,
    })
}

/// The strategy the merge-key table gives to list `field` found in the map at `parent`.
fn table_strategy(parent: &Path, field: &str, items: &[Value]) -> ListStrategy {
    if field == "finalizers" && parent.is_top_level("spec") {
        // A Namespace's spec.finalizers: atomic, unlike metadata's set.
        return ListStrategy::Atomic;
    }
    if field != "ports" {
        // tolerations, volumeClaimTemplates, args, command, … are atomic.
        return named_strategy(field).unwrap_or(ListStrategy::Atomic);
    }
    if matches!(
        parent.name(),
        "containers" | "initContainers" | "ephemeralContainers"
    ) {
        ListStrategy::Keyed("containerPort")
    } else if parent.is_top_level("spec") {
        // Service spec.ports (and look-alike custom resources).
        ListStrategy::Keyed("port")
    } else if !items.is_empty() && items.iter().all(|i| i.get("containerPort").is_some()) {
        ListStrategy::Keyed("containerPort")
    } else {
        ListStrategy::Atomic
    }
}

fn is_replace_marker(item: &Value) -> bool {
    item.get(DIRECTIVE).and_then(Value::as_str) == Some("replace")
}

/// Whether `item` may take part in a keyed merge on `key`.
fn has_key(item: &Value, key: &str) -> bool {
    item.get(key).is_some_and(|v| !v.is_null())
}

/// The strategy for list `field` with the given patch `items`, after checking
/// the items fit it. In [`Mode::Apply`] a misfit degrades to
/// [`ListStrategy::Atomic`]; in [`Mode::Strategic`] it is an error.
pub(crate) fn list_strategy(
    parent: &Path,
    field: &str,
    items: &[Value],
    mode: Mode,
) -> Result<ListStrategy, PatchError> {
    let strategy = table_strategy(parent, field, items);
    let fits = match strategy {
        ListStrategy::Atomic => true,
        ListStrategy::Keyed(key) => items.iter().all(|i| {
            i.is_object() && (has_key(i, key) || (mode == Mode::Strategic && is_replace_marker(i)))
        }),
        ListStrategy::Set => items.iter().all(|i| {
            (!i.is_object() && !i.is_array()) || (mode == Mode::Strategic && is_replace_marker(i))
        }),
    };
    match (fits, mode) {
        (true, _) => Ok(strategy),
        (false, Mode::Apply) => Ok(ListStrategy::Atomic),
        (false, Mode::Strategic) => Err(PatchError::Invalid(match strategy {
            ListStrategy::Keyed(key) => {
                format!("list {field}: every item must be a map containing the merge key {key:?}")
            }
            _ => format!("list {field}: items must be primitive values"),
        })),
    }
}

/// Applies a strategic merge patch for a built-in `kind` (e.g. `"Pod"`,
/// `"StatefulSet"`) to `target`. The body must be a JSON object.
///
/// This is an approximation of Kubernetes' schema-driven algorithm:
/// - maps merge recursively and a `null` value deletes the key;
/// - lists are merged by a fixed merge-key table keyed on the field name
///   (`containers`/`initContainers`/`ephemeralContainers`/`env`/`volumes`/
///   `imagePullSecrets`/`schedulingGates`/`resourceClaims` by `name`,
///   `volumeMounts` by `mountPath`, `volumeDevices` by `devicePath`,
///   `ownerReferences` by `uid`, `conditions` by `type`, `hostAliases` by `ip`,
///   `topologySpreadConstraints` by `topologyKey`, `ports` by `containerPort`
///   inside containers and by `port` in a top-level `spec` (Service);
///   `finalizers` is a primitive set) and every other list is replaced;
/// - merged lists keep the existing items' order and append new ones, unless
///   `$setElementOrder/<field>` says otherwise (patched items take the listed
///   order in the slots they occupy, server-only items keep their slots);
/// - directives: `$patch: replace|merge|delete` on maps (`delete` leaves an
///   empty map, as Kubernetes does), `{"$patch": "delete", key: v}` and
///   `{"$patch": "replace"}` items in keyed lists, `$retainKeys`,
///   `$deleteFromPrimitiveList/<field>`, `$setElementOrder/<field>`. Any
///   other `$`-key (except the schema fields `$ref`/`$schema`) is
///   [`PatchError::Invalid`]; no directive survives into the result.
///
/// `kind` does not change the table (the `ports` rule is decided by path);
/// it is accepted so callers need not care. Atomic: on error `target` is
/// unchanged.
pub fn apply_strategic_merge_patch(
    target: &mut Value,
    body: &[u8],
    kind: &str,
) -> Result<(), PatchError> {
    let _ = kind;
    let patch: Value = serde_json::from_slice(body)
        .map_err(|e| PatchError::Malformed(format!("invalid strategic merge patch: {e}")))?;
    let Value::Object(patch) = patch else {
        return Err(PatchError::Malformed(
            "strategic merge patch body must be a JSON object".to_string(),
        ));
    };
    let mut work = match target {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    merge_map(&mut work, &patch, Mode::Strategic, &Path::ROOT)?;
    *target = Value::Object(work);
    Ok(())
}

/// Merges the object `patch` into `target` (replaced by an empty object when
/// it is not one) with the strategic rules of `mode`.
pub(crate) fn merge_object(
    target: &mut Value,
    patch: &Map<String, Value>,
    mode: Mode,
) -> Result<(), PatchError> {
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(m) = target {
        merge_map(m, patch, mode, &Path::ROOT)?;
    }
    Ok(())
}

fn merge_map(
    orig: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    mode: Mode,
    path: &Path,
) -> Result<(), PatchError> {
    if path.too_deep() {
        return Err(PatchError::Invalid("patch nesting too deep".to_string()));
    }
    let is_directive = |k: &String| k.starts_with('$') && !is_schema_key(k);
    if let (Mode::Apply, Some(k)) = (mode, patch.keys().find(|k| is_directive(k))) {
        return Err(PatchError::Invalid(format!(
            "{k:?} at {} is a patch directive, not allowed in an applied configuration",
            path.display()
        )));
    }
    if let Some(d) = patch.get(DIRECTIVE) {
        match d.as_str() {
            Some("replace") => {
                let mut rest = patch.clone();
                rest.remove(DIRECTIVE);
                let mut fresh = Map::new();
                merge_map(&mut fresh, &rest, mode, path)?;
                *orig = fresh;
                return Ok(());
            }
            Some("delete") => {
                orig.clear();
                return Ok(());
            }
            Some("merge") => {}
            _ => {
                return Err(PatchError::Invalid(format!(
                    "unknown patch type: {d} in map at {}",
                    path.display()
                )));
            }
        }
    }
    if let Some(rk) = patch.get(RETAIN_KEYS) {
        let keep: Vec<&str> = match rk {
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if rk.as_array().is_none_or(|a| a.len() != keep.len()) {
            return Err(PatchError::Invalid(format!(
                "{RETAIN_KEYS} must be a list of strings"
            )));
        }
        for (k, v) in patch {
            if !k.starts_with('$') && !v.is_null() && !keep.contains(&k.as_str()) {
                return Err(PatchError::Invalid(format!(
                    "field {k:?} is not present in $retainKeys list at {}",
                    path.display()
                )));
            }
        }
        orig.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (k, v) in patch {
        let Some(field) = k.strip_prefix(DELETE_PRIMITIVE_PREFIX) else {
            continue;
        };
        let Value::Array(remove) = v else {
            return Err(PatchError::Invalid(format!("{k} must be a list")));
        };
        match orig.get_mut(field) {
            Some(Value::Array(list)) => list.retain(|x| !remove.contains(x)),
            None | Some(Value::Null) => {}
            Some(_) => {
                return Err(PatchError::Invalid(format!(
                    "{k}: field {field:?} is not a list"
                )));
            }
        }
    }
    for (k, pv) in patch {
        if is_directive(k) {
            if k == DIRECTIVE
                || k == RETAIN_KEYS
                || k.starts_with(DELETE_PRIMITIVE_PREFIX)
                || k.starts_with(SET_ORDER_PREFIX)
            {
                continue;
            }
            return Err(PatchError::Invalid(format!(
                "unknown patch directive {k:?} at {}",
                path.display()
            )));
        }
        let child = path.child(k);
        match pv {
            Value::Null => {
                orig.remove(k);
            }
            Value::Object(pm) => {
                let slot = orig
                    .entry(k.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                if !slot.is_object() {
                    *slot = Value::Object(Map::new());
                }
                if let Value::Object(om) = slot {
                    merge_map(om, pm, mode, &child)?;
                }
            }
            Value::Array(pa) => {
                let order = patch.get(&format!("{SET_ORDER_PREFIX}{k}"));
                let slot = orig
                    .entry(k.clone())
                    .or_insert_with(|| Value::Array(Vec::new()));
                if !slot.is_array() {
                    *slot = Value::Array(Vec::new());
                }
                if let Value::Array(oa) = slot {
                    merge_list(oa, pa, order, mode, path, k)?;
                }
            }
            scalar => {
                orig.insert(k.clone(), scalar.clone());
            }
        }
    }
    // `$setElementOrder` for lists the patch does not otherwise touch.
    for (k, order) in patch {
        let Some(field) = k.strip_prefix(SET_ORDER_PREFIX) else {
            continue;
        };
        if patch.contains_key(field) {
            continue;
        }
        if let Some(Value::Array(list)) = orig.get_mut(field) {
            let strategy = list_strategy(path, field, list, Mode::Apply)?;
            apply_order(list, order, strategy, k)?;
        } else if !order.is_array() {
            return Err(PatchError::Invalid(format!("{k} must be a list")));
        }
    }
    Ok(())
}

/// Copies a patch value into a fresh location, processing directives and
/// dropping `null` map values.
fn normalized(v: &Value, mode: Mode, path: &Path) -> Result<Value, PatchError> {
    match v {
        Value::Object(m) => {
            let mut fresh = Map::new();
            merge_map(&mut fresh, m, mode, path)?;
            Ok(Value::Object(fresh))
        }
        Value::Array(a) => {
            let inner = path.item();
            if inner.too_deep() {
                return Err(PatchError::Invalid("patch nesting too deep".to_string()));
            }
            a.iter()
                .map(|x| normalized(x, mode, &inner))
                .collect::<Result<_, _>>()
                .map(Value::Array)
        }
        other => Ok(other.clone()),
    }
}

fn merge_list(
    orig: &mut Vec<Value>,
    patch: &[Value],
    order: Option<&Value>,
    mode: Mode,
    parent: &Path,
    field: &str,
) -> Result<(), PatchError> {
    let strategy = list_strategy(parent, field, patch, mode)?;
    let path = parent.child(field);
    let item_path = path.item();
    if item_path.too_deep() {
        return Err(PatchError::Invalid("patch nesting too deep".to_string()));
    }
    let replace = patch.iter().any(is_replace_marker);
    match strategy {
        ListStrategy::Atomic => {
            let mut fresh = Vec::with_capacity(patch.len());
            for item in patch {
                match item.get(DIRECTIVE) {
                    Some(d) if d.as_str() == Some("replace") => {
                        let mut rest = item.as_object().cloned().unwrap_or_default();
                        rest.remove(DIRECTIVE);
                        if !rest.is_empty() {
                            fresh.push(normalized(&Value::Object(rest), mode, &item_path)?);
                        }
                    }
                    Some(d) if d.as_str() == Some("delete") => {
                        return Err(PatchError::Invalid(format!(
                            "cannot use $patch: delete in list {field} without a merge key"
                        )));
                    }
                    _ => fresh.push(normalized(item, mode, &item_path)?),
                }
            }
            *orig = fresh;
        }
        ListStrategy::Keyed(key) => {
            if replace {
                orig.clear();
            }
            for item in patch {
                let Value::Object(m) = item else { continue };
                let mut m = m;
                let mut owned;
                match m.get(DIRECTIVE).map(|d| (d, d.as_str())) {
                    None | Some((_, Some("merge"))) => {}
                    Some((_, Some("replace"))) => {
                        owned = m.clone();
                        owned.remove(DIRECTIVE);
                        if !owned.contains_key(key) {
                            continue;
                        }
                        m = &owned;
                    }
                    Some((_, Some("delete"))) => {
                        let Some(kv) = m.get(key).filter(|v| !v.is_null()) else {
                            return Err(PatchError::Invalid(format!(
                                "$patch: delete in list {field} needs the merge key {key:?}"
                            )));
                        };
                        orig.retain(|o| o.get(key) != Some(kv));
                        continue;
                    }
                    Some((d, _)) => {
                        return Err(PatchError::Invalid(format!(
                            "unknown patch type: {d} in list {field}"
                        )));
                    }
                }
                let kv = m.get(key);
                match orig.iter_mut().find(|o| o.get(key) == kv) {
                    Some(existing) => {
                        if !existing.is_object() {
                            *existing = Value::Object(Map::new());
                        }
                        if let Value::Object(em) = existing {
                            merge_map(em, m, mode, &item_path)?;
                        }
                    }
                    None => {
                        let mut fresh = Map::new();
                        merge_map(&mut fresh, m, mode, &item_path)?;
                        orig.push(Value::Object(fresh));
                    }
                }
            }
        }
        ListStrategy::Set => {
            if replace {
                orig.clear();
            }
            for item in patch {
                if !item.is_object() && !orig.contains(item) {
                    orig.push(item.clone());
                }
            }
        }
    }
    if let Some(order) = order {
        apply_order(orig, order, strategy, &format!("{SET_ORDER_PREFIX}{field}"))?;
    }
    Ok(())
}

/// Reorders `list` per a `$setElementOrder` list: the items named in `order`
/// are sorted into the slots they already occupy; other items stay put.
fn apply_order(
    list: &mut [Value],
    order: &Value,
    strategy: ListStrategy,
    what: &str,
) -> Result<(), PatchError> {
    let Value::Array(order) = order else {
        return Err(PatchError::Invalid(format!("{what} must be a list")));
    };
    let id = |v: &Value| -> Option<Value> {
        match strategy {
            ListStrategy::Keyed(key) => v.get(key).cloned(),
            ListStrategy::Set => Some(v.clone()),
            ListStrategy::Atomic => None,
        }
    };
    let wanted: Vec<Value> = order.iter().filter_map(&id).collect();
    let rank = |v: &Value| id(v).and_then(|i| wanted.iter().position(|w| *w == i));
    let slots: Vec<usize> = (0..list.len())
        .filter(|&i| rank(&list[i]).is_some())
        .collect();
    let mut items: Vec<(usize, Value)> = slots
        .iter()
        .map(|&i| (rank(&list[i]).unwrap_or(usize::MAX), list[i].clone()))
        .collect();
    items.sort_by_key(|(r, _)| *r);
    for (slot, (_, item)) in slots.into_iter().zip(items) {
        list[slot] = item;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Patches a copy of `t`, checking that no directive survives.
    fn smp(t: &Value, p: Value) -> Result<Value, PatchError> {
        let mut t = t.clone();
        apply_strategic_merge_patch(&mut t, p.to_string().as_bytes(), "Pod")?;
        let text = t.to_string();
        for d in ["$patch", "$retainKeys", "$setElement", "$deleteFrom"] {
            assert!(!text.contains(d), "directive survived: {text}");
        }
        Ok(t)
    }

    /// The value at JSON pointer `ptr` after a successful patch.
    fn at(t: &Value, p: Value, ptr: &str) -> Value {
        let out = smp(t, p).unwrap();
        out.pointer(ptr).cloned().unwrap_or(Value::Null)
    }

    fn invalid(t: &Value, p: Value) -> bool {
        matches!(smp(t, p), Err(PatchError::Invalid(_)))
    }

    fn names(v: &Value) -> Vec<&str> {
        let items = v.as_array().map(Vec::as_slice).unwrap_or(&[]);
        items.iter().filter_map(|c| c["name"].as_str()).collect()
    }

    fn pod() -> Value {
        json!({"metadata": {"name": "p", "labels": {"a": "1", "b": "2"}, "finalizers": ["x", "y"]},
            "spec": {
                "containers": [
                    {"name": "app", "image": "app:1",
                     "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                     "ports": [{"containerPort": 80, "name": "http"}],
                     "volumeMounts": [{"name": "data", "mountPath": "/data"}], "args": ["--a"]},
                    {"name": "side", "image": "side:1"}],
                "volumes": [{"name": "data", "emptyDir": {}}],
                "imagePullSecrets": [{"name": "s1"}],
                "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["a"]}],
                "topologySpreadConstraints": [{"topologyKey": "zone", "maxSkew": 1}]}})
    }

    #[test]
    fn maps_merge_and_null_deletes() {
        let p = json!({"metadata": {"labels": {"a": null, "c": "3"}}, "spec": {"nodeName": "n"}});
        let out = smp(&pod(), p).unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"b": "2", "c": "3"}));
        assert_eq!(out["spec"]["nodeName"], "n");
        assert_eq!(out["spec"]["containers"], pod()["spec"]["containers"]);
        assert_eq!(at(&pod(), json!({"spec": null}), "/spec"), Value::Null);
    }

    #[test]
    fn containers_env_ports_mounts_merge_by_key() {
        let p = json!({"spec": {"containers": [{"name": "app", "image": "app:2",
            "env": [{"name": "B", "value": "two"}, {"name": "C", "value": "3"}],
            "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 443}],
            "volumeMounts": [{"mountPath": "/data", "readOnly": true}, {"mountPath": "/c"}],
            "args": ["--c"]}, {"name": "new", "image": "n", "stdin": null}]}});
        let c = at(&pod(), p, "/spec/containers");
        assert_eq!(names(&c), ["app", "side", "new"]);
        assert_eq!(c[0]["image"], "app:2");
        let env = json!([{"name": "A", "value": "1"}, {"name": "B", "value": "two"},
            {"name": "C", "value": "3"}]);
        assert_eq!(c[0]["env"], env);
        let ports = json!([{"containerPort": 80, "name": "http", "protocol": "TCP"},
            {"containerPort": 443}]);
        assert_eq!(c[0]["ports"], ports);
        let mounts = json!([{"name": "data", "mountPath": "/data", "readOnly": true},
            {"mountPath": "/c"}]);
        assert_eq!(c[0]["volumeMounts"], mounts);
        assert_eq!(c[0]["args"], json!(["--c"]), "unkeyed lists are replaced");
        let new = json!({"name": "new", "image": "n"});
        assert_eq!(c[2], new, "nulls dropped from new items");
        let t = json!({"spec": {"initContainers": [{"name": "i", "image": "1"}],
            "ephemeralContainers": [{"name": "e"}]}});
        let p = json!({"spec": {"initContainers": [{"name": "i", "image": "2"}],
            "ephemeralContainers": [{"name": "f"}]}});
        let out = smp(&t, p).unwrap();
        let init = json!([{"name": "i", "image": "2"}]);
        assert_eq!(out["spec"]["initContainers"], init);
        assert_eq!(names(&out["spec"]["ephemeralContainers"]), ["e", "f"]);
    }

    #[test]
    fn service_ports_merge_by_port() {
        let svc = json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443}]}});
        let p = json!({"spec": {"ports": [{"port": 80, "targetPort": 9090}, {"port": 8443}]}});
        let want = json!([{"port": 80, "targetPort": 9090}, {"port": 443}, {"port": 8443}]);
        assert_eq!(at(&svc, p, "/spec/ports"), want);
    }

    #[test]
    fn volumes_secrets_host_aliases_spread_constraints_merge_by_key() {
        let p = json!({"spec": {"volumes": [{"name": "cfg", "configMap": {"name": "c"}}],
            "imagePullSecrets": [{"name": "s2"}],
            "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["b"]}, {"ip": "10.0.0.2"}],
            "topologySpreadConstraints": [{"topologyKey": "zone", "maxSkew": 2}]}});
        let s = at(&pod(), p, "/spec");
        assert_eq!(names(&s["volumes"]), ["data", "cfg"]);
        assert_eq!(names(&s["imagePullSecrets"]), ["s1", "s2"]);
        let aliases = json!([{"ip": "10.0.0.1", "hostnames": ["b"]}, {"ip": "10.0.0.2"}]);
        assert_eq!(s["hostAliases"], aliases);
        let spread = json!([{"topologyKey": "zone", "maxSkew": 2}]);
        assert_eq!(s["topologySpreadConstraints"], spread);
    }

    #[test]
    fn owner_references_by_uid_and_conditions_by_type() {
        let t = json!({"metadata": {"ownerReferences": [{"uid": "u1", "name": "a"}]},
            "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "S"}]}});
        let p = json!({"metadata": {"ownerReferences": [{"uid": "u1", "x": true}, {"uid": "u2"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "I"}]}});
        let out = smp(&t, p).unwrap();
        let refs = json!([{"uid": "u1", "name": "a", "x": true}, {"uid": "u2"}]);
        assert_eq!(out["metadata"]["ownerReferences"], refs);
        let conds = json!([{"type": "Ready", "status": "True"}, {"type": "S"}, {"type": "I"}]);
        assert_eq!(out["status"]["conditions"], conds);
    }

    #[test]
    fn finalizers_union_and_delete_from_primitive_list() {
        let f = "/metadata/finalizers";
        let p = json!({"metadata": {"finalizers": ["z", "x"]}});
        assert_eq!(at(&pod(), p, f), json!(["x", "y", "z"]));
        let p = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}});
        assert_eq!(at(&pod(), p, f), json!(["y"]));
        let p = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x", "y"],
            "finalizers": ["w"]}});
        assert_eq!(at(&pod(), p, f), json!(["w"]));
        let p = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": "x"}});
        assert!(invalid(&pod(), p));
        let p = json!({"metadata": {"finalizers": [{"a": 1}]}});
        assert!(invalid(&pod(), p));
    }

    #[test]
    fn unkeyed_lists_are_replaced() {
        let t = json!({"spec": {"tolerations": [{"key": "a"}, {"key": "b"}],
            "volumeClaimTemplates": [{"a": 1}]}});
        let p = json!({"spec": {"tolerations": [{"key": "c", "value": null}],
            "volumeClaimTemplates": []}});
        let want = json!({"tolerations": [{"key": "c"}], "volumeClaimTemplates": []});
        assert_eq!(at(&t, p, "/spec"), want);
        // `ports` outside containers / a top-level spec (NetworkPolicy rules) is atomic.
        let t = json!({"spec": {"ingress": [{"ports": [{"port": 80}]}]}});
        let p = json!({"spec": {"ingress": [{"ports": [{"port": 81}]}]}});
        let want = json!([{"ports": [{"port": 81}]}]);
        assert_eq!(at(&t, p, "/spec/ingress"), want);
    }

    #[test]
    fn delete_directive_in_keyed_list() {
        let p = json!({"spec": {"containers": [{"name": "side", "$patch": "delete"},
            {"name": "app", "env": [{"name": "A", "$patch": "delete"}]}]}});
        let c = at(&pod(), p, "/spec/containers");
        assert_eq!(names(&c), ["app"]);
        assert_eq!(c[0]["env"], json!([{"name": "B", "value": "2"}]));
        let p = json!({"spec": {"containers": [{"$patch": "delete"}]}});
        assert!(invalid(&pod(), p));
    }

    #[test]
    fn replace_merge_delete_directives_on_lists_and_maps() {
        let p = json!({"spec": {"containers": [{"$patch": "replace"}, {"name": "o"}]}});
        assert_eq!(at(&pod(), p, "/spec/containers"), json!([{"name": "o"}]));
        let l = "/metadata/labels";
        let p = json!({"metadata": {"labels": {"$patch": "replace", "z": "9"}}});
        assert_eq!(at(&pod(), p, l), json!({"z": "9"}));
        let p = json!({"metadata": {"labels": {"$patch": "merge", "z": "9"}}});
        assert_eq!(at(&pod(), p, l), json!({"a": "1", "b": "2", "z": "9"}));
        let p = json!({"metadata": {"labels": {"$patch": "delete"}}});
        assert_eq!(at(&pod(), p, l), json!({}));
        let p = json!({"finalizers": [{"$patch": "replace"}, "q"]});
        let want = json!(["q"]);
        assert_eq!(at(&json!({"finalizers": ["a"]}), p, "/finalizers"), want);
    }

    #[test]
    fn retain_keys() {
        let t = json!({"spec": {"strategy": {"type": "Rolling", "rollingUpdate": {"x": 1}}}});
        let p = json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}});
        assert_eq!(at(&t, p, "/spec/strategy"), json!({"type": "Recreate"}));
        let p = json!({"spec": {"strategy": {"$retainKeys": ["type"], "other": 1}}});
        assert!(invalid(&t, p));
        let p = json!({"spec": {"strategy": {"$retainKeys": "type"}}});
        assert!(invalid(&t, p));
        let p = json!({"spec": {"strategy": {"$retainKeys": [1]}}});
        assert!(invalid(&t, p));
    }

    #[test]
    fn set_element_order() {
        let t = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}});
        let p = json!({"spec": {"containers": [{"name": "d", "image": "d"}],
            "$setElementOrder/containers": [{"name": "d"}, {"name": "c"}, {"name": "a"}]}});
        assert_eq!(names(&at(&t, p, "/spec/containers")), ["d", "b", "c", "a"]);
        // Only the directive; the server-only item `b` keeps its slot.
        let p = json!({"spec": {"$setElementOrder/containers": [{"name": "c"}, {"name": "a"}]}});
        assert_eq!(names(&at(&t, p, "/spec/containers")), ["c", "b", "a"]);
        let p = json!({"metadata": {"$setElementOrder/finalizers": ["z", "y", "x"],
            "finalizers": ["z"]}});
        let want = json!(["z", "y", "x"]);
        assert_eq!(at(&pod(), p, "/metadata/finalizers"), want);
        let p = json!({"metadata": {"$setElementOrder/finalizers": "x"}});
        assert!(invalid(&pod(), p));
    }

    #[test]
    fn new_items_are_appended_in_patch_order() {
        let p = json!({"spec": {"containers": [{"name": "z"}, {"name": "app"}, {"name": "y"}]}});
        let c = at(&pod(), p, "/spec/containers");
        assert_eq!(names(&c), ["app", "side", "z", "y"]);
    }

    #[test]
    fn bad_directives_and_missing_keys_are_invalid_and_atomic() {
        for p in [
            json!({"metadata": {"$frobnicate": 1}}),
            json!({"metadata": {"labels": {"$patch": "explode"}}}),
            json!({"spec": {"containers": [{"name": "app", "$patch": "bogus"}]}}),
            json!({"spec": {"containers": [{"image": "no-name"}]}}),
            json!({"spec": {"containers": ["app"]}}),
            json!({"spec": {"env": [{"value": "x"}]}}),
        ] {
            let mut t = pod();
            let err = apply_strategic_merge_patch(&mut t, p.to_string().as_bytes(), "Pod");
            assert!(matches!(err, Err(PatchError::Invalid(_))), "{p}: {err:?}");
            assert_eq!(t, pod(), "target unchanged on error");
        }
        // `$ref` / `$schema` are ordinary CRD schema fields.
        let t = json!({"schema": {"$ref": "#/a"}});
        let p = json!({"schema": {"$schema": "x"}});
        assert_eq!(at(&t, p, "/schema"), json!({"$ref": "#/a", "$schema": "x"}));
        // Server-side apply mode refuses directives outright.
        let p = json!({"a": {"$patch": "merge"}});
        let err = merge_object(&mut json!({}), p.as_object().unwrap(), Mode::Apply);
        assert!(matches!(err, Err(PatchError::Invalid(_))));
    }

    #[test]
    fn malformed_bodies_type_changes_and_depth() {
        let mut t = pod();
        for body in [&b"[]"[..], b"\"str\"", b"null", b"{", b"", b"spec: {}"] {
            let err = apply_strategic_merge_patch(&mut t, body, "Pod").unwrap_err();
            assert!(matches!(err, PatchError::Malformed(_)), "{err:?}");
        }
        let t2 = json!({"a": [1], "b": {"c": 1}, "d": 1});
        let p = json!({"a": {"x": 1}, "b": "s", "d": [1]});
        assert_eq!(smp(&t2, p.clone()).unwrap(), p);
        assert_eq!(at(&json!("scalar"), json!({"a": 1}), "/a"), 1);
        let mut deep = json!(1);
        for _ in 0..(MAX_DEPTH + 10) {
            deep = json!({ "a": deep });
        }
        let err = merge_object(&mut json!({}), deep.as_object().unwrap(), Mode::Strategic);
        assert!(matches!(err, Err(PatchError::Invalid(_))));
        // Alternating lists and maps right up to the limit still merge.
        let mut deep = json!(1);
        for _ in 0..(MAX_DEPTH / 3 - 2) {
            deep = json!({ "containers": [{ "name": "n", "a": deep }] });
        }
        let mut live = deep.clone();
        merge_object(&mut live, deep.as_object().unwrap(), Mode::Strategic).unwrap();
        assert_eq!(live, deep);
        let body = format!("{}{}", "{\"a\":".repeat(1000), "}".repeat(1000));
        let err = apply_strategic_merge_patch(&mut t, body.as_bytes(), "X").unwrap_err();
        assert!(matches!(err, PatchError::Malformed(_)));
    }
}
