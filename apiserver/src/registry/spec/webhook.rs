//! A webhook as registered: one entry of a Mutating- or
//! ValidatingWebhookConfiguration's `webhooks`, defaulted as
//! admissionregistration/v1 defaults it, checked at registration as
//! kube-apiserver checks it (`validation.go`), and compiled for dispatch
//! ([`Webhook`]).

use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;

use crate::machinery::selector::{LabelSelector, selector_string};
use crate::schema::cel::Expression;

/// The variables a `matchConditions` expression may name.
pub const CONDITION_VARS: &[&str] = &["object", "oldObject", "request", "authorizer"];

/// Where a webhook is called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `clientConfig.url`.
    Url(String),
    /// `clientConfig.service`: resolved through the Service's
    /// EndpointSlices at call time.
    Service {
        /// The Service's namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The request path (`/` when unset).
        path: String,
        /// The Service port (443 when unset).
        port: u16,
    },
}

/// One rule of a webhook (`rules[i]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// CREATE, UPDATE, DELETE, CONNECT or `*`.
    pub operations: Vec<String>,
    /// API groups (`*` any).
    pub api_groups: Vec<String>,
    /// API versions (`*` any).
    pub api_versions: Vec<String>,
    /// Resources: `pods`, `pods/status`, `*`, `*/*`, `pods/*`, `*/status`.
    pub resources: Vec<String>,
    /// `*`, `Cluster` or `Namespaced`.
    pub scope: String,
}

/// A registered webhook, ready to match and call.
#[derive(Debug)]
pub struct Webhook {
    /// Its name.
    pub name: String,
    /// Whether it is a mutating webhook.
    pub mutating: bool,
    /// Where it is called.
    pub endpoint: Endpoint,
    /// The PEM certificates that verify its server (`caBundle`, decoded).
    pub ca_bundle: Vec<u8>,
    /// What it is sent.
    pub rules: Vec<Rule>,
    /// `failurePolicy: Ignore` (else Fail).
    pub ignore_failures: bool,
    /// The namespaces it applies to.
    pub namespace_selector: LabelSelector,
    /// The objects it applies to (by the old or the new object's labels).
    pub object_selector: LabelSelector,
    /// `sideEffects: NoneOnDryRun` or `None` (so dry runs may be sent).
    pub side_effects: String,
    /// How long a call may take.
    pub timeout: Duration,
    /// `reinvocationPolicy: IfNeeded`.
    pub reinvoke: bool,
    /// `matchConditions`, by name.
    pub conditions: Vec<(String, Expression)>,
}

impl Webhook {
    /// Whether dry-run requests may be sent to it (`sideEffects` None or
    /// NoneOnDryRun).
    #[must_use]
    pub fn dry_run_safe(&self) -> bool {
        matches!(self.side_effects.as_str(), "None" | "NoneOnDryRun")
    }

    /// The webhooks of a stored configuration (`mutating` for a
    /// MutatingWebhookConfiguration), in order. A webhook that does not
    /// compile (it passed registration, so only a selector or condition
    /// this server cannot read) is left out with a warning in the log.
    #[must_use]
    pub fn all_of(config: &Value, mutating: bool) -> Vec<Webhook> {
        let configuration = str_of(&config["metadata"]["name"]);
        let mut out = Vec::new();
        for hook in config["webhooks"].as_array().into_iter().flatten() {
            match Webhook::compile(hook, mutating) {
                Ok(w) => out.push(w),
                Err(e) => tracing::warn!(%configuration, error = %e, "a webhook is not called"),
            }
        }
        out
    }

