//! The RBAC authorizer's tests: decisions, aggregation, coverage, rules
//! and wording, against kube-apiserver's behaviour.

use super::*;

/// A user from `name` or `name|group,group`.
fn user(spec: &str) -> UserInfo {
    let (name, groups) = spec.split_once('|').unwrap_or((spec, ""));
    let groups = groups
        .split(',')
        .filter(|g| !g.is_empty())
        .map(String::from)
        .collect();
    UserInfo {
        name: name.into(),
        groups,
        ..UserInfo::default()
    }
}

/// A request from `verb /path` or `verb resource[.group][/sub] name ns`
/// (`-` for none).
fn req(spec: &str) -> Attributes<'_> {
    let f: Vec<&str> = spec.split_whitespace().collect();
    let field = |i: usize| {
        f.get(i)
            .filter(|s| **s != "-")
            .unwrap_or(&"")
            .to_string()
            .into()
    };
    let (verb, path) = (f[0].to_string().into(), f[1].to_string().into());
    if f[1].starts_with('/') {
        return Attributes {
            verb,
            path,
            ..Attributes::default()
        };
    }
    let (resource, sub) = f[1].split_once('/').unwrap_or((f[1], ""));
    let (resource, group) = resource.split_once('.').unwrap_or((resource, ""));
    let (name, namespace) = (field(2), field(3));
    let (api_group, resource, subresource) = (
        group.to_string().into(),
        resource.to_string().into(),
        sub.to_string().into(),
    );
    let resource_request = true;
    Attributes {
        verb,
        resource_request,
        api_group,
        resource,
        subresource,
        name,
        namespace,
        path,
    }
}

/// Asserts each line of `table`, `yes|no user request`, is decided so, by
/// `authorize` and by `allows` (a request's check) alike.
fn check(rbac: &Rbac, table: &str) {
    for line in table.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let mut f = line.splitn(3, ' ');
        let (want, who, what) = (f.next(), f.next().unwrap_or(""), f.next().unwrap_or(""));
        let decision = rbac.authorize(&user(who), &req(what));
        let allowed = matches!(decision, Decision::Allow(_));
        assert_eq!(rbac.allows(&user(who), &req(what)), allowed, "{line}");
        assert_eq!(
            Some(if allowed { "yes" } else { "no" }),
            want,
            "{line}: {decision:?}"
        );
    }
}

/// The objects of a JSON list.
fn list(v: Value) -> Vec<Value> {
    v.as_array().cloned().unwrap_or_default()
}

/// The reason of a decision.
fn reason(d: Decision) -> String {
    match d {
        Decision::Allow(r) | Decision::Deny(r) => r,
    }
}

fn pods_reader() -> Value {
    json!({"metadata": {"name": "pods-reader"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]})
}

