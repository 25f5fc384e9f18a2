//! Validation of object names and labels, following the rules (and the error
//! messages) of `k8s.io/apimachinery/pkg/util/validation`. Checks are written
//! by hand; the regular expressions quoted in messages are only informative.

use serde_json::{Map, Value};

const DNS1123_SUBDOMAIN_MAX: usize = 253;
const DNS1123_LABEL_MAX: usize = 63;
const QUALIFIED_NAME_MAX: usize = 63;
const LABEL_VALUE_MAX: usize = 63;

const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// Why a name or a label map failed validation. The `Display` text matches the
/// message the real kube-apiserver reports for the same problem.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ValidationError {
    /// The name is longer than `max` bytes.
    #[error("must be no more than {max} characters")]
    TooLong {
        /// The maximum allowed length.
        max: usize,
    },
    /// The name is not a lowercase RFC 1123 subdomain.
    #[error("{}", DNS1123_SUBDOMAIN_MSG)]
    NotDns1123Subdomain,
    /// The name is not a lowercase RFC 1123 label.
    #[error("{}", DNS1123_LABEL_MSG)]
    NotDns1123Label,
    /// A label key is not a valid qualified name.
    #[error("metadata.labels: Invalid value: {key:?}: {reason}")]
    InvalidLabelKey {
        /// The offending key.
        key: String,
        /// All reasons, joined with "; ".
        reason: String,
    },
    /// A label value is not a valid label value.
    #[error("metadata.labels: Invalid value: {value:?}: {reason}")]
    InvalidLabelValue {
        /// The key the value belongs to.
        key: String,
        /// The offending value.
        value: String,
        /// All reasons, joined with "; ".
        reason: String,
    },
    /// A label value in the JSON object is not a string.
    #[error("metadata.labels: Invalid value: {key:?}: label value must be a string")]
    NonStringLabelValue {
        /// The key whose value is not a string.
        key: String,
    },
}

/// DNS-1123 subdomain (<=253 chars, lowercase alnum, '-' and '.', alnum at both
/// ends of every dot-separated part) — used for most object names. When both
/// the length and the format are wrong, the length error is reported.
pub fn validate_dns1123_subdomain(name: &str) -> Result<(), ValidationError> {
    if name.len() > DNS1123_SUBDOMAIN_MAX {
        return Err(ValidationError::TooLong {
            max: DNS1123_SUBDOMAIN_MAX,
        });
    }
    if !is_dns1123_subdomain(name) {
        return Err(ValidationError::NotDns1123Subdomain);
    }
    Ok(())
}

/// DNS-1123 label (<=63 chars, lowercase alnum and '-', alnum at both ends) —
/// used for namespace names and services. When both the length and the format
/// are wrong, the length error is reported.
pub fn validate_dns1123_label(name: &str) -> Result<(), ValidationError> {
    if name.len() > DNS1123_LABEL_MAX {
        return Err(ValidationError::TooLong {
            max: DNS1123_LABEL_MAX,
        });
    }
    if !is_dns1123_label(name) {
        return Err(ValidationError::NotDns1123Label);
    }
    Ok(())
}

/// Label map validation: every key must be a qualified name (optional DNS-1123
/// subdomain prefix and '/', then a 1..=63 char name) and every value a string
/// that is a valid label value. Returns the first problem found.
pub fn validate_labels(labels: &Map<String, Value>) -> Result<(), ValidationError> {
    for (key, value) in labels {
        let errs = label_key_errors(key);
        if !errs.is_empty() {
            return Err(ValidationError::InvalidLabelKey {
                key: key.clone(),
                reason: errs.join("; "),
            });
        }
        let Value::String(value) = value else {
            return Err(ValidationError::NonStringLabelValue { key: key.clone() });
        };
        let errs = label_value_errors(value);
        if !errs.is_empty() {
            return Err(ValidationError::InvalidLabelValue {
                key: key.clone(),
                value: value.clone(),
                reason: errs.join("; "),
            });
        }
    }
    Ok(())
}

