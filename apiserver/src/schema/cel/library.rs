//! The CEL environment rules run in: the `cel` crate's standard library,
//! its strings and lists extensions (cel-go's `ext.Strings`, `ext.Lists`),
//! optional values, and the Kubernetes libraries this module implements:
//!
//! - lists: `isSorted()`, `sum()`, `min()`, `max()`, `indexOf(x)`,
//!   `lastIndexOf(x)`;
//! - regex: `find(re)`, `findAll(re)`, `findAll(re, n)` (`matches` is the
//!   standard one);
//! - URLs: `url(s)`, `isURL(s)`, and on a URL `getScheme()`, `getHost()`,
//!   `getHostname()`, `getPort()`, `getEscapedPath()`, `getQuery()`;
//! - quantities: `quantity(s)`, `isQuantity(s)`, and on a quantity
//!   `compareTo(q)`, `isLessThan(q)`, `isGreaterThan(q)`, `add(q|int)`,
//!   `sub(q|int)`, `asInteger()`, `asApproximateFloat()`, `sign()`,
//!   `isInteger()`.
//!
//! [`PROVIDED`] names every function the environment has: the compiler
//! rejects a call to anything else (an expression the `cel` crate would
//! otherwise only fail on when the call is reached).

use std::sync::{Arc, LazyLock};

use ::cel::common::types::{DYN_TYPE, INT_TYPE, LIST_TYPE, STRING_TYPE};
use ::cel::common::value::{CowVal, Val};
use ::cel::objects::{Key, Opaque};
use ::cel::{Env, ExecutionError, Value};

use super::quantity::Quantity;

/// Every function (operators and namespaced functions included) that rules
/// may call: the `cel` crate's (standard library, strings and lists
/// extensions, optionals) and this module's.
#[rustfmt::skip]
pub(crate) const PROVIDED: &[&str] = &[
    // operators and macro internals
    "_?_:_", "_&&_", "_||_", "!_", "_-_", "_+_", "_*_", "_/_", "_%_", "_==_", "_!=_", "_>=_",
    "_<=_", "_>_", "_<_", "-_", "_[_]", "_[?_]", "_?._", "@not_strictly_false", "@in",
    // standard library
    "size", "contains", "startsWith", "endsWith", "matches", "int", "uint", "double", "string",
    "bytes", "bool", "type", "dyn", "duration", "timestamp", "getDate", "getDayOfMonth",
    "getDayOfWeek", "getDayOfYear", "getFullYear", "getHours", "getMilliseconds", "getMinutes",
    "getMonth", "getSeconds",
    // optionals
    "optional.none", "optional.of", "optional.ofNonZeroValue", "value", "hasValue", "or",
    "orValue",
    // strings extension
    "charAt", "indexOf", "lastIndexOf", "join", "lowerAscii", "upperAscii", "trim", "replace",
    "split", "substring", "format", "strings.quote", "reverse",
    // lists extension
    "slice", "flatten", "distinct", "sort", "@sortByAssociatedKeys", "lists.range",
    // Kubernetes: lists, regex, URLs, quantities
    "isSorted", "sum", "min", "max", "find", "findAll", "url", "isURL", "getScheme", "getHost",
    "getHostname", "getPort", "getEscapedPath", "getQuery", "quantity", "isQuantity", "compareTo",
    "isLessThan", "isGreaterThan", "add", "sub", "asInteger", "asApproximateFloat", "sign",
    "isInteger",
];

/// The type names an expression may use as identifiers (`type(x) == int`).
#[rustfmt::skip]
pub(crate) const TYPE_NAMES: &[&str] = &[
    "int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type",
];

/// The shared environment (built once).
pub(crate) static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| Arc::new(build()));

fn build() -> Env {
    let mut env = Env::stdlib();
    let registered = env
        .add_extension(::cel::extensions::strings)
        .and_then(|()| env.add_extension(::cel::extensions::lists))
        .and_then(|()| register(&mut env));
    // The names are fixed and distinct: a failure is a bug in this file,
    // caught by every test.
    debug_assert!(registered.is_ok(), "{registered:?}");
    env
}

