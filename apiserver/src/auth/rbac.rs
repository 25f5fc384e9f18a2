//! kube-apiserver's RBAC authorizer, over a snapshot of the cluster's
//! Roles, ClusterRoles, RoleBindings and ClusterRoleBindings as stored.
//!
//! **What it decides.** [`Rbac::authorize`] answers as kube-apiserver's
//! RBAC authorizer (`plugin/pkg/auth/authorizer/rbac`): the rules of the
//! ClusterRoleBindings whose subjects name the user are tried, then, when
//! the request has a namespace, those of the namespace's RoleBindings (a
//! RoleBinding's Role is looked up in its own namespace; a ClusterRole it
//! references grants its rules in that namespace only). The first rule that
//! matches allows, with kube's reason (`RBAC: allowed by ClusterRoleBinding
//! "x" of ClusterRole "y" to Group "z"`); otherwise the request is denied
//! with kube's reason: empty, or `RBAC: ` and the roles that bindings
//! applying to the user name but that do not exist. Rules match as
//! `pkg/apis/rbac/v1`'s helpers match them: `*` verbs, groups and
//! resources; `pods/log` for a subresource and `*/scale` for a subresource
//! of any resource (`pods` alone is not `pods/log`, and `pods/*` matches
//! only a subresource named `*`, as in kube); resourceNames only when the
//! request names an object; nonResourceURLs exactly or by a trailing `*`.
//! Non-resource requests have no namespace, so only ClusterRoleBindings
//! grant them. No user or group is special here: `system:masters` is
//! allowed before RBAC is asked (`auth::Auth::authorize`), and through
//! the bootstrap ClusterRoleBinding `cluster-admin` too.
//!
//! **Aggregation.** kube-controller-manager's clusterrole-aggregation
//! controller overwrites the rules of a ClusterRole with an
//! `aggregationRule` with the rules of the other ClusterRoles its selectors
//! select (selector by selector, by name, each rule once). [`Rbac::new`]
//! does the same, to a fixed point (an aggregated role selected by another
//! brings its aggregated rules, as `view` does to `edit` and `edit` to
//! `admin`); the rules an aggregated role stores are ignored, unless the
//! controller would reject one of its selectors and leave them.
//!
//! **Approximations.** Bindings are tried in the order given, where kube
//! takes its informer cache's: when several allow, the reason may name
//! another binding than kube's would. Quoting follows Go's `%q` but keeps
//! non-printable Unicode other than control characters as is. Kube lets
//! `system:masters` and holders of `escalate`/`bind` skip the escalation
//! check: that is the caller's part; [`Rbac::covers`] is
//! `ConfirmNoEscalation`'s comparison of rules. Malformed objects are
//! skipped: a binding to a skipped role names a role that does not exist.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Map, Value, json};

/// Who is asking (kube's `user.Info`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    /// The user name (`system:serviceaccount:<namespace>:<name>` for a
    /// ServiceAccount).
    pub name: String,
    /// The user's uid, "" when none.
    pub uid: String,
    /// The user's groups, the authenticator's (`system:authenticated`...)
    /// included.
    pub groups: Vec<String>,
    /// What else the authenticator says (RBAC reads none of it).
    pub extra: BTreeMap<String, Vec<String>>,
}

/// What is asked (kube-apiserver's `authorizer.Attributes`), borrowing
/// from the request where it can (a request's check allocates nothing).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Attributes<'a> {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`, `impersonate`, `bind`, `escalate`, `use`...; the
    /// lowercase HTTP method of a non-resource request.
    pub verb: Cow<'a, str>,
    /// Whether this asks for a resource (else for `path`).
    pub resource_request: bool,
    /// The API group, "" for core.
    pub api_group: Cow<'a, str>,
    /// The resource, plural (`pods`).
    pub resource: Cow<'a, str>,
    /// The subresource (`log`, `status`), "" for none.
    pub subresource: Cow<'a, str>,
    /// The object's name, "" when none (a list, a create).
    pub name: Cow<'a, str>,
    /// The namespace, "" for cluster-scoped resources or all namespaces.
    pub namespace: Cow<'a, str>,
    /// The request's path (what a non-resource request asks for).
    pub path: Cow<'a, str>,
}

