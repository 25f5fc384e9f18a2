//! ValidatingAdmissionPolicies and their bindings, evaluated as
//! kube-apiserver's validating policy plugin does: a binding names a
//! policy; a write both their match rules take, and whose
//! `matchConditions` hold, is checked by each of the policy's
//! `validations` (CEL on `object`, `oldObject`, `request`, `params`,
//! `namespaceObject`, `variables`) with the binding's `validationActions`:
//! Deny fails the write, Warn adds a warning, Audit is accepted (there is
//! no audit log). One CEL engine: [`crate::schema::cel::Expression`], its cost
//! limits.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::config::{Rule, selector, strings};
use super::context::Context;
pub use super::policy_config::POLICY_VARS;
use super::review::Request;
use crate::machinery::selector::LabelSelector;
use crate::machinery::status::ApiError;
use crate::schema::cel::{Budget, Expression};

/// A rule of `matchConstraints` or `matchResources`, with its
/// `resourceNames`.
#[derive(Debug, Clone)]
pub struct ResourceRule {
    /// Operations, groups, versions, resources, scope.
    pub rule: Rule,
    /// Only these names (empty: any).
    pub names: Vec<String>,
}

/// `matchConstraints` (a policy's) or `matchResources` (a binding's).
#[derive(Debug, Clone, Default)]
pub struct Matcher {
    /// What it takes (empty in a binding: whatever the policy takes).
    pub rules: Vec<ResourceRule>,
    /// What it leaves out.
    pub exclude: Vec<ResourceRule>,
    /// The namespaces it takes.
    pub namespace_selector: LabelSelector,
    /// The objects it takes.
    pub object_selector: LabelSelector,
}

/// One `validations` entry.
#[derive(Debug)]
pub struct Validation {
    /// `expression`.
    pub expression: Expression,
    /// `message`.
    pub message: Option<String>,
    /// `messageExpression`.
    pub message_expression: Option<Expression>,
    /// `reason` (Invalid when unset).
    pub reason: Option<String>,
}

/// A compiled ValidatingAdmissionPolicy.
#[derive(Debug)]
pub struct Policy {
    /// Its name.
    pub name: String,
    /// `failurePolicy: Ignore` (else Fail).
    pub ignore_failures: bool,
    /// `paramKind` (apiVersion, kind).
    pub param_kind: Option<(String, String)>,
    /// `matchConstraints`.
    pub constraints: Matcher,
    /// `matchConditions`, by name.
    pub conditions: Vec<(String, Expression)>,
    /// `variables`, in order.
    pub variables: Vec<(String, Expression)>,
    /// `validations`.
    pub validations: Vec<Validation>,
}

/// A binding's `paramRef`.
#[derive(Debug, Clone)]
pub struct ParamRef {
    /// One param by name.
    pub name: Option<String>,
    /// Its namespace (`""`: the request's, for a namespaced param kind).
    pub namespace: String,
    /// Params by label.
    pub selector: Option<LabelSelector>,
    /// `parameterNotFoundAction: Deny` (else Allow).
    pub deny_when_missing: bool,
}

/// A compiled ValidatingAdmissionPolicyBinding.
#[derive(Debug)]
pub struct Binding {
    /// Its name.
    pub name: String,
    /// The policy it binds.
    pub policy: String,
    /// Where its params are.
    pub param_ref: Option<ParamRef>,
    /// `matchResources` (None: whatever the policy takes).
    pub matches: Option<Matcher>,
    /// `validationActions`: Deny, Warn, Audit.
    pub actions: Vec<String>,
}

fn rules(v: &Value) -> Vec<ResourceRule> {
    (v.as_array().into_iter().flatten())
        .map(|r| ResourceRule {
            rule: Rule::parse(r),
            names: strings(&r["resourceNames"]),
        })
        .collect()
}

impl Matcher {
    fn parse(v: &Value) -> Result<Matcher, String> {
        Ok(Matcher {
            rules: rules(&v["resourceRules"]),
            exclude: rules(&v["excludeResourceRules"]),
            namespace_selector: selector(&v["namespaceSelector"])?,
            object_selector: selector(&v["objectSelector"])?,
        })
    }

    /// Whether its rules (alone) may take `r`: the cheap check before a
    /// write stops for admission.
    #[must_use]
    pub fn rules_may_take(&self, r: &Request<'_>) -> bool {
        self.rules.is_empty()
            || self
                .rules
                .iter()
                .any(|rr| super::matching::rules_match(std::slice::from_ref(&rr.rule), r))
    }

