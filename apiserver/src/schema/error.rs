//! Field errors as apimachinery's `field.Error` prints them
//! (`spec.replicas: Invalid value: -1: ...`), and the paths they name.

use std::fmt;

use serde_json::Value;

/// A field path as apimachinery's `field.Path` prints it: `.name` for a
/// child, `[key]` for a map key, `[i]` for a list index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Path(String);

impl Path {
    /// A path starting at `root` (e.g. `spec`), or empty.
    #[must_use]
    pub fn new(root: &str) -> Path {
        Path(root.to_string())
    }

    /// The child field `name`.
    #[must_use]
    pub fn child(&self, name: &str) -> Path {
        if self.0.is_empty() {
            Path(name.to_string())
        } else {
            Path(format!("{}.{name}", self.0))
        }
    }

    /// The map key `key` (`[key]`).
    #[must_use]
    pub fn key(&self, key: &str) -> Path {
        Path(format!("{}[{key}]", self.0))
    }

    /// The list index `i` (`[i]`).
    #[must_use]
    pub fn index(&self, i: usize) -> Path {
        Path(format!("{}[{i}]", self.0))
    }

    /// The path as printed.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What kind of field error (apimachinery's `field.ErrorType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// `Required value`.
    Required,
    /// `Invalid value`.
    Invalid,
    /// `Unsupported value` (with the supported ones).
    NotSupported,
    /// `Forbidden`.
    Forbidden,
    /// `Duplicate value`.
    Duplicate,
    /// `Too long`.
    TooLong,
    /// `Too many`.
    TooMany,
}

impl FieldErrorKind {
    /// The `reason` of a `metav1.StatusCause`.
    #[must_use]
    pub fn cause(self) -> &'static str {
        match self {
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::Invalid => "FieldValueInvalid",
            FieldErrorKind::NotSupported => "FieldValueNotSupported",
            FieldErrorKind::Forbidden => "FieldValueForbidden",
            FieldErrorKind::Duplicate => "FieldValueDuplicate",
            FieldErrorKind::TooLong => "FieldValueTooLong",
            FieldErrorKind::TooMany => "FieldValueTooMany",
        }
    }
}

/// One field error.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// Its kind.
    pub kind: FieldErrorKind,
    /// The field.
    pub path: String,
    /// The value printed after the kind (`None`: omitted, as apimachinery
    /// omits it for Required, Forbidden and Too long).
    pub value: Option<Value>,
    /// The detail after the value.
    pub detail: String,
}

impl FieldError {
    fn new(kind: FieldErrorKind, path: &Path, value: Option<Value>, detail: String) -> Self {
        FieldError {
            kind,
            path: path.to_string(),
            value,
            detail,
        }
    }

    /// `Required value`, with an optional detail.
    #[must_use]
    pub fn required(path: &Path, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorKind::Required, path, None, detail.into())
    }

    /// `Invalid value: <value>: <detail>`.
    #[must_use]
    pub fn invalid(path: &Path, value: Value, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorKind::Invalid, path, Some(value), detail.into())
    }

    /// `Forbidden: <detail>`.
    #[must_use]
    pub fn forbidden(path: &Path, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorKind::Forbidden, path, None, detail.into())
    }

    /// `Unsupported value: <value>: supported values: "a", "b"`.
    #[must_use]
    pub fn not_supported(path: &Path, value: Value, supported: &[String]) -> Self {
        let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        let detail = if list.is_empty() {
            String::new()
        } else {
            format!("supported values: {}", list.join(", "))
        };
        Self::new(FieldErrorKind::NotSupported, path, Some(value), detail)
    }

    /// `Duplicate value: <value>`.
    #[must_use]
    pub fn duplicate(path: &Path, value: Value) -> Self {
        Self::new(FieldErrorKind::Duplicate, path, Some(value), String::new())
    }

    /// `Too long: may not be more than <max> bytes`.
    #[must_use]
    pub fn too_long(path: &Path, max: u64) -> Self {
        let unit = if max == 1 { "byte" } else { "bytes" };
        Self::new(
            FieldErrorKind::TooLong,
            path,
            None,
            format!("may not be more than {max} {unit}"),
        )
    }

    /// `Too many: <actual>: must have at most <max> items`.
    #[must_use]
    pub fn too_many(path: &Path, actual: usize, max: u64) -> Self {
        Self::new(
            FieldErrorKind::TooMany,
            path,
            Some(Value::from(actual)),
            format!("must have at most {max} items"),
        )
    }

    /// The `metav1.StatusCause` of this error.
    #[must_use]
    pub fn cause(&self) -> Value {
        serde_json::json!({
            "reason": self.kind.cause(),
            "message": self.body(),
            "field": self.path,
        })
    }

    /// The error without its path: `Invalid value: -1: ...`.
    #[must_use]
    pub fn body(&self) -> String {
        let head = match self.kind {
            FieldErrorKind::Required => "Required value",
            FieldErrorKind::Invalid => "Invalid value",
            FieldErrorKind::NotSupported => "Unsupported value",
            FieldErrorKind::Forbidden => "Forbidden",
            FieldErrorKind::Duplicate => "Duplicate value",
            FieldErrorKind::TooLong => "Too long",
            FieldErrorKind::TooMany => "Too many",
        };
        let mut s = head.to_string();
        if let Some(v) = &self.value {
            s.push_str(": ");
            s.push_str(&print_value(v));
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

/// A value as apimachinery prints it in an error: strings quoted, numbers
/// and booleans bare, anything else as JSON (`null` too, since 1.34's
/// apimachinery; it printed `"null"` before).
fn print_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.body())
    }
}

