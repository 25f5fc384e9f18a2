//! Label and field selectors as sent in the `labelSelector` and `fieldSelector`
//! query parameters. The grammar, semantics and error messages follow
//! `k8s.io/apimachinery/pkg/labels` and `k8s.io/apimachinery/pkg/fields`.

use std::collections::BTreeSet;

use crate::machinery::validation::{label_key_errors, label_value_errors};

/// Why a label or field selector could not be parsed. The `Display` text
/// matches the message the real kube-apiserver reports.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SelectorError {
    /// A label selector requirement is malformed or names an invalid key/value.
    #[error("unable to parse requirement: {0}")]
    Requirement(String),
    /// The label selector is malformed between requirements.
    #[error("{0}")]
    Syntax(String),
    /// A field selector term has no `=`, `==` or `!=` operator.
    #[error("invalid selector: '{selector}'; can't understand '{term}'")]
    FieldTerm {
        /// The whole field selector.
        selector: String,
        /// The term that could not be understood.
        term: String,
    },
    /// A field selector value contains an unknown escape sequence or a trailing `\`.
    #[error("invalid field selector: invalid escape sequence: {0}")]
    InvalidEscape(String),
    /// A field selector value contains an unescaped `,` or `=`.
    #[error("invalid field selector: unescaped character in value: {0}")]
    UnescapedChar(char),
}

/// A parsed label selector: a conjunction of requirements on object labels.
/// The default (empty) selector matches everything.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

#[derive(Debug, Clone, PartialEq)]
struct Requirement {
    key: String,
    op: Op,
}

/// `=`/`==` are stored as a one-value `In`, `!=` as a one-value `NotIn`.
#[derive(Debug, Clone, PartialEq)]
enum Op {
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
    GreaterThan(i64),
    LessThan(i64),
}

impl LabelSelector {
    /// Parses a label selector such as `app=web,tier in (a,b),!legacy,rev>3`.
    /// An empty or all-whitespace string yields a selector matching everything.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let syntax = |t, expected| SelectorError::Syntax(found(t, expected));
        let mut p = Parser {
            toks: lex(s),
            pos: 0,
        };
        let mut requirements = Vec::new();
        while !p.peek().is_empty() {
            if !starts_requirement(p.peek()) {
                return Err(syntax(p.peek(), "!, identifier, or 'end of string'"));
            }
            requirements.push(p.requirement().map_err(SelectorError::Requirement)?);
            match p.next() {
                "" => break,
                "," if starts_requirement(p.peek()) => {}
                "," => return Err(syntax(p.peek(), "identifier after ','")),
                t => return Err(syntax(t, "',' or 'end of string'")),
            }
        }
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Self { requirements })
    }

    /// Whether the labels that `label` looks up satisfy every requirement
    /// of the selector.
    pub fn matches<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.requirements.iter().all(|r| {
            let value = label(&r.key);
            let int = || value.and_then(|v| v.parse::<i64>().ok());
            let listed = |values: &[String], v: &str| values.iter().any(|x| x == v);
            match &r.op {
                Op::In(values) => value.is_some_and(|v| listed(values, v)),
                Op::NotIn(values) => value.is_none_or(|v| !listed(values, v)),
                Op::Exists => value.is_some(),
                Op::DoesNotExist => value.is_none(),
                Op::GreaterThan(n) => int().is_some_and(|v| v > *n),
                Op::LessThan(n) => int().is_some_and(|v| v < *n),
            }
        })
    }

    /// Whether the selector has no requirements (and so matches everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

fn found(t: &str, expected: &str) -> String {
    format!("found '{t}', expected: {expected}")
}

fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

fn is_special(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '>' | '<')
}

/// A word token: an identifier, or `in`/`notin` (keywords only where an
/// operator is expected, identifiers elsewhere).
fn is_word(t: &str) -> bool {
    t.starts_with(|c| !is_special(c))
}

fn starts_requirement(t: &str) -> bool {
    t == "!" || is_word(t)
}