/// The authorizer's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed, with kube's reason (`RBAC: allowed by ...`).
    Allow(String),
    /// Not allowed (kube's NoOpinion), with kube's reason: empty unless a
    /// binding applying to the user names a role that does not exist.
    Deny(String),
}

/// A snapshot of the cluster's RBAC objects, ready to answer.
#[derive(Debug, Default)]
pub struct Rbac {
    /// Roles by namespace, then name.
    roles: HashMap<String, HashMap<String, Arc<[Rule]>>>,
    /// ClusterRoles by name, aggregated ones with their aggregated rules.
    cluster_roles: HashMap<String, Arc<[Rule]>>,
    /// The ClusterRoleBindings.
    cluster: Scope,
    /// The RoleBindings, by namespace.
    namespaced: Index<Scope>,
}

/// A map looked up on every authorized request, by name: hashed with
/// foldhash (SipHash's lookups were half of what deciding a
/// ServiceAccount's request cost, by callgrind). Its keys are names from
/// RBAC objects, which only their writers choose.
type Index<V> = HashMap<String, V, foldhash::fast::RandomState>;

impl Rbac {
    /// Build from the objects as stored (JSON as the API serves them,
    /// `rbac.authorization.k8s.io/v1`). A ClusterRole with an
    /// `aggregationRule` gets the union of the rules of every other
    /// ClusterRole whose labels match one of its `clusterRoleSelectors`
    /// (`matchLabels`, `matchExpressions` with `In`, `NotIn`, `Exists`,
    /// `DoesNotExist`) instead of its own, as kube-controller-manager
    /// writes them (but keeps its own when kube's controller would reject
    /// a selector). Malformed objects are skipped.
    #[must_use]
    pub fn new(
        roles: &[Value],
        cluster_roles: &[Value],
        role_bindings: &[Value],
        cluster_role_bindings: &[Value],
    ) -> Rbac {
        let mut rbac = Rbac {
            cluster_roles: aggregate(cluster_roles),
            ..Rbac::default()
        };
        for (name, namespace, rules) in roles.iter().filter_map(|r| role(r, true)) {
            let by_name = rbac.roles.entry(namespace).or_default();
            by_name.entry(name).or_insert_with(|| rules.into());
        }
        for b in cluster_role_bindings
            .iter()
            .filter_map(|b| binding(b, false))
        {
            let b = rbac.resolve(b);
            rbac.cluster.add(b);
        }
        for b in role_bindings.iter().filter_map(|b| binding(b, true)) {
            let b = rbac.resolve(b);
            rbac.namespaced
                .entry(b.namespace.clone())
                .or_default()
                .add(b);
        }
        rbac
    }

    /// Whether [`authorize`](Self::authorize) allows: the same walk,
    /// without the reason (what a request's check needs; its reason is
    /// wanted only when it denies).
    #[must_use]
    pub fn allows(&self, user: &UserInfo, attrs: &Attributes) -> bool {
        let local = (!attrs.namespace.is_empty()).then(|| self.namespaced.get(&*attrs.namespace));
        std::iter::once(&self.cluster)
            .chain(local.flatten())
            .any(|scope| {
                // In any order, a binding perhaps twice: no reason is worded.
                // The index names exactly the bindings with a subject that
                // applies to the user (`Subject::applies`).
                let groups = user.groups.iter().filter_map(|g| scope.groups.get(g));
                let lists = scope.users.get(&user.name).into_iter().chain(groups);
                lists.flatten().any(|&i| {
                    let rules = scope.bindings[i].rules.as_deref().unwrap_or_default();
                    rules.iter().any(|r| r.allows(attrs))
                })
            })
    }

