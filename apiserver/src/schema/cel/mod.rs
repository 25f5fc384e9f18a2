//! CEL validation rules (`x-kubernetes-validations`) for CRD schemas, as
//! kube-apiserver's apiextensions-apiserver runs them.
//!
//! A [`Rule`] is one entry of a schema node's `x-kubernetes-validations`,
//! compiled against that node (the OpenAPI v3 schema object, as raw JSON,
//! with its nested `properties` / `items` / `additionalProperties` and
//! `x-kubernetes-*` extensions). [`Rule::compile`] makes the checks a CRD
//! create or update makes; [`Rule::eval`] runs the rule on a value,
//! charging the request's [`Budget`].
//!
//! For example, `self.minReplicas <= self.replicas` on an object with
//! both integers passes for 3 and 1 and, for 1 and 3, fails with the
//! message `failed rule: self.minReplicas <= self.replicas` (the test
//! `a_rule_compiles_and_reports_its_violation`).
//!
//! `self` is typed by the node ([`value`] has the table); `oldSelf` is the
//! old value on updates. A rule that uses `oldSelf` is a transition rule
//! ([`Rule::is_transition`]): without an old value it is not evaluated,
//! unless `optionalOldSelf: true`, which makes `oldSelf` an optional value
//! (`oldSelf.hasValue()`, `oldSelf.value()`, `oldSelf.orValue(x)`).
//!
//! The functions are the `cel` crate's standard library with its strings
//! and lists extensions and optionals, plus the Kubernetes lists, regex,
//! URL and quantity libraries: lists `isSorted`, `sum`, `min`, `max`,
//! `indexOf`, `lastIndexOf`; regex `find`, `findAll`; `url`, `isURL`,
//! `getScheme`, `getHost`, `getHostname`, `getPort`, `getEscapedPath`,
//! `getQuery`; `quantity`, `isQuantity`, `compareTo`, `isLessThan`,
//! `isGreaterThan`, `add`, `sub`, `asInteger`, `asApproximateFloat`,
//! `sign`, `isInteger`. A call to any
//! other function, an undeclared identifier, or (on an object whose
//! properties are declared) a field the schema does not declare, fails to
//! compile, never passes silently. Not provided: the Kubernetes `ip`,
//! `cidr`, `semver`, `format` (`format.dns1123Label()` …), `authz` and
//! sets libraries, two-variable comprehensions beyond what the crate
//! parses, and static type checking of everything else (a rule that is not
//! boolean fails when evaluated, with kube's compile-time message).
//!
//! Costs are estimated, not metered ([`cost`] says how): a rule whose
//! estimate exceeds kube's limits is refused when compiled, or not run and
//! reported as an error when evaluated.
//!
//! ## Messages
//!
//! Checked against apiextensions-apiserver's source (`validation.go`,
//! `cel/validation.go`, `cel/compilation.go`): `failed rule: <rule>`; the
//! runtime errors of [`EvalError`] (`validation failed due to running out
//! of cost budget, no further validation rules will be run`, `'operation
//! cancelled: actual cost limit exceeded': no further validation rules will
//! be run due to call cost exceeds limit for rule: <rule>`, `<error>
//! evaluating rule: <rule>`, `'<error>': call arguments did not match a
//! supported operator, function or macro signature for rule: <rule>`); the
//! CRD-creation details of [`CompileError`] (`rule is not specified`,
//! `message must be non-empty if specified`, `fieldPath must be a valid
//! path`, `estimated rule cost exceeds budget by factor of …`, `may not be
//! set if oldSelf is not used in rule`, `compilation failed: …`,
//! `messageExpression compilation failed: …`).
//!
//! From memory of cel-go, not checked: the text after `compilation
//! failed: ` (`ERROR: <input>:1:5: undefined field 'x'`, `undeclared
//! reference to 'foo' (in container '')`; syntax errors are the `cel`
//! crate's, in the same `ERROR: <input>:line:column:` form but not cel-go's
//! wording), and the text of evaluation errors themselves (`No such key:
//! x` is the `cel` crate's, cel-go says `no such key: x`).

