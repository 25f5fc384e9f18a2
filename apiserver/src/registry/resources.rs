//! The table of kinds the server serves: built-ins at start, custom resources
//! added and removed as CustomResourceDefinitions come and go.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

pub use crate::registry::kind::ServedSubresource;
use crate::registry::kind::Strategy;

/// One served resource (a group/version/plural), as discovery describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceInfo {
    /// API group; empty for the core group.
    pub group: String,
    /// Version within the group, e.g. `v1`.
    pub version: String,
    /// Plural resource name used in URLs, e.g. `pods`.
    pub plural: String,
    /// Singular name, e.g. `pod`.
    pub singular: String,
    /// Kind, e.g. `Pod`.
    pub kind: String,
    /// Kind of the list, e.g. `PodList`.
    pub list_kind: String,
    /// Namespaced (true) or cluster-scoped (false).
    pub namespaced: bool,
    /// kubectl short names, e.g. `po`.
    pub short_names: Vec<String>,
    /// kubectl categories, e.g. `all`.
    pub categories: Vec<String>,
    /// Whether a `/status` subresource is served.
    pub status_subresource: bool,
    /// Built-in kinds accept strategic merge patches; custom resources answer 415.
    pub builtin: bool,
    /// Whether the `spec` field drives `metadata.generation` (false for kinds
    /// without a spec such as ConfigMap, where any non-metadata change counts).
    pub has_spec: bool,
    /// Where a `/scale` subresource reads and writes, when one is served.
    pub scale: Option<ScalePaths>,
    /// What the kind does differently from the generic request path
    /// (`registry::kind`, one file per kind); `Strategy::generic` for
    /// custom resources.
    pub strategy: Strategy,
    /// A custom resource's structural schema (its CRD version's
    /// `openAPIV3Schema`, compiled): every write is pruned, defaulted and
    /// validated by it. `None` for built-ins.
    pub schema: Option<Arc<crate::schema::VersionSchema>>,
    /// How a custom resource defined in several versions converts between
    /// them (`conversion/`), or a built-in kind into the group it is
    /// stored in (`events.k8s.io` Events); `None` for the other built-ins
    /// and CRDs of one version.
    pub conversion: Option<Arc<crate::conversion::Conversion>>,
    /// A custom resource's `selectableFields` as field selectors name them
    /// (`spec.color`): read from each object's JSON when a list or watch
    /// selects on one. Empty for built-ins (theirs are the strategy's
    /// `selectable_fields`).
    pub selectable_fields: Vec<String>,
    /// The columns a custom resource's Tables print, after Name (its CRD
    /// version's `additionalPrinterColumns`, else Age); empty for a
    /// built-in kind, whose strategy has its columns.
    pub printer_columns: Vec<crate::registry::kind::PrinterColumn>,
    /// The warning every answer at this version carries (a custom
    /// resource's `deprecated` CRD version); `None` for the others.
    pub deprecation: Option<String>,
}

/// The fields behind a `/scale` subresource, as JSON paths (`.spec.replicas`),
/// as a CRD's `subresources.scale` declares them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    /// `specReplicasPath`: the desired replicas.
    pub spec_replicas: String,
    /// `statusReplicasPath`: the observed replicas.
    pub status_replicas: String,
    /// `labelSelectorPath`: the pods' selector (a string, or for built-ins
    /// the `LabelSelector` or map of `.spec.selector`).
    pub label_selector: Option<String>,
}

impl ScalePaths {
    /// What the built-in workloads (Deployments, ReplicaSets, StatefulSets,
    /// ReplicationControllers) scale.
    #[must_use]
    pub fn workload() -> Self {
        ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: Some(".spec.selector".into()),
        }
    }
}

impl ResourceInfo {
    /// The kind as kube-apiserver names it in a 422's message and details:
    /// `Deployment.apps`, or `ConfigMap` in the core group.
    #[must_use]
    pub fn group_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    /// The subresources served on this resource, in discovery's order.
    #[must_use]
    pub fn subresources(&self) -> Vec<ServedSubresource> {
        const RW: &[&str] = &["get", "patch", "update"];
        let mut out = Vec::new();
        if self.status_subresource {
            out.push(ServedSubresource {
                name: "status",
                kind: None,
                verbs: RW,
            });
        }
        out.extend(self.strategy.subresources().iter().cloned());
        if self.scale.is_some() {
            out.push(ServedSubresource {
                name: "scale",
                kind: Some(("autoscaling", "v1", "Scale")),
                verbs: RW,
            });
        }
        out
    }