    /// kube-apiserver's RBAC decision on `attrs` asked by `user`.
    #[must_use]
    pub fn authorize(&self, user: &UserInfo, attrs: &Attributes) -> Decision {
        let (mut allowed, mut errors) = (None, Vec::new());
        self.visit(user, &attrs.namespace, |b, s, rules| match rules {
            Ok(rules) if rules.iter().any(|r| r.allows(attrs)) => {
                allowed = Some(format!("RBAC: allowed by {}", b.describe(s)));
                false
            }
            Ok(_) => true,
            Err(e) => {
                if !errors.contains(&e) {
                    errors.push(e);
                }
                true
            }
        });
        match (allowed, errors.as_slice()) {
            (Some(reason), _) => Decision::Allow(reason),
            (None, []) => Decision::Deny(String::new()),
            (None, [e]) => Decision::Deny(format!("RBAC: {e}")),
            (None, es) => Decision::Deny(format!("RBAC: [{}]", es.join(", "))),
        }
    }

    /// The rules that apply to `user` in `namespace` (cluster-wide ones
    /// first), for a SelfSubjectRulesReview: (resource rules, non-resource
    /// rules), as PolicyRules' JSON, in kube's order, not deduplicated. As
    /// in kube, a rule with both resources and nonResourceURLs is in both,
    /// and a RoleBinding's ClusterRole's nonResourceURLs are listed though
    /// they allow nothing.
    #[must_use]
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> (Vec<Value>, Vec<Value>) {
        let (mut resource, mut non_resource) = (Vec::new(), Vec::new());
        for r in self.held(user, namespace) {
            if !r.resources.is_empty() {
                let mut r = r.clone();
                r.urls.clear();
                resource.push(r.to_json());
            }
            if !r.urls.is_empty() {
                non_resource.push(json!({"verbs": r.verbs, "nonResourceURLs": r.urls}));
            }
        }
        (resource, non_resource)
    }

    /// kube's escalation check on writing a Role or ClusterRole
    /// (`ConfirmNoEscalation`): `Ok` if every rule in `rules` is covered by
    /// the rules `user` holds in `namespace` ("" = cluster-wide ones only).
    ///
    /// # Errors
    ///
    /// What is not covered, broken down as kube's `validation.Covers` does:
    /// one PolicyRule (JSON) per (group, resource, verb, name) and per
    /// (URL, verb); a rule that does not parse as is.
    pub fn covers(
        &self,
        user: &UserInfo,
        namespace: &str,
        rules: &[Value],
    ) -> Result<(), Vec<Value>> {
        let owner = self.held(user, namespace);
        let mut missing = Vec::new();
        for value in rules {
            let Some(r) = Rule::parse(value) else {
                missing.push(value.clone());
                continue;
            };
            let names: Vec<Option<&String>> = match r.resource_names.as_slice() {
                [] => vec![None],
                names => names.iter().map(Some).collect(),
            };
            for (group, resource) in pairs(&r.api_groups, &r.resources) {
                for (verb, name) in pairs(&r.verbs, &names) {
                    if !owner.iter().any(|o| o.covers(verb, group, resource, *name)) {
                        let sub =
                            json!({"apiGroups": [group], "resources": [resource], "verbs": [verb]});
                        missing.push(with_name(sub, *name));
                    }
                }
            }
            for (url, verb) in pairs(&r.urls, &r.verbs) {
                let covers = |o: &&Rule| {
                    let url = o.urls.iter().any(|u| url_covers(u, url));
                    url && has_or_all(&o.verbs, verb) && o.resource_names.is_empty()
                };
                if !owner.iter().any(covers) {
                    missing.push(json!({"nonResourceURLs": [url], "verbs": [verb]}));
                }
            }
        }
        missing.is_empty().then_some(()).ok_or(missing)
    }