/// An overload over [`Value`]s: `$imp(&[receiver, args…])`.
macro_rules! bridge {
    ($name:ident, $imp:expr) => {
        fn $name<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
            let vals = args
                .iter()
                .map(|a| Value::try_from(a.as_ref()))
                .collect::<Result<Vec<_>, _>>()?;
            let out: Value = $imp(vals.as_slice())?;
            let boxed: Box<dyn Val> = out.try_into()?;
            Ok(CowVal::Owned(boxed))
        }
    };
}

bridge!(is_sorted_fn, is_sorted);
bridge!(sum_fn, sum);
bridge!(min_fn, |a: &[Value]| extreme(
    a,
    "min",
    std::cmp::Ordering::Less
));
bridge!(max_fn, |a: &[Value]| extreme(
    a,
    "max",
    std::cmp::Ordering::Greater
));
bridge!(index_of_fn, |a: &[Value]| index_of(a, false));
bridge!(last_index_of_fn, |a: &[Value]| index_of(a, true));
bridge!(find_fn, |a: &[Value]| find(a, Some(1)).map(|mut l| l
    .pop()
    .unwrap_or_else(|| Value::String(Arc::new(String::new())))));
bridge!(find_all_fn, |a: &[Value]| find(a, None)
    .map(|l| Value::List(Arc::new(l))));
bridge!(find_all_n_fn, |a: &[Value]| {
    let n = match a.get(2) {
        Some(Value::Int(n)) if *n >= 0 => Some(usize::try_from(*n).unwrap_or(usize::MAX)),
        _ => None,
    };
    find(a, n).map(|l| Value::List(Arc::new(l)))
});
bridge!(url_fn, |a: &[Value]| {
    let s = arg_str(a, 0, "url")?;
    Url::parse(s)
        .map(|u| Value::Opaque(Arc::new(u)))
        .map_err(|e| ExecutionError::function_error("url", e))
});
bridge!(is_url_fn, |a: &[Value]| {
    arg_str(a, 0, "isURL").map(|s| Value::Bool(Url::parse(s).is_ok()))
});
bridge!(url_part_fn0, |a: &[Value]| url_part(a, "getScheme"));
bridge!(url_part_fn1, |a: &[Value]| url_part(a, "getHost"));
bridge!(url_part_fn2, |a: &[Value]| url_part(a, "getHostname"));
bridge!(url_part_fn3, |a: &[Value]| url_part(a, "getPort"));
bridge!(url_part_fn4, |a: &[Value]| url_part(a, "getEscapedPath"));
bridge!(url_part_fn5, |a: &[Value]| url_part(a, "getQuery"));
bridge!(quantity_fn, |a: &[Value]| {
    let s = arg_str(a, 0, "quantity")?;
    Quantity::parse(s)
        .map(|q| Value::Opaque(Arc::new(q)))
        .map_err(|e| ExecutionError::function_error("quantity", e))
});
bridge!(is_quantity_fn, |a: &[Value]| {
    arg_str(a, 0, "isQuantity").map(|s| Value::Bool(Quantity::parse(s).is_ok()))
});
bridge!(q_compare_fn, |a: &[Value]| q_binary(a, "compareTo"));
bridge!(q_less_fn, |a: &[Value]| q_binary(a, "isLessThan"));
bridge!(q_greater_fn, |a: &[Value]| q_binary(a, "isGreaterThan"));
bridge!(q_add_fn, |a: &[Value]| q_binary(a, "add"));
bridge!(q_sub_fn, |a: &[Value]| q_binary(a, "sub"));
bridge!(q_as_integer_fn, |a: &[Value]| q_unary(a, "asInteger"));
bridge!(q_as_float_fn, |a: &[Value]| q_unary(
    a,
    "asApproximateFloat"
));
bridge!(q_sign_fn, |a: &[Value]| q_unary(a, "sign"));
bridge!(q_is_integer_fn, |a: &[Value]| q_unary(a, "isInteger"));