    fn takes(&self, r: &Request<'_>, ns_labels: Option<&Map<String, Value>>) -> bool {
        let named = |rr: &ResourceRule| {
            super::matching::rules_match(std::slice::from_ref(&rr.rule), r)
                && (rr.names.is_empty() || rr.names.iter().any(|n| n == r.name))
        };
        (self.rules.is_empty() || self.rules.iter().any(named))
            && !self.exclude.iter().any(named)
            && super::matching::selected(
                &self.namespace_selector,
                &self.object_selector,
                r,
                ns_labels,
            )
    }
}

fn compile(src: &str) -> Result<Expression, String> {
    Expression::compile(src, POLICY_VARS)
}

impl Policy {
    /// Compiles a stored policy (it passed registration).
    ///
    /// # Errors
    ///
    /// An expression or selector this server cannot compile.
    pub fn compile(obj: &Value) -> Result<Policy, String> {
        let spec = &obj["spec"];
        let named = |v: &Value, key: &str| -> Result<Vec<(String, Expression)>, String> {
            (v.as_array().into_iter().flatten())
                .map(|c| {
                    Ok((
                        c["name"].as_str().unwrap_or_default().to_owned(),
                        compile(c[key].as_str().unwrap_or_default())?,
                    ))
                })
                .collect()
        };
        let mut validations = Vec::new();
        for v in spec["validations"].as_array().into_iter().flatten() {
            validations.push(Validation {
                expression: compile(v["expression"].as_str().unwrap_or_default())?,
                message: v["message"].as_str().map(String::from),
                message_expression: v["messageExpression"].as_str().map(compile).transpose()?,
                reason: v["reason"].as_str().map(String::from),
            });
        }
        let pk = &spec["paramKind"];
        Ok(Policy {
            name: obj["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            ignore_failures: spec["failurePolicy"] == "Ignore",
            param_kind: pk["kind"].as_str().map(|k| {
                (
                    pk["apiVersion"].as_str().unwrap_or_default().to_owned(),
                    k.to_owned(),
                )
            }),
            constraints: Matcher::parse(&spec["matchConstraints"])?,
            conditions: named(&spec["matchConditions"], "expression")?,
            variables: named(&spec["variables"], "expression")?,
            validations,
        })
    }
}

impl Binding {
    /// Compiles a stored binding.
    ///
    /// # Errors
    ///
    /// A selector this server cannot parse.
    pub fn compile(obj: &Value) -> Result<Binding, String> {
        let spec = &obj["spec"];
        let pr = &spec["paramRef"];
        let param_ref = if pr.is_object() {
            Some(ParamRef {
                name: pr["name"].as_str().map(String::from),
                namespace: pr["namespace"].as_str().unwrap_or_default().to_owned(),
                selector: (!pr["selector"].is_null())
                    .then(|| selector(&pr["selector"]))
                    .transpose()?,
                deny_when_missing: pr["parameterNotFoundAction"] == "Deny",
            })
        } else {
            None
        };
        Ok(Binding {
            name: obj["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            policy: spec["policyName"].as_str().unwrap_or_default().to_owned(),
            param_ref,
            matches: spec
                .get("matchResources")
                .filter(|m| m.is_object())
                .map(Matcher::parse)
                .transpose()?,
            actions: strings(&spec["validationActions"]),
        })
    }

    /// Whether the policy's and this binding's rules may take `r`.
    #[must_use]
    pub fn may_take(&self, policy: &Policy, r: &Request<'_>) -> bool {
        !policy.constraints.rules.is_empty()
            && policy.constraints.rules_may_take(r)
            && self.matches.as_ref().is_none_or(|m| m.rules_may_take(r))
    }
}

/// What evaluating a binding needs besides the request.
pub struct Inputs<'a> {
    /// The request as `request` (AdmissionRequest JSON).
    pub request: &'a Value,
    /// The namespace's labels (selectors).
    pub ns_labels: Option<&'a Map<String, Value>>,
    /// The namespace object (`namespaceObject`).
    pub namespace_object: Option<&'a Value>,
    /// The params found for the binding (None: the policy takes none).
    pub params: Option<Vec<Value>>,
}

/// What a binding decided: the error that fails the write, if any, and
/// the warnings for the client.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Deny.
    pub denied: Option<ApiError>,
    /// Warn.
    pub warnings: Vec<String>,
}

/// The cost budget of a policy's `matchConditions` (kube's
/// `RuntimeCELCostBudgetMatchConditions`).
pub const MATCH_CONDITIONS_BUDGET: u64 = 2_500_000;

/// The HTTP code of a validation's `reason`.
fn code_of(reason: &str) -> u16 {
    match reason {
        "Unauthorized" => 401,
        "Forbidden" => 403,
        "RequestEntityTooLarge" => 413,
        _ => 422,
    }
}