    /// The rules of the role a binding's roleRef names (kind `Role` in
    /// `namespace`, or `ClusterRole`, aggregated ones with their aggregated
    /// rules), as PolicyRules' JSON: `None` if there is no such role.
    #[must_use]
    pub fn role_rules(&self, namespace: &str, kind: &str, name: &str) -> Option<Vec<Value>> {
        let rules = match kind {
            "Role" => self.roles.get(namespace)?.get(name)?,
            "ClusterRole" => self.cluster_roles.get(name)?,
            _ => return None,
        };
        Some(rules.iter().map(Rule::to_json).collect())
    }

    /// kube's `GetRoleReferenceRules`: `b` with its role's rules, or with
    /// kube's error when there is no such role.
    fn resolve(&self, mut b: Binding) -> Binding {
        let (kind, name) = (b.role_kind.as_str(), &b.role_name);
        let found = match kind {
            "Role" => self.roles.get(&b.namespace).and_then(|m| m.get(name)),
            "ClusterRole" => self.cluster_roles.get(name),
            _ => {
                b.rules = Err(format!("unsupported role reference kind: {}", quote(kind)));
                return b;
            }
        };
        let resource = kind.to_ascii_lowercase();
        let missing = format!(
            "{resource}.rbac.authorization.k8s.io {} not found",
            quote(name)
        );
        b.rules = found.cloned().ok_or(missing);
        b
    }

    /// kube's `VisitRulesFor`: `f` gets each binding applying to `user` in
    /// `namespace` (ClusterRoleBindings, then the namespace's
    /// RoleBindings), the subject that makes it apply, and its role's
    /// rules; it returns whether to go on.
    fn visit<'a>(
        &'a self,
        user: &UserInfo,
        namespace: &str,
        mut f: impl FnMut(&'a Binding, &'a Subject, Result<&'a [Rule], &'a str>) -> bool,
    ) {
        let local = (!namespace.is_empty()).then(|| self.namespaced.get(namespace));
        for scope in std::iter::once(&self.cluster).chain(local.flatten()) {
            for i in scope.candidates(user) {
                let b = &scope.bindings[i];
                let Some(s) = b.subjects.iter().find(|s| s.applies(user, &b.namespace)) else {
                    continue;
                };
                if !f(b, s, b.rules.as_deref().map_err(String::as_str)) {
                    return;
                }
            }
        }
    }

    /// kube's `RulesFor`: every rule `user` holds in `namespace`.
    fn held(&self, user: &UserInfo, namespace: &str) -> Vec<&Rule> {
        let mut rules = Vec::new();
        self.visit(user, namespace, |_, _, r| {
            rules.extend(r.unwrap_or_default());
            true
        });
        rules
    }
}

/// kube-apiserver's 403 message for `attrs` denied to `user`, worded as
/// kube-apiserver words it (`responsewriters.Forbidden` in
/// `apierrors.NewForbidden`), with `: <reason>` when `reason` is not empty:
/// `configmaps "x" is forbidden: User "u" cannot get resource "configmaps"
/// in API group "" in the namespace "ns"`, `... at the cluster scope`,
/// `pods "p" is forbidden: User "u" cannot get resource "pods/log" ...`,
/// `deployments.apps is forbidden: ...` without a name, and
/// `forbidden: User "u" cannot get path "/healthz"`.
#[must_use]
pub fn forbidden_message(user: &UserInfo, attrs: &Attributes, reason: &str) -> String {
    let (who, verb, a) = (quote(&user.name), &attrs.verb, attrs);
    let mut msg = if !a.resource_request {
        format!("User {who} cannot {verb} path {}", quote(&a.path))
    } else {
        let resource = match &*a.subresource {
            "" => quote(&a.resource),
            sub => quote(&format!("{}/{sub}", a.resource)),
        };
        let what = format!(
            "{verb} resource {resource} in API group {}",
            quote(&a.api_group)
        );
        match &*a.namespace {
            "" => format!("User {who} cannot {what} at the cluster scope"),
            ns => format!("User {who} cannot {what} in the namespace {}", quote(ns)),
        }
    };
    // Nothing that looks like HTML (kube's sanitizer); the reason as is.
    msg = msg
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    if !reason.is_empty() {
        msg = format!("{msg}: {reason}");
    }
    let qualified = match &*a.api_group {
        "" => a.resource.to_string(),
        group => format!("{}.{group}", a.resource),
    };
    match (qualified.as_str(), &*a.name) {
        ("", _) => format!("forbidden: {msg}"),
        (q, "") => format!("{q} is forbidden: {msg}"),
        (q, name) => format!("{q} {} is forbidden: {msg}", quote(name)),
    }
}