fn register(env: &mut Env) -> Result<(), ::cel::DeclarationError> {
    env.add_member_overload(
        "isSorted",
        "list_is_sorted",
        LIST_TYPE,
        vec![],
        is_sorted_fn,
    )?;
    env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], sum_fn)?;
    env.add_member_overload("min", "list_min", LIST_TYPE, vec![], min_fn)?;
    env.add_member_overload("max", "list_max", LIST_TYPE, vec![], max_fn)?;
    env.add_member_overload(
        "indexOf",
        "list_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        index_of_fn,
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list_last_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        last_index_of_fn,
    )?;
    env.add_member_overload(
        "find",
        "string_find",
        STRING_TYPE,
        vec![STRING_TYPE],
        find_fn,
    )?;
    env.add_member_overload(
        "findAll",
        "string_find_all",
        STRING_TYPE,
        vec![STRING_TYPE],
        find_all_fn,
    )?;
    env.add_member_overload(
        "findAll",
        "string_find_all_n",
        STRING_TYPE,
        vec![STRING_TYPE, INT_TYPE],
        find_all_n_fn,
    )?;
    env.add_overload("url", "string_to_url", vec![STRING_TYPE], url_fn)?;
    env.add_overload("isURL", "is_url_string", vec![STRING_TYPE], is_url_fn)?;
    let parts: [(&str, ::cel::common::functions::Function); 6] = [
        ("getScheme", url_part_fn0),
        ("getHost", url_part_fn1),
        ("getHostname", url_part_fn2),
        ("getPort", url_part_fn3),
        ("getEscapedPath", url_part_fn4),
        ("getQuery", url_part_fn5),
    ];
    for (name, f) in parts {
        env.add_member_overload(name, &format!("url_{name}"), DYN_TYPE, vec![], f)?;
    }
    env.add_overload(
        "quantity",
        "string_to_quantity",
        vec![STRING_TYPE],
        quantity_fn,
    )?;
    env.add_overload(
        "isQuantity",
        "is_quantity_string",
        vec![STRING_TYPE],
        is_quantity_fn,
    )?;
    let binary: [(&str, ::cel::common::functions::Function); 5] = [
        ("compareTo", q_compare_fn),
        ("isLessThan", q_less_fn),
        ("isGreaterThan", q_greater_fn),
        ("add", q_add_fn),
        ("sub", q_sub_fn),
    ];
    for (name, f) in binary {
        env.add_member_overload(
            name,
            &format!("quantity_{name}"),
            DYN_TYPE,
            vec![DYN_TYPE],
            f,
        )?;
    }
    let unary: [(&str, ::cel::common::functions::Function); 4] = [
        ("asInteger", q_as_integer_fn),
        ("asApproximateFloat", q_as_float_fn),
        ("sign", q_sign_fn),
        ("isInteger", q_is_integer_fn),
    ];
    for (name, f) in unary {
        env.add_member_overload(name, &format!("quantity_{name}"), DYN_TYPE, vec![], f)?;
    }
    Ok(())
}

fn type_name(v: &Value) -> String {
    match v {
        Value::Opaque(o) => o.runtime_type_name().to_owned(),
        v => v.type_of().to_string(),
    }
}

/// The error for arguments no overload takes, as the `cel` crate words it.
fn no_overload(name: &str, args: &[Value]) -> ExecutionError {
    ExecutionError::no_such_member_overload(name, args.iter().map(type_name).collect())
}

fn arg_str<'a>(args: &'a [Value], i: usize, name: &str) -> Result<&'a str, ExecutionError> {
    match args.get(i) {
        Some(Value::String(s)) => Ok(s.as_str()),
        _ => Err(no_overload(name, args)),
    }
}

fn list<'a>(args: &'a [Value], name: &str) -> Result<&'a [Value], ExecutionError> {
    match args.first() {
        Some(Value::List(l)) => Ok(l.as_slice()),
        _ => Err(no_overload(name, args)),
    }
}

fn compare(a: &Value, b: &Value, name: &str) -> Result<std::cmp::Ordering, ExecutionError> {
    if let (Value::Opaque(x), Value::Opaque(y)) = (a, b)
        && let (Some(x), Some(y)) = (x.downcast_ref::<Quantity>(), y.downcast_ref::<Quantity>())
    {
        return Ok(x.cmp(y));
    }
    a.partial_cmp(b)
        .filter(|_| std::mem::discriminant(a) == std::mem::discriminant(b))
        .ok_or_else(|| no_overload(name, &[a.clone(), b.clone()]))
}