#[test]
fn users_groups_and_service_accounts_are_subjects() {
    let crbs = list(json!([{"metadata": {"name": "read"},
        "roleRef": {"kind": "ClusterRole", "name": "pods-reader"},
        "subjects": [{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "readers"},
            {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"},
            {"kind": "ServiceAccount", "name": "nons"}]}]));
    let rbac = Rbac::new(&[], &[pods_reader()], &[], &crbs);
    check(
        &rbac,
        "
        yes alice get pods p ns
        yes bob|readers list pods - -
        yes system:serviceaccount:ns:sa get pods p other
        no bob|writers get pods p ns
        no Alice get pods p ns
        no system:serviceaccount:ns:other get pods p ns
        no system:serviceaccount:ns:nons get pods p ns
        no alice delete pods p ns",
    );
    let allowed = r#"RBAC: allowed by ClusterRoleBinding "read" of ClusterRole "pods-reader" to Group "readers""#;
    assert_eq!(
        rbac.authorize(&user("b|readers"), &req("get pods p ns")),
        Decision::Allow(allowed.into())
    );
    assert_eq!(
        rbac.authorize(&user("b"), &req("get pods p ns")),
        Decision::Deny(String::new())
    );
}

#[test]
fn role_bindings_grant_in_their_namespace_only() {
    let roles = list(json!([{"metadata": {"name": "cm", "namespace": "ns"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]}]));
    let rbs = list(json!([
        {"metadata": {"name": "to-cr", "namespace": "ns"}, "subjects": [{"kind": "ServiceAccount", "name": "sa"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "pods-reader"}},
        {"metadata": {"name": "to-role", "namespace": "ns"}, "subjects": [{"kind": "User", "name": "u"}],
            "roleRef": {"kind": "Role", "name": "cm"}},
        {"metadata": {"name": "to-role", "namespace": "elsewhere"}, "subjects": [{"kind": "User", "name": "v"}],
            "roleRef": {"kind": "Role", "name": "cm"}}]));
    let rbac = Rbac::new(&roles, &[pods_reader()], &rbs, &[]);
    // The ServiceAccount's namespace defaults to the binding's.
    check(
        &rbac,
        "
        yes system:serviceaccount:ns:sa list pods - ns
        no system:serviceaccount:ns:sa list pods - other
        no system:serviceaccount:ns:sa list pods - -
        no system:serviceaccount:other:sa list pods - ns
        yes u create configmaps - ns
        no u create configmaps - elsewhere
        no v get configmaps c elsewhere",
    );
    let sa = user("system:serviceaccount:ns:sa");
    assert_eq!(
        reason(rbac.authorize(&sa, &req("get pods p ns"))),
        r#"RBAC: allowed by RoleBinding "to-cr/ns" of ClusterRole "pods-reader" to ServiceAccount "sa/ns""#
    );
    // A Role is looked up in the binding's namespace: there is none there.
    assert_eq!(
        rbac.authorize(&user("v"), &req("get configmaps x elsewhere")),
        Decision::Deny(r#"RBAC: role.rbac.authorization.k8s.io "cm" not found"#.into())
    );
}

#[test]
fn missing_roles_are_the_deny_reason() {
    let crbs = list(json!([
        {"metadata": {"name": "a"}, "roleRef": {"kind": "ClusterRole", "name": "gone"}, "subjects": [{"kind": "User", "name": "u"}]},
        {"metadata": {"name": "b"}, "roleRef": {"kind": "ClusterRole", "name": "also-gone"}, "subjects": [{"kind": "Group", "name": "g"}]},
        {"metadata": {"name": "c"}, "roleRef": {"kind": "ClusterRole", "name": "gone"}, "subjects": [{"kind": "Group", "name": "g"}]},
        {"metadata": {"name": "d"}, "roleRef": {"kind": "ClusterRole", "name": "gone"}, "subjects": [{"kind": "User", "name": "x"}]},
        {"metadata": {"name": "e"}, "roleRef": {"kind": "Thing", "name": "t"}, "subjects": [{"kind": "User", "name": "w"}]}]));
    let rbac = Rbac::new(&[], &[], &[], &crbs);
    let deny = |who: &str| reason(rbac.authorize(&user(who), &req("get pods - -")));
    let gone = r#"clusterrole.rbac.authorization.k8s.io "gone" not found"#;
    let also = r#"clusterrole.rbac.authorization.k8s.io "also-gone" not found"#;
    assert_eq!(deny("u"), format!("RBAC: {gone}"));
    assert_eq!(deny("u|g"), format!("RBAC: [{gone}, {also}]"));
    assert_eq!(
        deny("w"),
        r#"RBAC: unsupported role reference kind: "Thing""#
    );
    assert_eq!(deny("y"), "");
}

#[test]
fn resources_names_subresources_and_wildcards_match_as_in_kube() {
    let rules = [
        (
            "named",
            json!({"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cm"], "verbs": ["get", "list", "create"]}),
        ),
        (
            "pods",
            json!({"apiGroups": ["*"], "resources": ["pods"], "verbs": ["get"]}),
        ),
        (
            "log",
            json!({"apiGroups": ["*"], "resources": ["pods/log"], "verbs": ["get"]}),
        ),
        (
            "scale",
            json!({"apiGroups": ["*"], "resources": ["*/scale"], "verbs": ["get"]}),
        ),
        (
            "pods-any",
            json!({"apiGroups": ["*"], "resources": ["pods/*"], "verbs": ["get"]}),
        ),
        (
            "all-verbs",
            json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["*"]}),
        ),
        (
            "all-groups",
            json!({"apiGroups": ["*"], "resources": ["widgets"], "verbs": ["get"]}),
        ),
        (
            "all-resources",
            json!({"apiGroups": ["batch"], "resources": ["*"], "verbs": ["list"]}),
        ),
    ];
    let crs: Vec<_> = rules
        .iter()
        .map(|(n, r)| json!({"metadata": {"name": n}, "rules": [r]}))
        .collect();
    let crbs: Vec<_> = rules
        .iter()
        .map(|(n, _)| {
            json!({"metadata": {"name": n},
        "roleRef": {"kind": "ClusterRole", "name": n}, "subjects": [{"kind": "User", "name": n}]})
        })
        .collect();
    // A list or a create names no object; kube's `pods/*` is not "any
    // subresource of pods".
    check(
        &Rbac::new(&[], &crs, &[], &crbs),
        "
        yes named get configmaps cm ns
        no named get configmaps other ns
        no named list configmaps - ns
        no named create configmaps - ns
        yes pods get pods p ns
        no pods get pods/log p ns
        yes log get pods/log p ns
        no log get pods p ns
        no log get pods/exec p ns
        yes scale get deployments.apps/scale d ns
        yes scale get statefulsets.apps/scale s ns
        no scale get deployments.apps d ns
        no scale get deployments.apps/status d ns
        no pods-any get pods/log p ns
        no pods-any get pods p ns
        yes pods-any get pods/* p ns
        yes all-verbs deletecollection deployments.apps - ns
        yes all-verbs escalate deployments.apps d -
        no all-verbs get replicasets.apps d -
        no all-verbs get deployments d -
        yes all-groups get widgets.example.com w ns
        yes all-groups get widgets w -
        no all-groups list widgets.example.com - ns
        yes all-resources list jobs.batch - ns
        yes all-resources list jobs.batch/status - ns
        no all-resources list jobs.apps - ns",
    );
}

#[test]
fn non_resource_urls_match_by_prefix_and_only_cluster_wide() {
    let crs = list(json!([{"metadata": {"name": "urls"},
        "rules": [{"nonResourceURLs": ["/healthz", "/apis/*"], "verbs": ["get"]}]}]));
    let binding = json!({"metadata": {"name": "urls", "namespace": "ns"},
        "roleRef": {"kind": "ClusterRole", "name": "urls"}, "subjects": [{"kind": "User", "name": "u"}]});
    check(
        &Rbac::new(&[], &crs, &[], std::slice::from_ref(&binding)),
        "
        yes u get /healthz
        no u get /healthz/etcd
        no u post /healthz
        yes u get /apis/apps
        yes u get /apis/
        no u get /apis
        no u get pods - ns",
    );
    // Through a RoleBinding the ClusterRole's URLs grant nothing.
    check(&Rbac::new(&[], &crs, &[binding], &[]), "no u get /healthz");
}

#[test]
fn aggregated_roles_take_the_selected_roles_rules() {
    let crs = list(json!([
        {"metadata": {"name": "a", "labels": {"agg": "yes", "tier": "one"}}, "rules": [{"apiGroups": [""], "resources": ["apples"], "verbs": ["get"]}]},
        {"metadata": {"name": "b", "labels": {"agg": "yes", "tier": "two"}}, "rules": [{"apiGroups": [""], "resources": ["bananas"], "verbs": ["get"]}]},
        {"metadata": {"name": "c", "labels": {"tier": "three"}}, "rules": [{"apiGroups": [""], "resources": ["cherries"], "verbs": ["get"]}]},
        {"metadata": {"name": "d", "labels": {"agg": "no"}}, "rules": [{"apiGroups": [""], "resources": ["dates"], "verbs": ["get"]}]},
        {"metadata": {"name": "dup", "labels": {"agg": "yes"}}, "rules": [{"apiGroups": [""], "resources": ["apples"], "verbs": ["get"]}]},
        {"metadata": {"name": "by-labels", "labels": {"outer": "true"}}, "rules": [{"apiGroups": [""], "resources": ["own"], "verbs": ["get"]}],
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"agg": "yes"}}]}},
        {"metadata": {"name": "by-in"}, "aggregationRule": {"clusterRoleSelectors": [{"matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["two", "three"]}]}]}},
        {"metadata": {"name": "by-not-in"}, "aggregationRule": {"clusterRoleSelectors": [{"matchExpressions": [
            {"key": "tier", "operator": "NotIn", "values": ["one", "two"]}, {"key": "agg", "operator": "Exists"}]}]}},
        {"metadata": {"name": "by-absent"}, "aggregationRule": {"clusterRoleSelectors": [{"matchExpressions": [
            {"key": "agg", "operator": "DoesNotExist"}, {"key": "tier", "operator": "Exists", "values": []}]}]}},
        {"metadata": {"name": "nested"}, "aggregationRule": {"clusterRoleSelectors": [
            {"matchLabels": {"tier": "three"}}, {"matchLabels": {"outer": "true"}}]}},
        {"metadata": {"name": "invalid"}, "rules": [{"apiGroups": [""], "resources": ["own"], "verbs": ["get"]}],
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"agg": "yes"}},
            {"matchExpressions": [{"key": "agg", "operator": "In", "values": []}]},
            {"matchExpressions": [{"key": "agg", "operator": "Near", "values": ["yes"]}]}]}}]));
    let crbs = list(
        json!([{"metadata": {"name": "n"}, "roleRef": {"kind": "ClusterRole", "name": "nested"},
        "subjects": [{"kind": "User", "name": "u"}]}]),
    );
    let rbac = Rbac::new(&[], &crs, &[], &crbs);
    let resources = |name: &str| -> Vec<String> {
        let rules = rbac.role_rules("", "ClusterRole", name).unwrap_or_default();
        rules
            .iter()
            .map(|r| r["resources"][0].as_str().unwrap_or_default().into())
            .collect()
    };
    // Selector by selector, by role name, duplicates once, never the
    // role's own rules (but when kube would reject a selector).
    assert_eq!(resources("by-labels"), ["apples", "bananas"]);
    assert_eq!(resources("by-in"), ["bananas", "cherries"]);
    assert_eq!(resources("by-not-in"), ["dates", "apples"]);
    assert_eq!(resources("by-absent"), ["cherries"]);
    assert_eq!(resources("nested"), ["cherries", "apples", "bananas"]);
    assert_eq!(resources("invalid"), ["own"]);
    assert_eq!(resources("a"), ["apples"]);
    check(&rbac, "yes u get bananas x ns\nno u get own x ns");
}

#[test]
fn malformed_objects_are_skipped() {
    let crs = list(
        json!(["not an object", null, {"metadata": {}, "rules": []}, {"metadata": {"name": 42}},
        {"metadata": {"name": "bad-rules"}, "rules": {"verbs": ["*"]}},
        {"metadata": {"name": "bad-verbs"}, "rules": [{"verbs": "get", "resources": ["*"]}]},
        {"metadata": {"name": "bad-rule"}, "rules": [7]},
        {"metadata": {"name": "bad-aggregation"}, "aggregationRule": {"clusterRoleSelectors": 3}},
        {"metadata": {"name": "pods-reader"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}]),
    );
    let roles = list(json!([{"metadata": {"name": "no-namespace"}, "rules": []}, [1, 2]]));
    let crbs = list(json!([
        {"metadata": {"name": "no-role-ref"}, "subjects": [{"kind": "User", "name": "u"}]},
        {"metadata": {"name": "bad-subjects"}, "roleRef": {"kind": "ClusterRole", "name": "pods-reader"}, "subjects": "u"},
        {"metadata": {"name": "bad-subject"}, "roleRef": {"kind": "ClusterRole", "name": "pods-reader"}, "subjects": [{"kind": "User"}]},
        {"metadata": {"name": "to-bad"}, "roleRef": {"kind": "ClusterRole", "name": "bad-verbs"}, "subjects": [{"kind": "User", "name": "u"}]},
        {"metadata": {"name": "good"}, "roleRef": {"kind": "ClusterRole", "name": "pods-reader"}, "subjects": [{"kind": "User", "name": "u"}]}]));
    let rbs = list(
        json!([true, {"metadata": {"name": "no-ns"}, "roleRef": {"kind": "ClusterRole", "name": "pods-reader"}}]),
    );
    let rbac = Rbac::new(&roles, &crs, &rbs, &crbs);
    check(&rbac, "yes u get pods p ns");
    let missing = r#"RBAC: clusterrole.rbac.authorization.k8s.io "bad-verbs" not found"#;
    assert_eq!(
        reason(rbac.authorize(&user("u"), &req("delete pods p ns"))),
        missing
    );
    for name in ["bad-rules", "bad-verbs", "bad-rule", "bad-aggregation"] {
        assert_eq!(rbac.role_rules("", "ClusterRole", name), None, "{name}");
    }
    assert_eq!(rbac.role_rules("", "Role", "no-namespace"), None);
    assert_eq!((rbac.cluster.bindings.len(), rbac.namespaced.len()), (2, 0));
}

/// A Role `r` in `ns` and a ClusterRole `cr`, both bound to `u`.
fn held() -> Rbac {
    let roles = list(json!([{"metadata": {"name": "r", "namespace": "ns"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["s"], "verbs": ["get"]}]}]));
    let crs = list(json!([{"metadata": {"name": "cr"}, "rules": [
        {"apiGroups": ["", "apps"], "resources": ["pods", "deployments", "*/scale"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a", "b"], "verbs": ["update"]},
        {"nonResourceURLs": ["/metrics/*"], "verbs": ["get"]}]}]));
    let rbs = list(json!([{"metadata": {"name": "r", "namespace": "ns"},
        "roleRef": {"kind": "Role", "name": "r"}, "subjects": [{"kind": "User", "name": "u"}]}]));
    let crbs = list(json!([{"metadata": {"name": "cr"},
        "roleRef": {"kind": "ClusterRole", "name": "cr"}, "subjects": [{"kind": "User", "name": "u"}]}]));
    Rbac::new(&roles, &crs, &rbs, &crbs)
}