/// A PolicyRule.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
struct Rule {
    verbs: Vec<String>,
    api_groups: Vec<String>,
    resources: Vec<String>,
    resource_names: Vec<String>,
    urls: Vec<String>,
}

impl Rule {
    /// A rule from its JSON: `None` if a field is not a list of strings.
    fn parse(value: &Value) -> Option<Rule> {
        let o = value.as_object()?;
        Some(Rule {
            verbs: strings(o.get("verbs"))?,
            api_groups: strings(o.get("apiGroups"))?,
            resources: strings(o.get("resources"))?,
            resource_names: strings(o.get("resourceNames"))?,
            urls: strings(o.get("nonResourceURLs"))?,
        })
    }

    /// The rule's JSON (empty lists omitted, but `verbs`).
    fn to_json(&self) -> Value {
        let mut rule = json!({"verbs": self.verbs});
        let lists = [
            ("apiGroups", &self.api_groups),
            ("resources", &self.resources),
        ];
        let more = [
            ("resourceNames", &self.resource_names),
            ("nonResourceURLs", &self.urls),
        ];
        for (key, list) in lists.into_iter().chain(more).filter(|(_, l)| !l.is_empty()) {
            rule[key] = json!(list);
        }
        rule
    }

    /// kube's `RuleAllows`.
    fn allows(&self, a: &Attributes) -> bool {
        if !has_or_all(&self.verbs, &a.verb) {
            false
        } else if !a.resource_request {
            self.urls.iter().any(|u| url_covers(u, &a.path))
        } else {
            has_or_all(&self.api_groups, &a.api_group)
                && self
                    .resources
                    .iter()
                    .any(|r| resource_matches(r, &a.resource, &a.subresource))
                && (self.resource_names.is_empty()
                    || self.resource_names.iter().any(|n| *n == *a.name))
        }
    }

    /// kube's `ruleCovers` of one verb on one group's resource (and name).
    fn covers(&self, verb: &str, group: &str, resource: &str, name: Option<&String>) -> bool {
        let star_sub = || {
            let sub = resource.split_once('/').map(|(_, sub)| sub);
            sub.is_some_and(|sub| {
                self.resources
                    .iter()
                    .any(|r| r.strip_prefix("*/") == Some(sub))
            })
        };
        has_or_all(&self.verbs, verb)
            && has_or_all(&self.api_groups, group)
            && (has_or_all(&self.resources, resource) || star_sub())
            && (self.resource_names.is_empty()
                || name.is_some_and(|n| self.resource_names.contains(n)))
    }
}

/// Every pair of an `a` and a `b`, `a` first.
fn pairs<'a, A, B>(a: &'a [A], b: &'a [B]) -> impl Iterator<Item = (&'a A, &'a B)> {
    a.iter().flat_map(move |x| b.iter().map(move |y| (x, y)))
}

/// `rule` with `resourceNames: [name]` when there is a name.
fn with_name(mut rule: Value, name: Option<&String>) -> Value {
    if let Some(name) = name {
        rule["resourceNames"] = json!([name]);
    }
    rule
}

/// Whether `list` holds `want` or `*`.
fn has_or_all(list: &[String], want: &str) -> bool {
    list.iter().any(|s| s == "*" || s == want)
}