pub mod compile;
pub mod cost;
mod expression;
mod library;
pub mod quantity;
pub mod value;

use std::sync::Arc;

use ::cel::objects::OptionalValue;
use ::cel::{Context, ExecutionError, Program, Value};
use serde_json::Value as Json;

pub use compile::CompileError;
use cost::{
    Estimator, PER_CALL_LIMIT, RUNTIME_CEL_COST_BUDGET, STATIC_ESTIMATED_COST_LIMIT, Shape,
};
pub use expression::Expression;
use value::Node;

/// The longest message a `messageExpression` may produce (bytes), as
/// kube's `MaxEvaluatedMessageExpressionSizeBytes`.
pub const MAX_MESSAGE_EXPRESSION_BYTES: usize = 5 * 1024;

/// How a failing rule is reported: the `reason` of the entry, the type of
/// the field error (`FieldValueInvalid` when unset).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[allow(clippy::enum_variant_names)] // x-kubernetes-validations' own names
pub enum Reason {
    /// `Invalid value: <value>: <message>` (the default).
    #[default]
    FieldValueInvalid,
    /// `Forbidden: <message>`.
    FieldValueForbidden,
    /// `Required value: <message>`.
    FieldValueRequired,
    /// `Duplicate value: <value>` (kube drops the message).
    FieldValueDuplicate,
}

impl Reason {
    /// The reason as written in the entry and in a Status cause.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::FieldValueInvalid => "FieldValueInvalid",
            Reason::FieldValueForbidden => "FieldValueForbidden",
            Reason::FieldValueRequired => "FieldValueRequired",
            Reason::FieldValueDuplicate => "FieldValueDuplicate",
        }
    }
}

/// A rule that did not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The evaluated `messageExpression` (when it yields a non-empty
    /// single-line string of at most [`MAX_MESSAGE_EXPRESSION_BYTES`]; kube
    /// prefers it to `message`), else `message`, else `failed rule: <rule>`.
    pub message: String,
    /// The entry's `fieldPath` relative to the node, normalized as kube
    /// does (`a.b`, `m[key]`): kube reports the error at the node's path
    /// `.Child(field_path)`. `None` reports it at the node.
    pub field_path: Option<String>,
    /// How to report it.
    pub reason: Reason,
}

/// A rule that could not be evaluated. Each is reported by kube as an
/// `Invalid` error at the node whose value is the node's type; those for
/// which [`EvalError::stops_validation`] holds end the request's CEL
/// validation (no further rules run).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// The request's [`Budget`] cannot pay for the rule.
    #[error(
        "validation failed due to running out of cost budget, no further validation rules will be run"
    )]
    BudgetExhausted,
    /// The request's [`Budget`] cannot pay for the message expression.
    #[error(
        "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run"
    )]
    MessageBudgetExhausted,
    /// The rule's cost on this value is over [`PER_CALL_LIMIT`]; holds the
    /// rule (or its message).
    #[error(
        "'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: {0}"
    )]
    CallCostExceeded(String),
    /// A function or operator got arguments it does not take (possible
    /// where values are dynamic: int-or-string, preserved unknown fields).
    #[error(
        "'{error}': call arguments did not match a supported operator, function or macro signature for rule: {rule}"
    )]
    NoMatchingOverload {
        /// The evaluation error.
        error: String,
        /// The rule (or its message).
        rule: String,
    },
    /// Any other evaluation error (no such key, index out of bounds,
    /// overflow, division by zero, ...).
    #[error("{error} evaluating rule: {rule}")]
    Evaluation {
        /// The evaluation error.
        error: String,
        /// The rule (or its message).
        rule: String,
    },
    /// The rule evaluated to something other than a boolean (kube refuses
    /// such a rule at CRD creation; this module finds out when it runs).
    #[error("cel expression must evaluate to a bool")]
    NotBool,
}