/// Problems with `key` as a label key (apimachinery `IsQualifiedName`); empty if valid.
pub(crate) fn label_key_errors(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let mut parts = key.split('/');
    let (first, second, rest) = (parts.next(), parts.next(), parts.next());
    let name = match (first, second, rest) {
        (Some(name), None, _) => name,
        (Some(prefix), Some(name), None) => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                if prefix.len() > DNS1123_SUBDOMAIN_MAX {
                    errs.push(format!(
                        "prefix part must be no more than {DNS1123_SUBDOMAIN_MAX} characters"
                    ));
                }
                if !is_dns1123_subdomain(prefix) {
                    errs.push(format!("prefix part {DNS1123_SUBDOMAIN_MSG}"));
                }
            }
            name
        }
        _ => {
            return vec![format!(
                "a qualified name {QUALIFIED_NAME_MSG} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > QUALIFIED_NAME_MAX {
        errs.push(format!(
            "name part must be no more than {QUALIFIED_NAME_MAX} characters"
        ));
    }
    if !is_qualified_name_part(name) {
        errs.push(format!("name part {QUALIFIED_NAME_MSG}"));
    }
    errs
}

/// Problems with `value` as a label value (apimachinery `IsValidLabelValue`); empty if valid.
pub(crate) fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX {
        errs.push(format!("must be no more than {LABEL_VALUE_MAX} characters"));
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        errs.push(LABEL_VALUE_MSG.to_string());
    }
    errs
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, without the length limit.
fn is_dns1123_label(s: &str) -> bool {
    let lower_alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match (s.as_bytes().first(), s.as_bytes().last()) {
        (Some(&first), Some(&last)) => {
            lower_alnum(first)
                && lower_alnum(last)
                && s.bytes().all(|b| lower_alnum(b) || b == b'-')
        }
        _ => false,
    }
}

/// Dot-separated DNS-1123 labels, without the length limit.
fn is_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(is_dns1123_label)
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, without the length limit.
fn is_qualified_name_part(s: &str) -> bool {
    match (s.as_bytes().first(), s.as_bytes().last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// A Go duration (`1h30m`, `250ms`, `-1.5s`, `0`) in nanoseconds, as Go's
/// `time.ParseDuration` reads it; None when it is not one (`""`, `1`,
/// `1x`) or does not fit. What a `format: duration` string, a protobuf
/// Duration and a CEL duration all are.
#[must_use]
pub fn go_duration_nanos(s: &str) -> Option<i64> {
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let n: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        total += n * unit;
        rest = &rest[unit_len..];
    }
    let ns = total.round();
    if !ns.is_finite() || ns > i64::MAX as f64 {
        return None;
    }
    #[allow(clippy::cast_possible_truncation)]
    let ns = ns as i64;
    Some(if neg { -ns } else { ns })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn subdomain_valid() {
        for name in [
            "a",
            "0",
            "abc",
            "a-b",
            "a--b",
            "example.com",
            "a.b.c",
            "1-2.3-4",
            &"a".repeat(253),
            &format!("{}.{}", "a".repeat(63), "b".repeat(189)),
        ] {
            assert_eq!(validate_dns1123_subdomain(name), Ok(()), "{name}");
        }
    }

    #[test]
    fn subdomain_invalid() {
        for name in [
            "", "-a", "a-", ".a", "a.", "a..b", "a.-b", "a-.b", "A", "aBc", "a_b", "a b", "a/b",
            "ä", "a\n", "*",
        ] {
            assert_eq!(
                validate_dns1123_subdomain(name),
                Err(ValidationError::NotDns1123Subdomain),
                "{name:?}"
            );
        }
        assert_eq!(
            validate_dns1123_subdomain(&"a".repeat(254)),
            Err(ValidationError::TooLong { max: 253 })
        );
        assert_eq!(
            validate_dns1123_subdomain(&"A".repeat(300)),
            Err(ValidationError::TooLong { max: 253 })
        );
    }

    #[test]
    fn label_valid_and_invalid() {
        for name in ["a", "9", "my-name", "123-abc", &"x".repeat(63)] {
            assert_eq!(validate_dns1123_label(name), Ok(()), "{name}");
        }
        for name in ["", "-a", "a-", "a.b", "A", "a_b", "ü"] {
            assert_eq!(
                validate_dns1123_label(name),
                Err(ValidationError::NotDns1123Label),
                "{name:?}"
            );
        }
        assert_eq!(
            validate_dns1123_label(&"x".repeat(64)),
            Err(ValidationError::TooLong { max: 63 })
        );
    }

    #[test]
    fn messages_match_apiserver() {
        assert_eq!(
            ValidationError::NotDns1123Subdomain.to_string(),
            r"a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        );
        assert_eq!(
            ValidationError::NotDns1123Label.to_string(),
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
        );
        assert_eq!(
            ValidationError::TooLong { max: 253 }.to_string(),
            "must be no more than 253 characters"
        );
    }

    #[test]
    fn label_keys() {
        for key in [
            "a",
            "A",
            "app",
            "My_Name.x-1",
            "example.com/app",
            "kubernetes.io/metadata.name",
            &"k".repeat(63),
            &format!("{}/{}", "p".repeat(253), "n".repeat(63)),
        ] {
            assert!(label_key_errors(key).is_empty(), "{key}");
        }
        assert_eq!(
            label_key_errors(""),
            vec![
                "name part must be non-empty".to_string(),
                format!("name part {QUALIFIED_NAME_MSG}")
            ]
        );
        assert_eq!(
            label_key_errors(&"k".repeat(64)),
            vec!["name part must be no more than 63 characters"]
        );
        assert_eq!(
            label_key_errors("/a"),
            vec!["prefix part must be non-empty"]
        );
        assert_eq!(
            label_key_errors(&format!("{}/a", "p".repeat(254))),
            vec!["prefix part must be no more than 253 characters"]
        );
        assert_eq!(
            label_key_errors("Example.com/a"),
            vec![format!("prefix part {DNS1123_SUBDOMAIN_MSG}")]
        );
        assert_eq!(label_key_errors("a/b/c").len(), 1);
        assert!(label_key_errors("a/b/c")[0].starts_with("a qualified name must consist"));
        for key in ["-a", "a-", "_a", "a b", "ключ", "a/", "a/-b", "a:b"] {
            assert!(!label_key_errors(key).is_empty(), "{key:?}");
        }
    }

    #[test]
    fn label_values() {
        for v in [
            "",
            "a",
            "MyValue",
            "my_value",
            "12345",
            "a.b-c_d",
            &"v".repeat(63),
        ] {
            assert!(label_value_errors(v).is_empty(), "{v:?}");
        }
        assert_eq!(label_value_errors("-a"), vec![LABEL_VALUE_MSG]);
        for v in ["a-", ".a", "a b", "a/b", "ü", "+5"] {
            assert_eq!(label_value_errors(v), vec![LABEL_VALUE_MSG], "{v:?}");
        }
        assert_eq!(
            label_value_errors(&"v".repeat(64)),
            vec!["must be no more than 63 characters"]
        );
        assert_eq!(label_value_errors(&format!("{}-", "v".repeat(64))).len(), 2);
    }

    #[test]
    fn label_maps() {
        assert_eq!(validate_labels(&Map::new()), Ok(()));
        assert_eq!(
            validate_labels(&labels(
                json!({"app": "web", "example.com/tier": "", "x": "1"})
            )),
            Ok(())
        );
        let err = validate_labels(&labels(json!({"app": "web", "-bad": "x"}))).unwrap_err();
        assert!(matches!(&err, ValidationError::InvalidLabelKey { key, .. } if key == "-bad"));
        assert!(
            err.to_string()
                .starts_with("metadata.labels: Invalid value: \"-bad\": name part must consist")
        );
        assert_eq!(
            validate_labels(&labels(json!({"app": "bad value"}))),
            Err(ValidationError::InvalidLabelValue {
                key: "app".into(),
                value: "bad value".into(),
                reason: LABEL_VALUE_MSG.into(),
            })
        );
        for v in [
            json!(1),
            json!(true),
            json!(null),
            json!(["a"]),
            json!({"a": "b"}),
        ] {
            assert_eq!(
                validate_labels(&labels(json!({ "app": v }))),
                Err(ValidationError::NonStringLabelValue { key: "app".into() })
            );
        }
        let err = validate_labels(&labels(json!({"app": "v".repeat(64)}))).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "metadata.labels: Invalid value: \"{}\": must be no more than 63 characters",
                "v".repeat(64)
            )
        );
    }
}