    /// `v1` for the core group, `group/version` otherwise.
    #[must_use]
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether `av` is [`api_version`](Self::api_version), without
    /// building it (the watch path asks for every event and watcher).
    #[must_use]
    pub fn is_api_version(&self, av: &str) -> bool {
        if self.group.is_empty() {
            av == self.version
        } else {
            av.strip_prefix(self.group.as_str())
                .and_then(|rest| rest.strip_prefix('/'))
                .is_some_and(|v| v == self.version)
        }
    }

    /// The storage key: objects of all versions of a group/resource share
    /// one store (and a built-in kind served in a second group, the first
    /// group's: `conversion::Builtin`).
    #[must_use]
    pub fn storage_key(&self) -> StorageKey {
        let builtin = self.conversion.as_ref().and_then(|c| c.builtin);
        StorageKey {
            group: builtin
                .map_or(self.group.as_str(), |b| b.storage_group())
                .into(),
            plural: self.plural.clone(),
        }
    }

    /// The apiVersion its objects are stored at: a CRD's storage version,
    /// or the version a built-in kind is converted to for storage.
    #[must_use]
    pub fn storage_api_version(&self) -> String {
        match &self.conversion {
            Some(c) => c.storage.clone(),
            None => self.api_version(),
        }
    }

    /// The verbs discovery advertises, and the only ones the handler
    /// routes (405 for the others): the kind's
    /// (`KindStrategy::verbs`).
    /// Namespaces, as in Kubernetes, have no deletecollection;
    /// componentstatuses are read-only.
    #[must_use]
    pub fn verbs(&self) -> &'static [&'static str] {
        self.strategy.verbs()
    }
}

/// Identifies one stored collection: the group and plural, whatever the version.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StorageKey {
    /// API group; empty for core.
    pub group: String,
    /// Plural resource name.
    pub plural: String,
}

#[allow(clippy::too_many_arguments)]
fn builtin(
    group: &str,
    version: &str,
    plural: &str,
    kind: &str,
    namespaced: bool,
    short_names: &[&str],
    status: bool,
    has_spec: bool,
) -> ResourceInfo {
    ResourceInfo {
        group: group.into(),
        version: version.into(),
        plural: plural.into(),
        singular: kind.to_lowercase(),
        kind: kind.into(),
        list_kind: format!("{kind}List"),
        namespaced,
        short_names: short_names.iter().map(|s| s.to_string()).collect(),
        categories: Vec::new(),
        status_subresource: status,
        builtin: true,
        has_spec,
        scale: None,
        strategy: crate::registry::kind::builtin(group, plural),
        schema: None,
        conversion: crate::conversion::Builtin::of(group, version, plural)
            .map(|b| Arc::new(crate::conversion::Conversion::of_builtin(b, kind))),
        selectable_fields: Vec::new(),
        printer_columns: Vec::new(),
        deprecation: None,
    }
}

/// The built-in kinds served from the start ([`crate::registry::builtins::BUILTINS`]).
#[must_use]
pub fn builtin_resources() -> Vec<ResourceInfo> {
    crate::registry::builtins::BUILTINS
        .iter()
        .map(
            |&(api_version, kind, plural, namespaced, status, spec, short)| {
                let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
                let mut r = builtin(
                    group, version, plural, kind, namespaced, short, status, spec,
                );
                if crate::registry::builtins::ALL_CATEGORY.contains(&plural) {
                    r.categories.push("all".into());
                }
                if crate::registry::builtins::API_EXTENSIONS_CATEGORY.contains(&plural) {
                    r.categories.push("api-extensions".into());
                }
                if crate::registry::builtins::SCALED.contains(&(group, plural)) {
                    r.scale = Some(ScalePaths::workload());
                }
                r
            },
        )
        .collect()
}

/// Served resources by group, then version, then plural.
type Table = BTreeMap<String, BTreeMap<String, BTreeMap<String, Arc<ResourceInfo>>>>;

/// The live table of served resources, shared by every request.
#[derive(Debug, Default)]
pub struct Registry {
    /// By group, version and plural: nested, so that a request's lookup
    /// borrows its path's strings instead of allocating a key (every
    /// request makes one).
    inner: RwLock<Table>,
    /// Bumped by every change (what caches of documents built from the
    /// table, such as /openapi's, compare).
    generation: AtomicU64,
}