/// kube's denial by a policy: built as `admission.NewForbidden` (the name
/// the request's, else the object's generateName, else `Unknown`), then
/// given the validation's reason (Invalid when unset) and its code, and
/// the message as a cause.
#[must_use]
pub fn denial(
    policy: &Policy,
    binding: &Binding,
    r: &Request<'_>,
    reason: &str,
    message: &str,
) -> ApiError {
    let full = format!(
        "ValidatingAdmissionPolicy '{}' with binding '{}' denied request: {message}",
        policy.name, binding.name
    );
    let generate_name = r
        .object
        .and_then(|o| o["metadata"]["generateName"].as_str())
        .filter(|g| !g.is_empty());
    let name = match (r.name, generate_name) {
        ("", Some(g)) => g,
        ("", None) => "Unknown",
        (n, _) => n,
    };
    let gr = crate::machinery::status::group_resource(r.group, r.resource);
    let mut details = serde_json::json!({"name": name, "kind": r.resource,
                                         "causes": [{"message": full}]});
    // Go's omitempty: the core group is no `group`.
    if !r.group.is_empty() {
        details["group"] = r.group.into();
    }
    ApiError::from_status(&serde_json::json!({
        "code": code_of(reason),
        "reason": reason,
        "message": format!("{gr} {name:?} is forbidden: {full}"),
        "details": details,
    }))
}

/// Evaluates `binding` of `policy` on `r` (its match already checked).
#[must_use]
pub fn evaluate(
    policy: &Policy,
    binding: &Binding,
    r: &Request<'_>,
    inputs: &Inputs<'_>,
) -> Outcome {
    let mut out = Outcome::default();
    if !policy.constraints.takes(r, inputs.ns_labels)
        || binding
            .matches
            .as_ref()
            .is_some_and(|m| !m.takes(r, inputs.ns_labels))
    {
        return out;
    }
    let prefix = format!(
        "ValidatingAdmissionPolicy '{}' with binding '{}'",
        policy.name, binding.name
    );
    let deny = |reason: &str, message: &str| denial(policy, binding, r, reason, message);
    let params: Vec<Option<&Value>> = match &inputs.params {
        None => vec![None],
        Some(ps) => ps.iter().map(Some).collect(),
    };
    let null = Value::Null;
    for param in params {
        let mut budget = Budget::new();
        let base = [
            ("object", r.object.unwrap_or(&null)),
            ("oldObject", r.old_object.unwrap_or(&null)),
            ("request", inputs.request),
            ("params", param.unwrap_or(&null)),
            ("namespaceObject", inputs.namespace_object.unwrap_or(&null)),
        ];
        // matchConditions: a false one skips, an error follows failurePolicy.
        let mut skip = false;
        let mut vars = Map::new();
        for (name, expr) in &policy.variables {
            let mut with = base.to_vec();
            let v = Value::Object(vars.clone());
            with.push(("variables", &v));
            // A variable that fails is left out: an expression that uses
            // it then fails on the missing key.
            if let Ok(value) = expr.eval_json(&with, &mut budget) {
                vars.insert(name.clone(), value);
            }
        }
        let variables = Value::Object(vars);
        let mut with = base.to_vec();
        with.push(("variables", &variables));
        // namespaceObject is null in matchConditions, as in kube.
        let mut conditions_with = with.clone();
        conditions_with[4] = ("namespaceObject", &null);
        let mut cond_budget = Budget::with_limit(MATCH_CONDITIONS_BUDGET);
        let mut cond_errors = Vec::new();
        for (_, expr) in &policy.conditions {
            match expr.eval_bool(&conditions_with, &mut cond_budget) {
                Ok(true) => {}
                Ok(false) => skip = true,
                Err(e) => cond_errors.push(format!(
                    "expression '{}' resulted in error: {e}",
                    expr.source()
                )),
            }
        }
        if skip {
            continue;
        }
        let mut failures: Vec<(String, String)> = Vec::new();
        if !cond_errors.is_empty() {
            if !policy.ignore_failures {
                let message = match cond_errors.as_slice() {
                    [one] => one.clone(),
                    many => format!("[{}]", many.join(", ")),
                };
                failures.push(("Invalid".into(), message));
            }
        } else {
            for v in &policy.validations {
                match v.expression.eval_bool(&with, &mut budget) {
                    Ok(true) => {}
                    Ok(false) => {
                        let message = v
                            .message_expression
                            .as_ref()
                            .and_then(|m| match m.eval(&with, &mut budget) {
                                Ok(::cel::Value::String(s))
                                    if !s.trim().is_empty()
                                        && s.trim().len()
                                            <= crate::schema::cel::MAX_MESSAGE_EXPRESSION_BYTES
                                        && !s.contains('\n') =>
                                {
                                    Some(s.trim().to_owned())
                                }
                                _ => None,
                            })
                            .or_else(|| {
                                v.message
                                    .as_deref()
                                    .map(str::trim)
                                    .filter(|m| !m.is_empty())
                                    .map(String::from)
                            })
                            .unwrap_or_else(|| {
                                format!("failed expression: {}", v.expression.source().trim())
                            });
                        let reason = v.reason.clone().unwrap_or_else(|| "Invalid".into());
                        failures.push((reason, message));
                    }
                    Err(e) if !policy.ignore_failures => failures.push((
                        "Invalid".into(),
                        format!(
                            "expression '{}' resulted in error: {e}",
                            v.expression.source()
                        ),
                    )),
                    Err(_) => {}
                }
            }
        }
        for (reason, message) in failures {
            for action in &binding.actions {
                match action.as_str() {
                    "Deny" if out.denied.is_none() => out.denied = Some(deny(&reason, &message)),
                    "Warn" => out
                        .warnings
                        .push(format!("Validation failed for {prefix}: {message}")),
                    _ => {}
                }
            }
        }
    }
    out
}

