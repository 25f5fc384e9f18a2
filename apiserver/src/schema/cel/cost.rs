//! Cost: the limits kube-apiserver puts on CEL rules, and this module's
//! estimator of what a rule costs.
//!
//! One estimator serves both checks. It walks the parsed expression over a
//! `Shape`: how long each string, list and map reachable from `self` can
//! be. At CRD creation the shape comes from the schema (`maxLength`,
//! `maxItems`, `maxProperties`; an unbounded one is as long as a request of
//! [`MAX_REQUEST_SIZE_BYTES`] allows, as kube assumes) and the estimate is
//! held to [`STATIC_ESTIMATED_COST_LIMIT`]. Before each evaluation the
//! shape comes from the value itself (the longest string, list and map at
//! each place) and the estimate is held to [`PER_CALL_LIMIT`] and charged
//! to the request's [`Budget`](super::Budget). A rule whose estimate is
//! over is never run: evaluation can't hang, whatever the data.
//!
//! Approximate, compared with cel-go's checker and interpreter (the numbers
//! are of the same order, not equal):
//!
//! - every identifier, field selection, index and function call costs 1;
//!   literals 0; list and map literals 10 plus their elements;
//! - string functions (`contains`, `matches`, `split`, `find`, ...),
//!   equality and concatenation add a tenth of the strings' (or lists')
//!   lengths; list functions (`isSorted`, `sum`, `indexOf`, ...) add the
//!   list's length;
//! - a comprehension (`all`, `exists`, `map`, `filter`, ...) costs its range
//!   plus the range's length times its body, nested ones multiply;
//! - at runtime the estimate is taken before evaluating, on the longest
//!   element at each place, and charges every branch (no short-circuit):
//!   it is an upper bound of the work, where kube charges what was done.

use std::collections::BTreeMap;

use ::cel::common::ast::{Expr, IdedExpr, LiteralValue};
use serde_json::Value as Json;

use super::value::{Node, escape};

/// kube-apiserver's largest request body (3 MiB), from which the length of
/// unbounded lists, maps and strings is estimated.
pub const MAX_REQUEST_SIZE_BYTES: u64 = 3 * 1024 * 1024;
/// The most one rule's estimated cost may be at CRD creation
/// (`StaticEstimatedCostLimit`).
pub const STATIC_ESTIMATED_COST_LIMIT: u64 = 10_000_000;
/// The most one evaluation of one rule may cost (`PerCallLimit`).
pub const PER_CALL_LIMIT: u64 = 1_000_000;
/// The most all the rules of one request may cost
/// (`RuntimeCELCostBudget`).
pub const RUNTIME_CEL_COST_BUDGET: u64 = 10_000_000;

/// How long the values at one place can be, and what is below it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Shape {
    /// The longest string, list or map here (0 for other values).
    pub len: u64,
    /// The longest map key here.
    pub key_len: u64,
    /// The declared fields of an object, by escaped name.
    pub fields: BTreeMap<String, Shape>,
    /// List elements or map values.
    pub elem: Option<Box<Shape>>,
    /// A typed object: selecting a field it does not declare is an error.
    pub closed: bool,
    /// A dynamic value: anything below is dynamic too.
    pub dynamic: bool,
}

impl Shape {
    fn dynamic() -> Shape {
        Shape {
            len: MAX_REQUEST_SIZE_BYTES,
            key_len: MAX_REQUEST_SIZE_BYTES,
            dynamic: true,
            ..Shape::default()
        }
    }

    fn scalar(len: u64) -> Shape {
        Shape {
            len,
            ..Shape::default()
        }
    }

    /// The shape of list elements or map values.
    pub fn elem(&self) -> Shape {
        match &self.elem {
            Some(e) => (**e).clone(),
            None if self.dynamic => Shape::dynamic(),
            None => Shape::default(),
        }
    }

    /// The shape of field `name`.
    pub fn field(&self, name: &str) -> Option<Shape> {
        if let Some(f) = self.fields.get(name) {
            return Some(f.clone());
        }
        if self.dynamic {
            return Some(Shape::dynamic());
        }
        if self.closed {
            return None;
        }
        Some(self.elem())
    }

