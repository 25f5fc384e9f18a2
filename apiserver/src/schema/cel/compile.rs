//! Compiling one `x-kubernetes-validations` entry: the checks
//! apiextensions-apiserver makes when a CRD is created or updated, with its
//! messages (see [the module docs](super) for which are verified).

use ::cel::Program;
use serde_json::Value as Json;

use super::cost::{Estimator, Problem, STATIC_ESTIMATED_COST_LIMIT, Shape};
use super::library::ENV;
use super::value::Node;

/// The `reason`s a rule may give.
pub const SUPPORTED_REASONS: [&str; 4] = [
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// Why an entry does not compile: the detail of the error kube-apiserver
/// reports at `...x-kubernetes-validations[j].<field>` (see
/// [`CompileError::field`]) with the type [`CompileError::reason`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// The entry is not an object, or one of its fields has the wrong JSON
    /// type (the request's decoding would have refused it).
    #[error("{field} must be a {want}")]
    Malformed {
        /// The entry's field (`rule`, `message`, ...).
        field: &'static str,
        /// The JSON type it must have.
        want: &'static str,
    },
    /// `rule` is missing or blank.
    #[error("rule is not specified")]
    RuleRequired,
    /// `message` is set but blank.
    #[error("message must be non-empty if specified")]
    MessageEmpty,
    /// `message` has a line break.
    #[error("message must not contain line breaks")]
    MessageLineBreaks,
    /// `rule` has a line break and there is no `message`.
    #[error("message must be specified if rule contains line breaks")]
    MessageRequired,
    /// `messageExpression` is set but blank.
    #[error("messageExpression must be non-empty if specified")]
    MessageExpressionRequired,
    /// `reason` is not one of [`SUPPORTED_REASONS`].
    #[error(
        "Unsupported value: {0:?}: supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\""
    )]
    Reason(String),
    /// `fieldPath` is set but blank.
    #[error("fieldPath must be non-empty if specified")]
    FieldPathEmpty,
    /// `fieldPath` has a line break.
    #[error("fieldPath must not contain line breaks")]
    FieldPathLineBreaks,
    /// `fieldPath` does not name a field of the schema.
    #[error("fieldPath must be a valid path")]
    FieldPath,
    /// The rule does not parse or check: `compilation failed: ERROR:
    /// <input>:line:column: ...`.
    #[error("compilation failed: {0}")]
    Compilation(String),
    /// The message expression does not parse or check.
    #[error("messageExpression compilation failed: {0}")]
    MessageExpression(String),
    /// The rule's estimated cost (times how often it may run) is over
    /// [`STATIC_ESTIMATED_COST_LIMIT`].
    #[error(
        "estimated rule cost exceeds budget by factor of {0} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )]
    Cost(String),
    /// The message expression's estimated cost is over the limit.
    #[error(
        "estimated messageExpression cost exceeds budget by factor of {0} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )]
    MessageExpressionCost(String),
    /// `optionalOldSelf` is set on a rule that does not use `oldSelf`.
    #[error("may not be set if oldSelf is not used in rule")]
    OptionalOldSelfUnused,
}

impl CompileError {
    /// The entry's field the error is about: `rule`, `message`,
    /// `messageExpression`, `reason`, `fieldPath` or `optionalOldSelf`.
    #[must_use]
    pub fn field(&self) -> &'static str {
        match self {
            CompileError::Malformed { field, .. } => field,
            CompileError::RuleRequired | CompileError::Compilation(_) | CompileError::Cost(_) => {
                "rule"
            }
            CompileError::MessageEmpty
            | CompileError::MessageLineBreaks
            | CompileError::MessageRequired => "message",
            CompileError::MessageExpressionRequired
            | CompileError::MessageExpression(_)
            | CompileError::MessageExpressionCost(_) => "messageExpression",
            CompileError::Reason(_) => "reason",
            CompileError::FieldPathEmpty
            | CompileError::FieldPathLineBreaks
            | CompileError::FieldPath => "fieldPath",
            CompileError::OptionalOldSelfUnused => "optionalOldSelf",
        }
    }

    /// The Status cause reason kube-apiserver gives the error:
    /// `FieldValueRequired`, `FieldValueForbidden` (cost),
    /// `FieldValueNotSupported` (reason) or `FieldValueInvalid`.
    #[must_use]
    pub fn reason(&self) -> &'static str {
        match self {
            CompileError::RuleRequired
            | CompileError::MessageRequired
            | CompileError::MessageExpressionRequired => "FieldValueRequired",
            CompileError::Cost(_) | CompileError::MessageExpressionCost(_) => "FieldValueForbidden",
            CompileError::Reason(_) => "FieldValueNotSupported",
            _ => "FieldValueInvalid",
        }
    }
}