fn is_sorted(args: &[Value]) -> Result<Value, ExecutionError> {
    let l = list(args, "isSorted")?;
    for w in l.windows(2) {
        if compare(&w[0], &w[1], "isSorted")? == std::cmp::Ordering::Greater {
            return Ok(Value::Bool(false));
        }
    }
    Ok(Value::Bool(true))
}

fn sum(args: &[Value]) -> Result<Value, ExecutionError> {
    let l = list(args, "sum")?;
    let Some(first) = l.first() else {
        return Ok(Value::Int(0));
    };
    let overflow = || ExecutionError::function_error("sum", "integer overflow");
    let mut acc = first.clone();
    for v in &l[1..] {
        acc = match (&acc, v) {
            (Value::Int(a), Value::Int(b)) => Value::Int(a.checked_add(*b).ok_or_else(overflow)?),
            (Value::UInt(a), Value::UInt(b)) => {
                Value::UInt(a.checked_add(*b).ok_or_else(overflow)?)
            }
            (Value::Float(a), Value::Float(b)) => Value::Float(a + b),
            (Value::Duration(a), Value::Duration(b)) => {
                Value::Duration(a.checked_add(b).ok_or_else(overflow)?)
            }
            _ => return Err(no_overload("sum", &[acc.clone(), v.clone()])),
        };
    }
    match acc {
        Value::Int(_) | Value::UInt(_) | Value::Float(_) | Value::Duration(_) => Ok(acc),
        other => Err(no_overload("sum", &[other])),
    }
}

fn extreme(args: &[Value], name: &str, keep: std::cmp::Ordering) -> Result<Value, ExecutionError> {
    let l = list(args, name)?;
    let Some(mut best) = l.first() else {
        return Err(ExecutionError::function_error(
            name,
            format!("{name}(list) called on an empty list"),
        ));
    };
    for v in &l[1..] {
        if compare(v, best, name)? == keep {
            best = v;
        }
    }
    Ok(best.clone())
}

fn index_of(args: &[Value], last: bool) -> Result<Value, ExecutionError> {
    let name = if last { "lastIndexOf" } else { "indexOf" };
    let l = list(args, name)?;
    let needle = args.get(1).ok_or_else(|| no_overload(name, args))?;
    let found = if last {
        l.iter().rposition(|v| v == needle)
    } else {
        l.iter().position(|v| v == needle)
    };
    Ok(Value::Int(
        found.map_or(-1, |i| i64::try_from(i).unwrap_or(i64::MAX)),
    ))
}

/// The first `limit` (all with `None`) matches of regex `args[1]` in
/// `args[0]`.
fn find(args: &[Value], limit: Option<usize>) -> Result<Vec<Value>, ExecutionError> {
    let s = arg_str(args, 0, "find")?;
    let re = arg_str(args, 1, "find")?;
    let re = regex::Regex::new(re).map_err(|e| ExecutionError::function_error("find", e))?;
    Ok(re
        .find_iter(s)
        .take(limit.unwrap_or(usize::MAX))
        .map(|m| Value::String(Arc::new(m.as_str().to_owned())))
        .collect())
}

fn quantity_arg(args: &[Value], i: usize, name: &str) -> Result<Quantity, ExecutionError> {
    match args.get(i) {
        Some(Value::Opaque(o)) => o
            .downcast_ref::<Quantity>()
            .copied()
            .ok_or_else(|| no_overload(name, args)),
        Some(Value::Int(n)) if i > 0 && matches!(name, "add" | "sub") => Ok(Quantity::from_int(*n)),
        _ => Err(no_overload(name, args)),
    }
}

fn q_binary(args: &[Value], name: &str) -> Result<Value, ExecutionError> {
    let (a, b) = (quantity_arg(args, 0, name)?, quantity_arg(args, 1, name)?);
    let range = |e| ExecutionError::function_error(name, e);
    Ok(match name {
        "compareTo" => Value::Int(match a.cmp(&b) {
            std::cmp::Ordering::Less => -1,
            std::cmp::Ordering::Equal => 0,
            std::cmp::Ordering::Greater => 1,
        }),
        "isLessThan" => Value::Bool(a < b),
        "isGreaterThan" => Value::Bool(a > b),
        "add" => Value::Opaque(Arc::new(a.checked_add(b).map_err(range)?)),
        _ => Value::Opaque(Arc::new(a.checked_add(b.negated()).map_err(range)?)),
    })
}

