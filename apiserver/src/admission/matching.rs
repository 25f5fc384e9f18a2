//! Which webhooks a request is sent to, as kube-apiserver's
//! `generic.Webhook` matchers decide: rules, then namespaceSelector, then
//! objectSelector, then `matchConditions`.

use serde_json::{Map, Value};

use super::config::{Rule, Webhook};
use super::review::Request;
use crate::machinery::selector::LabelSelector;
use crate::schema::cel::Budget;

/// Whether a webhook's rules take a request for `operation` on
/// group/version/resource(/subresource) in this scope.
#[must_use]
pub fn rules_match(rules: &[Rule], r: &Request<'_>) -> bool {
    rules.iter().any(|rule| {
        let any = |list: &[String], v: &str| list.iter().any(|x| x == "*" || x == v);
        any(&rule.operations, r.operation.as_str())
            && any(&rule.api_groups, r.group)
            && any(&rule.api_versions, r.version)
            && rule.resources.iter().any(|res| {
                let (res, sub) = res.split_once('/').unwrap_or((res, ""));
                (res == "*" || res == r.resource) && (sub == "*" || sub == r.subresource)
            })
            && {
                // A Namespace counts as cluster-scoped.
                let namespaced =
                    r.namespaced && !(r.group.is_empty() && r.resource == "namespaces");
                match rule.scope.as_str() {
                    "Cluster" => !namespaced,
                    "Namespaced" => namespaced,
                    _ => true,
                }
            }
    })
}

fn labels_of(obj: Option<&Value>) -> Option<&Map<String, Value>> {
    obj.and_then(|o| o["metadata"]["labels"].as_object())
}

fn selects(selector: &LabelSelector, labels: Option<&Map<String, Value>>) -> bool {
    selector.matches(|k| labels.and_then(|l| l.get(k)).and_then(Value::as_str))
}

/// Whether the webhook's selectors take the request: its namespaceSelector
/// judges the namespace's labels (a Namespace's own, for a Namespace; no
/// other cluster-scoped object is excluded by it), its objectSelector the
/// new or the old object's labels.
#[must_use]
pub fn selectors_match(
    hook: &Webhook,
    r: &Request<'_>,
    namespace_labels: Option<&Map<String, Value>>,
) -> bool {
    selected(
        &hook.namespace_selector,
        &hook.object_selector,
        r,
        namespace_labels,
    )
}

/// Whether a namespaceSelector and an objectSelector take the request
/// (see [`selectors_match`]).
#[must_use]
pub fn selected(
    namespace_selector: &LabelSelector,
    object_selector: &LabelSelector,
    r: &Request<'_>,
    namespace_labels: Option<&Map<String, Value>>,
) -> bool {
    let ns_ok = namespace_selector.is_empty()
        || if r.group.is_empty() && r.resource == "namespaces" {
            selects(namespace_selector, labels_of(r.object))
                || selects(namespace_selector, labels_of(r.old_object))
        } else if !r.namespaced {
            true
        } else {
            selects(namespace_selector, namespace_labels)
        };
    ns_ok
        && (object_selector.is_empty()
            || (r.object.is_some() && selects(object_selector, labels_of(r.object)))
            || (r.old_object.is_some() && selects(object_selector, labels_of(r.old_object))))
}

/// What a webhook's `matchConditions` decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conditions {
    /// Every condition is true (or there are none): call it.
    Match,
    /// One is false: skip it.
    Skip,
    /// One failed to evaluate (and none was false): the message.
    Error(String),
}

/// Evaluates the conditions on the request as the webhook would see it
/// (`request` the AdmissionRequest's JSON): a false one wins over an
/// error, as in kube.
#[must_use]
pub fn conditions(hook: &Webhook, r: &Request<'_>, request: &Value) -> Conditions {
    if hook.conditions.is_empty() {
        return Conditions::Match;
    }
    let null = Value::Null;
    let vars = [
        ("object", r.object.unwrap_or(&null)),
        ("oldObject", r.old_object.unwrap_or(&null)),
        ("request", request),
    ];
    let mut budget = Budget::new();
    let mut error = None;
    for (_, expr) in &hook.conditions {
        match expr.eval_bool(&vars, &mut budget) {
            Ok(true) => {}
            Ok(false) => return Conditions::Skip,
            Err(e) if error.is_none() => {
                error = Some(format!(
                    "expression '{}' resulted in error: {e}",
                    expr.source()
                ));
            }
            Err(_) => {}
        }
    }
    error.map_or(Conditions::Match, Conditions::Error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::review::Operation;

    fn rule(ops: &[&str], res: &[&str], scope: &str) -> Rule {
        let v = |s: &[&str]| s.iter().map(|x| (*x).to_string()).collect();
        Rule {
            operations: v(ops),
            api_groups: v(&["*"]),
            api_versions: v(&["*"]),
            resources: v(res),
            scope: scope.into(),
        }
    }

    #[test]
    fn rules_match_resources_subresources_operations_and_scope() {
        let user = crate::auth::UserInfo::default();
        let req = |op, resource: &'static str, sub: &'static str, namespaced| Request {
            operation: op,
            group: "",
            version: "v1",
            resource,
            subresource: sub,
            kind: "Pod",
            namespace: "",
            name: "p",
            namespaced,
            object: None,
            old_object: None,
            user: &user,
            dry_run: false,
            options: Value::Null,
        };
        let pods = req(Operation::Create, "pods", "", true);
        let status = req(Operation::Update, "pods", "status", true);
        let cases = [
            (rule(&["CREATE"], &["pods"], "*"), &pods, true),
            (rule(&["UPDATE"], &["pods"], "*"), &pods, false),
            (rule(&["*"], &["*"], "*"), &pods, true),
            (rule(&["*"], &["*"], "*"), &status, false),
            (rule(&["*"], &["*/*"], "*"), &status, true),
            (rule(&["*"], &["pods/*"], "*"), &status, true),
            (rule(&["*"], &["*/status"], "*"), &status, true),
            (rule(&["*"], &["pods/status"], "*"), &status, true),
            (rule(&["*"], &["pods"], "*"), &status, false),
            (rule(&["*"], &["pods"], "Cluster"), &pods, false),
            (rule(&["*"], &["pods"], "Namespaced"), &pods, true),
        ];
        for (i, (rule, r, want)) in cases.iter().enumerate() {
            assert_eq!(
                rules_match(std::slice::from_ref(rule), r),
                *want,
                "case {i}"
            );
        }
    }
}
