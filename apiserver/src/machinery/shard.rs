//! Server-side sharded list and watch (KEP-5866, Kubernetes 1.36 alpha,
//! feature gate `ShardedListAndWatch`): the `shardSelector` list option.
//!
//! A replica of a sharded controller lists and watches only its slice of a
//! collection, instead of every replica receiving everything and dropping
//! what is not its own:
//!
//! ```text
//! GET /api/v1/configmaps?shardSelector=shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')
//! ```
//!
//! An object matches when the 64-bit FNV-1a hash of the field's text (its
//! uid, or its namespace) lies in `[start, end)` of any of the ranges,
//! joined with `||`; bounds are `0x` and 16 lowercase hex digits, or
//! `0x10000000000000000` (2^64) for an end. A LIST answers with the
//! selector as requested in `metadata.shardInfo.selector` (on every page);
//! a WATCH filters its events — initial events, resumption from a
//! resourceVersion, every later event — and passes bookmarks through
//! (JSON, Table and metadata-only lists echo; a protobuf list does not yet:
//! the protobuf schema's `ListMeta` predates `shardInfo`). Uid
//! and namespace never change, so an object never moves between shards.
//!
//! As kube-apiserver with the gate off, a server started without
//! [`ServerConfig::sharded_list_and_watch`](crate::ServerConfig::sharded_list_and_watch)
//! ignores the option (everything, no `shardInfo`): a client that sees no
//! echo filters for itself with [`ShardSelector::matches_value`].
//!
//! kube-apiserver parses the selector as a CEL expression and accepts only
//! `shardRange` calls and `||`; this parser accepts exactly that language
//! (single- or double-quoted bounds, any whitespace between tokens) with the
//! same messages. A malformed selector is a 400 BadRequest here (which
//! status kube-apiserver answers with was not confirmed from its source).

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;

/// The fields a shard range may hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardField {
    /// `object.metadata.uid`.
    Uid,
    /// `object.metadata.namespace` (cluster-scoped objects hash `""`).
    Namespace,
}

impl ShardField {
    /// As written in a selector.
    #[must_use]
    pub fn path(self) -> &'static str {
        match self {
            ShardField::Uid => "object.metadata.uid",
            ShardField::Namespace => "object.metadata.namespace",
        }
    }
}

/// A parsed `shardSelector`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardSelector {
    field: ShardField,
    /// `[start, end)`, as u128 so that an end of 2^64 fits.
    ranges: Vec<(u128, u128)>,
    /// As requested (what `shardInfo.selector` echoes).
    text: String,
}

/// Why a `shardSelector` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    /// Blank.
    #[error("empty shard selector is not allowed; omit the parameter for unfiltered lists")]
    Empty,
    /// Something other than `shardRange(...)` and `||`.
    #[error("unsupported function {0:?}; only shardRange() and || are allowed")]
    Unsupported(String),
    /// A field that cannot be hashed.
    #[error(
        "unsupported shard field {0:?}; only object.metadata.uid and object.metadata.namespace are allowed"
    )]
    Field(String),
    /// Ranges over different fields.
    #[error("all shard ranges must use the same field, got {0:?} and {1:?}")]
    MixedFields(&'static str, &'static str),
    /// A bound that is not `0x` and 16 lowercase hex digits.
    #[error("{which} must be a 0x-prefixed 16-digit hex value, got {got:?}{hint}")]
    Bound {
        /// `hexStart` or `hexEnd`.
        which: &'static str,
        /// The literal.
        got: String,
        /// A suggestion, when the digits were merely too few.
        hint: String,
    },
    /// `start >= end`.
    #[error("hexStart must be less than hexEnd, got {0:?} and {1:?}")]
    Order(String, String),
    /// Anything else that does not parse.
    #[error("invalid shard selector {0:?}: {1}")]
    Syntax(String, &'static str),
}

impl ShardSelector {
    /// Parse a `shardSelector`.
    ///
    /// # Errors
    /// A [`ShardError`] saying what is wrong, worded as kube-apiserver's.
    pub fn parse(s: &str) -> Result<Self, ShardError> {
        let text = s.trim();
        if text.is_empty() {
            return Err(ShardError::Empty);
        }
        let mut field = None;
        let mut ranges = Vec::new();
        for term in text.split("||") {
            let (f, start, end) = range(term.trim(), text)?;
            match field {
                Some(prev) if prev != f => {
                    return Err(ShardError::MixedFields(
                        ShardField::path(prev),
                        ShardField::path(f),
                    ));
                }
                _ => field = Some(f),
            }
            ranges.push((start, end));
        }
        Ok(ShardSelector {
            field: field.expect("split yields at least one term"),
            ranges,
            text: s.to_string(),
        })
    }