/// Splits a label selector into tokens, each a slice of the input: a word or
/// one of `!`, `=`, `==`, `!=`, `<`, `>`, `(`, `)`, `,`.
fn lex(s: &str) -> Vec<&str> {
    let mut toks = Vec::new();
    let mut rest = s.trim_start_matches(is_space);
    while let Some(c) = rest.chars().next() {
        let len = if !is_special(c) {
            rest.find(|c| is_space(c) || is_special(c))
                .unwrap_or(rest.len())
        } else if matches!(c, '=' | '!') && rest[1..].starts_with('=') {
            2
        } else {
            1
        };
        let (tok, tail) = rest.split_at(len);
        toks.push(tok);
        rest = tail.trim_start_matches(is_space);
    }
    toks
}

struct Parser<'a> {
    toks: Vec<&'a str>,
    pos: usize,
}

impl<'a> Parser<'a> {
    /// The next token without consuming it; "" at the end of the input.
    fn peek(&self) -> &'a str {
        self.toks.get(self.pos).copied().unwrap_or("")
    }

    fn next(&mut self) -> &'a str {
        let t = self.peek();
        self.pos += 1;
        t
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        let mut t = self.next();
        let negated = t == "!";
        if negated {
            t = self.next();
        }
        if !is_word(t) {
            return Err(found(t, "identifier"));
        }
        let key = t.to_string();
        let errs = label_key_errors(&key);
        if !errs.is_empty() {
            return Err(format!("key: Invalid value: {key:?}: {}", errs.join("; ")));
        }
        if negated || matches!(self.peek(), "" | ",") {
            let op = if negated {
                Op::DoesNotExist
            } else {
                Op::Exists
            };
            return Ok(Requirement { key, op });
        }
        let op = self.next();
        let values = match op {
            "in" | "notin" => self.value_set()?,
            "=" | "==" | "!=" | ">" | "<" => vec![self.exact_value()?],
            _ => return Err(found(op, "in, notin, =, ==, !=, gt, lt")),
        };
        let mut errs = Vec::new();
        let int = values[0].parse::<i64>().ok();
        if matches!(op, ">" | "<") && int.is_none() {
            errs.push(format!(
                "values[0]: Invalid value: {:?}: for 'Gt', 'Lt' operators, the value must be an integer",
                values[0]
            ));
        }
        for (i, v) in values.iter().enumerate() {
            let e = label_value_errors(v);
            if !e.is_empty() {
                let e = e.join("; ");
                errs.push(format!("values[{i}][{key}]: Invalid value: {v:?}: {e}"));
            }
        }
        match errs.len() {
            0 => {}
            1 => return Err(errs.remove(0)),
            _ => return Err(format!("[{}]", errs.join(", "))),
        }
        let op = match op {
            "in" | "=" | "==" => Op::In(values),
            "notin" | "!=" => Op::NotIn(values),
            ">" => Op::GreaterThan(int.unwrap_or_default()),
            _ => Op::LessThan(int.unwrap_or_default()),
        };
        Ok(Requirement { key, op })
    }

    /// The value after `=`, `==`, `!=`, `>` or `<`; missing means "".
    fn exact_value(&mut self) -> Result<String, String> {
        match self.peek() {
            "" | "," => Ok(String::new()),
            t if is_word(t) => Ok(self.next().to_string()),
            t => Err(found(t, "identifier")),
        }
    }

    /// A parenthesised, comma-separated set such as `(a, b)`, never empty;
    /// returned sorted and deduplicated. Empty entries (`()`, `(a,)`) mean "".
    fn value_set(&mut self) -> Result<Vec<String>, String> {
        let t = self.next();
        if t != "(" {
            return Err(format!("found '{t}' expected: '('"));
        }
        let mut set = BTreeSet::new();
        match self.peek() {
            ")" => {
                set.insert(String::new());
            }
            t if t == "," || is_word(t) => loop {
                match (self.next(), self.peek()) {
                    (",", next) => {
                        if set.is_empty() || matches!(next, ")" | ",") {
                            set.insert(String::new());
                        }
                        match next {
                            ")" => break,
                            "," => self.pos += 1,
                            _ => {}
                        }
                    }
                    (t, next) if is_word(t) => {
                        set.insert(t.to_string());
                        match next {
                            "," => {}
                            ")" => break,
                            _ => return Err(found(next, "',' or ')'")),
                        }
                    }
                    (t, _) => return Err(found(t, "',', or identifier")),
                }
            },
            t => return Err(found(t, "',', ')' or identifier")),
        }
        self.next(); // the `)` seen above
        Ok(set.into_iter().collect())
    }
}

