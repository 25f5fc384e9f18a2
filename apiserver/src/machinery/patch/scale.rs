//! Server-side apply to a `/scale` subresource, as kube-apiserver's
//! `ScaleHandler` does it: the parent's managedFields are turned into the
//! Scale's (a manager owning the parent's replicas owns the Scale's
//! `spec.replicas`, at `autoscaling/v1`), the apply runs on the Scale with
//! the usual conflicts and `force`, and the result is turned back into the
//! parent's entries.

use serde_json::Value;

use super::PatchError;
use super::apply::{ApplyOptions, server_side_apply};
use super::fieldset::{Entry, FieldSet, parse_entries, write_entries};

/// The Scale's API version, which its managedFields entries carry.
const SCALE_VERSION: &str = "autoscaling/v1";

/// What an apply to `/scale` leaves: the applied Scale and the parent's new
/// `managedFields`.
#[derive(Debug)]
pub struct ScaleApplied {
    /// The Scale after the apply (its `spec.replicas` is the parent's now).
    pub scale: Value,
    /// The parent's `metadata.managedFields` after the apply.
    pub managed_fields: Value,
}

/// Apply `body` (an `autoscaling/v1` Scale) to `scale`, the Scale of
/// `parent` whose replicas are at `replicas` (`["spec", "replicas"]` for a
/// Deployment; a CRD's `specReplicasPath`), by `opts.manager` with
/// `opts.force`. `opts.api_version` is the parent's; its `kind` is `Scale`.
///
/// Ownership moves as in kube-apiserver: a parent entry owning the replicas
/// keeps them when its manager still owns the Scale's after the apply, and
/// loses them otherwise (forced away); a manager new to the replicas gets an
/// entry at the parent's API version with subresource `scale` and, as
/// there, no `time`.
///
/// # Errors
/// As [`server_side_apply`]: a body that is not a Scale, a conflict over
/// `.spec.replicas` without `force` (naming the manager at
/// `autoscaling/v1`).
pub fn apply_to_scale(
    parent: &Value,
    scale: &Value,
    replicas: &[&str],
    body: &[u8],
    opts: &ApplyOptions<'_>,
) -> Result<ScaleApplied, PatchError> {
    let in_parent: Vec<String> = replicas.iter().map(|s| format!("f:{s}")).collect();
    let in_scale = ["f:spec".to_string(), "f:replicas".to_string()];
    let parent_entries = parse_entries(parent.pointer("/metadata/managedFields"));
    let owns = |e: &Entry, path: &[String]| e.set.as_ref().is_some_and(|s| s.has_path(path));

    let mut scale = scale.clone();
    let to_scale = parent_entries
        .iter()
        .filter(|e| owns(e, &in_parent))
        .map(|e| e.with(SCALE_VERSION, FieldSet::of_path(&in_scale)))
        .collect();
    write_entries(&mut scale, to_scale);
    let applied = server_side_apply(
        Some(&scale),
        body,
        &ApplyOptions {
            api_version: SCALE_VERSION,
            kind: "Scale",
            subresource: Some("scale"),
            ..*opts
        },
    )?;
    let scale_entries = parse_entries(applied.pointer("/metadata/managedFields"));

    let mut out = Vec::with_capacity(parent_entries.len() + 1);
    let mut matched = vec![false; scale_entries.len()];
    for mut e in parent_entries {
        if owns(&e, &in_parent) {
            let kept = scale_entries.iter().position(|s| s.same_manager(&e));
            match kept {
                Some(i) if owns(&scale_entries[i], &in_scale) => matched[i] = true,
                _ => {
                    if let Some(set) = &mut e.set {
                        set.remove_path(&in_parent);
                    }
                }
            }
        }
        out.push(e);
    }
    for (s, _) in scale_entries.iter().zip(&matched).filter(|(_, m)| !**m) {
        if owns(s, &in_scale) && !out.iter().any(|e| e.same_manager(s)) {
            out.push(
                s.with(opts.api_version, FieldSet::of_path(&in_parent))
                    .without_time(),
            );
        }
    }
    let mut holder = parent.clone();
    write_entries(&mut holder, out);
    let managed_fields = holder
        .pointer("/metadata/managedFields")
        .cloned()
        .unwrap_or(Value::Null);
    let mut scale = applied;
    if let Some(m) = scale["metadata"].as_object_mut() {
        m.remove("managedFields");
    }
    Ok(ScaleApplied {
        scale,
        managed_fields,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn deployment(replicas: i64, managed: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "ns", "managedFields": managed},
            "spec": {"replicas": replicas, "template": {}}})
    }

    fn scale(replicas: i64) -> Value {
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": "d", "namespace": "ns"},
            "spec": {"replicas": replicas}, "status": {"replicas": 0}})
    }

    fn opts(force: bool) -> ApplyOptions<'static> {
        ApplyOptions {
            manager: "scaler",
            force,
            now: "2026-12-07T00:00:00Z",
            api_version: "apps/v1",
            kind: "Scale",
            name: "d",
            subresource: Some("scale"),
        }
    }

    const BODY: &str = r#"{"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "d"}, "spec": {"replicas": 5}}"#;

    #[test]
    fn the_creator_owning_replicas_conflicts_until_forced_then_loses_them() {
        let creator = json!([{"manager": "creator", "operation": "Update", "apiVersion": "apps/v1",
            "time": "2026-12-06T00:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:replicas": {}, "f:template": {}}}}]);
        let d = deployment(1, creator);
        let err = apply_to_scale(
            &d,
            &scale(1),
            &["spec", "replicas"],
            BODY.as_bytes(),
            &opts(false),
        )
        .unwrap_err();
        let PatchError::Conflict { message, .. } = err else {
            panic!("expected a conflict, got {err:?}")
        };
        assert_eq!(
            message,
            "Apply failed with 1 conflict: conflict with \"creator\" using autoscaling/v1: .spec.replicas"
        );

        let done = apply_to_scale(
            &d,
            &scale(1),
            &["spec", "replicas"],
            BODY.as_bytes(),
            &opts(true),
        )
        .unwrap();
        assert_eq!(done.scale["spec"]["replicas"], 5);
        assert!(done.scale["metadata"].get("managedFields").is_none());
        assert_eq!(
            done.managed_fields,
            json!([
                {"manager": "scaler", "operation": "Apply", "apiVersion": "apps/v1",
                 "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:replicas": {}}}, "subresource": "scale"},
                {"manager": "creator", "operation": "Update", "apiVersion": "apps/v1",
                 "time": "2026-12-06T00:00:00Z", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:template": {}}}},
            ])
        );
    }

    #[test]
    fn an_unowned_replicas_is_taken_without_conflict_and_other_fields_stay() {
        let other = json!([{"manager": "creator", "operation": "Update", "apiVersion": "apps/v1",
            "time": "2026-12-06T00:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:template": {}}}}]);
        let done = apply_to_scale(
            &deployment(1, other.clone()),
            &scale(1),
            &["spec", "replicas"],
            BODY.as_bytes(),
            &opts(false),
        )
        .unwrap();
        assert_eq!(done.scale["spec"]["replicas"], 5);
        let managed = done.managed_fields.as_array().unwrap();
        assert_eq!(managed.len(), 2);
        assert_eq!(managed[0]["manager"], "scaler");
        assert_eq!(managed[0]["subresource"], "scale");
        assert_eq!(managed[1], other[0]);
    }
}
