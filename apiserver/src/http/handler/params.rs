//! Query parameters, decoded and validated the way kube-apiserver does it,
//! before anything is read or written.
//!
//! Kubernetes turns a request's query into typed options in two steps, and
//! so does this module:
//!
//! 1. **Decoding** (400 BadRequest): integers must parse (`limit=abc`,
//!    `timeoutSeconds=`, `gracePeriodSeconds=1.5`), booleans follow
//!    apimachinery's rule (absent, `0` or `false` in any case is false;
//!    anything else, even an empty value, is true), a repeated parameter
//!    counts by its first value, selectors must parse, a `continue` token
//!    must decode, a `resourceVersion` must be an unsigned integer.
//! 2. **Validation** (422 Invalid, `ListOptions.meta.k8s.io "" is invalid:
//!    ...`): `resourceVersionMatch` and `sendInitialEvents` combinations,
//!    `fieldManager` length and characters, `force` only on apply,
//!    `dryRun` values, `fieldValidation` values.
//!
//! Each verb's handler takes its options from here, so a verb cannot read a
//! parameter that was not checked first.

use std::time::Duration;

use crate::machinery::status::ApiError;
use crate::registry::fields::FieldValidation;
use crate::storage::store::Commit;

/// The raw query: every `key=value` pair, percent-decoded, in order.
#[derive(Debug, Default)]
pub(super) struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    /// Decode a raw query string (`None`: no query).
    pub(super) fn parse(raw: Option<&str>) -> Self {
        Query {
            pairs: raw
                .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
                .unwrap_or_default(),
        }
    }

    /// The first value of `key`, even when empty (apimachinery reads the
    /// first of a repeated parameter).
    pub(super) fn first(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every `dryRun` value, in order (a list parameter).
    pub(super) fn dry_run(&self) -> Vec<&str> {
        self.pairs
            .iter()
            .filter(|(k, _)| k == "dryRun")
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// A string parameter: absent and empty both mean unset.
    pub(super) fn string(&self, key: &str) -> Option<&str> {
        self.first(key).filter(|v| !v.is_empty())
    }

    /// A boolean parameter as apimachinery converts one: None when absent;
    /// `0` and `false` (any case) are false, anything else (even empty) true.
    pub(super) fn flag(&self, key: &str) -> Option<bool> {
        self.first(key)
            .map(|v| !(v == "0" || v.eq_ignore_ascii_case("false")))
    }

    /// An integer parameter: None when absent; present, it must be a
    /// base-10 int64 (an empty value is not one).
    pub(super) fn int(&self, key: &str) -> Result<Option<i64>, ApiError> {
        self.first(key)
            .map(|v| {
                // Go's strconv words it (kube-apiserver's query decoding).
                v.parse::<i64>()
                    .map_err(|e| ApiError::bad_request(strconv("ParseInt", v, &e)))
            })
            .transpose()
    }
}

/// Parse a `resourceVersion` as the storage does: empty and `0` mean "any",
/// anything else must be an unsigned integer (400 otherwise, in
/// kube-apiserver's words: a field error around Go's `strconv.ParseUint`).
pub(super) fn resource_version(rv: Option<&str>) -> Result<Option<u64>, ApiError> {
    match rv {
        None | Some("") => Ok(None),
        Some(rv) => rv.parse::<u64>().map(Some).map_err(|e| {
            ApiError::bad_request(format!(
                "invalid resource version: resourceVersion: Invalid value: {rv:?}: {}",
                strconv("ParseUint", rv, &e)
            ))
        }),
    }
}

/// Go's `strconv.<func>` error for `v` (`strconv.ParseInt: parsing "x":
/// invalid syntax`).
fn strconv(func: &str, v: &str, e: &std::num::ParseIntError) -> String {
    let why = match e.kind() {
        std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
            "value out of range"
        }
        _ => "invalid syntax",
    };
    format!("strconv.{func}: parsing {v:?}: {why}")
}

/// `resourceVersionMatch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RvMatch {
    /// `NotOlderThan`.
    NotOlderThan,
    /// `Exact`.
    Exact,
}

/// The options of get: only `resourceVersion`.
#[derive(Debug)]
pub(super) struct GetOptions {
    /// `resourceVersion` (None: the latest).
    pub resource_version: Option<u64>,
}

impl GetOptions {
    pub(super) fn from_query(q: &Query) -> Result<Self, ApiError> {
        Ok(GetOptions {
            resource_version: resource_version(q.first("resourceVersion"))?,
        })
    }
}

