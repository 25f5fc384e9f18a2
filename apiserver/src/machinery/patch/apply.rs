//! Server-side apply: an applied configuration parsed (JSON or YAML),
//! checked, merged into the live object by the field sets of its manager
//! (`fieldset.rs`), with conflicts against other managers' fields
//! (approximate, see docs/apiserver.md; `Update` operations are recorded in
//! `managed_fields.rs`).

use serde_json::{Map, Value};

use super::fieldset::{
    Entry, FieldSet, SERVER_METADATA, display_path, fields_of, get_path, parse_entries, prune,
    write_entries,
};
use super::strategic::{self, Mode, Path};
use super::{ConflictCause, PatchError};

/// Stack for the YAML parser thread: serde-saphyr needs well over 1 MiB for
/// its 64 nesting levels in debug builds, more than a tokio worker may have
/// left. Only touched pages are committed.
const YAML_STACK: usize = 16 * 1024 * 1024;

/// Parses an applied configuration: JSON directly when it is JSON, else YAML
/// (YAML 1.1 style scalars, as Kubernetes' decoder) on a helper thread with a
/// large stack, which also turns a parser panic into `Malformed`. A
/// duplicate key keeps its last value (as go-yaml's non-strict decoding;
/// `fieldValidation` decides whether it is reported, see `crate::registry::fields`).
pub fn parse_applied(body: &[u8]) -> Result<Value, PatchError> {
    if body.trim_ascii_start().first() == Some(&b'{')
        && let Ok(v) = serde_json::from_slice::<Value>(body)
    {
        return Ok(v);
    }
    let parse = || {
        let mut options = serde_saphyr::Options::default();
        options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::LastWins;
        serde_saphyr::from_slice_with_options::<Value>(body, options)
            .map_err(|e| PatchError::Malformed(format!("error decoding YAML: {e}")))
    };
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name("apply-yaml".to_string())
            .stack_size(YAML_STACK)
            .spawn_scoped(scope, parse);
        match spawned {
            Ok(handle) => handle
                .join()
                .unwrap_or_else(|_| Err(PatchError::Malformed("error decoding YAML".into()))),
            Err(_) => parse(),
        }
    })
}

/// Checks the identity fields of an applied configuration and strips the
/// server-owned metadata from it.
/// A body without `metadata` or without `metadata.name` takes the name
/// the URL gives (`url_name`), as kube-apiserver does.
fn check_applied(
    applied: Value,
    kind: &str,
    url_name: &str,
) -> Result<Map<String, Value>, PatchError> {
    let missing = |what: &str| {
        PatchError::Malformed(format!("{what} must be set in the applied configuration"))
    };
    let text = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(String::from)
    };
    let Value::Object(mut body) = applied else {
        return Err(PatchError::Malformed(
            "the applied configuration must be an object".into(),
        ));
    };
    let body_version = text(body.get("apiVersion")).ok_or_else(|| missing("apiVersion"))?;
    let body_kind = text(body.get("kind")).ok_or_else(|| missing("kind"))?;
    if !kind.is_empty() && body_kind != kind {
        // kube-apiserver's words: the body's group/version and kind.
        let gv = if body_version.contains('/') {
            body_version.to_string()
        } else {
            format!("/{body_version}")
        };
        return Err(PatchError::Malformed(format!(
            "invalid object type: {gv}, Kind={body_kind}"
        )));
    }
    let meta = match body.entry("metadata").or_insert(Value::Null) {
        m @ Value::Null => {
            *m = Value::Object(Map::new());
            m.as_object_mut().expect("just made a map")
        }
        Value::Object(m) => m,
        _ => {
            return Err(PatchError::Malformed(
                "metadata must be an object in the applied configuration".into(),
            ));
        }
    };
    if text(meta.get("name")).is_none() {
        if url_name.is_empty() {
            return Err(missing("metadata.name"));
        }
        meta.insert("name".into(), url_name.into());
    }
    for f in SERVER_METADATA {
        meta.remove(f);
    }
    Ok(body)
}

/// Who applies, and to what: the options of one server-side apply.
#[derive(Debug, Clone, Copy)]
pub struct ApplyOptions<'a> {
    /// The field manager (`fieldManager`).
    pub manager: &'a str,
    /// Take over fields other managers own instead of conflicting (`force`).
    pub force: bool,
    /// The time recorded in managedFields.
    pub now: &'a str,
    /// The apiVersion the apply is made at.
    pub api_version: &'a str,
    /// The kind the URL names (the body must match it).
    pub kind: &'a str,
    /// The name the URL names: a body without `metadata.name` takes it
    /// (empty: the body must name the object).
    pub name: &'a str,
    /// `Some("status")` for an apply to the status subresource.
    pub subresource: Option<&'a str>,
}

/// Server-side apply of `applied_body` (YAML, or JSON which is YAML) by
/// field manager `manager`, returning the new object with
/// `metadata.managedFields` updated.
///
/// **Approximation** of Kubernetes' structured-merge-diff, without schemas:
/// - The body must be an object with `apiVersion`, `kind` (equal to `kind`
///   when that is non-empty) and `metadata.name` (or `opts.name`, the
///   URL's, when the body has none), else [`PatchError::Malformed`]; `$` directives are [`PatchError::Invalid`].
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
/// - YAML bodies are parsed on a short-lived helper thread with a 16 MiB
///   stack (the parser is stack-hungry in debug builds); objects nested
///   deeper than 150 levels are refused as [`PatchError::Invalid`].
pub fn server_side_apply(
    live: Option<&Value>,
    applied_body: &[u8],
    opts: &ApplyOptions<'_>,
) -> Result<Value, PatchError> {
    let ApplyOptions {
        manager,
        force,
        now,
        api_version,
        kind,
        name,
        subresource,
    } = *opts;
    let body = check_applied(parse_applied(applied_body)?, kind, name)?;
    let status_only = subresource == Some("status");
    let effective: Map<String, Value> = if status_only {
        body.get("status")
            .map(|s| ("status".to_string(), s.clone()))
            .into_iter()
            .collect()
    } else {
        body.clone()
    };
    let mut new_set = fields_of(&effective, &Path::ROOT);
    super::added::atomic_leaves(&mut new_set, api_version, kind);
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
            let causes = conflicts
                .iter()
                .map(|(i, path)| ConflictCause {
                    field: display_path(path),
                    message: format!(
                        "conflict with {}",
                        entries.get(*i).map(Entry::describe).unwrap_or_default()
                    ),
                })
                .collect();
            return Err(PatchError::Conflict {
                message: conflict_message(&entries, &conflicts),
                causes,
            });
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
        let (who, at) = (describe(*i), display_path(path));
        return format!("Apply failed with 1 conflict: conflict with {who}: {at}");
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
    let (n, list) = (conflicts.len(), lines.join("\n"));
    format!("Apply failed with {n} conflicts: {list}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflict_messages_group_by_manager() {
        let entries = vec![
            Entry::new("a", "Apply", "v1", "t", None),
            Entry::new("b", "Update", "apps/v1", "t", Some("status")),
        ];
        let p = |f: &str| vec![String::from("f:spec"), format!("f:{f}")];
        let msg = conflict_message(&entries, &[(0, p("x")), (1, p("y")), (0, p("z"))]);
        let want = "Apply failed with 3 conflicts: conflicts with \"a\":\n- .spec.x\n- .spec.z\n\
            conflicts with \"b\" with subresource \"status\" using apps/v1:\n- .spec.y";
        assert_eq!(msg, want);
    }
}