    /// The larger of both at every place.
    fn merge(mut self, other: Shape) -> Shape {
        self.len = self.len.max(other.len);
        self.key_len = self.key_len.max(other.key_len);
        for (k, v) in other.fields {
            let merged = match self.fields.remove(&k) {
                Some(mine) => mine.merge(v),
                None => v,
            };
            self.fields.insert(k, merged);
        }
        self.elem = match (self.elem.take(), other.elem) {
            (Some(a), Some(b)) => Some(Box::new(a.merge(*b))),
            (a, b) => a.or(b),
        };
        self.closed &= other.closed;
        self.dynamic |= other.dynamic;
        self
    }

    /// The shape of schema node `node`, from its declared bounds.
    pub fn of_schema(node: Node<'_>) -> Shape {
        if node.is_dyn() {
            return Shape::dynamic();
        }
        match node.ty() {
            "string" => Shape::scalar(
                node.bound("maxLength")
                    .unwrap_or(MAX_REQUEST_SIZE_BYTES - 2),
            ),
            "array" => {
                let item = node.items().map_or_else(Shape::dynamic, Shape::of_schema);
                let min = node.items().map_or(1, min_size);
                Shape {
                    len: node
                        .bound("maxItems")
                        .unwrap_or((MAX_REQUEST_SIZE_BYTES - 2) / (min + 1)),
                    elem: Some(Box::new(item)),
                    ..Shape::default()
                }
            }
            _ => {
                let mut shape = Shape::default();
                if let Some(add) = node.additional() {
                    let min = 2 + 1 + min_size(add) + 1; // "":v,
                    shape.len = node
                        .bound("maxProperties")
                        .unwrap_or((MAX_REQUEST_SIZE_BYTES - 2) / min);
                    shape.key_len = MAX_REQUEST_SIZE_BYTES - 2;
                    shape.elem = Some(Box::new(Shape::of_schema(add)));
                } else {
                    shape.closed = true;
                }
                if node.embedded() {
                    for (f, len) in [("apiVersion", 0), ("kind", 0)] {
                        shape
                            .fields
                            .insert(f.to_owned(), Shape::scalar(len.max(253)));
                    }
                    let mut meta = Shape {
                        closed: true,
                        ..Shape::default()
                    };
                    meta.fields.insert("name".to_owned(), Shape::scalar(253));
                    meta.fields
                        .insert("generateName".to_owned(), Shape::scalar(253));
                    shape.fields.insert("metadata".to_owned(), meta);
                }
                for (k, v) in node.properties().into_iter().flatten() {
                    if let Some(name) = escape(k) {
                        shape
                            .fields
                            .entry(name)
                            .or_insert_with(|| Shape::of_schema(Node(v)));
                    }
                }
                shape.len = shape.len.max(shape.fields.len() as u64);
                shape
            }
        }
    }

    /// The shape of JSON value `v` (typed by `node`): the actual lengths.
    pub fn of_value(v: &Json, node: Option<Node<'_>>) -> Shape {
        let typed = node.filter(|n| !n.is_dyn());
        match v {
            Json::String(s) => Shape::scalar(s.chars().count() as u64),
            Json::Array(items) => {
                let item = typed.and_then(Node::items);
                let elem = items
                    .iter()
                    .map(|i| Shape::of_value(i, item))
                    .reduce(Shape::merge)
                    .unwrap_or_default();
                Shape {
                    len: items.len() as u64,
                    elem: Some(Box::new(elem)),
                    ..Shape::default()
                }
            }
            Json::Object(obj) => {
                let mut shape = Shape {
                    len: obj.len() as u64,
                    ..Shape::default()
                };
                let props = typed.and_then(Node::properties);
                let add = typed.and_then(Node::additional);
                for (k, v) in obj {
                    shape.key_len = shape.key_len.max(k.chars().count() as u64);
                    match (props.and_then(|p| p.get(k)), add) {
                        (Some(s), None) => {
                            if let Some(name) = escape(k) {
                                shape.fields.insert(name, Shape::of_value(v, Some(Node(s))));
                            }
                        }
                        (_, Some(a)) => {
                            let e = Shape::of_value(v, Some(a));
                            shape.elem = Some(Box::new(match shape.elem.take() {
                                Some(old) => old.merge(e),
                                None => e,
                            }));
                        }
                        (None, None) if typed.is_none() => {
                            shape.fields.insert(k.clone(), Shape::of_value(v, None));
                            let e = Shape::of_value(v, None);
                            shape.elem = Some(Box::new(match shape.elem.take() {
                                Some(old) => old.merge(e),
                                None => e,
                            }));
                        }
                        (None, None) => {}
                    }
                }
                shape
            }
            _ => Shape::default(),
        }
    }
}