/// The options of list, watch and deletecollection (`metav1.ListOptions`).
#[derive(Debug, Default)]
pub(super) struct ListOptions {
    /// `labelSelector` (parsed by the filter).
    pub label_selector: Option<String>,
    /// `fieldSelector` (parsed by the filter).
    pub field_selector: Option<String>,
    /// `watch`.
    pub watch: bool,
    /// `allowWatchBookmarks`.
    pub allow_watch_bookmarks: bool,
    /// `resourceVersion`, parsed (None: absent or empty; `0` is named).
    pub resource_version: Option<u64>,
    /// `resourceVersionMatch`.
    pub resource_version_match: Option<RvMatch>,
    /// `timeoutSeconds`: None when absent or 0 (no timeout, as the real
    /// server's default); a negative value ends a watch at once.
    pub timeout: Option<Duration>,
    /// `limit`: None when absent or not positive (Kubernetes pages only
    /// for a positive limit).
    pub limit: Option<usize>,
    /// The decoded `continue` token: the (namespace, name) to list after.
    pub continue_after: Option<(String, String)>,
    /// The decoded `continue` token's resourceVersion: the snapshot its
    /// list pages through.
    pub continue_rv: Option<u64>,
    /// `sendInitialEvents`.
    pub send_initial_events: Option<bool>,
    /// `shardSelector` (parsed by the filter when the server serves it).
    pub shard_selector: Option<String>,
}

/// Longest watch timeout honoured (about 100 years); longer ones are capped
/// so that now + timeout cannot overflow an `Instant`.
const MAX_TIMEOUT_SECS: i64 = 100 * 366 * 24 * 3600;

impl ListOptions {
    /// Decode (400) and validate (422) the list options of a query.
    pub(super) fn from_query(q: &Query) -> Result<Self, ApiError> {
        let limit = q.int("limit")?;
        let timeout = q.int("timeoutSeconds")?;
        let raw_rv = q.string("resourceVersion");
        let raw_match = q.string("resourceVersionMatch");
        let raw_continue = q.string("continue");
        let mut o = ListOptions {
            label_selector: q.string("labelSelector").map(String::from),
            field_selector: q.string("fieldSelector").map(String::from),
            watch: q.flag("watch").unwrap_or(false),
            allow_watch_bookmarks: q.flag("allowWatchBookmarks").unwrap_or(false),
            send_initial_events: q.flag("sendInitialEvents"),
            shard_selector: q.string("shardSelector").map(String::from),
            limit: limit
                .filter(|l| *l > 0)
                .map(|l| usize::try_from(l).unwrap_or(usize::MAX)),
            timeout: match timeout {
                None | Some(0) => None,
                Some(t) => Some(Duration::from_secs(
                    u64::try_from(t.clamp(0, MAX_TIMEOUT_SECS)).unwrap_or(0),
                )),
            },
            ..ListOptions::default()
        };
        validate_list(&o, raw_rv, raw_match, raw_continue)?;
        o.resource_version_match = match raw_match {
            Some("Exact") => Some(RvMatch::Exact),
            Some(_) => Some(RvMatch::NotOlderThan),
            None => None,
        };
        if let Some(token) = raw_continue {
            let (rv, ns, name) = decode_continue(token)?;
            o.continue_rv = Some(rv);
            o.continue_after = Some((ns, name));
            if raw_rv.is_some_and(|rv| rv != "0") {
                return Err(ApiError::bad_request(
                    "specifying resource version is not allowed when using continue",
                ));
            }
        }
        o.resource_version = resource_version(raw_rv)?;
        Ok(o)
    }

    /// The state a list reads, as kube-apiserver's `ListOptions` semantics
    /// have it: a continued list pages through its first page's snapshot;
    /// `resourceVersion=0` is any state (the latest here); another
    /// resourceVersion is exact with `resourceVersionMatch=Exact`, or
    /// without a match when paging (`limit`), else not older than it.
    pub(super) fn read_at(&self) -> ReadAt {
        if let Some(rv) = self.continue_rv {
            return ReadAt::Continue(rv);
        }
        match (self.resource_version, self.resource_version_match) {
            (None | Some(0), _) => ReadAt::Latest,
            (Some(rv), Some(RvMatch::Exact)) => ReadAt::Exact(rv),
            (Some(rv), None) if self.limit.is_some() => ReadAt::Exact(rv),
            (Some(rv), _) => ReadAt::NotOlderThan(rv),
        }
    }
}

