//! ValidatingAdmissionPolicies and bindings as registered: defaulted as
//! admissionregistration/v1 defaults them and checked as kube-apiserver's
//! `validation.go` checks them (the common field errors, in its words), so
//! a stored policy compiles ([`crate::admission::policy`]).
//!
//! Not checked: that a validation's type is exactly `bool` (expressions
//! are compiled `dyn`, so a non-boolean one fails when evaluated, not at
//! registration), `auditAnnotations` keys and value types, and the
//! authorization a binding's `paramRef` needs.

use serde_json::Value;

use super::webhook::{condition_errors, one_of, quoted, rule_errors, selector_errors, set_default};
use crate::schema::cel::Expression;

/// The variables a policy's expressions may name.
pub const POLICY_VARS: &[&str] = &[
    "object",
    "oldObject",
    "request",
    "params",
    "namespaceObject",
    "authorizer",
    "variables",
];

fn default_match(m: &mut Value) {
    if !m.is_object() {
        return;
    }
    set_default(m, "matchPolicy", "Equivalent".into());
    set_default(m, "namespaceSelector", serde_json::json!({}));
    set_default(m, "objectSelector", serde_json::json!({}));
    for key in ["resourceRules", "excludeResourceRules"] {
        let rules = m.get_mut(key).and_then(Value::as_array_mut);
        for r in (rules.into_iter().flatten()).filter(|r| r.is_object()) {
            set_default(r, "scope", "*".into());
        }
    }
}

/// A policy's v1 defaults: failurePolicy Fail; in matchConstraints,
/// matchPolicy Equivalent, empty selectors, each rule's scope `*`.
pub fn default_policy(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    set_default(spec, "failurePolicy", "Fail".into());
    if let Some(m) = spec.get_mut("matchConstraints") {
        default_match(m);
    }
}

/// A binding's v1 defaults: its matchResources' as a policy's.
pub fn default_binding(obj: &mut Value) {
    if let Some(m) = obj.pointer_mut("/spec/matchResources") {
        default_match(m);
    }
}

fn compiles(src: &str, at: &str, errs: &mut Vec<String>) {
    if src.trim().is_empty() {
        errs.push(format!("{at}: Required value: expression is not specified"));
    } else if let Err(e) = Expression::compile(src, POLICY_VARS) {
        errs.push(format!(
            "{at}: Invalid value: {}: compilation failed: {e}",
            quoted(src)
        ));
    }
}

fn match_resources(m: &Value, at: &str, errs: &mut Vec<String>, policy: bool) {
    one_of(
        &m["matchPolicy"],
        &format!("{at}.matchPolicy"),
        &["Equivalent", "Exact"],
        errs,
    );
    selector_errors(m, at, errs);
    let rules = m["resourceRules"].as_array().map_or(&[][..], Vec::as_slice);
    if policy && rules.is_empty() {
        errs.push(format!(
            "{at}.resourceRules: Required value: at least one resourceRule must be defined to provide type information"
        ));
    }
    for key in ["resourceRules", "excludeResourceRules"] {
        for (i, r) in m[key].as_array().into_iter().flatten().enumerate() {
            rule_errors(r, &format!("{at}.{key}[{i}]"), errs);
        }
    }
}