/// kube's `ResourceMatches` of a rule's resource against a request's.
fn resource_matches(rule: &str, resource: &str, subresource: &str) -> bool {
    if rule == "*" || subresource.is_empty() {
        return rule == "*" || rule == resource;
    }
    let rest = rule
        .strip_prefix(resource)
        .and_then(|rest| rest.strip_prefix('/'));
    rest == Some(subresource) || rule.strip_prefix("*/") == Some(subresource)
}

/// kube's `NonResourceURLMatches` (and `nonResourceURLCovers`): exactly,
/// or by the prefix before a trailing `*`.
fn url_covers(rule: &str, path: &str) -> bool {
    rule == path || (rule.ends_with('*') && path.starts_with(rule.trim_end_matches('*')))
}

/// A binding's subject.
#[derive(Debug)]
struct Subject {
    kind: String,
    name: String,
    namespace: String,
}

impl Subject {
    /// A ServiceAccount's namespace: its own, else the RoleBinding's (kube
    /// defaults it so); "" when neither says.
    fn sa_namespace<'a>(&'a self, binding_namespace: &'a str) -> &'a str {
        if self.namespace.is_empty() {
            binding_namespace
        } else {
            &self.namespace
        }
    }

    /// kube's `appliesToUser`.
    fn applies(&self, user: &UserInfo, binding_namespace: &str) -> bool {
        match self.kind.as_str() {
            "User" => user.name == self.name,
            "Group" => user.groups.contains(&self.name),
            "ServiceAccount" => {
                let ns = self.sa_namespace(binding_namespace);
                let rest = user.name.strip_prefix("system:serviceaccount:");
                let rest = rest.and_then(|r| r.strip_prefix(ns)?.strip_prefix(':'));
                !ns.is_empty() && rest == Some(self.name.as_str())
            }
            _ => false,
        }
    }

    /// kube's `describeSubject`: `User "u"`, `ServiceAccount "sa/ns"`.
    fn describe(&self, binding_namespace: &str) -> String {
        match self.kind.as_str() {
            "ServiceAccount" => {
                let name = format!("{}/{}", self.name, self.sa_namespace(binding_namespace));
                format!("ServiceAccount {}", quote(&name))
            }
            kind => format!("{kind} {}", quote(&self.name)),
        }
    }
}

/// A RoleBinding (with its namespace) or ClusterRoleBinding (namespace
/// ""), with its role's rules resolved.
#[derive(Debug)]
struct Binding {
    name: String,
    namespace: String,
    role_kind: String,
    role_name: String,
    subjects: Vec<Subject>,
    rules: Result<Arc<[Rule]>, String>,
}

impl Binding {
    /// kube's describers: `ClusterRoleBinding "x" of ClusterRole "y" to
    /// User "u"`, `RoleBinding "x/ns" of Role "y" to ServiceAccount "sa/ns"`.
    fn describe(&self, subject: &Subject) -> String {
        let (kind, name) = match self.namespace.as_str() {
            "" => ("ClusterRoleBinding", quote(&self.name)),
            ns => ("RoleBinding", quote(&format!("{}/{ns}", self.name))),
        };
        let (role_kind, role) = (&self.role_kind, quote(&self.role_name));
        let to = subject.describe(&self.namespace);
        format!("{kind} {name} of {role_kind} {role} to {to}")
    }
}

/// Bindings, indexed by the users and groups their subjects name.
#[derive(Debug, Default)]
struct Scope {
    bindings: Vec<Binding>,
    users: Index<Vec<usize>>,
    groups: Index<Vec<usize>>,
}