/// Evaluates every policy binding that takes the request: the first Deny
/// fails it, Warn adds warnings.
pub(super) fn run_policies(
    bound: &[(Arc<Policy>, Arc<Binding>)],
    r: &Request<'_>,
    ns_labels: Option<&Map<String, Value>>,
    ctx: &Context<'_>,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    let mut request = None;
    let mut namespace_object = None;
    for (p, b) in bound.iter().filter(|(p, b)| b.may_take(p, r)) {
        let request = request.get_or_insert_with(|| r.json(""));
        let namespace_object = namespace_object.get_or_insert_with(|| {
            (r.namespaced && !r.namespace.is_empty())
                .then(|| {
                    ctx.store
                        .get(&crate::storage::store::namespaces_key(), "", r.namespace)
                        .map(|n| n.value())
                })
                .flatten()
        });
        let params = match params_of(p, b, r, ctx) {
            Ok(params) => params,
            Err(None) => continue,
            Err(Some(e)) => return Err(e),
        };
        let inputs = Inputs {
            request,
            ns_labels,
            namespace_object: namespace_object.as_ref(),
            params,
        };
        let out = evaluate(p, b, r, &inputs);
        warnings.extend(out.warnings);
        if let Some(e) = out.denied {
            return Err(e);
        }
    }
    Ok(())
}

/// The params a binding gives its policy: None for a policy without
/// `paramKind` or a binding without `paramRef` (`params` is null);
/// Err(None) to skip the binding (no params under Allow, or a
/// configuration error under Ignore), Err(Some) to fail the request (a
/// configuration error under Fail, whatever the binding's actions).
fn params_of(
    p: &Policy,
    b: &Binding,
    r: &Request<'_>,
    ctx: &Context<'_>,
) -> Result<Option<Vec<Value>>, Option<ApiError>> {
    let (Some((api_version, kind)), Some(pr)) = (&p.param_kind, &b.param_ref) else {
        return Ok(None);
    };
    let config_error = |what: &str, e: String| {
        (!p.ignore_failures).then(|| {
            denial(
                p,
                b,
                r,
                "Invalid",
                &format!("failed to configure {what}: {e}"),
            )
        })
    };
    let Some(info) = ctx.registry.by_kind(api_version, kind) else {
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let version = api_version
            .rsplit_once('/')
            .map_or(api_version.as_str(), |(_, v)| v);
        return Err(config_error(
            "policy",
            format!(
                "failed to find resource referenced by paramKind: '{group}/{version}, Kind={kind}'"
            ),
        ));
    };
    let ns = match (info.namespaced, pr.namespace.as_str(), r.namespace) {
        (false, "", _) => "",
        (false, _, _) => {
            return Err(config_error(
                "binding",
                "paramRef.namespace must not be provided for a cluster-scoped `paramKind`".into(),
            ));
        }
        (true, "", "") => {
            return Err(config_error(
                "binding",
                "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources".into(),
            ));
        }
        (true, "", request_ns) => request_ns,
        (true, ns, _) => ns,
    };
    let found: Vec<Value> = if let Some(name) = &pr.name {
        (ctx.store
            .get(&info.storage_key(), ns, name)
            .map(|o| o.value()))
        .into_iter()
        .collect()
    } else {
        let sel = pr.selector.clone().unwrap_or_default();
        let within = (info.namespaced).then_some(ns);
        ctx.store
            .list(&info.storage_key(), within, None, None, |o| {
                sel.matches(|k| o.label(k))
            })
            .items
            .iter()
            .map(|o| o.value())
            .collect()
    };
    match (found.is_empty(), pr.deny_when_missing) {
        (false, _) => Ok(Some(found)),
        (true, false) => Err(None),
        (true, true) => Err(config_error(
            "binding",
            "no params found for policy binding with `Deny` parameterNotFoundAction".into(),
        )),
    }
}