/// The field errors kube-apiserver reports for a policy (empty: valid).
#[must_use]
pub fn policy_errors(obj: &Value) -> Vec<String> {
    let spec = &obj["spec"];
    let mut errs = Vec::new();
    one_of(
        &spec["failurePolicy"],
        "spec.failurePolicy",
        &["Fail", "Ignore"],
        &mut errs,
    );
    let pk = &spec["paramKind"];
    if pk.is_object() {
        if pk["apiVersion"].as_str().is_none_or(str::is_empty) {
            errs.push("spec.paramKind.apiVersion: Required value".into());
        }
        if pk["kind"].as_str().is_none_or(str::is_empty) {
            errs.push("spec.paramKind.kind: Required value".into());
        }
    }
    match spec.get("matchConstraints").filter(|m| m.is_object()) {
        None => errs.push("spec.matchConstraints: Required value".into()),
        Some(m) => match_resources(m, "spec.matchConstraints", &mut errs, true),
    }
    let validations = spec["validations"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let audits = spec["auditAnnotations"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    if validations.is_empty() && audits.is_empty() {
        for f in ["validations", "auditAnnotations"] {
            errs.push(format!(
                "spec.{f}: Required value: validations or auditAnnotations must contain at least one item"
            ));
        }
    }
    for (i, v) in validations.iter().enumerate() {
        let at = format!("spec.validations[{i}]");
        compiles(
            v["expression"].as_str().unwrap_or_default(),
            &format!("{at}.expression"),
            &mut errs,
        );
        if let Some(m) = v["message"].as_str() {
            if m.trim().is_empty() {
                errs.push(format!(
                    "{at}.message: Invalid value: {}: message must be non-empty if specified",
                    quoted(m)
                ));
            } else if m.contains('\n') {
                errs.push(format!(
                    "{at}.message: Invalid value: {}: message must not contain line breaks",
                    quoted(m)
                ));
            }
        }
        if let Some(m) = v["messageExpression"].as_str() {
            if m.trim().is_empty() {
                errs.push(format!(
                    "{at}.messageExpression: Invalid value: {}: must be non-empty if specified",
                    quoted(m)
                ));
            } else {
                compiles(m, &format!("{at}.messageExpression"), &mut errs);
            }
        }
        one_of(
            &v["reason"],
            &format!("{at}.reason"),
            &["Forbidden", "Invalid", "RequestEntityTooLarge"],
            &mut errs,
        );
    }
    for (i, v) in spec["variables"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("spec.variables[{i}]");
        let name = v["name"].as_str().unwrap_or_default();
        let ident = name
            .chars()
            .next()
            .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
            && name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric());
        if name.is_empty() {
            errs.push(format!("{at}.name: Required value: name is not specified"));
        } else if !ident {
            errs.push(format!(
                "{at}.name: Invalid value: {}: name is not a valid CEL identifier",
                quoted(name)
            ));
        }
        compiles(
            v["expression"].as_str().unwrap_or_default(),
            &format!("{at}.expression"),
            &mut errs,
        );
    }
    condition_errors(
        &spec["matchConditions"],
        "spec.matchConditions",
        POLICY_VARS,
        &mut errs,
    );
    errs
}

/// The field errors kube-apiserver reports for a binding (empty: valid).
#[must_use]
pub fn binding_errors(obj: &Value) -> Vec<String> {
    let spec = &obj["spec"];
    let mut errs = Vec::new();
    if spec["policyName"].as_str().is_none_or(str::is_empty) {
        errs.push("spec.policyName: Required value".into());
    }
    let pr = &spec["paramRef"];
    if pr.is_object() {
        let (name, selector) = (pr.get("name"), pr.get("selector"));
        let has = |v: Option<&Value>| v.is_some_and(|v| !v.is_null() && *v != "");
        match (has(name), has(selector)) {
            (true, true) => {
                for f in ["name", "selector"] {
                    errs.push(format!(
                        "spec.paramRef.{f}: Forbidden: name and selector are mutually exclusive"
                    ));
                }
            }
            (false, false) => errs.push(
                "spec.paramRef: Required value: one of name or selector must be specified".into(),
            ),
            _ => {}
        }
        match pr["parameterNotFoundAction"].as_str() {
            None => errs.push("spec.paramRef.parameterNotFoundAction: Required value".into()),
            Some(_) => one_of(
                &pr["parameterNotFoundAction"],
                "spec.paramRef.parameterNotFoundAction",
                &["Deny", "Allow"],
                &mut errs,
            ),
        }
    }
    if let Some(m) = spec.get("matchResources").filter(|m| m.is_object()) {
        // kube's own spelling of the path.
        match_resources(m, "spec.matchResouces", &mut errs, false);
    }
    let actions: Vec<&Value> = spec["validationActions"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    if actions.is_empty() {
        errs.push(
            "spec.validationActions: Required value: at least one validation action is required"
                .into(),
        );
    }
    let mut seen = Vec::new();
    for (i, a) in actions.iter().enumerate() {
        let at = format!("spec.validationActions[{i}]");
        one_of(a, &at, &["Audit", "Deny", "Warn"], &mut errs);
        if seen.contains(a) {
            errs.push(format!("{at}: Duplicate value: {a}"));
        }
        seen.push(a);
    }
    let has = |s: &str| actions.iter().any(|a| *a == s);
    if has("Deny") && has("Warn") {
        let list: Vec<String> = actions.iter().map(|a| a.to_string()).collect();
        errs.push(format!(
            "spec.validationActions: Invalid value: []v1.ValidationAction{{{}}}: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
            list.join(", ")
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(validations: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
            "validations": validations}})
    }

    #[test]
    fn a_policy_is_defaulted_and_its_errors_are_kubes() {
        let mut ok = policy(json!([{"expression": "object.spec.replicas <= 5"}]));
        assert!(policy_errors(&ok).is_empty(), "{:?}", policy_errors(&ok));
        default_policy(&mut ok);
        assert_eq!(ok["spec"]["failurePolicy"], "Fail");
        assert_eq!(ok["spec"]["matchConstraints"]["matchPolicy"], "Equivalent");
        assert_eq!(
            ok["spec"]["matchConstraints"]["resourceRules"][0]["scope"],
            "*"
        );
        let bad =
            policy(json!([{"expression": "object.spec.replicas <=", "reason": "Unauthorized"}]));
        let errs = policy_errors(&bad);
        assert!(errs[0].starts_with("spec.validations[0].expression: Invalid value: \"object.spec.replicas <=\": compilation failed: ERROR: <input>:1:"), "{errs:?}");
        assert_eq!(
            errs[1],
            "spec.validations[0].reason: Unsupported value: \"Unauthorized\": supported values: \"Forbidden\", \"Invalid\", \"RequestEntityTooLarge\""
        );
        let empty = policy(json!([]));
        assert_eq!(policy_errors(&empty).len(), 2);
    }

    #[test]
    fn a_bindings_errors_are_kubes() {
        let b = json!({"spec": {"policyName": "p", "validationActions": ["Deny", "Warn"],
            "paramRef": {"name": "x", "selector": {}}}});
        assert_eq!(
            binding_errors(&b),
            [
                "spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
                "spec.paramRef.selector: Forbidden: name and selector are mutually exclusive",
                "spec.paramRef.parameterNotFoundAction: Required value",
                "spec.validationActions: Invalid value: []v1.ValidationAction{\"Deny\", \"Warn\"}: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
            ]
        );
        let none = json!({"spec": {}});
        assert_eq!(
            binding_errors(&none),
            [
                "spec.policyName: Required value",
                "spec.validationActions: Required value: at least one validation action is required"
            ]
        );
    }
}