impl Scope {
    /// Adds `b`, indexed by the users and groups its subjects name.
    fn add(&mut self, b: Binding) {
        let i = self.bindings.len();
        for s in &b.subjects {
            let (index, key) = match (s.kind.as_str(), s.sa_namespace(&b.namespace)) {
                ("User", _) => (&mut self.users, s.name.clone()),
                ("Group", _) => (&mut self.groups, s.name.clone()),
                ("ServiceAccount", ns) if !ns.is_empty() => (
                    &mut self.users,
                    format!("system:serviceaccount:{ns}:{}", s.name),
                ),
                _ => continue,
            };
            index.entry(key).or_default().push(i);
        }
        self.bindings.push(b);
    }

    /// The bindings whose subjects may name `user`, in order.
    fn candidates(&self, user: &UserInfo) -> Vec<usize> {
        let mut out = Vec::new();
        out.extend(self.users.get(&user.name).into_iter().flatten());
        for g in &user.groups {
            out.extend(self.groups.get(g).into_iter().flatten());
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// A non-empty string at `key` of `v`.
fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key)?
        .as_str()
        .filter(|s| !s.is_empty())
        .map(String::from)
}

/// A Role's or ClusterRole's name, namespace ("" unless `namespaced`) and
/// rules, if well-formed.
fn role(obj: &Value, namespaced: bool) -> Option<(String, String, Vec<Rule>)> {
    let rules = match obj.get("rules") {
        None | Some(Value::Null) => Vec::new(),
        Some(rules) => rules
            .as_array()?
            .iter()
            .map(Rule::parse)
            .collect::<Option<_>>()?,
    };
    let meta = obj.get("metadata")?;
    let namespace = if namespaced {
        text(meta, "namespace")?
    } else {
        String::new()
    };
    Some((text(meta, "name")?, namespace, rules))
}

/// A RoleBinding or ClusterRoleBinding, if well-formed (rules unresolved).
fn binding(obj: &Value, namespaced: bool) -> Option<Binding> {
    let meta = obj.get("metadata")?;
    let role_ref = obj.get("roleRef")?;
    let subject = |s: &Value| {
        let namespace = match s.get("namespace") {
            None | Some(Value::Null) => String::new(),
            Some(ns) => ns.as_str()?.to_string(),
        };
        let (kind, name) = (text(s, "kind")?, text(s, "name")?);
        Some(Subject {
            kind,
            name,
            namespace,
        })
    };
    let subjects = match obj.get("subjects") {
        None | Some(Value::Null) => Vec::new(),
        Some(s) => s.as_array()?.iter().map(subject).collect::<Option<_>>()?,
    };
    Some(Binding {
        name: text(meta, "name")?,
        namespace: if namespaced {
            text(meta, "namespace")?
        } else {
            String::new()
        },
        role_kind: text(role_ref, "kind")?,
        role_name: text(role_ref, "name")?,
        subjects,
        rules: Ok(Arc::from(Vec::new())),
    })
}

/// A list of strings (absent or null: empty); `None` if not one.
fn strings(v: Option<&Value>) -> Option<Vec<String>> {
    match v {
        None | Some(Value::Null) => Some(Vec::new()),
        Some(v) => v
            .as_array()?
            .iter()
            .map(|s| s.as_str().map(String::from))
            .collect(),
    }
}

/// One requirement of a label selector: key, operator, values.
type Requirement = (String, String, Vec<String>);

/// A `metav1.LabelSelector` (null or empty: everything); `None` if kube
/// would reject it.
fn selector(v: &Value) -> Option<Vec<Requirement>> {
    if !(v.is_null() || v.is_object()) {
        return None;
    }
    let mut reqs = Vec::new();
    if let Some(labels) = v.get("matchLabels").filter(|l| !l.is_null()) {
        for (k, val) in labels.as_object()? {
            reqs.push((k.clone(), "In".into(), vec![val.as_str()?.to_string()]));
        }
    }
    if let Some(exprs) = v.get("matchExpressions").filter(|e| !e.is_null()) {
        for e in exprs.as_array()? {
            let (key, op, values) = (
                text(e, "key")?,
                text(e, "operator")?,
                strings(e.get("values"))?,
            );
            match (op.as_str(), values.is_empty()) {
                ("In" | "NotIn", false) | ("Exists" | "DoesNotExist", true) => {}
                _ => return None,
            }
            reqs.push((key, op, values));
        }
    }
    Some(reqs)
}

/// Whether `labels` satisfy every requirement.
fn selects(reqs: &[Requirement], labels: &Map<String, Value>) -> bool {
    reqs.iter().all(|(key, op, values)| {
        let value = labels.get(key).and_then(Value::as_str);
        let listed = value.is_some_and(|v| values.iter().any(|x| x == v));
        match op.as_str() {
            "In" => listed,
            "NotIn" => !listed,
            "Exists" => value.is_some(),
            _ => value.is_none(),
        }
    })
}

/// The ClusterRoles by name, aggregated ones with the rules
/// kube-controller-manager's aggregation controller gives them.
fn aggregate(cluster_roles: &[Value]) -> HashMap<String, Arc<[Rule]>> {
    let (empty, mut seen) = (Map::new(), HashSet::new());
    // (name, labels, selectors when aggregated, rules)
    let mut parsed = Vec::new();
    for obj in cluster_roles {
        let Some((name, _, rules)) = role(obj, false) else {
            continue;
        };
        let selectors = match obj.get("aggregationRule") {
            None | Some(Value::Null) => None,
            Some(Value::Object(agg)) => match agg.get("clusterRoleSelectors") {
                None | Some(Value::Null) => Some(Vec::new()),
                // kube's controller leaves alone a role with a selector it
                // rejects: here its rules are the ones it stores.
                Some(Value::Array(s)) => s.iter().map(selector).collect::<Option<Vec<_>>>(),
                Some(_) => continue,
            },
            Some(_) => continue,
        };
        if seen.insert(name.clone()) {
            let labels = obj.pointer("/metadata/labels").and_then(Value::as_object);
            parsed.push((name, labels.unwrap_or(&empty), selectors, rules));
        }
    }
    // What each aggregated role selects: selector by selector, by name,
    // without itself.
    let mut members = Vec::new();
    for (a, (name, _, selectors, _)) in parsed.iter().enumerate() {
        let mut selected = Vec::new();
        for s in selectors.iter().flatten() {
            let start = selected.len();
            let chosen = |i: &usize| parsed[*i].0 != *name && selects(s, parsed[*i].1);
            selected.extend((0..parsed.len()).filter(chosen));
            selected[start..].sort_by(|&x, &y| parsed[x].0.cmp(&parsed[y].0));
        }
        if selectors.is_some() {
            members.push((a, selected));
        }
    }
    let mut rules: Vec<Vec<Rule>> = parsed
        .iter_mut()
        .map(|p| std::mem::take(&mut p.3))
        .collect();
    for (a, _) in &members {
        rules[*a].clear();
    }
    // Rules only grow: a round per aggregated role at most, and one to see
    // that nothing changed.
    for _ in 0..=members.len() {
        let mut changed = false;
        for (a, selected) in &members {
            let mut once = HashSet::new();
            let all = selected.iter().flat_map(|&m| rules[m].iter());
            let union: Vec<Rule> = all.filter(|r| once.insert(*r)).cloned().collect();
            changed |= union.len() != rules[*a].len();
            rules[*a] = union;
        }
        if !changed {
            break;
        }
    }
    let names = parsed.into_iter().map(|(name, ..)| name);
    names
        .zip(rules)
        .map(|(name, rules)| (name, rules.into()))
        .collect()
}

/// Go's `%q` of a string (non-printable Unicode other than control
/// characters kept as is).
fn quote(s: &str) -> String {
    let mut out = String::from('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => out.extend(['\\', c]),
            '\x07'..='\x0d' => out.extend(['\\', char::from(b"abtnvfr"[c as usize - 7])]),
            c if c < ' ' || c == '\x7f' => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests;