impl EvalError {
    /// Whether kube stops running rules for the request after this error.
    #[must_use]
    pub fn stops_validation(&self) -> bool {
        matches!(
            self,
            EvalError::BudgetExhausted
                | EvalError::MessageBudgetExhausted
                | EvalError::CallCostExceeded(_)
        )
    }
}

/// What one request may still spend on CEL rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    remaining: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Budget::new()
    }
}

impl Budget {
    /// kube's per-request budget, [`RUNTIME_CEL_COST_BUDGET`].
    #[must_use]
    pub fn new() -> Budget {
        Budget::with_limit(RUNTIME_CEL_COST_BUDGET)
    }

    /// A budget of `limit`.
    #[must_use]
    pub fn with_limit(limit: u64) -> Budget {
        Budget { remaining: limit }
    }

    /// What is left.
    #[must_use]
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Pays `cost`, or empties the budget and fails with `err`.
    fn charge(&mut self, cost: u64, err: EvalError) -> Result<(), EvalError> {
        match self.remaining.checked_sub(cost) {
            Some(left) => {
                self.remaining = left;
                Ok(())
            }
            None => {
                self.remaining = 0;
                Err(err)
            }
        }
    }
}

/// One compiled `x-kubernetes-validations` entry.
pub struct Rule {
    source: String,
    program: Program,
    message: Option<String>,
    message_expression: Option<Program>,
    field_path: Option<String>,
    reason: Reason,
    transition: bool,
    optional_old_self: bool,
    node: Json,
    estimated_cost: u64,
}

impl std::fmt::Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rule")
            .field("rule", &self.source)
            .field("message", &self.message)
            .field("field_path", &self.field_path)
            .field("reason", &self.reason)
            .field("transition", &self.transition)
            .finish_non_exhaustive()
    }
}

impl Rule {
    /// Compiles `entry` (the JSON object with `rule`, `message`,
    /// `messageExpression`, `fieldPath`, `reason`, `optionalOldSelf`) that
    /// sits on schema node `node`, as if the node ran once per object (see
    /// [`Rule::compile_with_cardinality`]).
    ///
    /// # Errors
    ///
    /// The first problem kube-apiserver reports when the CRD is created
    /// (see [`CompileError`], whose `field()` and `reason()` tell where and
    /// how to report it, under `...x-kubernetes-validations[j]`).
    pub fn compile(entry: &Json, node: &Json) -> Result<Rule, CompileError> {
        Rule::compile_with_cardinality(entry, node, 1)
    }

    /// As [`Rule::compile`], for a node that may occur `cardinality` times
    /// in an object (the product of the `maxItems` / `maxProperties` of the
    /// lists and maps above it, unbounded ones estimated from the request
    /// size): kube holds the rule's estimated cost times that to the limit.
    ///
    /// # Errors
    ///
    /// As [`Rule::compile`].
    pub fn compile_with_cardinality(
        entry: &Json,
        node: &Json,
        cardinality: u64,
    ) -> Result<Rule, CompileError> {
        let (e, field_path) = compile::entry(entry, Node(node))?;
        let shape = Shape::of_schema(Node(node));
        let vars = vec![
            ("self".to_owned(), shape.clone()),
            ("oldSelf".to_owned(), shape),
        ];
        let (program, cost) =
            compile::program(&e.rule, &vars).map_err(CompileError::Compilation)?;
        let transition = program.references().has_variable("oldSelf");
        let total = cost.saturating_mul(cardinality.max(1));
        if total > STATIC_ESTIMATED_COST_LIMIT {
            return Err(CompileError::Cost(compile::exceed_factor(total)));
        }
        let message_expression = match &e.message_expression {
            Some(src) => {
                let (p, cost) =
                    compile::program(src, &vars).map_err(CompileError::MessageExpression)?;
                let total = cost.saturating_mul(cardinality.max(1));
                if total > STATIC_ESTIMATED_COST_LIMIT {
                    return Err(CompileError::MessageExpressionCost(compile::exceed_factor(
                        total,
                    )));
                }
                Some(p)
            }
            None => None,
        };
        if !transition && e.optional_old_self.is_some() {
            return Err(CompileError::OptionalOldSelfUnused);
        }
        let reason = match e.reason.as_deref() {
            Some("FieldValueForbidden") => Reason::FieldValueForbidden,
            Some("FieldValueRequired") => Reason::FieldValueRequired,
            Some("FieldValueDuplicate") => Reason::FieldValueDuplicate,
            _ => Reason::FieldValueInvalid,
        };
        Ok(Rule {
            source: e.rule,
            program,
            message: e
                .message
                .map(|m| m.trim().to_owned())
                .filter(|m| !m.is_empty()),
            message_expression,
            field_path: field_path.filter(|_| e.field_path.is_some()),
            reason,
            transition,
            optional_old_self: e.optional_old_self == Some(true),
            node: node.clone(),
            estimated_cost: cost,
        })
    }