/// A parsed field selector: a conjunction of `field=value` / `field!=value`
/// terms. The default (empty) selector matches everything.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct FieldTerm {
    field: String,
    equal: bool,
    value: String,
}

impl FieldSelector {
    /// Parses a field selector such as `metadata.name=foo,status.phase!=Running`.
    /// Values may escape `\`, `,` and `=` with a backslash. Empty terms are
    /// skipped, so "" matches everything.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut parts = split_terms(s);
        parts.sort_unstable(); // as apimachinery does: decides which error is reported
        let mut terms = Vec::new();
        for part in parts.into_iter().filter(|p| !p.is_empty()) {
            let (field, equal, raw) = split_term(part).ok_or_else(|| SelectorError::FieldTerm {
                selector: s.to_string(),
                term: part.to_string(),
            })?;
            let (field, value) = (field.to_string(), unescape(raw)?);
            terms.push(FieldTerm {
                field,
                equal,
                value,
            });
        }
        terms.sort();
        Ok(Self { terms })
    }

    /// The field paths named, e.g. `["metadata.name", "status.phase"]`, so the
    /// caller can reject unsupported ones. Sorted, each path listed once.
    pub fn fields(&self) -> Vec<&str> {
        let mut fields: Vec<&str> = self.terms.iter().map(|t| t.field.as_str()).collect();
        fields.dedup();
        fields
    }

    /// Whether the object satisfies every term. `get(field)` returns the
    /// object's value for a field path (None = field absent, treated as "").
    pub fn matches<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.terms
            .iter()
            .all(|t| (get(&t.field).unwrap_or_default() == t.value) == t.equal)
    }

    /// Whether the selector has no terms (and so matches everything).
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }
}

/// Splits on commas not preceded by a backslash (escapes are kept).
fn split_terms(s: &str) -> Vec<&str> {
    let (mut terms, mut start, mut escaped) = (Vec::new(), 0, false);
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            ',' => {
                terms.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&s[start..]);
    terms
}

/// Splits at the first `!=`, `==` or `=`: (field, is-equality, raw value).
fn split_term(term: &str) -> Option<(&str, bool, &str)> {
    term.char_indices().find_map(|(i, _)| {
        let (field, rest) = term.split_at(i);
        [("!=", false), ("==", true), ("=", true)]
            .into_iter()
            .find_map(|(op, equal)| Some((field, equal, rest.strip_prefix(op)?)))
    })
}

/// Resolves `\\`, `\,` and `\=`; any other escape or a bare `,`/`=` is an error.
fn unescape(s: &str) -> Result<String, SelectorError> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        out.push(match c {
            '\\' => match chars.next() {
                Some(e @ ('\\' | ',' | '=')) => e,
                Some(e) => return Err(SelectorError::InvalidEscape(format!("\\{e}"))),
                None => return Err(SelectorError::InvalidEscape("\\".into())),
            },
            ',' | '=' => return Err(SelectorError::UnescapedChar(c)),
            c => c,
        });
    }
    Ok(out)
}