/// Which state a list reads ([`ListOptions::read_at`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ReadAt {
    /// The latest.
    Latest,
    /// The latest, which must be at least this resourceVersion.
    NotOlderThan(u64),
    /// The state at exactly this resourceVersion.
    Exact(u64),
    /// The snapshot a continue token pages through.
    Continue(u64),
}

/// apimachinery's `ValidateListOptions` (with the WatchList feature on).
fn validate_list(
    o: &ListOptions,
    rv: Option<&str>,
    rv_match: Option<&str>,
    cont: Option<&str>,
) -> Result<(), ApiError> {
    let mut errs = Vec::new();
    if o.watch {
        if o.send_initial_events.is_some() && rv_match != Some("NotOlderThan") {
            errs.push(
                "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan".to_string(),
            );
        }
        if let Some(m) = rv_match {
            if o.send_initial_events.is_none() {
                errs.push("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided".into());
            }
            if m != "NotOlderThan" {
                errs.push(format!(
                    "resourceVersionMatch: Unsupported value: {m:?}: supported values: \"NotOlderThan\""
                ));
            }
            if cont.is_some() {
                errs.push("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided".into());
            }
        }
    } else {
        if let Some(m) = rv_match {
            if rv.is_none() {
                errs.push("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided".into());
            }
            if cont.is_some() {
                errs.push("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided".into());
            }
            if m != "Exact" && m != "NotOlderThan" {
                errs.push(format!(
                    "resourceVersionMatch: Unsupported value: {m:?}: supported values: \"Exact\", \"NotOlderThan\", \"\""
                ));
            }
            if m == "Exact" && rv == Some("0") {
                errs.push("resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"".into());
            }
        }
        if o.send_initial_events.is_some() {
            errs.push(
                "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list".into(),
            );
        }
    }
    invalid_options("ListOptions", errs)
}

/// Which write a [`WriteOptions`] belongs to: its validation differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WriteVerb {
    /// create (`CreateOptions`).
    Create,
    /// update (`UpdateOptions`).
    Update,
    /// a JSON, merge or strategic merge patch (`PatchOptions`).
    Patch,
    /// a server-side apply patch (`PatchOptions`).
    Apply,
}

/// The options of create, update and patch (`metav1.CreateOptions`,
/// `UpdateOptions`, `PatchOptions`).
#[derive(Debug)]
pub(super) struct WriteOptions {
    /// `fieldManager` (None when absent or empty).
    pub field_manager: Option<String>,
    /// `force` (apply only).
    pub force: bool,
    /// `dryRun=All`: validate and answer, store nothing.
    pub commit: Commit,
    /// `fieldValidation` (Warn when absent or empty).
    pub field_validation: FieldValidation,
}

/// Longest `fieldManager` accepted, in bytes.
const FIELD_MANAGER_MAX_BYTES: usize = 128;

impl WriteOptions {
    /// Decode and validate the options of one write.
    pub(super) fn from_query(q: &Query, verb: WriteVerb) -> Result<Self, ApiError> {
        let mut errs = Vec::new();
        let manager = q.string("fieldManager");
        let force = q.flag("force");
        match verb {
            WriteVerb::Apply if manager.is_none() => {
                errs.push("fieldManager: Required value: is required for apply patch".into());
            }
            WriteVerb::Patch if force.is_some() => {
                errs.push("force: Forbidden: may not be specified for non-apply patch".into());
            }
            _ => {}
        }
        if let Some(m) = manager {
            errs.extend(field_manager_errors(m));
        }
        errs.extend(dry_run_errors(&q.dry_run()));
        let field_validation = FieldValidation::parse(q.first("fieldValidation"));
        if let (None, Some(v)) = (field_validation, q.first("fieldValidation")) {
            errs.push(format!(
                "fieldValidation: Unsupported value: {v:?}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
            ));
        }
        let kind = match verb {
            WriteVerb::Create => "CreateOptions",
            WriteVerb::Update => "UpdateOptions",
            WriteVerb::Patch | WriteVerb::Apply => "PatchOptions",
        };
        invalid_options(kind, errs)?;
        Ok(WriteOptions {
            field_manager: manager.map(String::from),
            force: force.unwrap_or(false),
            commit: commit_of(&q.dry_run()),
            field_validation: field_validation.unwrap_or_default(),
        })
    }
}