    fn compile(hook: &Value, mutating: bool) -> Result<Webhook, String> {
        let (endpoint, ca_bundle) = client(&hook["clientConfig"]);
        let rules = (hook["rules"].as_array().into_iter().flatten())
            .map(Rule::parse)
            .collect();
        let mut conditions = Vec::new();
        for c in hook["matchConditions"].as_array().into_iter().flatten() {
            let e = Expression::compile(str_of(&c["expression"]), CONDITION_VARS)?;
            conditions.push((str_of(&c["name"]).to_owned(), e));
        }
        Ok(Webhook {
            name: str_of(&hook["name"]).to_owned(),
            mutating,
            endpoint,
            ca_bundle: ca_bundle?,
            rules,
            ignore_failures: hook["failurePolicy"] == "Ignore",
            namespace_selector: selector(&hook["namespaceSelector"])?,
            object_selector: selector(&hook["objectSelector"])?,
            side_effects: str_of(&hook["sideEffects"]).to_owned(),
            timeout: Duration::from_secs(hook["timeoutSeconds"].as_u64().unwrap_or(10)),
            reinvoke: hook["reinvocationPolicy"] == "IfNeeded",
            conditions,
        })
    }
}

fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// A list of strings (non-strings left out).
pub(crate) fn strings(v: &Value) -> Vec<String> {
    (v.as_array().into_iter().flatten())
        .filter_map(|s| s.as_str().map(String::from))
        .collect()
}

/// A `LabelSelector` object (null: the empty selector, which takes all).
pub(crate) fn selector(v: &Value) -> Result<LabelSelector, String> {
    if v.is_null() {
        return Ok(LabelSelector::default());
    }
    LabelSelector::parse(&selector_string(v).unwrap_or_default()).map_err(|e| e.to_string())
}

impl Rule {
    /// One rule as registered (scope `*` when unset).
    #[must_use]
    pub fn parse(r: &Value) -> Rule {
        Rule {
            operations: strings(&r["operations"]),
            api_groups: strings(&r["apiGroups"]),
            api_versions: strings(&r["apiVersions"]),
            resources: strings(&r["resources"]),
            scope: r["scope"].as_str().unwrap_or("*").to_owned(),
        }
    }
}

/// Where a `clientConfig` (an admission webhook's, or a CRD's conversion
/// webhook's) points, and its `caBundle` decoded (an error when it is not
/// base64).
pub fn client(cc: &Value) -> (Endpoint, Result<Vec<u8>, String>) {
    let endpoint = match cc["url"].as_str() {
        Some(url) => Endpoint::Url(url.to_owned()),
        None => {
            let svc = &cc["service"];
            Endpoint::Service {
                namespace: str_of(&svc["namespace"]).to_owned(),
                name: str_of(&svc["name"]).to_owned(),
                path: svc["path"].as_str().unwrap_or("/").to_owned(),
                port: svc["port"]
                    .as_u64()
                    .and_then(|p| u16::try_from(p).ok())
                    .unwrap_or(443),
            }
        }
    };
    let ca_bundle = match cc["caBundle"].as_str() {
        Some(b) => base64::engine::general_purpose::STANDARD
            .decode(b)
            .map_err(|e| format!("caBundle: {e}")),
        None => Ok(Vec::new()),
    };
    (endpoint, ca_bundle)
}

/// Fill in what admissionregistration/v1 defaults in each webhook of a
/// configuration: failurePolicy Fail, matchPolicy Equivalent, empty
/// namespace and object selectors, sideEffects none (left unset: v1
/// requires it), timeoutSeconds 10, a service's port 443, each rule's
/// scope `*`, and (mutating) reinvocationPolicy Never.
pub fn default(config: &mut Value, mutating: bool) {
    let Some(hooks) = config.get_mut("webhooks").and_then(Value::as_array_mut) else {
        return;
    };
    for hook in hooks.iter_mut().filter(|h| h.is_object()) {
        set_default(hook, "failurePolicy", "Fail".into());
        set_default(hook, "matchPolicy", "Equivalent".into());
        set_default(hook, "namespaceSelector", serde_json::json!({}));
        set_default(hook, "objectSelector", serde_json::json!({}));
        set_default(hook, "timeoutSeconds", 10.into());
        if mutating {
            set_default(hook, "reinvocationPolicy", "Never".into());
        }
        if let Some(svc) = hook.pointer_mut("/clientConfig/service")
            && svc.is_object()
        {
            set_default(svc, "port", 443.into());
        }
        let rules = hook.get_mut("rules").and_then(Value::as_array_mut);
        for rule in (rules.into_iter().flatten()).filter(|r| r.is_object()) {
            set_default(rule, "scope", "*".into());
        }
    }
}

