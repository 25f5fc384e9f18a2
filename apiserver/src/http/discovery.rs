//! Discovery documents: /version, /api, /api/v1, /apis, /apis/{group} and
//! /apis/{group}/{version}, built from the live resource registry.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::registry::resources::{Registry, ResourceInfo};
use crate::registry::versions::version_priority;

/// The Kubernetes version this server reports.
pub const KUBE_MINOR: &str = "33";

/// `/version`.
#[must_use]
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": KUBE_MINOR,
        "gitVersion": format!("v1.{KUBE_MINOR}.0-ward.{}", env!("CARGO_PKG_VERSION")),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": "",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    })
}

/// `/api`.
#[must_use]
pub fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

/// The reviews (`http::handler::review`): group (all at `v1`), plural,
/// kind, namespaced. Each is only created, answered and never stored, so
/// none is in the registry; discovery lists them as kube-apiserver does,
/// with the one verb `create`.
const REVIEWS: &[(&str, &str, &str, bool)] = &[
    (
        "authentication.k8s.io",
        "selfsubjectreviews",
        "SelfSubjectReview",
        false,
    ),
    (
        "authentication.k8s.io",
        "tokenreviews",
        "TokenReview",
        false,
    ),
    (
        "authorization.k8s.io",
        "localsubjectaccessreviews",
        "LocalSubjectAccessReview",
        true,
    ),
    (
        "authorization.k8s.io",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        false,
    ),
    (
        "authorization.k8s.io",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
        false,
    ),
    (
        "authorization.k8s.io",
        "subjectaccessreviews",
        "SubjectAccessReview",
        false,
    ),
];

/// The reviews of one group version.
fn reviews<'a>(
    group: &'a str,
    version: &'a str,
) -> impl Iterator<Item = &'static (&'static str, &'static str, &'static str, bool)> + 'a {
    REVIEWS
        .iter()
        .filter(move |(g, ..)| *g == group && version == "v1")
}

/// Whether `group`/`version` is served: a resource of it, or a review.
#[must_use]
pub fn serves(registry: &Registry, group: &str, version: &str) -> bool {
    reviews(group, version).next().is_some()
        || registry.group_versions(group).iter().any(|v| v == version)
}

/// Groups (other than core) with their versions, ordered.
fn groups(registry: &Registry) -> BTreeMap<String, Vec<String>> {
    let mut g: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let served = registry.all();
    let stored = served
        .iter()
        .map(|r| (r.group.as_str(), r.version.as_str()));
    let reviewed = REVIEWS.iter().map(|(group, ..)| (*group, "v1"));
    for (group, version) in stored.chain(reviewed) {
        if group.is_empty() {
            continue;
        }
        let v = g.entry(group.to_string()).or_default();
        if !v.iter().any(|x| x == version) {
            v.push(version.to_string());
        }
    }
    for versions in g.values_mut() {
        versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
    }
    g
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({
        "name": name,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
    })
}