/// apimachinery's `ValidateFieldManager`: at most 128 bytes, printable
/// characters only.
pub(super) fn field_manager_errors(m: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if m.len() > FIELD_MANAGER_MAX_BYTES {
        errs.push(format!(
            "fieldManager: Too long: may not be more than {FIELD_MANAGER_MAX_BYTES} bytes"
        ));
    }
    if let Some((i, c)) = m.char_indices().find(|(_, c)| c.is_control()) {
        errs.push(format!(
            "fieldManager: Invalid value: {m:?}: invalid character U+{:04X} (at position {i})",
            u32::from(c)
        ));
    }
    errs
}

/// `dryRun` (from the query or a DeleteOptions body) may only hold `All`
/// (422 otherwise).
pub(super) fn dry_run_errors(values: &[&str]) -> Vec<String> {
    if values.iter().all(|v| *v == "All") {
        Vec::new()
    } else {
        vec![format!(
            "dryRun: Unsupported value: {values:?}: supported values: \"All\""
        )]
    }
}

/// A valid `dryRun` (every value `All`, checked by [`dry_run_errors`]):
/// a dry run when it holds any value.
pub(super) fn commit_of(values: &[&str]) -> Commit {
    if values.is_empty() {
        Commit::Store
    } else {
        Commit::DryRun
    }
}

/// The options of `metav1.DeleteOptions` that the handler reads, from the
/// body when there is one, else from the query (as kube-apiserver does: a
/// body's options replace the query's entirely).
#[derive(Debug, Default)]
pub(super) struct DeleteOptions {
    /// `gracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
    /// `orphanDependents`.
    pub orphan_dependents: Option<bool>,
    /// `propagationPolicy`.
    pub propagation_policy: Option<String>,
    /// `dryRun=All`.
    pub commit: Commit,
}

impl DeleteOptions {
    /// Decode the query's delete options (400; 422 for a `dryRun` other
    /// than `All`).
    pub(super) fn from_query(q: &Query) -> Result<Self, ApiError> {
        // Decoding (400) comes before validation (422), as in kube-apiserver.
        let grace_period_seconds = q.int("gracePeriodSeconds")?;
        let dry_run = q.dry_run();
        invalid_options("DeleteOptions", dry_run_errors(&dry_run))?;
        Ok(DeleteOptions {
            grace_period_seconds,
            orphan_dependents: q.flag("orphanDependents"),
            propagation_policy: q.string("propagationPolicy").map(String::from),
            commit: commit_of(&dry_run),
        })
    }
}