fn q_unary(args: &[Value], name: &str) -> Result<Value, ExecutionError> {
    let q = quantity_arg(args, 0, name)?;
    Ok(match name {
        "asInteger" => Value::Int(
            q.as_integer()
                .map_err(|e| ExecutionError::function_error(name, e))?,
        ),
        "asApproximateFloat" => Value::Float(q.as_approximate_float()),
        "sign" => Value::Int(q.sign()),
        _ => Value::Bool(q.as_integer().is_ok()),
    })
}

impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

/// A parsed URL: an absolute URI (`scheme://host/path?query`) or an
/// absolute path (`/path?query`), as Go's `url.ParseRequestURI` accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Url {
    scheme: String,
    host: String,
    path: String,
    query: String,
}

impl Opaque for Url {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.URL"
    }
}

impl Url {
    fn parse(s: &str) -> Result<Url, String> {
        let err = |why: &str| {
            format!("URL parse error during conversion from string: parse {s:?}: {why}")
        };
        if s.chars().any(|c| c.is_control() || c == ' ') {
            return Err(err("invalid character in URL"));
        }
        let (rest, query) = s.split_once('?').unwrap_or((s, ""));
        if rest.starts_with('/') {
            return Ok(Url {
                scheme: String::new(),
                host: String::new(),
                path: rest.to_owned(),
                query: query.to_owned(),
            });
        }
        let Some((scheme, after)) = rest.split_once(':') else {
            return Err(err("invalid URI for request"));
        };
        let valid_scheme = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        if !valid_scheme {
            return Err(err("missing protocol scheme"));
        }
        let Some(after) = after.strip_prefix("//") else {
            return Err(err("invalid URI for request"));
        };
        let (authority, path) = match after.find('/') {
            Some(i) => after.split_at(i),
            None => (after, ""),
        };
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let url = Url {
            scheme: scheme.to_owned(),
            host: host.to_owned(),
            path: path.to_owned(),
            query: query.to_owned(),
        };
        let port = url.port();
        if !port.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err(&format!(
                "invalid port {:?} after host",
                format!(":{port}")
            )));
        }
        Ok(url)
    }

    /// The host without its port (and without an IPv6 address's brackets).
    fn hostname(&self) -> &str {
        let h = &self.host;
        if let Some(rest) = h.strip_prefix('[') {
            return rest.split_once(']').map_or(rest, |(ip, _)| ip);
        }
        h.split_once(':').map_or(h, |(name, _)| name)
    }

    fn port(&self) -> &str {
        let h = &self.host;
        let after = if h.starts_with('[') {
            h.split_once(']').map_or("", |(_, r)| r)
        } else {
            h
        };
        after.split_once(':').map_or("", |(_, p)| p)
    }

    /// The query as a map of key → values, percent-decoded.
    fn query_map(&self) -> Value {
        let mut m: std::collections::HashMap<Key, Vec<Value>> = std::collections::HashMap::new();
        for (k, v) in form_urlencoded::parse(self.query.as_bytes()) {
            m.entry(Key::String(Arc::new(k.into_owned())))
                .or_default()
                .push(Value::String(Arc::new(v.into_owned())));
        }
        Value::Map(::cel::objects::Map {
            map: Arc::new(
                m.into_iter()
                    .map(|(k, v)| (k, Value::List(Arc::new(v))))
                    .collect(),
            ),
        })
    }
}