    /// Whether the rule uses `oldSelf` (a transition rule: evaluated on
    /// updates only when the old value exists, unless `optionalOldSelf`).
    #[must_use]
    pub fn is_transition(&self) -> bool {
        self.transition
    }

    /// The rule's estimated cost from the schema's bounds (once).
    #[must_use]
    pub fn estimated_cost(&self) -> u64 {
        self.estimated_cost
    }

    /// The rule as written.
    #[must_use]
    pub fn source(&self) -> &str {
        &self.source
    }

    /// What kube names the rule in errors: its message if it has one, else
    /// the rule.
    fn error_string(&self) -> String {
        self.message
            .clone()
            .unwrap_or_else(|| self.source.trim().to_owned())
    }

    /// Evaluates the rule against `self_` (the JSON value at the node) and,
    /// for updates, `old_self` (the old value there, if it had one),
    /// charging `budget` with the estimated cost on these values.
    ///
    /// A transition rule without `old_self` is not evaluated (`Ok(None)`)
    /// unless it sets `optionalOldSelf`.
    ///
    /// # Errors
    ///
    /// The evaluation errors of [`EvalError`]: the budget or the per-call
    /// limit exceeded (the rule is then not run), an error while running.
    pub fn eval(
        &self,
        self_: &Json,
        old_self: Option<&Json>,
        budget: &mut Budget,
    ) -> Result<Option<Violation>, EvalError> {
        if self.transition && old_self.is_none() && !self.optional_old_self {
            return Ok(None);
        }
        let node = Node(&self.node);
        let self_shape = Shape::of_value(self_, Some(node));
        let old_shape = old_self.map_or_else(Shape::default, |o| Shape::of_value(o, Some(node)));
        let vars = vec![
            ("self".to_owned(), self_shape),
            ("oldSelf".to_owned(), old_shape),
        ];
        let cost = Estimator::new(vars.clone(), false)
            .estimate(self.program.expression())
            .0;
        if cost > PER_CALL_LIMIT {
            budget.remaining = 0;
            return Err(EvalError::CallCostExceeded(self.error_string()));
        }
        budget.charge(cost, EvalError::BudgetExhausted)?;
        let mut ctx = Context::with_env(Arc::clone(&library::ENV));
        ctx.add_variable_from_value("self", value::to_cel(self_, node));
        let old = old_self.map(|o| value::to_cel(o, node));
        if self.optional_old_self {
            let opt = match old {
                Some(v) => OptionalValue::of(v),
                None => OptionalValue::none(),
            };
            ctx.add_variable_from_value("oldSelf", Value::Opaque(Arc::new(opt)));
        } else if let Some(v) = old {
            ctx.add_variable_from_value("oldSelf", v);
        }
        match self.program.execute(&ctx) {
            Ok(Value::Bool(true)) => Ok(None),
            Ok(Value::Bool(false)) => Ok(Some(Violation {
                message: self.message(&ctx, &vars, budget)?,
                field_path: self.field_path.clone(),
                reason: self.reason,
            })),
            Ok(_) => Err(EvalError::NotBool),
            Err(e @ ExecutionError::NoSuchOverload(_)) => Err(EvalError::NoMatchingOverload {
                error: e.to_string(),
                rule: self.error_string(),
            }),
            Err(e) => Err(EvalError::Evaluation {
                error: e.to_string(),
                rule: self.error_string(),
            }),
        }
    }