/// The fewest bytes a value of schema `node` takes in JSON.
fn min_size(node: Node<'_>) -> u64 {
    match node.ty() {
        "string" => 2,
        "boolean" => 4,
        "object" | "array" => 2,
        _ => 1,
    }
}

/// What the estimator found wrong with an expression (only when checking).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Problem {
    /// An identifier that is not `self`, `oldSelf`, a comprehension variable
    /// or a type name.
    UndeclaredReference(u64, String),
    /// A function not in [`PROVIDED`](super::library::PROVIDED).
    UndeclaredFunction(u64, String),
    /// A field a typed object does not declare.
    UndefinedField(u64, String),
}

/// The estimator: variables in scope, and whether to check names.
pub(crate) struct Estimator {
    scope: Vec<(String, Shape)>,
    check: bool,
    /// The first problem found.
    pub problem: Option<Problem>,
}

fn tenth(len: u64) -> u64 {
    len.div_ceil(10)
}

impl Estimator {
    /// An estimator with `vars` in scope; `check` reports unknown names.
    pub fn new(vars: Vec<(String, Shape)>, check: bool) -> Estimator {
        Estimator {
            scope: vars,
            check,
            problem: None,
        }
    }

    fn report(&mut self, p: Problem) {
        if self.check && self.problem.is_none() {
            self.problem = Some(p);
        }
    }

