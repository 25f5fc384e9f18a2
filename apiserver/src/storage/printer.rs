//! A custom resource's Table columns (its CRD version's
//! `additionalPrinterColumns`, else Age), as kube-apiserver's CRD table
//! convertor prints them: each cell read at the column's JSONPath (the
//! first result; none is `null`) and typed by the column's `type`.
//!
//! The JSONPath read is the subset CRDs use: fields (`.spec.color`,
//! `.metadata.labels.app`, `['a.b']`), indexes (`[0]`, `[-1]`), all items
//! (`[*]`) and filters by equality (`[?(@.type=="Ready")]`). A path
//! outside it reads nothing (a `null` cell), where kube-apiserver would
//! refuse the CRD or read more.

use serde_json::{Value, json};

use crate::registry::kind::PrinterColumn;

/// The column definitions after Name.
pub(super) fn definitions(columns: &[PrinterColumn]) -> impl Iterator<Item = Value> + '_ {
    columns.iter().map(|c| {
        json!({"name": c.name, "type": c.type_, "format": c.format,
               "description": c.description, "priority": c.priority})
    })
}

/// The cells of `obj` after its name.
pub(super) fn cells<'a>(
    columns: &'a [PrinterColumn],
    obj: &'a Value,
    age: fn(&str) -> String,
) -> impl Iterator<Item = Value> + 'a {
    columns.iter().map(move |c| {
        let Some(v) = read(obj, &c.json_path).into_iter().next() else {
            return Value::Null;
        };
        match (c.type_.as_str(), v) {
            (_, Value::Null) => Value::Null,
            ("string", Value::String(s)) => s.clone().into(),
            // JSONPath prints anything else as its JSON text.
            ("string", other) => other.to_string().into(),
            ("integer", Value::Number(n)) => n
                .as_i64()
                .or_else(|| n.as_f64().map(|f| f as i64))
                .map_or(Value::Null, Value::from),
            ("number", Value::Number(n)) => n.as_f64().map_or(Value::Null, Value::from),
            ("boolean", Value::Bool(b)) => (*b).into(),
            ("date", Value::String(s)) => age(s).into(),
            _ => Value::Null,
        }
    })
}

/// One step of a path.
#[derive(Debug, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    All,
    /// `[?(@.path=="value")]`: the items whose `path` is `value`.
    Equals(Vec<String>, Value),
}

/// What `path` reads in `obj`, in order (empty when nothing, or a path
/// outside the subset).
fn read<'a>(obj: &'a Value, path: &str) -> Vec<&'a Value> {
    let Some(steps) = parse(path) else {
        return Vec::new();
    };
    let mut at = vec![obj];
    for step in &steps {
        let mut next = Vec::new();
        for v in at {
            match (step, v) {
                (Step::Field(f), Value::Object(m)) => next.extend(m.get(f)),
                (Step::Index(i), Value::Array(a)) => {
                    let i = if *i < 0 { a.len() as i64 + i } else { *i };
                    next.extend(usize::try_from(i).ok().and_then(|i| a.get(i)));
                }
                (Step::All, Value::Array(a)) => next.extend(a),
                (Step::All, Value::Object(m)) => next.extend(m.values()),
                (Step::Equals(p, want), Value::Array(a)) => next.extend(
                    a.iter()
                        .filter(|item| p.iter().try_fold(*item, |v, f| v.get(f)) == Some(want)),
                ),
                _ => {}
            }
        }
        at = next;
    }
    at
}

/// The steps of a path such as `.status.conditions[?(@.type=="Ready")].status`.
fn parse(path: &str) -> Option<Vec<Step>> {
    let path = path.trim();
    let path = path
        .strip_prefix('{')
        .and_then(|p| p.strip_suffix('}'))
        .unwrap_or(path);
    let mut rest = path.strip_prefix('$').unwrap_or(path);
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end > 0 {
                steps.push(Step::Field(r[..end].to_string()));
            }
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = bracket_end(r)?;
            steps.push(bracket(r[..end].trim())?);
            rest = &r[end + 1..];
        } else {
            return None;
        }
    }
    Some(steps)
}

/// Where the bracket opened before `r` closes (quotes may hold `]`).
fn bracket_end(r: &str) -> Option<usize> {
    let mut quote = None;
    for (i, ch) in r.char_indices() {
        match (quote, ch) {
            (Some(q), c) if c == q => quote = None,
            (None, '\'' | '"') => quote = Some(ch),
            (None, ']') => return Some(i),
            _ => {}
        }
    }
    None
}

fn bracket(inner: &str) -> Option<Step> {
    if inner == "*" {
        return Some(Step::All);
    }
    if let Ok(i) = inner.parse() {
        return Some(Step::Index(i));
    }
    if let Some(quoted) = unquote(inner) {
        return Some(Step::Field(quoted));
    }
    let filter = inner.strip_prefix("?(")?.strip_suffix(')')?;
    let (lhs, rhs) = filter.split_once("==")?;
    let field = lhs.trim().strip_prefix("@.")?;
    let rhs = rhs.trim();
    let want = match unquote(rhs) {
        Some(s) => Value::String(s),
        None => serde_json::from_str(rhs).ok()?,
    };
    Some(Step::Equals(
        field.split('.').map(String::from).collect(),
        want,
    ))
}

fn unquote(s: &str) -> Option<String> {
    ['\'', '"'].into_iter().find_map(|q| {
        s.strip_prefix(q)
            .and_then(|s| s.strip_suffix(q))
            .map(String::from)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(type_: &str, json_path: &str) -> PrinterColumn {
        PrinterColumn {
            name: "C".into(),
            type_: type_.into(),
            format: String::new(),
            description: String::new(),
            priority: 0,
            json_path: json_path.into(),
        }
    }

    #[test]
    fn cells_are_read_at_their_paths_and_typed() {
        let obj = json!({"metadata": {"labels": {"app.kubernetes.io/name": "w"},
                "creationTimestamp": "2020-01-01T00:00:00Z"},
            "spec": {"color": "red", "replicas": 3, "on": true, "ratio": 0.5, "list": [1, 2]},
            "status": {"conditions": [{"type": "Synced", "status": "False"},
                                      {"type": "Ready", "status": "True"}]}});
        let columns = [
            col("string", ".spec.color"),
            col("integer", ".spec.replicas"),
            col("boolean", ".spec.on"),
            col("number", ".spec.ratio"),
            col("string", ".status.conditions[?(@.type==\"Ready\")].status"),
            col("string", ".metadata.labels['app.kubernetes.io/name']"),
            col("string", ".spec.list"),
            col("integer", ".spec.list[-1]"),
            col("string", ".spec.missing"),
            col("integer", ".spec.color"),
            col("date", ".metadata.creationTimestamp"),
            col("string", ".spec[bad"),
        ];
        let got: Vec<Value> = cells(&columns, &obj, |_| "5d".into()).collect();
        assert_eq!(
            got,
            [
                json!("red"),
                json!(3),
                json!(true),
                json!(0.5),
                json!("True"),
                json!("w"),
                json!("[1,2]"),
                json!(2),
                Value::Null,
                Value::Null,
                json!("5d"),
                Value::Null,
            ]
        );
    }
}