/// The entry's fields, checked.
pub(crate) struct Entry {
    pub rule: String,
    pub message: Option<String>,
    pub message_expression: Option<String>,
    pub reason: Option<String>,
    pub field_path: Option<String>,
    pub optional_old_self: Option<bool>,
}

fn opt_str(entry: &Json, field: &'static str) -> Result<Option<String>, CompileError> {
    match entry.get(field) {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(CompileError::Malformed {
            field,
            want: "string",
        }),
    }
}

fn has_newlines(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

/// The entry's fields, with the checks kube makes before compiling.
pub(crate) fn entry(entry: &Json, node: Node<'_>) -> Result<(Entry, Option<String>), CompileError> {
    if !entry.is_object() {
        return Err(CompileError::Malformed {
            field: "rule",
            want: "object",
        });
    }
    let rule = opt_str(entry, "rule")?.unwrap_or_default();
    let message = opt_str(entry, "message")?;
    let message_expression = opt_str(entry, "messageExpression")?;
    let reason = opt_str(entry, "reason")?;
    let field_path = opt_str(entry, "fieldPath")?;
    let optional_old_self = match entry.get("optionalOldSelf") {
        None | Some(Json::Null) => None,
        Some(Json::Bool(b)) => Some(*b),
        Some(_) => {
            return Err(CompileError::Malformed {
                field: "optionalOldSelf",
                want: "boolean",
            });
        }
    };
    let trimmed_msg = message.as_deref().map(str::trim);
    if rule.trim().is_empty() {
        return Err(CompileError::RuleRequired);
    }
    if message.as_deref().is_some_and(|m| !m.is_empty()) && trimmed_msg == Some("") {
        return Err(CompileError::MessageEmpty);
    }
    if trimmed_msg.is_some_and(has_newlines) {
        return Err(CompileError::MessageLineBreaks);
    }
    if has_newlines(rule.trim()) && trimmed_msg.is_none_or(str::is_empty) {
        return Err(CompileError::MessageRequired);
    }
    if message_expression
        .as_deref()
        .is_some_and(|m| !m.is_empty() && m.trim().is_empty())
    {
        return Err(CompileError::MessageExpressionRequired);
    }
    if let Some(r) = &reason
        && !SUPPORTED_REASONS.contains(&r.as_str())
    {
        return Err(CompileError::Reason(r.clone()));
    }
    let mut normalized = None;
    if let Some(p) = &field_path {
        if !p.is_empty() && p.trim().is_empty() {
            return Err(CompileError::FieldPathEmpty);
        }
        if has_newlines(p) {
            return Err(CompileError::FieldPathLineBreaks);
        }
        if !p.is_empty() {
            normalized = Some(valid_field_path(p.trim(), node).ok_or(CompileError::FieldPath)?);
        }
    }
    Ok((
        Entry {
            rule,
            message,
            message_expression: message_expression.filter(|m| !m.trim().is_empty()),
            reason,
            field_path,
            optional_old_self,
        },
        normalized,
    ))
}

/// `path` (`.a.b`, `.a['k']`, `['x.y']`) checked against `node`, as kube's
/// `ValidFieldPath`: a property name or a map key at each step. Returns the
/// path as a field path string (`a.b`, `a[k]`).
pub(crate) fn valid_field_path(path: &str, node: Node<'_>) -> Option<String> {
    let mut out = String::new();
    let mut node = node;
    let mut rest = path;
    while !rest.is_empty() {
        let name: String;
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end == 0 {
                return None;
            }
            name = r[..end].to_owned();
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix("['") {
            let mut s = String::new();
            let mut chars = r.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => match chars.next()?.1 {
                        'n' => s.push('\n'),
                        't' => s.push('\t'),
                        'r' => s.push('\r'),
                        '\'' => s.push('\''),
                        '\\' => s.push('\\'),
                        _ => return None,
                    },
                    '\'' => {
                        end = Some(i);
                        break;
                    }
                    c => s.push(c),
                }
            }
            let end = end?;
            rest = r[end + 1..].strip_prefix(']')?;
            name = s;
        } else {
            return None;
        }
        if let Some(props) = node.properties() {
            node = Node(props.get(&name)?);
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&name);
        } else if let Some(add) = node.additional() {
            node = add;
            out.push_str(&format!("[{name}]"));
        } else {
            return None;
        }
    }
    Some(out)
}