    fn lookup(&self, name: &str) -> Option<Shape> {
        self.scope
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s.clone())
    }

    /// The cost of `e` and the shape of its value.
    pub fn estimate(&mut self, e: &IdedExpr) -> (u64, Shape) {
        match &e.expr {
            Expr::Literal(LiteralValue::String(s)) => {
                (0, Shape::scalar(s.inner().chars().count() as u64))
            }
            Expr::Literal(LiteralValue::Bytes(b)) => (0, Shape::scalar(b.inner().len() as u64)),
            Expr::Literal(_) | Expr::Unspecified => (0, Shape::default()),
            Expr::Ident(name) => match self.lookup(name) {
                Some(shape) => (1, shape),
                None => {
                    if !super::library::TYPE_NAMES.contains(&name.as_str()) {
                        self.report(Problem::UndeclaredReference(e.id, name.clone()));
                    }
                    (1, Shape::default())
                }
            },
            Expr::Select(sel) => {
                let (c, operand) = self.estimate(&sel.operand);
                let shape = match operand.field(&sel.field) {
                    Some(s) => s,
                    None => {
                        self.report(Problem::UndefinedField(e.id, sel.field.clone()));
                        Shape::default()
                    }
                };
                (
                    c.saturating_add(1),
                    if sel.test { Shape::default() } else { shape },
                )
            }
            Expr::List(list) => {
                let mut cost = 10u64;
                let mut elem: Option<Shape> = None;
                for el in &list.elements {
                    let (c, s) = self.estimate(el);
                    cost = cost.saturating_add(c);
                    elem = Some(match elem {
                        Some(prev) => prev.merge(s),
                        None => s,
                    });
                }
                let shape = Shape {
                    len: list.elements.len() as u64,
                    elem: elem.map(Box::new),
                    ..Shape::default()
                };
                (cost, shape)
            }
            Expr::Map(m) => {
                let mut cost = 30u64;
                for entry in &m.entries {
                    if let ::cel::common::ast::EntryExpr::MapEntry(me) = &entry.expr {
                        cost = cost
                            .saturating_add(self.estimate(&me.key).0)
                            .saturating_add(self.estimate(&me.value).0);
                    }
                }
                (
                    cost,
                    Shape {
                        len: m.entries.len() as u64,
                        ..Shape::default()
                    },
                )
            }
            Expr::Struct(s) => {
                self.report(Problem::UndeclaredReference(e.id, s.type_name.clone()));
                (1, Shape::default())
            }
            Expr::Call(call) => self.call(e.id, call),
            Expr::Comprehension(c) => {
                let (range_cost, range) = self.estimate(&c.iter_range);
                let n = range.len;
                let (init_cost, init) = self.estimate(&c.accu_init);
                // A list binds its elements; a map (or object) its keys.
                let is_map = range.key_len > 0 || !range.fields.is_empty();
                let var = if is_map {
                    Shape::scalar(range.key_len.max(longest_key(&range)))
                } else {
                    range.elem()
                };
                let depth = self.scope.len();
                self.scope.push((c.iter_var.clone(), var));
                if let Some(v2) = &c.iter_var2 {
                    self.scope.push((v2.clone(), range.elem()));
                }
                self.scope.push((c.accu_var.clone(), init.clone()));
                let (cond_cost, _) = self.estimate(&c.loop_cond);
                let (step_cost, step) = self.estimate(&c.loop_step);
                // The accumulator grows by what one step adds, n times.
                let grown = Shape {
                    len: init
                        .len
                        .saturating_add(n.saturating_mul(step.len.saturating_sub(init.len))),
                    ..step.clone().merge(init)
                };
                if let Some(last) = self.scope.last_mut() {
                    last.1 = grown;
                }
                let (result_cost, result) = self.estimate(&c.result);
                self.scope.truncate(depth);
                let body = cond_cost.saturating_add(step_cost);
                let cost = range_cost
                    .saturating_add(init_cost)
                    .saturating_add(n.saturating_mul(body))
                    .saturating_add(result_cost);
                (cost, result)
            }
        }
    }

    fn call(&mut self, id: u64, call: &::cel::common::ast::CallExpr) -> (u64, Shape) {
        let mut cost = 1u64;
        let mut name = call.func_name.clone();
        let mut target: Option<Shape> = None;
        if let Some(t) = &call.target {
            // `ns.f(…)`: a namespaced function, not a member call on `ns`.
            let namespaced = match &t.expr {
                Expr::Ident(ns) if self.lookup(ns).is_none() => {
                    let full = format!("{ns}.{name}");
                    super::library::PROVIDED
                        .contains(&full.as_str())
                        .then_some(full)
                }
                _ => None,
            };
            match namespaced {
                Some(full) => name = full,
                None => {
                    let (c, s) = self.estimate(t);
                    cost = cost.saturating_add(c);
                    target = Some(s);
                }
            }
        }
        if !super::library::PROVIDED.contains(&name.as_str()) {
            self.report(Problem::UndeclaredFunction(id, name.clone()));
        }
        let mut args = Vec::with_capacity(call.args.len());
        for a in &call.args {
            let (c, s) = self.estimate(a);
            cost = cost.saturating_add(c);
            args.push(s);
        }
        let recv_len = target.as_ref().or(args.first()).map_or(0, |s| s.len);
        let arg_len = |i: usize| args.get(i).map_or(0, |s| s.len);
        let (extra, shape) = match name.as_str() {
            "_[_]" | "_[?_]" => {
                let base = args.first().cloned().unwrap_or_default();
                let field = match call.args.get(1).map(|a| &a.expr) {
                    Some(Expr::Literal(LiteralValue::String(s))) => base.field(s.inner()),
                    _ => None,
                };
                (0, field.unwrap_or_else(|| base.elem()))
            }
            "_+_" => {
                let (a, b) = (arg_len(0), arg_len(1));
                let elem = args.first().map(Shape::elem);
                (
                    tenth(a.saturating_add(b)),
                    Shape {
                        len: a.saturating_add(b),
                        elem: elem.map(Box::new),
                        ..Shape::default()
                    },
                )
            }
            "_==_" | "_!=_" | "_<_" | "_<=_" | "_>_" | "_>=_" => {
                (tenth(arg_len(0).min(arg_len(1))), Shape::default())
            }
            "@in" => (arg_len(1), Shape::default()),
            "contains" | "startsWith" | "endsWith" | "matches" | "find" | "charAt" | "indexOf"
            | "lastIndexOf"
                if target.as_ref().is_some_and(|t| t.elem.is_none()) =>
            {
                (
                    tenth(recv_len).saturating_add(tenth(arg_len(0))),
                    Shape::scalar(recv_len),
                )
            }
            "lowerAscii" | "upperAscii" | "trim" | "substring" | "reverse" | "string"
            | "strings.quote" => (tenth(recv_len), Shape::scalar(recv_len.saturating_add(2))),
            "replace" => {
                let len = recv_len.saturating_mul(arg_len(1).max(1));
                (tenth(len), Shape::scalar(len))
            }
            "split" | "findAll" => (
                tenth(recv_len),
                Shape {
                    len: recv_len.saturating_add(1),
                    elem: Some(Box::new(Shape::scalar(recv_len))),
                    ..Shape::default()
                },
            ),
            "join" => {
                let t = target.clone().unwrap_or_default();
                let len = t
                    .len
                    .saturating_mul(t.elem().len.saturating_add(arg_len(0)));
                (tenth(len), Shape::scalar(len))
            }
            "format" => {
                let len = recv_len.saturating_add(arg_len(0).saturating_mul(64));
                (tenth(len), Shape::scalar(len))
            }
            "isSorted" | "sum" | "min" | "max" | "indexOf" | "lastIndexOf" | "distinct" => {
                let t = target.clone().unwrap_or_default();
                let elem = t.elem();
                let cost = recv_len.saturating_mul(if name == "distinct" { recv_len } else { 1 });
                (cost, if name == "distinct" { t } else { elem })
            }
            "sort" | "flatten" | "slice" => {
                let t = target.clone().unwrap_or_default();
                (recv_len, t)
            }
            "url" | "quantity" | "isURL" | "isQuantity" => {
                (tenth(arg_len(0)), Shape::scalar(arg_len(0)))
            }
            "getQuery" => (
                tenth(recv_len),
                Shape {
                    len: recv_len,
                    key_len: recv_len,
                    elem: Some(Box::new(Shape {
                        len: recv_len,
                        elem: Some(Box::new(Shape::scalar(recv_len))),
                        ..Shape::default()
                    })),
                    ..Shape::default()
                },
            ),
            "getScheme" | "getHost" | "getHostname" | "getPort" | "getEscapedPath" => {
                (tenth(recv_len), Shape::scalar(recv_len))
            }
            "size" | "int" | "uint" | "double" | "bool" | "type" | "duration" | "timestamp" => {
                (tenth(arg_len(0)), Shape::default())
            }
            "dyn" | "value" | "orValue" | "or" | "optional.of" | "optional.ofNonZeroValue" => (
                0,
                target
                    .clone()
                    .or_else(|| args.first().cloned())
                    .unwrap_or_default(),
            ),
            "lists.range" => (
                0,
                Shape {
                    len: MAX_REQUEST_SIZE_BYTES,
                    ..Shape::default()
                },
            ),
            "_?_:_" => (
                0,
                args.get(1)
                    .cloned()
                    .unwrap_or_default()
                    .merge(args.get(2).cloned().unwrap_or_default()),
            ),
            _ => (0, Shape::default()),
        };
        (cost.saturating_add(extra), shape)
    }
}