    /// The field it hashes.
    #[must_use]
    pub fn field(&self) -> ShardField {
        self.field
    }

    /// The selector as requested (echoed in `shardInfo.selector`).
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether an object whose field (uid or namespace, per
    /// [`ShardSelector::field`]) has the text `value` is in the shard.
    #[must_use]
    pub fn matches_value(&self, value: &str) -> bool {
        self.matches_hash(hash(value))
    }

    /// Whether a field whose [`hash`] is `h` is in the shard.
    #[must_use]
    pub fn matches_hash(&self, h: u64) -> bool {
        let h = u128::from(h);
        self.ranges
            .iter()
            .any(|&(start, end)| start <= h && h < end)
    }
}

impl fmt::Display for ShardSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// KEP-5866's hash of a field's text: 64-bit FNV-1a over its bytes.
#[must_use]
pub fn hash(value: &str) -> u64 {
    ward_base::fnv1a(value.as_bytes())
}

/// [`hash`] of a value's `Display` text (a uid), without building it: a
/// sharded watch hashes every event it is offered.
#[must_use]
pub fn hash_display(value: impl fmt::Display) -> u64 {
    use fmt::Write;
    let mut h = ward_base::Fnv1a::default();
    write!(h, "{value}").expect("hashing never fails");
    h.finish()
}

/// One `shardRange(<path>, '<start>', '<end>')`.
fn range(term: &str, all: &str) -> Result<(ShardField, u128, u128), ShardError> {
    let syntax = |why| ShardError::Syntax(all.to_string(), why);
    let (name, rest) = term.split_once('(').ok_or_else(|| {
        if term.is_empty() {
            syntax("an empty term around ||")
        } else {
            ShardError::Unsupported(term.to_string())
        }
    })?;
    let name = name.trim();
    if name != "shardRange" {
        return Err(ShardError::Unsupported(name.to_string()));
    }
    let args = rest
        .trim_end()
        .strip_suffix(')')
        .ok_or_else(|| syntax("shardRange( is not closed"))?;
    let args: Vec<&str> = args.split(',').map(str::trim).collect();
    let [path, start, end] = args[..] else {
        return Err(syntax("shardRange takes a field and two bounds"));
    };
    let field = match path {
        "object.metadata.uid" => ShardField::Uid,
        "object.metadata.namespace" => ShardField::Namespace,
        other => return Err(ShardError::Field(other.to_string())),
    };
    let start_text = literal(start).ok_or_else(|| syntax("a bound is not a quoted string"))?;
    let end_text = literal(end).ok_or_else(|| syntax("a bound is not a quoted string"))?;
    let start = bound("hexStart", start_text, false)?;
    let end = bound("hexEnd", end_text, true)?;
    if start >= end {
        return Err(ShardError::Order(start_text.into(), end_text.into()));
    }
    Ok((field, start, end))
}

/// The text of a CEL string literal in single or double quotes.
fn literal(s: &str) -> Option<&str> {
    ['\'', '"'].into_iter().find_map(|q| {
        s.strip_prefix(q)
            .and_then(|r| r.strip_suffix(q))
            .filter(|inner| !inner.contains(q))
    })
}

/// `0x` and 16 lowercase hex digits; for an end also 2^64.
fn bound(which: &'static str, text: &str, end: bool) -> Result<u128, ShardError> {
    const TWO_TO_64: &str = "0x10000000000000000";
    if end && text == TWO_TO_64 {
        return Ok(1u128 << 64);
    }
    let digits = text.strip_prefix("0x").unwrap_or("");
    let hex = |d: &str| d.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if digits.len() == 16 && hex(digits) {
        return Ok(u128::from(
            u64::from_str_radix(digits, 16).expect("16 lowercase hex digits"),
        ));
    }
    let hint = if !digits.is_empty() && digits.len() < 16 && hex(digits) {
        format!(" (did you mean \"0x{digits:0>16}\"?)")
    } else {
        String::new()
    };
    Err(ShardError::Bound {
        which,
        got: text.to_string(),
        hint,
    })
}

/// Selectors parsed before, by their text: a sharded controller sends the
/// same selector on every LIST and WATCH until its slots change, and
/// parsing it on each request was 6% of a sharded simulation's
/// instructions (#61). Holds at most [`SelectorCache::MAX`] texts (all are
/// forgotten when it is full).
#[derive(Debug, Default)]
pub(crate) struct SelectorCache(Mutex<HashMap<String, Result<ShardSelector, ShardError>>>);

impl SelectorCache {
    /// How many selector texts it keeps.
    pub(crate) const MAX: usize = 64;