impl Registry {
    /// A registry holding the built-in kinds.
    #[must_use]
    pub fn with_builtins() -> Self {
        let r = Registry::default();
        for info in builtin_resources() {
            r.insert(info);
        }
        r
    }

    /// Serve a resource (replacing any entry with the same group/version/plural).
    pub fn insert(&self, info: ResourceInfo) {
        self.inner
            .write()
            .expect("registry lock poisoned")
            .entry(info.group.clone())
            .or_default()
            .entry(info.version.clone())
            .or_default()
            .insert(info.plural.clone(), Arc::new(info));
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Stop serving every version of `group`/`plural`.
    pub fn remove_group_resource(&self, group: &str, plural: &str) {
        let mut table = self.inner.write().expect("registry lock poisoned");
        if let Some(versions) = table.get_mut(group) {
            for plurals in versions.values_mut() {
                plurals.remove(plural);
            }
            versions.retain(|_, plurals| !plurals.is_empty());
            if versions.is_empty() {
                table.remove(group);
            }
        }
        drop(table);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// A number that changes whenever the served resources do (bumped
    /// after each change is visible: a reader that sees a value and then
    /// reads the table reads at least that change).
    #[must_use]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Look up by group, version and plural.
    #[must_use]
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceInfo>> {
        self.inner
            .read()
            .expect("registry lock poisoned")
            .get(group)
            .and_then(|versions| versions.get(version))
            .and_then(|plurals| plurals.get(plural))
            .cloned()
    }

    /// The resource serving `kind` at `api_version` (e.g. `apps/v1`, `StatefulSet`).
    #[must_use]
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceInfo>> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        self.inner
            .read()
            .expect("registry lock poisoned")
            .get(group)
            .and_then(|versions| versions.get(version))
            .and_then(|plurals| plurals.values().find(|r| r.kind == kind))
            .cloned()
    }

    /// Every served resource, ordered by group, version, plural.
    #[must_use]
    pub fn all(&self) -> Vec<Arc<ResourceInfo>> {
        self.inner
            .read()
            .expect("registry lock poisoned")
            .values()
            .flat_map(BTreeMap::values)
            .flat_map(BTreeMap::values)
            .cloned()
            .collect()
    }

    /// The versions of `group` served, in order (empty when none is).
    #[must_use]
    pub fn group_versions(&self, group: &str) -> Vec<String> {
        self.inner
            .read()
            .expect("registry lock poisoned")
            .get(group)
            .map(|versions| versions.keys().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removing_a_resource_leaves_no_empty_version_behind() {
        let r = Registry::default();
        for (version, plural, kind) in [
            ("v1", "widgets", "Widget"),
            ("v2", "widgets", "Widget"),
            ("v1", "gadgets", "Gadget"),
        ] {
            r.insert(builtin(
                "x.dev",
                version,
                plural,
                kind,
                true,
                &[],
                false,
                false,
            ));
        }
        let names = |r: &Registry| -> Vec<String> {
            r.all()
                .iter()
                .map(|i| format!("{}/{}", i.version, i.plural))
                .collect()
        };
        assert_eq!(names(&r), ["v1/gadgets", "v1/widgets", "v2/widgets"]);
        assert_eq!(r.group_versions("x.dev"), ["v1", "v2"]);
        assert_eq!(r.by_kind("x.dev/v2", "Widget").unwrap().plural, "widgets");
        r.remove_group_resource("x.dev", "widgets");
        assert_eq!(names(&r), ["v1/gadgets"]);
        assert_eq!(r.group_versions("x.dev"), ["v1"]);
        assert!(r.get("x.dev", "v2", "widgets").is_none());
        r.remove_group_resource("x.dev", "gadgets");
        assert!(r.group_versions("x.dev").is_empty());
    }

    #[test]
    fn is_api_version_agrees_with_api_version() {
        let core = builtin("", "v1", "pods", "Pod", true, &[], true, true);
        let apps = builtin(
            "apps",
            "v1",
            "deployments",
            "Deployment",
            true,
            &[],
            true,
            true,
        );
        for info in [&core, &apps] {
            for av in [
                "v1", "apps/v1", "apps/v2", "apps", "appsv1", "apps/", "/v1", "", "x/v1",
            ] {
                assert_eq!(
                    info.is_api_version(av),
                    info.api_version() == av,
                    "{} vs {av}",
                    info.api_version()
                );
            }
        }
    }
}