#[test]
fn covers_checks_escalation() {
    let (rbac, u) = (held(), user("u"));
    let subset = list(json!([
        {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets/scale"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"], "verbs": ["update"]},
        {"nonResourceURLs": ["/metrics/cadvisor"], "verbs": ["get"]}]));
    assert_eq!(rbac.covers(&u, "", &subset), Ok(()));
    let secret = list(
        json!([{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["s"], "verbs": ["get"]}]),
    );
    assert_eq!(rbac.covers(&u, "ns", &secret), Ok(()));
    assert_eq!(rbac.covers(&u, "", &secret), Err(secret));
    let extra_verb = list(
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "delete", "create"]}]),
    );
    assert_eq!(
        rbac.covers(&u, "ns", &extra_verb),
        Err(list(json!([
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}])))
    );
    // Every name needs a rule without names; what does not parse is not covered.
    let more = list(
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["update"]},
        {"nonResourceURLs": ["/metrics", "/metrics/x"], "verbs": ["get"]}, 3]),
    );
    assert_eq!(
        rbac.covers(&u, "", &more),
        Err(list(json!([
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["update"]},
        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}, 3])))
    );
}

#[test]
fn rules_for_lists_what_applies() {
    let rbac = held();
    let (resource, non_resource) = rbac.rules_for(&user("u"), "ns");
    let rules = rbac.role_rules("", "ClusterRole", "cr").unwrap_or_default();
    let secret = json!({"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["s"], "verbs": ["get"]});
    assert_eq!(resource, [rules[0].clone(), rules[1].clone(), secret]);
    assert_eq!(non_resource, [rules[2].clone()]);
    assert_eq!(rbac.rules_for(&user("u"), "").0.len(), 2);
    assert_eq!(rbac.rules_for(&user("v"), "ns"), (vec![], vec![]));
    assert_eq!(rbac.role_rules("ns", "Role", "r").map(|r| r.len()), Some(1));
    assert_eq!(rbac.role_rules("other", "Role", "r"), None);
    assert_eq!(rbac.role_rules("ns", "Widget", "r"), None);
}

#[test]
fn forbidden_messages_are_worded_as_kube_words_them() {
    let msg = |who: &str, what: &str| forbidden_message(&user(who), &req(what), "");
    assert_eq!(
        msg("system:serviceaccount:ns:sa", "get configmaps x ns"),
        r#"configmaps "x" is forbidden: User "system:serviceaccount:ns:sa" cannot get resource "configmaps" in API group "" in the namespace "ns""#
    );
    assert_eq!(
        msg("u", "list configmaps - ns"),
        r#"configmaps is forbidden: User "u" cannot list resource "configmaps" in API group "" in the namespace "ns""#
    );
    assert_eq!(
        msg("u", "list deployments.apps - -"),
        r#"deployments.apps is forbidden: User "u" cannot list resource "deployments" in API group "apps" at the cluster scope"#
    );
    assert_eq!(
        msg("u", "get pods/log p ns"),
        r#"pods "p" is forbidden: User "u" cannot get resource "pods/log" in API group "" in the namespace "ns""#
    );
    assert_eq!(
        msg("u", "get /healthz"),
        r#"forbidden: User "u" cannot get path "/healthz""#
    );
    assert_eq!(
        msg("a\"<b>\n", "get /x"),
        r#"forbidden: User "a\"&lt;b&gt;\n" cannot get path "/x""#
    );
    let reason = r#"RBAC: role.rbac.authorization.k8s.io "x" not found"#;
    assert_eq!(
        forbidden_message(&user("u"), &req("get nodes n -"), reason),
        format!(
            r#"nodes "n" is forbidden: User "u" cannot get resource "nodes" in API group "" at the cluster scope: {reason}"#
        )
    );
}

#[test]
fn the_bootstrap_policy_grants_what_kube_does() {
    let objects = crate::registry::bootstrap::objects();
    let of = |kind: &str| -> Vec<Value> {
        objects
            .iter()
            .filter(|o| o["kind"] == kind)
            .cloned()
            .collect()
    };
    let rbs: Vec<_> = ["admin", "edit", "view"]
        .iter()
        .map(|r| {
            json!({"metadata": {"name": r, "namespace": "ns"},
        "roleRef": {"kind": "ClusterRole", "name": r}, "subjects": [{"kind": "User", "name": r}]})
        })
        .collect();
    let rbac = Rbac::new(
        &of("Role"),
        &of("ClusterRole"),
        &rbs,
        &of("ClusterRoleBinding"),
    );
    check(
        &rbac,
        "
        yes root|system:masters delete nodes n -
        yes root|system:masters escalate clusterroles.rbac.authorization.k8s.io - -
        yes root|system:masters post /anything
        yes view get pods p ns
        yes view list endpointslices.discovery.k8s.io - ns
        no view get secrets s ns
        no view create pods - ns
        no view get pods p other
        yes edit create deployments.apps - ns
        yes edit get secrets s ns
        yes edit get pods p ns
        no edit create roles.rbac.authorization.k8s.io - ns
        yes admin create roles.rbac.authorization.k8s.io - ns
        yes admin patch deployments.apps d ns
        yes admin watch pods - ns
        yes u|system:authenticated get /apis/apps/v1
        yes u|system:authenticated create selfsubjectaccessreviews.authorization.k8s.io - -
        no u|system:authenticated list pods - ns
        yes system:anonymous|system:unauthenticated get /healthz
        yes system:anonymous|system:unauthenticated get /version
        no system:anonymous|system:unauthenticated get /apis",
    );
    assert_eq!(
        reason(rbac.authorize(&user("root|system:masters"), &req("get pods p ns"))),
        r#"RBAC: allowed by ClusterRoleBinding "cluster-admin" of ClusterRole "cluster-admin" to Group "system:masters""#
    );
}