/// `source` parsed and checked against the variables in `vars`.
pub(crate) fn program(source: &str, vars: &[(String, Shape)]) -> Result<(Program, u64), String> {
    // cel-go sets its snippet lines off with " | "; the cel crate with "| ".
    let program = ENV
        .compile(source)
        .map_err(|e| e.to_string().replace("\n| ", "\n | "))?;
    let mut est = Estimator::new(vars.to_vec(), true);
    let (cost, _) = est.estimate(program.expression());
    if let Some(problem) = est.problem {
        let (id, msg) = match problem {
            Problem::UndeclaredReference(id, n) | Problem::UndeclaredFunction(id, n) => (
                id,
                format!("undeclared reference to '{n}' (in container '')"),
            ),
            Problem::UndefinedField(id, f) => (id, format!("undefined field '{f}'")),
        };
        let offset = program
            .source_info()
            .offset_for(id)
            .map_or(0, |(start, _)| start as usize);
        return Err(located(source, offset, &msg));
    }
    Ok((program, cost))
}

/// `msg` at byte `offset` of `source`, as cel-go reports issues.
fn located(source: &str, offset: usize, msg: &str) -> String {
    let offset = offset.min(source.len());
    let before = source.get(..offset).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = before[line_start..].chars().count() + 1;
    let text = source[line_start..].lines().next().unwrap_or("");
    format!(
        "ERROR: <input>:{line}:{col}: {msg}\n | {text}\n | {:.>col$}",
        "^"
    )
}

/// The factor kube reports an estimate over the limit by.
pub(crate) fn exceed_factor(cost: u64) -> String {
    #[allow(clippy::cast_precision_loss)]
    let factor = cost as f64 / STATIC_ESTIMATED_COST_LIMIT as f64;
    if factor > 100.0 {
        "more than 100x".to_owned()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn field_paths_follow_the_schema() {
        let schema = json!({"type": "object", "properties": {
            "a": {"type": "object", "properties": {"b.c": {"type": "string"}}},
            "m": {"type": "object", "additionalProperties": {"type": "string"}}
        }});
        let n = Node(&schema);
        assert_eq!(valid_field_path(".a", n).as_deref(), Some("a"));
        assert_eq!(valid_field_path(".a['b.c']", n).as_deref(), Some("a.b.c"));
        assert_eq!(valid_field_path(".m.key", n).as_deref(), Some("m[key]"));
        assert_eq!(
            valid_field_path(".m['k\\'s']", n).as_deref(),
            Some("m[k's]")
        );
        assert_eq!(valid_field_path(".nope", n), None);
        assert_eq!(valid_field_path("a", n), None);
        assert_eq!(valid_field_path(".a[", n), None);
        assert_eq!(valid_field_path(".a..b", n), None);
    }

    #[test]
    fn locations_are_one_based() {
        assert_eq!(
            located("self.x", 4, "undefined field 'x'"),
            "ERROR: <input>:1:5: undefined field 'x'\n | self.x\n | ....^"
        );
    }

    #[test]
    fn factors_read_as_kube_writes_them() {
        assert_eq!(
            exceed_factor(STATIC_ESTIMATED_COST_LIMIT * 1000),
            "more than 100x"
        );
        assert_eq!(exceed_factor(STATIC_ESTIMATED_COST_LIMIT * 2), "2.0x");
        assert_eq!(exceed_factor(STATIC_ESTIMATED_COST_LIMIT + 1), "1.000000x");
    }
}