/// kube-apiserver's 422 for a list of field errors: one error printed
/// alone, several as `[a, b]`, each also a cause in `details`.
#[must_use]
pub fn to_api_error(
    qualified_kind: &str,
    group: &str,
    kind: &str,
    name: &str,
    errors: &[FieldError],
) -> crate::machinery::status::ApiError {
    let list = match errors {
        [one] => one.to_string(),
        many => format!(
            "[{}]",
            many.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut e = crate::machinery::status::ApiError::invalid(qualified_kind, name, list);
    e.details = Some(serde_json::json!({
        "name": name, "group": group, "kind": kind,
        "causes": errors.iter().map(FieldError::cause).collect::<Vec<_>>(),
    }));
    e
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn errors_print_as_apimachinery_prints_them() {
        let p = Path::new("spec").child("replicas");
        let e = FieldError::invalid(
            &p,
            json!(-1),
            "spec.replicas in body should be greater than or equal to 0",
        );
        assert_eq!(
            e.to_string(),
            "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0"
        );
        let p = Path::new("spec")
            .child("versions")
            .index(0)
            .child("schema")
            .child("openAPIV3Schema")
            .child("properties")
            .key("spec")
            .child("type");
        assert_eq!(
            FieldError::required(&p, "must not be empty for specified object fields").to_string(),
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields"
        );
        assert_eq!(
            FieldError::required(&Path::new("spec").child("x"), "").to_string(),
            "spec.x: Required value"
        );
        assert_eq!(
            FieldError::not_supported(&Path::new("m"), json!("c"), &["a".into(), "b".into()])
                .to_string(),
            "m: Unsupported value: \"c\": supported values: \"a\", \"b\""
        );
        assert_eq!(
            FieldError::too_long(&Path::new("n"), 5).to_string(),
            "n: Too long: may not be more than 5 bytes"
        );
        assert_eq!(
            FieldError::too_many(&Path::new("l"), 3, 2).to_string(),
            "l: Too many: 3: must have at most 2 items"
        );
        assert_eq!(
            FieldError::duplicate(&Path::new("l").index(1), json!({"name": "a"})).to_string(),
            "l[1]: Duplicate value: {\"name\":\"a\"}"
        );
    }

    #[test]
    fn several_errors_are_one_422_with_causes() {
        let errs = [
            FieldError::required(&Path::new("spec").child("a"), ""),
            FieldError::invalid(&Path::new("spec").child("b"), json!("x"), "bad"),
        ];
        let e = to_api_error("Widget.example.dev", "example.dev", "Widget", "w", &errs);
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            "Widget.example.dev \"w\" is invalid: [spec.a: Required value, spec.b: Invalid value: \"x\": bad]"
        );
        let causes = &e.details.unwrap()["causes"];
        assert_eq!(causes[1]["reason"], "FieldValueInvalid");
        assert_eq!(causes[1]["field"], "spec.b");
    }
}