fn url_part(args: &[Value], name: &str) -> Result<Value, ExecutionError> {
    let url = match args.first() {
        Some(Value::Opaque(o)) => o.downcast_ref::<Url>(),
        _ => None,
    }
    .ok_or_else(|| no_overload(name, args))?;
    let s = |s: &str| Value::String(Arc::new(s.to_owned()));
    Ok(match name {
        "getScheme" => s(&url.scheme),
        "getHost" => s(&url.host),
        "getHostname" => s(url.hostname()),
        "getPort" => s(url.port()),
        "getEscapedPath" => s(&url.path),
        _ => url.query_map(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(expr: &str) -> Result<Value, ExecutionError> {
        let program = ENV.compile(expr).expect("compiles");
        let ctx = ::cel::Context::with_env(Arc::clone(&ENV));
        program.execute(&ctx)
    }

    fn t(expr: &str) {
        assert_eq!(eval(expr), Ok(Value::Bool(true)), "{expr}");
    }

    #[test]
    fn every_provided_function_is_registered_once() {
        let mut names = PROVIDED.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), PROVIDED.len());
        // The environment builds (its debug_assert holds).
        t("true");
    }

    #[test]
    fn lists() {
        t("[1, 2, 2, 3].isSorted() && ![2, 1].isSorted() && ['a', 'b'].isSorted()");
        t("[1, 2, 3].sum() == 6 && [1.5, 2.5].sum() == 4.0 && [].sum() == 0");
        t("[3, 1, 2].min() == 1 && [3, 1, 2].max() == 3 && ['b', 'a'].max() == 'b'");
        t("[1, 2, 1].indexOf(1) == 0 && [1, 2, 1].lastIndexOf(1) == 2 && [1].indexOf(5) == -1");
        assert!(eval("[].min()").is_err());
        assert!(eval("[1, 'a'].isSorted()").is_err());
    }

    #[test]
    fn strings_extension() {
        t("'hello'.charAt(1) == 'e' && 'hello'.indexOf('l') == 2 && 'hello'.lastIndexOf('l') == 3");
        t("'Hi'.lowerAscii() == 'hi' && 'Hi'.upperAscii() == 'HI' && ' x '.trim() == 'x'");
        t("'a,b'.split(',') == ['a', 'b'] && ['a', 'b'].join('-') == 'a-b'");
        t("'hello'.substring(1, 3) == 'el' && 'aXa'.replace('a', 'b') == 'bXb'");
        t("'%s=%d'.format(['a', 1]) == 'a=1'");
    }

    #[test]
    fn regex() {
        t("'abc 123 45'.find('[0-9]+') == '123' && 'abc'.find('[0-9]+') == ''");
        t("'abc 123 45'.findAll('[0-9]+') == ['123', '45']");
        t("'1 2 3'.findAll('[0-9]', 2) == ['1', '2']");
        t("'abc'.matches('^a.c$')");
        assert!(eval("'abc'.find('(')").is_err());
    }

    #[test]
    fn urls() {
        t("url('https://user@example.com:8080/a%20b?x=1&x=2&y=').getScheme() == 'https'");
        t("url('https://example.com:8080/p').getHost() == 'example.com:8080'");
        t("url('https://example.com:8080/p').getHostname() == 'example.com'");
        t("url('https://example.com:8080/p').getPort() == '8080'");
        t("url('https://[::1]:80/').getHostname() == '::1'");
        t("url('https://example.com/a%20b').getEscapedPath() == '/a%20b'");
        t("url('/p?x=1&x=2&y=').getQuery() == {'x': ['1', '2'], 'y': ['']}");
        t(
            "isURL('https://example.com') && isURL('/abs') && !isURL('relative') && !isURL('http://h:x/')",
        );
        assert!(eval("url('nope')").is_err());
    }

    #[test]
    fn quantities() {
        t(
            "quantity('1Gi').isGreaterThan(quantity('1G')) && quantity('500m').isLessThan(quantity('1'))",
        );
        t("quantity('1k').compareTo(quantity('1000')) == 0");
        t("quantity('1').add(quantity('500m')) == quantity('1.5')");
        t("quantity('2').sub(1).asInteger() == 1 && quantity('1').add(2) == quantity('3')");
        t("quantity('1.5').asApproximateFloat() == 1.5 && quantity('-3').sign() == -1");
        t("quantity('1Ki').isInteger() && !quantity('1m').isInteger()");
        t("isQuantity('1Gi') && !isQuantity('1Zi')");
        assert!(eval("quantity('x')").is_err());
        assert!(eval("quantity('1m').asInteger()").is_err());
        assert!(eval("'a'.add(1)").is_err());
    }
}