/// 422 `<Kind>.meta.k8s.io "" is invalid: ...` for a non-empty error list,
/// worded as apimachinery's `NewInvalid` words one.
pub(super) fn invalid_options(kind: &str, errs: Vec<String>) -> Result<(), ApiError> {
    let message = match errs.as_slice() {
        [] => return Ok(()),
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    Err(ApiError::invalid(
        &format!("{kind}.meta.k8s.io"),
        "",
        message,
    ))
}

/// The `continue` token of a page of the snapshot at `rv` that ended at
/// `ns`/`name`.
pub(super) fn encode_continue(rv: u64, ns: &str, name: &str) -> String {
    let raw = format!("{rv}\u{0}{ns}\u{0}{name}");
    raw.bytes().map(|b| format!("{b:02x}")).collect()
}

/// The snapshot's resourceVersion and the `ns`/`name` a `continue` token
/// names (400 for one this server did not make).
pub(super) fn decode_continue(token: &str) -> Result<(u64, String, String), ApiError> {
    let bad = || ApiError::bad_request(format!("continue key is not valid: {token}"));
    if !token.len().is_multiple_of(2) {
        return Err(bad());
    }
    let bytes = (0..token.len())
        .step_by(2)
        .map(|i| {
            token
                .get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(bad)?;
    let s = String::from_utf8(bytes).map_err(|_| bad())?;
    let mut parts = s.splitn(3, '\u{0}');
    let (Some(rv), Some(ns), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    let rv = rv.parse::<u64>().map_err(|_| bad())?;
    // Tokens name the last object of a page: never an empty name.
    if name.is_empty() {
        return Err(bad());
    }
    Ok((rv, ns.to_string(), name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Query {
        Query::parse(Some(s))
    }

    #[test]
    fn booleans_follow_apimachinery() {
        let cases = [
            ("", None),
            ("watch", Some(true)),
            ("watch=", Some(true)),
            ("watch=true", Some(true)),
            ("watch=yes", Some(true)),
            ("watch=1", Some(true)),
            ("watch=0", Some(false)),
            ("watch=false", Some(false)),
            ("watch=FaLsE", Some(false)),
            ("watch=0&watch=1", Some(false)),
        ];
        for (query, want) in cases {
            assert_eq!(q(query).flag("watch"), want, "{query}");
        }
    }

    #[test]
    fn integers_must_parse_and_empty_is_not_one() {
        assert_eq!(q("limit=5").int("limit").unwrap(), Some(5));
        assert_eq!(q("limit=-1").int("limit").unwrap(), Some(-1));
        assert_eq!(q("").int("limit").unwrap(), None);
        for bad in [
            "limit=",
            "limit=abc",
            "limit=1.5",
            "limit=1e3",
            "limit=99999999999999999999",
        ] {
            let e = q(bad).int("limit").unwrap_err();
            assert_eq!(e.code, 400, "{bad}");
        }
    }

    #[test]
    fn list_options_decode_and_validate() {
        let ok = ListOptions::from_query(&q(
            "limit=-3&timeoutSeconds=0&resourceVersion=7&resourceVersionMatch=NotOlderThan",
        ))
        .unwrap();
        assert_eq!(ok.limit, None);
        assert_eq!(ok.timeout, None);
        assert_eq!(ok.resource_version, Some(7));
        assert_eq!(ok.resource_version_match, Some(RvMatch::NotOlderThan));
        let neg = ListOptions::from_query(&q("watch=1&timeoutSeconds=-5")).unwrap();
        assert_eq!(neg.timeout, Some(Duration::ZERO));
        // (query, status) for each refusal.
        let cases = [
            ("resourceVersion=abc", 400),
            ("resourceVersion=-1", 400),
            ("resourceVersion=1.5", 400),
            ("limit=abc", 400),
            ("timeoutSeconds=abc", 400),
            ("timeoutSeconds=", 400),
            ("continue=zz", 400),
            ("continue=6100620a&resourceVersion=5", 400),
            ("resourceVersionMatch=Exact", 422),
            ("resourceVersion=0&resourceVersionMatch=Exact", 422),
            ("resourceVersion=1&resourceVersionMatch=Newest", 422),
            ("sendInitialEvents=true", 422),
            ("watch=1&resourceVersionMatch=NotOlderThan", 422),
            ("watch=1&sendInitialEvents=true", 422),
            (
                "watch=1&sendInitialEvents=true&resourceVersionMatch=Exact",
                422,
            ),
        ];
        for (query, code) in cases {
            let e = ListOptions::from_query(&q(query)).unwrap_err();
            assert_eq!(e.code, code, "{query}: {e}");
        }
        let e = ListOptions::from_query(&q("sendInitialEvents=1")).unwrap_err();
        assert_eq!(
            e.message,
            "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"
        );
    }

    #[test]
    fn write_options_validate_like_the_real_server() {
        let long = "m".repeat(129);
        let cases = [
            (format!("fieldManager={long}"), WriteVerb::Create, 422),
            ("fieldManager=a%00b".into(), WriteVerb::Update, 422),
            ("force=true".into(), WriteVerb::Patch, 422),
            ("force=false".into(), WriteVerb::Patch, 422),
            ("force=true".into(), WriteVerb::Apply, 422),
            ("dryRun=Some".into(), WriteVerb::Create, 422),
            ("dryRun=All&dryRun=x".into(), WriteVerb::Create, 422),
            ("fieldValidation=Loose".into(), WriteVerb::Update, 422),
        ];
        for (query, verb, code) in cases {
            let e = WriteOptions::from_query(&q(&query), verb).unwrap_err();
            assert_eq!(e.code, code, "{query}: {e}");
        }
        let ok = WriteOptions::from_query(&q("fieldManager=kube&force=1"), WriteVerb::Apply);
        let ok = ok.unwrap();
        assert!(ok.force);
        assert_eq!(ok.commit, Commit::Store);
        let dry = WriteOptions::from_query(&q("dryRun=All"), WriteVerb::Create).unwrap();
        assert_eq!(dry.commit, Commit::DryRun);
        let fm = "m".repeat(128);
        assert!(
            WriteOptions::from_query(&q(&format!("fieldManager={fm}")), WriteVerb::Create).is_ok()
        );
        let e = WriteOptions::from_query(&q("force=1"), WriteVerb::Patch).unwrap_err();
        assert_eq!(
            e.message,
            "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"
        );
    }
}
