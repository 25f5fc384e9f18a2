//! CustomResourceDefinitions, end to end: recognising a CRD, validating it
//! and the resources it defines, accepting it (status conditions), and
//! keeping the served resources in step with the store.
//!
//! One function, [`settle`], makes the registry match the store for one
//! CRD: served (each served version) while the CRD exists, not served and
//! its objects dropped once it is gone. The handler calls it after every
//! committed write to a CRD; [`watch_deletions`] calls it for removals by
//! any other path (a finalizer removed later, the garbage collector).

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;

use crate::machinery::status::ApiError;
use crate::registry::kind::Strategy;
use crate::registry::resources::{Registry, ResourceInfo, ScalePaths, StorageKey};
use crate::storage::store::{EventType, Store};

/// Where CRDs are stored.
#[must_use]
pub fn crd_key() -> StorageKey {
    StorageKey {
        group: "apiextensions.k8s.io".into(),
        plural: "customresourcedefinitions".into(),
    }
}

/// Whether `info` is the CustomResourceDefinition resource itself.
#[must_use]
pub fn is_crd(info: &ResourceInfo) -> bool {
    info.group == "apiextensions.k8s.io" && info.plural == "customresourcedefinitions"
}

/// The resources a CRD object defines (one per served version), or 422.
pub fn resources(crd: &Value) -> Result<Vec<ResourceInfo>, ApiError> {
    let d = crate::registry::kind::Definition::parse(crd)?;
    let conversion =
        (d.versions.len() > 1).then(|| Arc::new(crate::conversion::Conversion::of_crd(crd)));
    Ok(d.versions
        .iter()
        .filter(|v| v.served)
        .map(|v| ResourceInfo {
            group: d.group.clone(),
            version: v.name.clone(),
            plural: d.plural.clone(),
            singular: d.singular.clone(),
            kind: d.kind.clone(),
            list_kind: d.list_kind.clone(),
            namespaced: d.namespaced,
            short_names: d.short_names.clone(),
            categories: d.categories.clone(),
            status_subresource: v.status,
            builtin: false,
            has_spec: true,
            scale: v
                .scale
                .clone()
                .map(
                    |[spec_replicas, status_replicas, label_selector]| ScalePaths {
                        spec_replicas,
                        status_replicas,
                        label_selector: (!label_selector.is_empty()).then_some(label_selector),
                    },
                ),
            strategy: Strategy::generic(),
            schema: Some(v.schema.clone()),
            conversion: conversion.clone(),
            selectable_fields: v.selectable_fields.clone(),
            printer_columns: v.printer_columns.clone(),
            deprecation: v.deprecation.clone(),
        })
        .collect())
}

/// Make the served resources match the store for the CRD `crd` (any
/// version of it, e.g. the one just written or deleted): served while a CRD
/// of that name exists, else not served and their objects dropped.
pub fn settle(registry: &Registry, store: &Store, crd: &Value) {
    let name = crd["metadata"]["name"].as_str().unwrap_or_default();
    match store.get(&crd_key(), "", name) {
        Some(current) => {
            let current = current.value();
            serve(registry, &current);
            establish(registry, store, &current);
        }
        None => forget(registry, store, crd),
    }
}

/// kube-apiserver's naming and establishing controllers: a CRD not yet
/// accepted gets its names accepted and is `Established`, in a status
/// write of the server's own (manager `kube-apiserver`), as a client
/// watching it sees there.
fn establish(registry: &Registry, store: &Store, crd: &Value) {
    const AV: &str = "apiextensions.k8s.io/v1";
    if crate::registry::kind::established(crd) {
        return;
    }
    let Some(info) = registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions") else {
        return;
    };
    let name = crd["metadata"]["name"].as_str().unwrap_or_default();
    let now = store.clock().rfc3339();
    // Gone or accepted meanwhile: nothing to do.
    let _ = store.update(&info, "", name, |old| {
        let mut new = old.clone();
        if crate::registry::kind::established(old) {
            return Ok(new);
        }
        crate::registry::kind::accept_crd(&mut new, &now);
        crate::machinery::patch::record_update(
            Some(old),
            &mut new,
            "kube-apiserver",
            &now,
            AV,
            Some("status"),
        );
        Ok(new)
    });
}