/// The field errors kube-apiserver reports for a configuration's
/// webhooks (`validation.go`), in its wording; empty when it is valid.
#[must_use]
pub fn errors(config: &Value, mutating: bool) -> Vec<String> {
    let mut errs = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, hook) in config["webhooks"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("webhooks[{i}]");
        let name = str_of(&hook["name"]);
        if name.is_empty() {
            errs.push(format!("{at}.name: Required value"));
        } else if let Some(e) = fully_qualified(name) {
            errs.push(format!("{at}.name: Invalid value: {}: {e}", quoted(name)));
        } else if !seen.insert(name) {
            errs.push(format!("{at}.name: Duplicate value: {}", quoted(name)));
        }
        for (i, r) in hook["rules"].as_array().into_iter().flatten().enumerate() {
            rule_errors(r, &format!("{at}.rules[{i}]"), &mut errs);
        }
        let mut enums = vec![
            ("failurePolicy", &["Fail", "Ignore"][..]),
            ("matchPolicy", &["Equivalent", "Exact"][..]),
            ("sideEffects", &["None", "NoneOnDryRun"][..]),
        ];
        if mutating {
            enums.push(("reinvocationPolicy", &["IfNeeded", "Never"][..]));
        }
        for (key, allowed) in enums {
            one_of(&hook[key], &format!("{at}.{key}"), allowed, &mut errs);
        }
        if hook["sideEffects"].is_null() {
            errs.push(format!(
                "{at}.sideEffects: Required value: must specify one of None, NoneOnDryRun"
            ));
        }
        if let Some(t) = hook.get("timeoutSeconds").filter(|t| !t.is_null())
            && !t.as_i64().is_some_and(|t| (1..=30).contains(&t))
        {
            errs.push(format!(
                "{at}.timeoutSeconds: Invalid value: {t}: the timeout value must be between 1 and 30 seconds"
            ));
        }
        let versions: Vec<&str> = (hook["admissionReviewVersions"].as_array().into_iter())
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if versions.is_empty() {
            errs.push(format!(
                "{at}.admissionReviewVersions: Required value: must specify one of v1, v1beta1"
            ));
        } else if !versions.iter().any(|v| matches!(*v, "v1" | "v1beta1")) {
            errs.push(format!(
                "{at}.admissionReviewVersions: Invalid value: []string{{{}}}: must include at least one of v1, v1beta1",
                versions.iter().map(|v| quoted(v)).collect::<Vec<_>>().join(", ")
            ));
        }
        client_config(
            &hook["clientConfig"],
            &format!("{at}.clientConfig"),
            &mut errs,
        );
        selector_errors(hook, &at, &mut errs);
        condition_errors(
            &hook["matchConditions"],
            &format!("{at}.matchConditions"),
            CONDITION_VARS,
            &mut errs,
        );
    }
    errs
}

/// `obj[key] = v` unless it holds a value already.
pub(crate) fn set_default(obj: &mut Value, key: &str, v: Value) {
    if obj.get(key).is_none_or(Value::is_null) {
        obj[key] = v;
    }
}

/// kube's errors for the `namespaceSelector` and `objectSelector` of `obj`
/// (a webhook, a policy's or binding's match resources) at `at`.
pub(crate) fn selector_errors(obj: &Value, at: &str, errs: &mut Vec<String>) {
    for key in ["namespaceSelector", "objectSelector"] {
        if let Some(s) = selector_string(&obj[key])
            && let Err(e) = LabelSelector::parse(&s)
        {
            errs.push(format!("{at}.{key}: Invalid value: {}: {e}", quoted(&s)));
        }
    }
}

