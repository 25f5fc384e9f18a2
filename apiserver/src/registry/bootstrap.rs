//! What a fresh cluster holds that clients look up, which
//! [`crate::storage::strategy::KindRules`] hands the store to begin with.

use serde_json::{Value, json};

/// What a fresh cluster holds that clients look up: the four initial
/// namespaces, the `default/kubernetes` Service, and kube-apiserver's
/// bootstrap RBAC policy (1.33's `bootstrappolicy/policy.go`, in part): the
/// ClusterRoles `cluster-admin` (bound to `system:masters`), `admin`,
/// `edit` and `view`, the `system:aggregate-to-*` roles whose rules those
/// three aggregate, and `system:discovery`, `system:basic-user` and
/// `system:public-info-viewer` with their bindings. `admin`, `edit` and
/// `view` carry their aggregation rules with empty rules, as created; no
/// controller fills them in here, but the RBAC authorizer
/// ([`crate::auth::rbac`]) aggregates them as kube-controller-manager does.
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
    // `edit` aggregates into `admin` and `view` into `edit`, as in kube.
    for (name, into) in [("admin", ""), ("edit", "admin"), ("view", "edit")] {
        let label = format!("rbac.authorization.k8s.io/aggregate-to-{name}");
        let mut labels = bootstrap.clone();
        if !into.is_empty() {
            labels[format!("rbac.authorization.k8s.io/aggregate-to-{into}")] = json!("true");
        }
        objects.push(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": labels, "annotations": autoupdate},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {label: "true"}}]},
            "rules": []}),
        );
    }
    for (name, rules) in aggregated_rules() {
        let mut labels = bootstrap.clone();
        labels[format!("rbac.authorization.k8s.io/{}", &name["system:".len()..])] = json!("true");
        objects.push(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": labels, "annotations": autoupdate},
            "rules": rules}),
        );
    }
    // What users may read about the server and ask about themselves, and
    // what anonymous users may read, bound as kube-apiserver 1.33 binds them.
    let discovery = json!([{"verbs": ["get"], "nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*",
        "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"]}]);
    let basic_user = json!([
        {"apiGroups": ["authorization.k8s.io"], "verbs": ["create"],
            "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]},
        {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}]);
    let public_info = json!([{"verbs": ["get"],
        "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"]}]);
    let everyone = ["system:authenticated", "system:unauthenticated"];
    for (name, rules, groups) in [
        ("system:discovery", discovery, &everyone[..1]),
        ("system:basic-user", basic_user, &everyone[..1]),
        ("system:public-info-viewer", public_info, &everyone[..]),
    ] {
        objects.push(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": bootstrap, "annotations": autoupdate},
            "rules": rules}),
        );
        let subjects: Vec<_> = groups
            .iter()
            .map(|g| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}))
            .collect();
        objects.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": bootstrap, "annotations": autoupdate},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": subjects}));
    }
    objects
}

/// The ClusterRoles `system:aggregate-to-admin`, `-edit` and `-view` and
/// their rules, as kube-apiserver 1.33 creates them (its
/// `bootstrappolicy/policy.go`; lists sorted, as it stores them).
fn aggregated_rules() -> [(&'static str, Value); 3] {
    let read = json!(["get", "list", "watch"]);
    let write = json!(["create", "delete", "deletecollection", "patch", "update"]);
    let admin = json!([
        {"apiGroups": ["authorization.k8s.io"], "resources": ["localsubjectaccessreviews"], "verbs": ["create"]},
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["rolebindings", "roles"],
            "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]},
    ]);
    let edit = json!([
        {"apiGroups": [""], "verbs": read, "resources": ["pods/attach", "pods/exec", "pods/portforward",
            "pods/proxy", "secrets", "services/proxy"]},
        {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"]},
        {"apiGroups": [""], "verbs": write, "resources": ["pods", "pods/attach", "pods/exec",
            "pods/portforward", "pods/proxy"]},
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
        {"apiGroups": [""], "verbs": write, "resources": ["configmaps", "events", "persistentvolumeclaims",
            "replicationcontrollers", "replicationcontrollers/scale", "secrets", "serviceaccounts",
            "services", "services/proxy"]},
        {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]},
        {"apiGroups": ["apps"], "verbs": write, "resources": ["daemonsets", "deployments",
            "deployments/rollback", "deployments/scale", "replicasets", "replicasets/scale",
            "statefulsets", "statefulsets/scale"]},
        {"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"], "verbs": write},
        {"apiGroups": ["batch"], "resources": ["cronjobs", "jobs"], "verbs": write},
        {"apiGroups": ["extensions"], "verbs": write, "resources": ["daemonsets", "deployments",
            "deployments/rollback", "deployments/scale", "ingresses", "networkpolicies", "replicasets",
            "replicasets/scale", "replicationcontrollers/scale"]},
        {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": write},
        {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses", "networkpolicies"], "verbs": write},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
            "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]},
    ]);
    let view = json!([
        {"apiGroups": [""], "verbs": read, "resources": ["configmaps", "endpoints",
            "persistentvolumeclaims", "persistentvolumeclaims/status", "pods", "replicationcontrollers",
            "replicationcontrollers/scale", "serviceaccounts", "services", "services/status"]},
        {"apiGroups": [""], "verbs": read, "resources": ["bindings", "events", "limitranges",
            "namespaces/status", "pods/log", "pods/status", "replicationcontrollers/status",
            "resourcequotas", "resourcequotas/status"]},
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": read},
        {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": read},
        {"apiGroups": ["apps"], "verbs": read, "resources": ["controllerrevisions", "daemonsets",
            "daemonsets/status", "deployments", "deployments/scale", "deployments/status", "replicasets",
            "replicasets/scale", "replicasets/status", "statefulsets", "statefulsets/scale",
            "statefulsets/status"]},
        {"apiGroups": ["autoscaling"], "verbs": read,
            "resources": ["horizontalpodautoscalers", "horizontalpodautoscalers/status"]},
        {"apiGroups": ["batch"], "resources": ["cronjobs", "cronjobs/status", "jobs", "jobs/status"], "verbs": read},
        {"apiGroups": ["extensions"], "verbs": read, "resources": ["daemonsets", "daemonsets/status",
            "deployments", "deployments/scale", "deployments/status", "ingresses", "ingresses/status",
            "networkpolicies", "replicasets", "replicasets/scale", "replicasets/status",
            "replicationcontrollers/scale"]},
        {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets", "poddisruptionbudgets/status"], "verbs": read},
        {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses", "ingresses/status", "networkpolicies"],
            "verbs": read},
    ]);
    [
        ("system:aggregate-to-admin", admin),
        ("system:aggregate-to-edit", edit),
        ("system:aggregate-to-view", view),
    ]
}