/// A label selector as a string (what a Scale reports, what an eviction
/// matches pods with): kept when it is one (a CRD's
/// `labelSelectorPath`); a `LabelSelector` (`matchLabels`,
/// `matchExpressions`) or a plain map (a ReplicationController's) printed
/// as kube-apiserver prints them.
pub fn selector_string(v: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    let label_map = |m: &serde_json::Map<String, Value>| {
        m.iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
            .collect::<Vec<_>>()
    };
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Object(m) if m.contains_key("matchLabels") || m.contains_key("matchExpressions") => {
            let mut parts = m
                .get("matchLabels")
                .and_then(Value::as_object)
                .map(label_map)
                .unwrap_or_default();
            for e in m
                .get("matchExpressions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let key = e["key"].as_str().unwrap_or_default();
                let values: Vec<&str> = e["values"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                parts.push(match e["operator"].as_str().unwrap_or_default() {
                    "In" => format!("{key} in ({})", values.join(",")),
                    "NotIn" => format!("{key} notin ({})", values.join(",")),
                    "Exists" => key.to_string(),
                    _ => format!("!{key}"),
                });
            }
            Some(parts.join(","))
        }
        Value::Object(m) => Some(label_map(m).join(",")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn selectors_print_as_kube_apiserver_prints_them() {
        let cases = [
            (serde_json::json!("app=x"), "app=x"),
            (serde_json::json!({"app": "x"}), "app=x"),
            (
                serde_json::json!({"matchLabels": {"a": "1", "b": "2"}}),
                "a=1,b=2",
            ),
            (
                serde_json::json!({"matchLabels": {"a": "1"}, "matchExpressions": [
                    {"key": "t", "operator": "In", "values": ["p", "q"]},
                    {"key": "u", "operator": "NotIn", "values": ["r"]},
                    {"key": "v", "operator": "Exists"},
                    {"key": "w", "operator": "DoesNotExist"}]}),
                "a=1,t in (p,q),u notin (r),v,!w",
            ),
        ];
        for (sel, want) in cases {
            assert_eq!(selector_string(&sel).as_deref(), Some(want), "{sel}");
        }
        assert_eq!(selector_string(&serde_json::Value::Null), None);
    }

    use super::*;

    /// `k=v k2=v2` (space separated) to a label map; a bare `k` means `k=""`.
    fn labels(s: &str) -> std::collections::BTreeMap<String, String> {
        let pair = |kv: &str| match kv.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (kv.to_string(), String::new()),
        };
        s.split_whitespace().map(pair).collect()
    }

    /// `selector ; label sets that match ; label sets that don't`, sets split by `|`.
    const MATCH_TABLE: &str = r"
        a=b              ; a=b | a=b c=d      ; a=c |
        a==b             ; a=b                ; a=B |
        a!=b             ; a=c | | x=b        ; a=b
        a in (x, y)      ; a=x | a=y          ; a=z |
        a notin (x,y)    ; a=z |              ; a=x | a=y
        a                ; a= | a=v           ; | b=a
        !a               ; | b=a              ; a=
        a>5              ; a=6 | a=100        ; a=5 | a=x | a= |
        a<5              ; a=4 | a=-7         ; a=5 | a=x | a= |
        a=               ; a=                 ; a=x |
        a==              ; a=                 ; a=x
        a!=,b            ; a=x b | b          ; a b | a=x
        a in ()          ; a=                 ; a=x |
        a in (x,)        ; a=x | a=           ; a=y |
        a in (,,x)       ; a=x | a=           ; a=y
        a in (in, notin) ; a=in | a=notin     ; a=x
        in=notin         ; in=notin           ; in=x
        app = web ,tier in(a,b),  !legacy , example.com/rev >3 ,x.y/Z_z-1!=q ; app=web tier=b example.com/rev=4 ; app=web tier=b | app=web tier=a example.com/rev=3 | app=web tier=b example.com/rev=4 legacy
    ";

    #[test]
    fn label_operators() {
        for line in MATCH_TABLE.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let cols: Vec<&str> = line.split(';').map(str::trim).collect();
            let sel = LabelSelector::parse(cols[0]).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert!(!sel.is_empty());
            for (col, want) in [(cols[1], true), (cols[2], false)] {
                for set in col.split('|') {
                    let m = labels(set);
                    let got = sel.matches(|k| m.get(k).map(String::as_str));
                    assert_eq!(got, want, "{line} / {set:?}");
                }
            }
        }
    }

    #[test]
    fn empty_and_normalised_label_selectors() {
        for s in ["", " ", "\t\n "] {
            let sel = LabelSelector::parse(s).unwrap();
            assert!(sel.is_empty());
            assert_eq!(sel, LabelSelector::default());
            let (none, ab) = (labels(""), labels("a=b"));
            assert!(
                sel.matches(|k| none.get(k).map(String::as_str))
                    && sel.matches(|k| ab.get(k).map(String::as_str))
            );
        }
        let p = |s| LabelSelector::parse(s).unwrap();
        assert_eq!(p("b=1,a=2"), p("a==2, b=1"));
        assert_eq!(p("a in (y,x,x)"), p("a in (x,y)"));
    }

    /// `selector => exact error message`.
    const ERROR_TABLE: &str = r#"
        a in (     => unable to parse requirement: found '', expected: ',', ')' or identifier
        =x         => found '=', expected: !, identifier, or 'end of string'
        a in b     => unable to parse requirement: found 'b' expected: '('
        !          => unable to parse requirement: found '', expected: identifier
        a b        => unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt
        a,         => found '', expected: identifier after ','
        a=b c      => found 'c', expected: ',' or 'end of string'
        !a=b       => found '=', expected: ',' or 'end of string'
        a in (x y) => unable to parse requirement: found 'y', expected: ',' or ')'
        a in (x,=) => unable to parse requirement: found '=', expected: ',', or identifier
        a=(        => unable to parse requirement: found '(', expected: identifier
        a>x        => unable to parse requirement: values[0]: Invalid value: "x": for 'Gt', 'Lt' operators, the value must be an integer
        a>         => unable to parse requirement: values[0]: Invalid value: "": for 'Gt', 'Lt' operators, the value must be an integer
        a<-5       => unable to parse requirement: values[0][a]: Invalid value: "-5": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')
        -a         => unable to parse requirement: key: Invalid value: "-a": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')
    "#;

    #[test]
    fn label_error_messages() {
        for line in ERROR_TABLE.lines().filter(|l| !l.trim().is_empty()) {
            let (sel, msg) = line.split_once(" => ").unwrap();
            let err = LabelSelector::parse(sel.trim()).unwrap_err();
            assert_eq!(err.to_string(), msg, "{sel}");
        }
        let err = |s| LabelSelector::parse(s).unwrap_err();
        let msg = "found 'c', expected: ',' or 'end of string'";
        assert_eq!(err("a=b c d"), SelectorError::Syntax(msg.into()));
        let msg = err("a in (-x,y,)").to_string();
        assert!(
            msg.starts_with(r#"unable to parse requirement: values[1][a]: Invalid value: "-x""#)
        );
        let msg = err("a>-x").to_string(); // two errors are aggregated
        assert!(
            msg.starts_with("unable to parse requirement: [values[0]: "),
            "{msg}"
        );
    }

    /// Rejected label selectors, separated by `|`.
    const GARBAGE: &str = r#"
        !!a | a=b=c | a===b | a>=5 | a<b | a>99999999999999999999 | ( | ) | , | ,a | a,,b
        a in | a notin | a notin (x | a in ((x)) | a in (x)) | a in (x,,) | a in (,,) | !a in (x)
        a=b, | ключ=x | a=ü | a=b,ü | a/b/c | /a | a/ | A.com/b | a="b" | a=b\,c
    "#;

    #[test]
    fn label_garbage_is_rejected() {
        let long = [
            "k".repeat(64),
            format!("{}/k", "p".repeat(254)),
            format!("a={}", "v".repeat(64)),
        ];
        let garbage = GARBAGE
            .split(['|', '\n'])
            .map(str::trim)
            .filter(|s| !s.is_empty());
        for s in garbage.chain(long.iter().map(String::as_str)) {
            assert!(LabelSelector::parse(s).is_err(), "{s:?} should be rejected");
        }
        assert!(LabelSelector::parse(&"k".repeat(63)).is_ok());
        assert!(LabelSelector::parse(&format!("{}/k", "p".repeat(253))).is_ok());
        assert!(LabelSelector::parse(&format!("a={}", "v".repeat(63))).is_ok());
    }

    #[test]
    fn label_parser_never_panics() {
        // Every concatenation of up to 4 of these pieces must parse or fail cleanly.
        let alphabet = ["a", "=", "!", "(", ")", ",", "<", ">", " ", "in", "1", "é"];
        let mut inputs = vec![String::new()];
        for _ in 0..4 {
            inputs = inputs
                .iter()
                .flat_map(|s| alphabet.iter().map(move |t| format!("{s}{t}")))
                .collect();
            inputs.iter().for_each(|s| drop(LabelSelector::parse(s)));
        }
        assert_eq!(inputs.len(), alphabet.len().pow(4));
    }

    #[test]
    fn field_selector_parse_and_match() {
        let fs = FieldSelector::parse("metadata.name=foo,status.phase!=Running").unwrap();
        assert_eq!(fs.fields(), vec!["metadata.name", "status.phase"]);
        let obj = |name: &'static str, phase: Option<&'static str>| {
            move |f: &str| match f {
                "metadata.name" => Some(name),
                "status.phase" => phase,
                _ => None,
            }
        };
        assert!(fs.matches(obj("foo", Some("Pending"))));
        assert!(fs.matches(obj("foo", None)));
        assert!(!fs.matches(obj("foo", Some("Running"))));
        assert!(!fs.matches(obj("bar", Some("Pending"))));
        let node1 = |_: &str| Some("node1");
        let fs = FieldSelector::parse("spec.nodeName==").unwrap();
        assert!(fs.matches(|_| None) && !fs.matches(node1));
        let fs = FieldSelector::parse("spec.nodeName!=").unwrap();
        assert!(!fs.matches(|_| None) && fs.matches(node1));
        let fs = FieldSelector::parse("a=!b").unwrap();
        assert!(fs.matches(|_| Some("!b")));
    }

    #[test]
    fn field_selector_empty_and_fields() {
        for s in ["", ",", ",,"] {
            let fs = FieldSelector::parse(s).unwrap();
            assert!(fs.is_empty() && fs.matches(|_| None) && fs.fields().is_empty());
        }
        let fs = FieldSelector::parse("b=1,a=2,b!=3,").unwrap();
        assert!(!fs.is_empty());
        assert_eq!(fs.fields(), vec!["a", "b"]);
        assert_eq!(fs, FieldSelector::parse("a=2,b=1,b!=3").unwrap());
    }

    #[test]
    fn field_selector_escapes() {
        let fs = FieldSelector::parse(r"metadata.name=a\,b\=c\\d,x=y").unwrap();
        assert_eq!(fs.fields(), vec!["metadata.name", "x"]);
        assert!(fs.matches(|f| Some(if f == "x" { "y" } else { r"a,b=c\d" })));
        let err = |s| FieldSelector::parse(s).unwrap_err();
        let msg = r"invalid field selector: invalid escape sequence: \x";
        assert_eq!(err(r"a=b\x").to_string(), msg);
        assert_eq!(err(r"a=b\"), SelectorError::InvalidEscape(r"\".into()));
        let msg = "invalid field selector: unescaped character in value: =";
        assert_eq!(err("a=b=c").to_string(), msg);
    }

    #[test]
    fn field_selector_errors() {
        let err = FieldSelector::parse("metadata.name=x,foo").unwrap_err();
        let msg = "invalid selector: 'metadata.name=x,foo'; can't understand 'foo'";
        assert_eq!(err.to_string(), msg);
        for s in ["a", " ", "a!b", "a<b", "a>b", "ü", r"a\,b", "x=1,!"] {
            let res = FieldSelector::parse(s);
            assert!(matches!(res, Err(SelectorError::FieldTerm { .. })), "{s:?}");
        }
        assert!(FieldSelector::parse("ключ=значение").is_ok());
    }
}
