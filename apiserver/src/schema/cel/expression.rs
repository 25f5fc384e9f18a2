//! A CEL expression over named, schemaless variables: what admission's
//! `matchConditions` (and the policies' expressions) are, as kube-apiserver
//! compiles them against `object`, `oldObject`, `request`... typed `dyn`
//! (an object's fields are looked up when evaluated, not declared).

use std::sync::{Arc, LazyLock};

use ::cel::{Context, ExecutionError, Program, Value};
use serde_json::Value as Json;

use super::Budget;
use super::cost::{Estimator, PER_CALL_LIMIT, STATIC_ESTIMATED_COST_LIMIT, Shape};
use super::value::{Node, untyped};

/// A dynamic schema node: every variable is `dyn`.
static DYN: LazyLock<Json> =
    LazyLock::new(|| serde_json::json!({"x-kubernetes-preserve-unknown-fields": true}));

fn dyn_shape() -> Shape {
    Shape::of_schema(Node(&DYN))
}

/// One compiled expression and the variables it may name.
pub struct Expression {
    source: String,
    program: Program,
    vars: Vec<String>,
}

impl std::fmt::Debug for Expression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Expression")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl Expression {
    /// Parses and checks `source` against the variables `vars` (each
    /// `dyn`): an undeclared variable or function, a syntax error, or an
    /// estimated cost over kube's limit is refused, with cel-go's form of
    /// message (`ERROR: <input>:1:1: undeclared reference to 'x' (in
    /// container '')`).
    ///
    /// # Errors
    ///
    /// The compilation error's message.
    pub fn compile(source: &str, vars: &[&str]) -> Result<Expression, String> {
        let shapes: Vec<(String, Shape)> = vars
            .iter()
            .map(|v| ((*v).to_owned(), dyn_shape()))
            .collect();
        let (program, cost) = super::compile::program(source, &shapes)?;
        if cost > STATIC_ESTIMATED_COST_LIMIT {
            return Err(format!(
                "estimated expression cost exceeds budget by factor of {}",
                super::compile::exceed_factor(cost)
            ));
        }
        Ok(Expression {
            source: source.to_owned(),
            program,
            vars: vars.iter().map(|v| (*v).to_owned()).collect(),
        })
    }

    /// The expression as written.
    #[must_use]
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Evaluates to a boolean with `values` bound to the variables
    /// (a variable left out, or JSON null, is CEL `null`), charging
    /// `budget` with the cost estimated on these values.
    ///
    /// # Errors
    ///
    /// A message when the budget or the per-call limit is exceeded, the
    /// evaluation fails, or the result is not a boolean.
    pub fn eval_bool(&self, values: &[(&str, &Json)], budget: &mut Budget) -> Result<bool, String> {
        match self.eval(values, budget)? {
            Value::Bool(b) => Ok(b),
            other => Err(format!(
                "expression '{}' resulted in error: expected a boolean, got {:?}",
                self.source,
                other.type_of()
            )),
        }
    }

    /// Evaluates to a JSON value (a policy's `variables`): CEL maps,
    /// lists, strings, numbers, booleans and null as JSON; any other value
    /// (a timestamp, a duration, a quantity) as its string form.
    ///
    /// # Errors
    ///
    /// As [`Expression::eval`].
    pub fn eval_json(&self, values: &[(&str, &Json)], budget: &mut Budget) -> Result<Json, String> {
        self.eval(values, budget).map(|v| to_json(&v))
    }

    /// Evaluates to a CEL value (see [`Expression::eval_bool`]).
    ///
    /// # Errors
    ///
    /// As [`Expression::eval_bool`], but any result type is accepted.
    pub fn eval(&self, values: &[(&str, &Json)], budget: &mut Budget) -> Result<Value, String> {
        let null = Json::Null;
        let bound: Vec<(&str, &Json)> = self
            .vars
            .iter()
            .map(|name| {
                let v = values
                    .iter()
                    .find(|(n, _)| n == name)
                    .map_or(&null, |(_, v)| *v);
                (name.as_str(), v)
            })
            .collect();
        let shapes: Vec<(String, Shape)> = bound
            .iter()
            .map(|(n, v)| ((*n).to_owned(), Shape::of_value(v, Some(Node(&DYN)))))
            .collect();
        let cost = Estimator::new(shapes, false)
            .estimate(self.program.expression())
            .0;
        if cost > PER_CALL_LIMIT {
            budget.remaining = 0;
            return Err("operation cancelled: actual cost limit exceeded".into());
        }
        budget
            .charge(cost, super::EvalError::BudgetExhausted)
            .map_err(|e| e.to_string())?;
        let mut ctx = Context::with_env(Arc::clone(&super::library::ENV));
        for (name, v) in &bound {
            ctx.add_variable_from_value(*name, untyped(v));
        }
        self.program.execute(&ctx).map_err(|e| match e {
            ExecutionError::NoSuchOverload(_) => format!("no such overload: {e}"),
            e => e.to_string(),
        })
    }
}

/// A CEL value as JSON (see [`Expression::eval_json`]).
fn to_json(v: &Value) -> Json {
    match v {
        Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) => Json::from(*i),
        Value::UInt(u) => Json::from(*u),
        Value::Float(f) => serde_json::Number::from_f64(*f).map_or(Json::Null, Json::Number),
        Value::String(s) => Json::String(s.to_string()),
        Value::List(items) => Json::Array(items.iter().map(to_json).collect()),
        Value::Map(m) => Json::Object(
            m.map
                .iter()
                .map(|(k, v)| (key_string(k), to_json(v)))
                .collect(),
        ),
        other => Json::String(format!("{other:?}")),
    }
}

fn key_string(k: &::cel::objects::Key) -> String {
    match k {
        ::cel::objects::Key::String(s) => s.to_string(),
        ::cel::objects::Key::Int(i) => i.to_string(),
        ::cel::objects::Key::Uint(u) => u.to_string(),
        ::cel::objects::Key::Bool(b) => b.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn compiles_against_the_named_variables_only() {
        let e = Expression::compile("object.metadata.name == 'a'", &["object"]).unwrap();
        let mut budget = Budget::new();
        let obj = json!({"metadata": {"name": "a"}});
        assert!(e.eval_bool(&[("object", &obj)], &mut budget).unwrap());
        let other = json!({"metadata": {"name": "b"}});
        assert!(!e.eval_bool(&[("object", &other)], &mut budget).unwrap());
        let err = Expression::compile("nope == 1", &["object"]).unwrap_err();
        assert!(err.contains("undeclared reference to 'nope'"), "{err}");
    }

    #[test]
    fn a_null_variable_and_a_non_boolean_are_told_apart() {
        let e = Expression::compile("oldObject == null", &["object", "oldObject"]).unwrap();
        let mut budget = Budget::new();
        assert!(e.eval_bool(&[], &mut budget).unwrap());
        let n = Expression::compile("1 + 1", &["object"]).unwrap();
        assert!(
            n.eval_bool(&[], &mut budget)
                .unwrap_err()
                .contains("boolean")
        );
    }
}