/// The longest declared field name of an object shape.
fn longest_key(shape: &Shape) -> u64 {
    shape
        .fields
        .keys()
        .map(|k| k.chars().count() as u64)
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn estimate(expr: &str, schema: &Json) -> (u64, Option<Problem>) {
        let program = super::super::library::ENV.compile(expr).unwrap();
        let mut est = Estimator::new(vec![("self".into(), Shape::of_schema(Node(schema)))], true);
        let (cost, _) = est.estimate(program.expression());
        (cost, est.problem)
    }

    #[test]
    fn bounds_drive_the_estimate() {
        let bounded = json!({"type": "array", "maxItems": 10,
            "items": {"type": "string", "maxLength": 10}});
        let unbounded = json!({"type": "array", "items": {"type": "string"}});
        let (small, p) = estimate("self.all(x, x.startsWith('a'))", &bounded);
        assert_eq!(p, None);
        assert!(small < 100, "{small}");
        let (big, _) = estimate("self.all(x, x.startsWith('a'))", &unbounded);
        assert!(big > 100_000, "{big}");
        let (nested, _) = estimate("self.all(x, self.all(y, x == y))", &unbounded);
        assert!(nested > STATIC_ESTIMATED_COST_LIMIT * 100, "{nested}");
    }

    #[test]
    fn value_shapes_take_the_longest() {
        let schema = json!({"type": "array", "items": {"type": "string"}});
        let shape = Shape::of_value(&json!(["a", "abcd", "ab"]), Some(Node(&schema)));
        assert_eq!(shape.len, 3);
        assert_eq!(shape.elem().len, 4);
    }

    #[test]
    fn checks_names_and_fields() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        assert_eq!(estimate("self.a > 1", &schema).1, None);
        assert!(matches!(
            estimate("self.b > 1", &schema).1,
            Some(Problem::UndefinedField(_, f)) if f == "b"
        ));
        assert!(matches!(
            estimate("foo(self.a)", &schema).1,
            Some(Problem::UndeclaredFunction(_, f)) if f == "foo"
        ));
        assert!(matches!(
            estimate("other.a", &schema).1,
            Some(Problem::UndeclaredReference(_, f)) if f == "other"
        ));
        assert_eq!(
            estimate("optional.none().hasValue() == false", &schema).1,
            None
        );
    }
}
