//! What a fresh cluster holds that clients look up, which
//! [`crate::strategy::KindRules`] hands the store to begin with.

use serde_json::{Value, json};

/// What a fresh cluster holds that clients look up: the four initial
/// namespaces, the `default/kubernetes` Service, and the bootstrap
/// ClusterRoles `cluster-admin` (bound to `system:masters`), `admin`,
/// `edit` and `view`. The last three carry their aggregation rules with
/// empty rules: no controller aggregates them here.
pub(crate) fn objects() -> Vec<Value> {
    let mut objects: Vec<_> = ["default", "kube-system", "kube-public", "kube-node-lease"]
        .into_iter()
        .map(|name| {
            json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
                "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
        })
        .collect();
    objects.push(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kubernetes", "namespace": "default",
            "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"],
            "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
            "sessionAffinity": "None", "internalTrafficPolicy": "Cluster"}}));
    let bootstrap = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
    let autoupdate = json!({"rbac.authorization.kubernetes.io/autoupdate": "true"});
    objects.push(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "cluster-admin", "labels": bootstrap, "annotations": autoupdate},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                  {"nonResourceURLs": ["*"], "verbs": ["*"]}]}),
    );
    objects.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "cluster-admin", "labels": bootstrap, "annotations": autoupdate},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:masters"}]}));
    for name in ["admin", "edit", "view"] {
        let label = format!("rbac.authorization.k8s.io/aggregate-to-{name}");
        objects.push(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": bootstrap, "annotations": autoupdate},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {label: "true"}}]},
            "rules": []}),
        );
    }
    objects
}