/// `/apis`.
#[must_use]
pub fn group_list(registry: &Registry) -> Value {
    let gs: Vec<Value> = groups(registry)
        .iter()
        .map(|(name, versions)| group_json(name, versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": gs})
}

/// `/apis/{group}`, or None when the group is not served.
#[must_use]
pub fn group(registry: &Registry, name: &str) -> Option<Value> {
    let gs = groups(registry);
    let versions = gs.get(name)?;
    let mut g = group_json(name, versions);
    g["kind"] = "APIGroup".into();
    g["apiVersion"] = "v1".into();
    Some(g)
}

/// kube-apiserver's `storageVersionHash` of a resource: the first 8 bytes
/// of the SHA-256 of the `group/version/Kind` its objects are stored at,
/// in base64 (a storage migrator compares it); none for what is not
/// stored. CRDs are stored at `v1beta1` there, as the hash says.
fn storage_version_hash(r: &ResourceInfo) -> Option<String> {
    use base64::Engine;
    if r.group.is_empty() && r.plural == "componentstatuses" {
        return None;
    }
    let stored = match (r.group.as_str(), r.plural.as_str()) {
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            "apiextensions.k8s.io/v1beta1".to_string()
        }
        _ => r.storage_api_version(),
    };
    let (group, version) = stored.rsplit_once('/').unwrap_or(("", &stored));
    let gvk = format!("{group}/{version}/{}", r.kind);
    let digest = ring::digest::digest(&ring::digest::SHA256, gvk.as_bytes());
    Some(base64::engine::general_purpose::STANDARD.encode(&digest.as_ref()[..8]))
}

fn resource_json(r: &ResourceInfo) -> Vec<Value> {
    let mut main = json!({
        "name": r.plural,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": r.verbs(),
    });
    if let Some(hash) = storage_version_hash(r) {
        main["storageVersionHash"] = hash.into();
    }
    if !r.short_names.is_empty() {
        main["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        main["categories"] = json!(r.categories);
    }
    let mut out = vec![main];
    // In name order, as kube-apiserver lists them (`scale` before `status`).
    let mut subresources = r.subresources();
    subresources.sort_by_key(|s| s.name);
    for sub in subresources {
        let mut entry = json!({
            "name": format!("{}/{}", r.plural, sub.name),
            "singularName": "",
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": sub.verbs,
        });
        if let Some((group, version, kind)) = sub.kind {
            entry["group"] = group.into();
            entry["version"] = version.into();
            entry["kind"] = kind.into();
        }
        out.push(entry);
    }
    out
}

/// `/api/v1` or `/apis/{group}/{version}`, or None when not served.
#[must_use]
pub fn resource_list(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let rs: Vec<Value> = registry
        .all()
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .flat_map(|r| resource_json(r))
        .chain(
            reviews(group, version).map(|&(_, plural, kind, namespaced)| {
                json!({
                    "name": plural,
                    "singularName": kind.to_lowercase(),
                    "namespaced": namespaced,
                    "kind": kind,
                    "verbs": ["create"],
                })
            }),
        )
        .collect();
    if rs.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": rs}),
    )
}

/// The media type of aggregated discovery (`apidiscovery.k8s.io/v2`, GA
/// in Kubernetes 1.30), as the answer's Content-Type.
pub const AGGREGATED_V2: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether an Accept header lists aggregated discovery v2 among its media
/// types (clients list it first, with the legacy documents as fallback).
/// v2beta1, removed in 1.33, is not served: its clients fall back.
#[must_use]
pub fn wants_aggregated(accept: &str) -> bool {
    accept.split(',').any(|m| {
        let params: Vec<&str> = m.split(';').map(str::trim).collect();
        let has = |p: &str| params.iter().any(|x| x.eq_ignore_ascii_case(p));
        has("g=apidiscovery.k8s.io") && has("v=v2") && has("as=APIGroupDiscoveryList")
    })
}

/// One resource of a version, as aggregated discovery lists it.
fn aggregated_resource(r: &ResourceInfo) -> Value {
    let kind = json!({"group": r.group, "version": r.version, "kind": r.kind});
    let mut out = json!({
        "resource": r.plural,
        "responseKind": kind,
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": r.verbs(),
    });
    if !r.short_names.is_empty() {
        out["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        out["categories"] = json!(r.categories);
    }
    let subresources: Vec<Value> = r
        .subresources()
        .into_iter()
        .map(|sub| {
            let response = match sub.kind {
                Some((group, version, kind)) => {
                    json!({"group": group, "version": version, "kind": kind})
                }
                None => kind.clone(),
            };
            json!({"subresource": sub.name, "responseKind": response, "verbs": sub.verbs})
        })
        .collect();
    if !subresources.is_empty() {
        out["subresources"] = subresources.into();
    }
    out
}

/// One group (`""`: core) with its versions, preferred first.
fn aggregated_group(registry: &Registry, name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| {
            let rs: Vec<Value> = registry
                .all()
                .iter()
                .filter(|r| r.group == name && &r.version == v)
                .map(|r| aggregated_resource(r))
                .chain(reviews(name, v).map(|&(group, plural, kind, namespaced)| {
                    json!({
                        "resource": plural,
                        "responseKind": {"group": group, "version": "v1", "kind": kind},
                        "scope": if namespaced { "Namespaced" } else { "Cluster" },
                        "singularResource": kind.to_lowercase(),
                        "verbs": ["create"],
                    })
                }))
                .collect();
            json!({"version": v, "resources": rs, "freshness": "Current"})
        })
        .collect();
    let meta = if name.is_empty() {
        json!({})
    } else {
        json!({"name": name})
    };
    json!({"metadata": meta, "versions": vs})
}

fn aggregated_list(items: Vec<Value>) -> Value {
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

/// `/api` as aggregated discovery: the core group, every resource.
#[must_use]
pub fn aggregated_core(registry: &Registry) -> Value {
    aggregated_list(vec![aggregated_group(registry, "", &["v1".to_string()])])
}

/// `/apis` as aggregated discovery: every other group, every resource.
#[must_use]
pub fn aggregated_groups(registry: &Registry) -> Value {
    let items = groups(registry)
        .iter()
        .map(|(name, versions)| aggregated_group(registry, name, versions))
        .collect();
    aggregated_list(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_list_has_pods_and_status() {
        let reg = Registry::with_builtins();
        let l = resource_list(&reg, "", "v1").unwrap();
        let names: Vec<&str> = l["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"pods"));
        assert!(names.contains(&"pods/status"));
        assert!(resource_list(&reg, "nope.io", "v1").is_none());
        assert!(group(&reg, "apps").is_some());
    }

    #[test]
    fn storage_version_hashes_are_kubes() {
        let reg = Registry::with_builtins();
        let hash =
            |g: &str, v: &str, plural: &str| storage_version_hash(&reg.get(g, v, plural).unwrap());
        // As kube-apiserver v1.37.2 answers them.
        assert_eq!(
            hash("apps", "v1", "controllerrevisions").unwrap(),
            "85nkx63pcBU="
        );
        assert_eq!(
            hash("coordination.k8s.io", "v1", "leases").unwrap(),
            "gqkMMb/YqFM="
        );
        let crds = hash("apiextensions.k8s.io", "v1", "customresourcedefinitions");
        assert_eq!(crds.unwrap(), "jfWCUB31mvA=");
        // Stored as core v1 Events, and at autoscaling/v2.
        assert_eq!(
            hash("events.k8s.io", "v1", "events").unwrap(),
            "r2yiGXH7wu8="
        );
        assert_eq!(
            hash("autoscaling", "v1", "horizontalpodautoscalers"),
            hash("autoscaling", "v2", "horizontalpodautoscalers")
        );
        assert_eq!(hash("", "v1", "componentstatuses"), None);
    }

    #[test]
    fn reviews_are_listed_with_create_only() {
        let reg = Registry::with_builtins();
        let l = resource_list(&reg, "authentication.k8s.io", "v1").unwrap();
        assert_eq!(
            l["resources"][1],
            json!({"name": "tokenreviews", "singularName": "tokenreview", "namespaced": false,
                "kind": "TokenReview", "verbs": ["create"]})
        );
        let g = group(&reg, "authorization.k8s.io").unwrap();
        assert_eq!(
            g["preferredVersion"]["groupVersion"],
            "authorization.k8s.io/v1"
        );
        let all = aggregated_groups(&reg);
        let authz = all["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["metadata"]["name"] == "authorization.k8s.io")
            .unwrap();
        assert_eq!(
            authz["versions"][0]["resources"][0]["scope"], "Namespaced",
            "localsubjectaccessreviews"
        );
        assert!(resource_list(&reg, "authentication.k8s.io", "v2").is_none());
    }
}