    /// [`ShardSelector::parse`] of `s`, parsed once.
    pub(crate) fn parse(&self, s: &str) -> Result<ShardSelector, ShardError> {
        let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(parsed) = seen.get(s) {
            return parsed.clone();
        }
        let parsed = ShardSelector::parse(s);
        if seen.len() >= Self::MAX {
            seen.clear();
        }
        seen.insert(s.to_string(), parsed.clone());
        parsed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HALF: &str =
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";

    #[test]
    fn the_hash_is_fnv1a_64_of_the_text() {
        assert_eq!(hash(""), 0xcbf2_9ce4_8422_2325, "the offset basis");
        assert_eq!(hash("a"), 0xaf63_dc4c_8601_ec8c);
        let uid = "943ff9fc-99de-4f03-8000-00000000000c";
        assert_eq!(hash_display(uid), hash(uid));
    }

    #[test]
    fn ranges_are_start_inclusive_end_exclusive_and_joined_by_or() {
        let s = ShardSelector::parse(HALF).unwrap();
        assert_eq!(s.field(), ShardField::Uid);
        assert_eq!(s.as_str(), HALF);
        // hash("a") = 0xaf63.. is in the upper half, hash("") = 0xcbf2.. too.
        assert!(!s.matches_value("a"));
        let upper =
            "shardRange(object.metadata.uid, \"0x8000000000000000\", \"0x10000000000000000\")";
        assert!(ShardSelector::parse(upper).unwrap().matches_value("a"));
        let both = format!("  {HALF} ||{upper}  ");
        let s = ShardSelector::parse(&both).unwrap();
        assert!(s.matches_value("a") && s.matches_value("") && s.matches_value("x"));
        assert_eq!(s.to_string(), both, "echoed as requested");
        let exact = format!(
            "shardRange(object.metadata.namespace, '0x{:016x}', '0x{:016x}')",
            hash("team-a"),
            hash("team-a") + 1
        );
        let s = ShardSelector::parse(&exact).unwrap();
        assert!(s.matches_value("team-a") && !s.matches_value("team-b"));
    }

    #[test]
    fn malformed_selectors_say_what_is_wrong() {
        let cases: &[(&str, &str)] = &[
            ("  ", "empty shard selector is not allowed"),
            (
                "hash(object.metadata.uid) > 3",
                "unsupported function \"hash\"",
            ),
            (
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') && true",
                "invalid shard selector",
            ),
            (
                "shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')",
                "unsupported shard field \"object.metadata.name\"",
            ),
            (
                "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
                "hexStart must be a 0x-prefixed 16-digit hex value, got \"0x0\" (did you mean \"0x0000000000000000\"?)",
            ),
            (
                "shardRange(object.metadata.uid, '0x0000000000000000', '0X8000000000000000')",
                "hexEnd must be a 0x-prefixed 16-digit hex value, got \"0X8000000000000000\"",
            ),
            (
                "shardRange(object.metadata.uid, '0x8000000000000000', '0x8000000000000000')",
                "hexStart must be less than hexEnd",
            ),
            (
                "shardRange(object.metadata.uid, 0, '0x8000000000000000')",
                "a bound is not a quoted string",
            ),
            (
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')",
                "all shard ranges must use the same field, got \"object.metadata.uid\" and \"object.metadata.namespace\"",
            ),
            (
                "shardRange(object.metadata.uid, '0x0000000000000000')",
                "takes a field and two bounds",
            ),
        ];
        for (sel, want) in cases {
            let e = ShardSelector::parse(sel).unwrap_err().to_string();
            assert!(e.contains(want), "{sel}: {e}");
        }
    }

    #[test]
    fn the_cache_answers_as_parse_does() {
        let cache = SelectorCache::default();
        let ok = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";
        for s in [ok, ok, "", "", "nonsense(", ok] {
            assert_eq!(cache.parse(s), ShardSelector::parse(s), "{s:?}");
        }
        for i in 0..=SelectorCache::MAX {
            let _ = cache.parse(&format!("x{i}"));
        }
        assert!(cache.0.lock().unwrap().len() <= SelectorCache::MAX);
        assert_eq!(cache.parse(ok), ShardSelector::parse(ok));
    }
}