/// Serve the resources a stored CRD defines, replacing older versions of
/// them; nothing changes (so no request meets a gap) when they are served
/// already.
fn serve(registry: &Registry, crd: &Value) {
    let Ok(mut infos) = resources(crd) else {
        return;
    };
    let Some(first) = infos.first().cloned() else {
        return;
    };
    let mut served: Vec<ResourceInfo> = registry
        .all()
        .iter()
        .filter(|i| i.group == first.group && i.plural == first.plural)
        .map(|i| (**i).clone())
        .collect();
    served.sort_by(|a, b| a.version.cmp(&b.version));
    infos.sort_by(|a, b| a.version.cmp(&b.version));
    if served == infos {
        return;
    }
    registry.remove_group_resource(&first.group, &first.plural);
    for i in infos {
        registry.insert(i);
    }
}

/// Stop serving a removed CRD's resources and drop their objects.
fn forget(registry: &Registry, store: &Store, crd: &Value) {
    let group = crd["spec"]["group"].as_str().unwrap_or_default();
    let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or_default();
    if group.is_empty() || plural.is_empty() {
        return;
    }
    registry.remove_group_resource(group, plural);
    store.drop_collection(&StorageKey {
        group: group.into(),
        plural: plural.into(),
    });
}

/// Settle every CRD removed by any path, until `stopped` flips. After
/// missed events, every custom resource whose CRD is gone is dropped.
pub async fn watch_deletions(
    registry: Arc<Registry>,
    store: Arc<Store>,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    let key = crd_key();
    let (_, _, mut rx) = store.snapshot_and_subscribe(&key);
    loop {
        let ev = tokio::select! {
            // Biased: a fixed poll order keeps seeded runs reproducible.
            biased;
            _ = stopped.wait_for(|s| *s) => return,
            ev = rx.recv() => ev,
        };
        match ev {
            Ok(e) if *e.key == key && e.kind == EventType::Deleted => {
                settle(&registry, &store, &e.object.value());
            }
            Ok(_) => {}
            Err(RecvError::Lagged(_)) => {
                for info in registry.all().iter().filter(|i| !i.builtin) {
                    let name = format!("{}.{}", info.plural, info.group);
                    if store.get(&key, "", &name).is_none() {
                        registry.remove_group_resource(&info.group, &info.plural);
                        store.drop_collection(&info.storage_key());
                    }
                }
            }
            Err(RecvError::Closed) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::storage::store::DeleteSpec;
    use crate::storage::store::testing::{info, store};

    fn widget_crd(versions: &[&str]) -> Value {
        let versions: Vec<Value> = versions
            .iter()
            .enumerate()
            .map(|(i, v)| {
                json!({"name": v, "served": true, "storage": i == 0,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}})
            })
            .collect();
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.ward.dev"},
            "spec": {"group": "example.ward.dev", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"}, "versions": versions}})
    }

    #[test]
    fn settle_serves_what_the_store_holds_and_forgets_what_it_does_not() {
        let (registry, store) = (Registry::with_builtins(), store());
        let crds = info("customresourcedefinitions");
        let served = |v: &str| registry.get("example.ward.dev", v, "widgets").is_some();
        let crd = store.create(&crds, widget_crd(&["v1"])).unwrap();
        settle(&registry, &store, &crd.value());
        assert!(served("v1") && !served("v2"));
        // A widget is stored under the served resource.
        let widgets = registry.get("example.ward.dev", "v1", "widgets").unwrap();
        let w = json!({"apiVersion": "example.ward.dev/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "default"}});
        store.create(&widgets, w).unwrap();
        // A new version is served after an update, the old one kept.
        let name = "widgets.example.ward.dev";
        let crd = store
            .update(&crds, "", name, |_| Ok(widget_crd(&["v1", "v2"])))
            .unwrap();
        settle(&registry, &store, &crd.value());
        assert!(served("v1") && served("v2"));
        // Gone from the store: not served, and its objects are dropped.
        store
            .delete(&crds, "", name, &DeleteSpec::default())
            .unwrap();
        settle(&registry, &store, &crd.value());
        assert!(!served("v1") && !served("v2"));
        assert!(store.get(&widgets.storage_key(), "default", "w").is_none());
    }
}