    /// The message of a violation: `message`, else the message expression's
    /// value when it evaluates to a usable string (kube falls back when it
    /// does not), else `failed rule: <rule>`.
    fn message(
        &self,
        ctx: &Context<'_, '_>,
        vars: &[(String, Shape)],
        budget: &mut Budget,
    ) -> Result<String, EvalError> {
        if let Some(expr) = &self.message_expression {
            let cost = Estimator::new(vars.to_vec(), false)
                .estimate(expr.expression())
                .0;
            if cost > PER_CALL_LIMIT {
                budget.remaining = 0;
                return Err(EvalError::CallCostExceeded(self.error_string()));
            }
            budget.charge(cost, EvalError::MessageBudgetExhausted)?;
            if let Ok(Value::String(s)) = expr.execute(ctx) {
                let s = s.trim();
                if !s.is_empty() && s.len() <= MAX_MESSAGE_EXPRESSION_BYTES && !s.contains('\n') {
                    return Ok(s.to_owned());
                }
            }
        }
        Ok(match &self.message {
            Some(m) => m.clone(),
            None => format!("failed rule: {}", self.source.trim()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_rule_compiles_and_reports_its_violation() {
        let node = json!({"type": "object", "properties": {
            "replicas": {"type": "integer"}, "minReplicas": {"type": "integer"}}});
        let rule =
            Rule::compile(&json!({"rule": "self.minReplicas <= self.replicas"}), &node).unwrap();
        let mut budget = Budget::new();
        let ok = rule.eval(&json!({"replicas": 3, "minReplicas": 1}), None, &mut budget);
        assert!(ok.unwrap().is_none());
        let bad = rule.eval(&json!({"replicas": 1, "minReplicas": 3}), None, &mut budget);
        assert_eq!(
            bad.unwrap().unwrap().message,
            "failed rule: self.minReplicas <= self.replicas"
        );
    }

    fn node() -> Json {
        json!({"type": "object", "properties": {
            "replicas": {"type": "integer"},
            "minReplicas": {"type": "integer"},
            "name": {"type": "string", "maxLength": 63},
            "port": {"x-kubernetes-int-or-string": true},
            "dash-name": {"type": "string"},
            "namespace": {"type": "string"},
            "mem": {"type": "string"},
            "link": {"type": "string"},
            "tags": {"type": "array", "maxItems": 10,
                     "items": {"type": "string", "maxLength": 10}},
            "labels": {"type": "object", "maxProperties": 10,
                       "additionalProperties": {"type": "string", "maxLength": 10}},
            "items": {"type": "array", "items": {"type": "string"}},
            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }})
    }

    fn compile(entry: Json) -> Result<Rule, CompileError> {
        Rule::compile(&entry, &node())
    }

    fn check(rule: &str, obj: Json) -> Result<Option<Violation>, EvalError> {
        compile(json!({"rule": rule}))
            .unwrap_or_else(|e| panic!("{rule}: {e}"))
            .eval(&obj, None, &mut Budget::new())
    }

    fn holds(rule: &str, obj: Json) {
        assert_eq!(check(rule, obj), Ok(None), "{rule}");
    }

    #[test]
    fn rule_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Rule>();
    }

    #[test]
    fn compile_errors() {
        let err = |entry: Json| compile(entry).unwrap_err();
        assert_eq!(err(json!({"rule": " "})), CompileError::RuleRequired);
        let syntax = err(json!({"rule": "self.replicas >"}));
        assert!(
            matches!(&syntax, CompileError::Compilation(m) if m.starts_with("ERROR: <input>:1:")),
            "{syntax}"
        );
        assert_eq!(syntax.field(), "rule");
        let unknown = err(json!({"rule": "foo(self.replicas)"}));
        assert_eq!(
            unknown.to_string(),
            "compilation failed: ERROR: <input>:1:4: undeclared reference to 'foo' (in container '')\n | foo(self.replicas)\n | ...^"
        );
        let member = err(json!({"rule": "self.name.frobnicate()"}));
        assert!(
            member
                .to_string()
                .contains("undeclared reference to 'frobnicate'"),
            "{member}"
        );
        let field = err(json!({"rule": "self.nosuch > 1"}));
        assert!(
            field.to_string().contains("undefined field 'nosuch'"),
            "{field}"
        );
        let var = err(json!({"rule": "other > 1"}));
        assert!(
            var.to_string().contains("undeclared reference to 'other'"),
            "{var}"
        );
        let reason = err(json!({"rule": "true", "reason": "Bogus"}));
        assert_eq!(
            (reason.field(), reason.reason()),
            ("reason", "FieldValueNotSupported")
        );
        assert!(
            reason
                .to_string()
                .starts_with("Unsupported value: \"Bogus\": supported values: ")
        );
        assert_eq!(
            err(json!({"rule": "true", "fieldPath": ".nope"})),
            CompileError::FieldPath
        );
        assert_eq!(
            err(json!({"rule": "true", "fieldPath": " "})),
            CompileError::FieldPathEmpty
        );
        assert_eq!(
            err(json!({"rule": "true", "message": " "})),
            CompileError::MessageEmpty
        );
        assert_eq!(
            err(json!({"rule": "true &&\ntrue"})),
            CompileError::MessageRequired
        );
        let msg = err(json!({"rule": "true", "messageExpression": "nope(1)"}));
        assert_eq!(msg.field(), "messageExpression");
        assert!(
            msg.to_string()
                .starts_with("messageExpression compilation failed: ERROR")
        );
        assert_eq!(
            err(json!({"rule": "true", "optionalOldSelf": true})),
            CompileError::OptionalOldSelfUnused
        );
        assert_eq!(err(json!("x")).field(), "rule");
    }

    #[test]
    fn cost_over_the_limit_is_refused() {
        let e =
            compile(json!({"rule": "self.items.all(x, self.items.all(y, x == y))"})).unwrap_err();
        assert_eq!(e.reason(), "FieldValueForbidden");
        assert_eq!(
            e.to_string(),
            "estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
        );
        // The same on a bounded list is fine.
        compile(json!({"rule": "self.tags.all(x, self.tags.all(y, x == y))"})).unwrap();
        // A node repeated many times multiplies the cost.
        let many = Rule::compile_with_cardinality(
            &json!({"rule": "self.tags.all(x, x.startsWith('a'))"}),
            &node(),
            1_000_000,
        );
        assert!(matches!(many, Err(CompileError::Cost(_))));
    }

    #[test]
    fn evaluation_and_messages() {
        holds(
            "self.minReplicas <= self.replicas",
            json!({"replicas": 3, "minReplicas": 1}),
        );
        let v = check(
            "self.minReplicas <= self.replicas",
            json!({"replicas": 1, "minReplicas": 3}),
        )
        .unwrap()
        .unwrap();
        assert_eq!(v.message, "failed rule: self.minReplicas <= self.replicas");
        assert_eq!((v.field_path, v.reason), (None, Reason::FieldValueInvalid));

        let rule = compile(
            json!({"rule": "self.replicas < 10", "message": " too many ",
            "messageExpression": "'replicas: ' + string(self.replicas)",
            "fieldPath": ".replicas", "reason": "FieldValueForbidden"}),
        )
        .unwrap();
        let v = rule
            .eval(&json!({"replicas": 12}), None, &mut Budget::new())
            .unwrap()
            .unwrap();
        assert_eq!(v.message, "replicas: 12");
        assert_eq!(v.field_path.as_deref(), Some("replicas"));
        assert_eq!(v.reason, Reason::FieldValueForbidden);

        // A message expression that fails falls back to the message.
        let rule = compile(json!({"rule": "false", "message": "m",
            "messageExpression": "self.name"}))
        .unwrap();
        let v = rule
            .eval(&json!({}), None, &mut Budget::new())
            .unwrap()
            .unwrap();
        assert_eq!(v.message, "m");

        holds("has(self.name) == false && !has(self.replicas)", json!({}));
        let missing = check("self.name == 'x'", json!({})).unwrap_err();
        assert!(
            matches!(&missing, EvalError::Evaluation { rule, .. } if rule == "self.name == 'x'")
        );
        assert!(
            missing
                .to_string()
                .ends_with(" evaluating rule: self.name == 'x'"),
            "{missing}"
        );
        assert_eq!(
            compile(json!({"rule": "self.replicas"})).unwrap().eval(
                &json!({"replicas": 1}),
                None,
                &mut Budget::new()
            ),
            Err(EvalError::NotBool)
        );
    }

    #[test]
    fn escaping_int_or_string_and_dynamic_values() {
        holds(
            "self.dash__dash__name == 'a' && self.__namespace__ == 'ns'",
            json!({"dash-name": "a", "namespace": "ns"}),
        );
        holds("self.port == 80", json!({"port": 80}));
        holds("self.port == '80%'", json!({"port": "80%"}));
        let e = check("self.port > 1", json!({"port": "x"})).unwrap_err();
        assert!(matches!(e, EvalError::NoMatchingOverload { .. }), "{e}");
        assert!(
            e.to_string()
                .contains("call arguments did not match a supported operator")
        );
        holds(
            "self.extra.anything.goes == 1",
            json!({"extra": {"anything": {"goes": 1}}}),
        );
        holds(
            "self.labels.all(k, self.labels[k].size() < 5) && 'a' in self.labels",
            json!({"labels": {"a": "x"}}),
        );
    }

    #[test]
    fn transition_rules() {
        let rule = compile(json!({"rule": "self.replicas >= oldSelf.replicas"})).unwrap();
        assert!(rule.is_transition());
        let mut b = Budget::new();
        assert_eq!(rule.eval(&json!({"replicas": 1}), None, &mut b), Ok(None));
        assert_eq!(
            rule.eval(
                &json!({"replicas": 2}),
                Some(&json!({"replicas": 1})),
                &mut b
            ),
            Ok(None)
        );
        assert!(
            rule.eval(
                &json!({"replicas": 1}),
                Some(&json!({"replicas": 2})),
                &mut b
            )
            .unwrap()
            .is_some()
        );
        assert!(
            !compile(json!({"rule": "self.replicas > 0"}))
                .unwrap()
                .is_transition()
        );

        let opt = compile(
            json!({"rule": "!oldSelf.hasValue() || self.replicas >= oldSelf.value().replicas",
            "optionalOldSelf": true}),
        )
        .unwrap();
        assert_eq!(opt.eval(&json!({"replicas": 1}), None, &mut b), Ok(None));
        assert!(
            opt.eval(
                &json!({"replicas": 1}),
                Some(&json!({"replicas": 2})),
                &mut b
            )
            .unwrap()
            .is_some()
        );
        let or_value = compile(
            json!({"rule": "oldSelf.orValue(self).replicas == self.replicas",
            "optionalOldSelf": true}),
        )
        .unwrap();
        assert_eq!(
            or_value.eval(&json!({"replicas": 1}), None, &mut b),
            Ok(None)
        );
    }

    #[test]
    fn libraries_from_rules() {
        holds(
            "self.tags.isSorted() && self.tags.indexOf('b') == 1 && self.tags.max() == 'c'",
            json!({"tags": ["a", "b", "c"]}),
        );
        holds(
            "self.name.split('-').size() == 2 && self.name.upperAscii() == 'A-B'",
            json!({"name": "a-b"}),
        );
        holds(
            "self.name.find('[0-9]+') == '12' && self.name.findAll('[0-9]') == ['1', '2']",
            json!({"name": "ab12"}),
        );
        holds(
            "quantity(self.mem).isLessThan(quantity('2Gi')) && isQuantity(self.mem)",
            json!({"mem": "1Gi"}),
        );
        holds(
            "isURL(self.link) && url(self.link).getHost() == 'example.com'",
            json!({"link": "https://example.com/x"}),
        );
        holds(
            "self.replicas in [1, 2] && [1, 2, 3].exists_one(x, x == self.replicas)",
            json!({"replicas": 2}),
        );
    }

    #[test]
    fn embedded_resources_expose_type_and_name() {
        let node = json!({"type": "object", "x-kubernetes-embedded-resource": true,
            "x-kubernetes-preserve-unknown-fields": true});
        let rule = Rule::compile(
            &json!({"rule": "self.kind == 'Pod' && self.metadata.name.startsWith('p')"}),
            &node,
        )
        .unwrap();
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p1", "labels": {"a": "b"}}});
        assert_eq!(rule.eval(&pod, None, &mut Budget::new()), Ok(None));
        let labels = Rule::compile(&json!({"rule": "has(self.metadata.labels)"}), &node);
        assert!(matches!(labels, Err(CompileError::Compilation(_))));
    }

    #[test]
    fn budget_stops_pathological_rules_by_data_size() {
        // Quadratic in the list: fine for 10 items, over the per-call limit
        // for 2000 (4M comparisons), decided before running.
        let rule = compile(json!({"rule": "self.tags.all(x, self.tags.all(y, x == y || x != y))"}))
            .unwrap();
        let mut budget = Budget::new();
        let small: Vec<String> = (0..10).map(|i| i.to_string()).collect();
        assert_eq!(
            rule.eval(&json!({"tags": small}), None, &mut budget),
            Ok(None)
        );
        let spent = RUNTIME_CEL_COST_BUDGET - budget.remaining();
        assert!(spent > 0 && spent < 10_000, "{spent}");
        let big: Vec<String> = (0..2000).map(|i| i.to_string()).collect();
        let e = rule
            .eval(&json!({"tags": big}), None, &mut budget)
            .unwrap_err();
        assert!(matches!(e, EvalError::CallCostExceeded(_)));
        assert!(e.stops_validation());
        assert!(e.to_string().starts_with("'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: "));

        // Many affordable evaluations run a budget out (one of a tenth of
        // kube's request budget: the same path in a tenth of the runs).
        let linear = compile(json!({"rule": "self.items.all(x, x.size() < 100)"})).unwrap();
        let items: Vec<String> = (0..50_000).map(|_| "x".repeat(10)).collect();
        let obj = json!({"items": items});
        let mut budget = Budget::with_limit(RUNTIME_CEL_COST_BUDGET / 10);
        let mut runs = 0;
        let err = loop {
            match linear.eval(&obj, None, &mut budget) {
                Ok(None) => runs += 1,
                Ok(Some(v)) => panic!("{v:?}"),
                Err(e) => break e,
            }
            assert!(runs < 1000);
        };
        assert!(runs >= 2, "{runs}");
        assert_eq!(err, EvalError::BudgetExhausted);
        assert_eq!(
            err.to_string(),
            "validation failed due to running out of cost budget, no further validation rules will be run"
        );
    }
}