/// kube's errors for `matchConditions` at `at` (a webhook's or a
/// policy's): names required and unique, expressions that compile against
/// `vars`.
pub(crate) fn condition_errors(conds: &Value, at: &str, vars: &[&str], errs: &mut Vec<String>) {
    let mut names = std::collections::HashSet::new();
    for (j, c) in conds.as_array().into_iter().flatten().enumerate() {
        let at = format!("{at}[{j}]");
        let name = str_of(&c["name"]);
        if name.is_empty() {
            errs.push(format!("{at}.name: Required value"));
        } else if !names.insert(name) {
            errs.push(format!("{at}.name: Duplicate value: {}", quoted(name)));
        }
        let expr = str_of(&c["expression"]);
        if expr.trim().is_empty() {
            errs.push(format!("{at}.expression: Required value"));
        } else if let Err(e) = Expression::compile(expr, vars) {
            errs.push(format!(
                "{at}.expression: Invalid value: {}: compilation failed: {e}",
                quoted(expr)
            ));
        }
    }
}

/// Go's `%q` of a string.
pub(crate) fn quoted(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// kube's `Unsupported value` error at `at` when `v` is a string not in
/// `allowed`.
pub(crate) fn one_of(v: &Value, at: &str, allowed: &[&str], errs: &mut Vec<String>) {
    if let Some(v) = v.as_str()
        && !allowed.contains(&v)
    {
        let list: Vec<String> = allowed.iter().map(|a| quoted(a)).collect();
        errs.push(format!(
            "{at}: Unsupported value: {}: supported values: {}",
            quoted(v),
            list.join(", ")
        ));
    }
}

/// apimachinery's `IsFullyQualifiedName`: a DNS subdomain of at least
/// three segments.
fn fully_qualified(name: &str) -> Option<String> {
    if let Err(e) = crate::machinery::validation::validate_dns1123_subdomain(name) {
        return Some(e.to_string());
    }
    (name.split('.').count() < 3)
        .then(|| "should be a domain with at least three segments separated by dots".into())
}

/// kube's errors for one rule at `at` (a webhook's `rules[i]`, a
/// policy's `resourceRules[i]`): operations, groups, versions, resources
/// and scope.
pub(crate) fn rule_errors(r: &Value, at: &str, errs: &mut Vec<String>) {
    const OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
    let list = |k: &str| -> Vec<&str> {
        (r[k].as_array().into_iter().flatten())
            .filter_map(Value::as_str)
            .collect()
    };
    let ops = list("operations");
    if ops.is_empty() {
        errs.push(format!("{at}.operations: Required value"));
    }
    for (j, op) in r["operations"].as_array().into_iter().flatten().enumerate() {
        one_of(op, &format!("{at}.operations[{j}]"), OPERATIONS, errs);
    }
    if ops.len() > 1 && ops.contains(&"*") {
        errs.push(format!(
            "{at}.operations: Invalid value: {}: if '*' is present, must not specify other operations",
            go_strings(&ops)
        ));
    }
    for (k, what) in [("apiGroups", "API groups"), ("apiVersions", "API versions")] {
        let v = list(k);
        if v.is_empty() {
            errs.push(format!("{at}.{k}: Required value"));
        } else if v.len() > 1 && v.contains(&"*") {
            errs.push(format!(
                "{at}.{k}: Invalid value: {}: if '*' is present, must not specify other {what}",
                go_strings(&v),
            ));
        }
    }
    let resources = list("resources");
    if resources.is_empty() {
        errs.push(format!("{at}.resources: Required value"));
    }
    for res in &resources {
        let (r, sub) = res.split_once('/').unwrap_or((res, ""));
        if r.is_empty() || res.ends_with('/') || sub.contains('/') {
            errs.push(format!(
                "{at}.resources: Invalid value: {}: must be of the form 'resource', 'resource/subresource', '*', '*/*', 'resource/*' or '*/subresource'",
                quoted(res)
            ));
        }
    }
    one_of(
        &r["scope"],
        &format!("{at}.scope"),
        &["*", "Cluster", "Namespaced"],
        errs,
    );
}

/// Go's `%#v` of a `[]string`.
fn go_strings(v: &[&str]) -> String {
    let items: Vec<String> = v.iter().map(|s| quoted(s)).collect();
    format!("[]string{{{}}}", items.join(", "))
}

/// What kube says of a webhook's `clientConfig` at `at` (an admission
/// webhook's, or a CRD's conversion webhook's): url or service, as its
/// `ValidateWebhookURL` and `ValidateWebhookService` do.
#[must_use]
pub fn client_config_errors(cc: &Value, at: &str) -> Vec<String> {
    let mut errs = Vec::new();
    client_config(cc, at, &mut errs);
    errs
}

fn client_config(cc: &Value, at: &str, errs: &mut Vec<String>) {
    let url = cc["url"].as_str();
    let service = cc.get("service").filter(|s| !s.is_null());
    match (url, service) {
        (Some(_), Some(_)) | (None, None) => {
            errs.push(format!(
                "{at}: Required value: exactly one of url or service is required"
            ));
        }
        (Some(url), None) => {
            if let Some(e) = url_error(url) {
                errs.push(format!("{at}.url: {e}"));
            }
        }
        (None, Some(svc)) => {
            let at = format!("{at}.service");
            // kube passes the name and namespace to its check swapped: a
            // missing name is reported as the namespace, and back.
            for (k, reported) in [("name", "namespace"), ("namespace", "name")] {
                if str_of(&svc[k]).is_empty() {
                    errs.push(format!(
                        "{at}.{reported}: Required value: service {reported} is required"
                    ));
                }
            }
            if let Some(path) = svc["path"].as_str()
                && !path.is_empty()
                && !path.starts_with('/')
            {
                errs.push(format!(
                    "{at}.path: Invalid value: {}: must start with a '/'",
                    quoted(path)
                ));
            }
            if let Some(p) = svc.get("port").filter(|p| !p.is_null())
                && !p.as_i64().is_some_and(|p| (1..=65535).contains(&p))
            {
                errs.push(format!(
                    "{at}.port: Invalid value: {p}: port is not valid: must be between 1 and 65535, inclusive"
                ));
            }
        }
    }
}

/// What kube's `ValidateWebhookURL` says of a webhook URL, if anything
/// (the error body after the field).
fn url_error(url: &str) -> Option<String> {
    const FORM: &str = "; desired format: https://host[/path]";
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    if scheme != "https" {
        return Some(format!(
            "Invalid value: {}: 'https' is the only allowed URL scheme{FORM}",
            quoted(scheme)
        ));
    }
    let (rest, fragment) = rest.split_once('#').unwrap_or((rest, ""));
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let authority = rest.split('/').next().unwrap_or_default();
    let (user, host) = authority.rsplit_once('@').unwrap_or(("", authority));
    if host.is_empty() {
        return Some(format!("Invalid value: \"\": host must be specified{FORM}"));
    }
    if authority.contains('@') {
        return Some(format!(
            "Invalid value: {}: user information is not permitted in the URL",
            quoted(user)
        ));
    }
    if url.contains('#') {
        return Some(format!(
            "Invalid value: {}: fragments are not permitted in the URL",
            quoted(fragment)
        ));
    }
    if url.contains('?') {
        return Some(format!(
            "Invalid value: {}: query parameters are not permitted in the URL",
            quoted(query)
        ));
    }
    None
}

/// A `caBundle` that is not base64: kube fails to decode the body (400)
/// before any validation.
#[must_use]
pub fn undecodable_ca_bundle(config: &Value) -> Option<String> {
    (config["webhooks"].as_array().into_iter().flatten()).find_map(|h| {
        let b = h["clientConfig"]["caBundle"].as_str()?;
        base64::engine::general_purpose::STANDARD
            .decode(b)
            .err()
            .map(|e| e.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn valid() -> Value {
        json!({"metadata": {"name": "c"}, "webhooks": [{
            "name": "label.example.com",
            "clientConfig": {"service": {"namespace": "d", "name": "hook"}},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }]})
    }

    #[test]
    fn a_valid_configuration_is_defaulted_and_compiles() {
        let mut c = valid();
        assert_eq!(errors(&c, true), Vec::<String>::new());
        default(&mut c, true);
        let hook = &c["webhooks"][0];
        assert_eq!(hook["failurePolicy"], "Fail");
        assert_eq!(hook["matchPolicy"], "Equivalent");
        assert_eq!(hook["timeoutSeconds"], 10);
        assert_eq!(hook["reinvocationPolicy"], "Never");
        assert_eq!(hook["clientConfig"]["service"]["port"], 443);
        assert_eq!(hook["rules"][0]["scope"], "*");
        let hooks = Webhook::all_of(&c, true);
        assert_eq!(hooks.len(), 1);
        assert_eq!(
            hooks[0].endpoint,
            Endpoint::Service {
                namespace: "d".into(),
                name: "hook".into(),
                path: "/".into(),
                port: 443
            }
        );
        assert!(!hooks[0].ignore_failures);
    }

    #[test]
    fn registration_errors_are_worded_as_kube_words_them() {
        let cases: &[(&str, Value, &str)] = &[
            (
                "name",
                json!("short.name"),
                "webhooks[0].name: Invalid value: \"short.name\": should be a domain with at least three segments separated by dots",
            ),
            (
                "clientConfig",
                json!({}),
                "webhooks[0].clientConfig: Required value: exactly one of url or service is required",
            ),
            (
                "clientConfig",
                json!({"url": "http://127.0.0.1/x"}),
                "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
            ),
            (
                "clientConfig",
                json!({"service": {"namespace": "d"}}),
                "webhooks[0].clientConfig.service.namespace: Required value: service namespace is required",
            ),
            (
                "clientConfig",
                json!({"url": "https://127.0.0.1/x?a=b"}),
                "query parameters are not permitted in the URL",
            ),
            (
                "clientConfig",
                json!({"url": "https://u@127.0.0.1/x"}),
                "user information is not permitted in the URL",
            ),
            (
                "sideEffects",
                json!("Some"),
                "webhooks[0].sideEffects: Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\"",
            ),
            (
                "timeoutSeconds",
                json!(31),
                "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
            ),
            (
                "admissionReviewVersions",
                json!([]),
                "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
            ),
            (
                "matchConditions",
                json!([{"name": "a", "expression": "object.x ==="}]),
                "webhooks[0].matchConditions[0].expression: Invalid value: \"object.x ===\": compilation failed: ",
            ),
            (
                "rules",
                json!([{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                    "resources": ["configmaps"], "scope": "Everywhere"}]),
                "webhooks[0].rules[0].scope: Unsupported value: \"Everywhere\"",
            ),
        ];
        for (path, value, want) in cases {
            let mut c = valid();
            c["webhooks"][0][*path] = value.clone();
            let errs = errors(&c, true);
            assert!(
                errs.iter().any(|e| e.starts_with(want) || e.contains(want)),
                "{path}: {errs:?}"
            );
        }
        let mut twice = valid();
        let hook = twice["webhooks"][0].clone();
        twice["webhooks"].as_array_mut().unwrap().push(hook);
        assert_eq!(
            errors(&twice, false),
            ["webhooks[1].name: Duplicate value: \"label.example.com\""]
        );
    }
}
