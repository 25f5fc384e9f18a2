//! Optimistic-concurrency patches and deletes that re-decide on fresh state.
//!
//! The race it stops (whereabouts: a stale decision replayed under a fresh rv):
//!
//! ```text
//! 1. reconciler: GET pool @R1 (47 -> default/web-2), judges web-2 dead: "remove 47"
//! 2. CNI ADD elsewhere: PATCH pool [test rv R1, replace /spec/allocations/47 {podref: default/web-9}] -> R2
//! 3. reconciler: PATCH [test rv R1, remove /spec/allocations/47] -> 422 (test failed)
//! 4. naive retry: GET pool @R2, replay "remove 47" with [test rv R2, ...] -> 200:
//!    web-9's live allocation is gone; the next CNI ADD hands .47 out twice
//! ```
//!
//! [`OccPatch::update`] never replays a decision. Each attempt GETs the
//! object, calls `decide` on that fresh object, and sends a JSON patch that
//! first tests what the decision was made on — `/metadata/resourceVersion`,
//! `/metadata/uid`, and the current value at every path it changes — then
//! applies the changes. A conflict (409, or a 422 from one of those tests)
//! means "the world moved": read again and decide again, with jittered
//! exponential backoff, a bounded number of times. [`OccPatch::delete`]
//! does the same for deletes, with `DeleteOptions.preconditions` {uid,
//! resourceVersion} so a same-named successor is never deleted on a
//! predecessor's verdict.
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::Api;
//! use ward_guards::occ_patch::{Change, Decision, OccPatch, json_pointer};
//!
//! # async fn demo(api: Api<ConfigMap>) -> Result<(), ward_guards::occ_patch::OccError> {
//! let dead = |podref: &str| podref == "default/web-2";
//! let outcome = OccPatch::new(api)
//!     .max_attempts(5)
//!     .update("pool", |pool: &ConfigMap| {
//!         // Decided on THIS read of the pool, never on an older one.
//!         match pool.data.as_ref().and_then(|d| d.get("47")) {
//!             Some(owner) if dead(owner) => {
//!                 Decision::Patch(vec![Change::remove(json_pointer(["data", "47"]))])
//!             }
//!             _ => Decision::Nothing,
//!         }
//!     })
//!     .await?;
//! # let _ = outcome;
//! # Ok(()) }
//! ```
//!
//! Adding a key that must be absent: RFC 6902 has no "test absent" (Go's
//! json-patch happens to pass `test` of `null` on a missing key, the
//! Rust crate does not, so it is not portable). The resourceVersion test
//! covers it — the decision saw the key absent at exactly that rv. With
//! [`OccPatch::test_resource_version`] off, the parent's whole current
//! value is tested instead (coarse but sound).

use std::fmt::{self, Debug};
use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

use json_patch::PatchOperation;
use kube::api::{Api, DeleteParams, GetParams, Patch, PatchParams, Preconditions};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use ward_base::{Backoff, Rng};

/// The message a real kube-apiserver gives for ANY failed JSON patch
/// (a failed `test`, or a `remove` of a missing path): 422 Invalid with no
/// detail. Only a re-read can tell whether one of our tests failed.
pub const GENERIC_INVALID_PATCH: &str =
    "the server rejected our request due to an error in our request";

/// Errors of an optimistic-concurrency write.
#[derive(Debug, thiserror::Error)]
pub enum OccError {
    /// Every attempt conflicted.
    #[error("still conflicting after {attempts} attempts")]
    Conflict {
        /// How many attempts were made.
        attempts: u32,
    },
    /// The object under that name is not the expected one (another uid).
    #[error("the object was replaced: expected uid {expected}, found {found}")]
    Replaced {
        /// The uid pinned with [`OccPatch::expect_uid`].
        expected: String,
        /// The uid found.
        found: String,
    },
    /// `decide` aborted, for this reason.
    #[error("decision aborted: {0}")]
    Aborted(#[source] BoxError),
    /// A change cannot be made to the fresh object (bad path, nothing to
    /// remove or replace, no resourceVersion or uid to test).
    #[error("invalid change: {0}")]
    Invalid(String),
    /// The object read does not decode as the API's type.
    #[error("decoding the object failed: {0}")]
    Decode(#[source] serde_json::Error),
    /// Another API error.
    #[error("API call failed: {0}")]
    Kube(#[from] kube::Error),
}

/// A change's operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Add (a map key, or an array element; replaces an existing key).
    Add,
    /// Replace an existing value.
    Replace,
    /// Remove an existing value.
    Remove,
}

/// One change: an operation at a JSON pointer, with the new value.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The operation.
    pub op: Op,
    /// Where (a JSON pointer, e.g. `/data/47`; see [`json_pointer`]).
    pub path: String,
    /// The new value (ignored for [`Op::Remove`]).
    pub value: Value,
}

impl Change {
    fn new(op: Op, path: impl Into<String>, value: Value) -> Self {
        let path = path.into();
        Change { op, path, value }
    }

    /// Add `value` at `path`.
    #[must_use]
    pub fn add(path: impl Into<String>, value: Value) -> Self {
        Change::new(Op::Add, path, value)
    }

    /// Replace the value at `path` with `value`.
    #[must_use]
    pub fn replace(path: impl Into<String>, value: Value) -> Self {
        Change::new(Op::Replace, path, value)
    }

    /// Remove the value at `path`.
    #[must_use]
    pub fn remove(path: impl Into<String>) -> Self {
        Change::new(Op::Remove, path, Value::Null)
    }
}

/// A JSON pointer from unescaped tokens: `["metadata", "annotations",
/// "a/b"]` gives `/metadata/annotations/a~1b`.
#[must_use]
pub fn json_pointer<'a>(tokens: impl IntoIterator<Item = &'a str>) -> String {
    tokens
        .into_iter()
        .map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// The reason `decide` gives up: any error (a `&str` or `String` converts
/// with `.into()`), kept as the [`OccError::Aborted`] source.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What `decide` says about the fresh object, for [`OccPatch::update`].
#[derive(Debug)]
pub enum Decision {
    /// Make these changes (tested against the object `decide` saw).
    Patch(Vec<Change>),
    /// Nothing to do.
    Nothing,
    /// Give up, with a reason.
    Abort(BoxError),
}

/// What `decide` says about the fresh object, for [`OccPatch::delete`].
#[derive(Debug)]
pub enum DeleteDecision {
    /// Delete it (exactly this uid and resourceVersion).
    Delete,
    /// Keep it.
    Keep,
    /// Give up, with a reason.
    Abort(BoxError),
}

/// How a write ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome<K> {
    /// Patched; the object as written.
    Patched(K),
    /// `decide` chose to do nothing; the fresh object it saw.
    Unchanged(K),
    /// Deleted.
    Deleted,
    /// Deletion started; the object lingers (finalizers, a grace period).
    Terminating(K),
    /// No object of that name (before the write, or it went meanwhile).
    Gone,
}

/// What the patch tests besides the changed values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pins {
    /// Test `/metadata/resourceVersion`: any concurrent write conflicts.
    pub resource_version: bool,
    /// Test `/metadata/uid`: a same-named successor conflicts.
    pub uid: bool,
}

impl Default for Pins {
    fn default() -> Self {
        Pins {
            resource_version: true,
            uid: true,
        }
    }
}

/// Build the JSON patch for `changes` to `current` (the object as the
/// server returned it): `test` ops first — resourceVersion and uid per
/// `pins`, then the current value at each changed path (for an add to an
/// absent path: nothing, or the parent's value when the rv is not pinned)
/// — then the changes.
pub fn build_patch(
    current: &Value,
    changes: &[Change],
    pins: Pins,
) -> Result<json_patch::Patch, OccError> {
    let mut tests: Vec<Value> = Vec::new();
    let mut test = |path: &str, value: &Value| {
        if !tests.iter().any(|t| t["path"] == path) {
            tests.push(json!({"op": "test", "path": path, "value": value}));
        }
    };
    let meta = [
        (pins.resource_version, "/metadata/resourceVersion"),
        (pins.uid, "/metadata/uid"),
    ];
    for (on, path) in meta {
        match current.pointer(path) {
            _ if !on => {}
            Some(v @ Value::String(s)) if !s.is_empty() => test(path, v),
            _ => return Err(OccError::Invalid(format!("the object has no {path}"))),
        }
    }
    let mut ops = Vec::new();
    for Change { op, path, value } in changes {
        let Some((parent, _)) = path.rsplit_once('/') else {
            return Err(OccError::Invalid(format!(
                "{path:?}: not a path into the object"
            )));
        };
        match (current.pointer(path), op, current.pointer(parent)) {
            (Some(v), _, _) => test(path, v),
            (None, Op::Add, Some(_)) if pins.resource_version => {}
            (None, Op::Add, Some(pv)) => test(parent, pv),
            (None, op, _) => {
                let m = format!("{op:?} {path}: no such path in the fresh object");
                return Err(OccError::Invalid(m));
            }
        }
        ops.push(match op {
            Op::Add => json!({"op": "add", "path": path, "value": value}),
            Op::Replace => json!({"op": "replace", "path": path, "value": value}),
            Op::Remove => json!({"op": "remove", "path": path}),
        });
    }
    tests.extend(ops);
    serde_json::from_value(Value::Array(tests)).map_err(|e| OccError::Invalid(e.to_string()))
}

/// The paths a patch tests.
#[must_use]
pub fn tested_paths(patch: &json_patch::Patch) -> Vec<String> {
    patch
        .0
        .iter()
        .filter_map(|op| match op {
            PatchOperation::Test(t) => Some(t.path.as_str().to_string()),
            _ => None,
        })
        .collect()
}

/// Whether every `test` of `patch` holds on `obj` (what the server would say).
#[must_use]
pub fn tests_hold(patch: &json_patch::Patch, obj: &Value) -> bool {
    patch.0.iter().all(|op| match op {
        PatchOperation::Test(t) => obj.pointer(t.path.as_str()) == Some(&t.value),
        _ => true,
    })
}

/// What a failed write means to the retry loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// 409, or a 422 naming one of our tested paths: re-read and re-decide.
    Conflict,
    /// 422 with kube-apiserver's detail-less patch message: a conflict only
    /// if a re-read shows one of our tests failing.
    MaybeConflict,
    /// 404: the object is gone.
    NotFound,
    /// Anything else (validation, auth, server errors): not retried here.
    Other,
}

/// Classify `err` from a write whose patch tested `tested` paths.
///
/// ward-apiserver (and the Go json-patch library) name the failed test:
/// `testing value /metadata/resourceVersion failed: test failed`, or `test
/// operation does not apply: is missing path: /x`. A real kube-apiserver
/// drops that detail and answers [`GENERIC_INVALID_PATCH`].
#[must_use]
pub fn classify(err: &kube::Error, tested: &[String]) -> ErrorClass {
    let kube::Error::Api(status) = err else {
        return ErrorClass::Other;
    };
    match status.code {
        409 => ErrorClass::Conflict,
        404 => ErrorClass::NotFound,
        422 if tested.iter().any(|p| names_failed_test(&status.message, p)) => ErrorClass::Conflict,
        422 if status.message.trim() == GENERIC_INVALID_PATCH => ErrorClass::MaybeConflict,
        _ => ErrorClass::Other,
    }
}

fn names_failed_test(msg: &str, path: &str) -> bool {
    // Old kube-apiservers (json-patch v1) capitalise "Testing".
    if ["testing", "Testing"]
        .iter()
        .any(|t| msg.contains(&format!("{t} value {path} failed")))
    {
        return true;
    }
    let needle = format!("is missing path: {path}");
    msg.match_indices(&needle).any(|(i, _)| {
        msg[i + needle.len()..]
            .chars()
            .next()
            .is_none_or(|c| matches!(c, ':' | ' ' | '"' | ',' | '\n'))
    })
}

/// The jitter generator of one write: seeded when the caller set a seed,
/// else from the process's random state.
fn jitter(seed: Option<u64>) -> Rng {
    Rng::new(seed.unwrap_or_else(|| RandomState::new().hash_one("ward-occ-jitter")))
}

/// Optimistic-concurrency writes to the objects of one [`Api`].
pub struct OccPatch<K> {
    api: Api<K>,
    client: Client,
    max_attempts: u32,
    backoff: Backoff,
    seed: Option<u64>,
    expect_uid: Option<String>,
    pins: Pins,
    patch_params: PatchParams,
    delete_params: DeleteParams,
}

impl<K: Resource> Debug for OccPatch<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OccPatch")
            .field("url", &self.api.resource_url())
            .field("max_attempts", &self.max_attempts)
            .field("backoff", &self.backoff)
            .field("expect_uid", &self.expect_uid)
            .field("pins", &self.pins)
            .finish_non_exhaustive()
    }
}

impl<K> OccPatch<K>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    /// Writes through `api`: 5 attempts, 50 ms base delay (cap 2 s),
    /// resourceVersion and uid tested, jitter seeded at random.
    #[must_use]
    pub fn new(api: Api<K>) -> Self {
        let client = api.clone().into_client();
        OccPatch {
            api,
            client,
            max_attempts: 5,
            backoff: Backoff {
                base: Duration::from_millis(50),
                max: Duration::from_secs(2),
            },
            seed: None,
            expect_uid: None,
            pins: Pins::default(),
            patch_params: PatchParams::default(),
            delete_params: DeleteParams::default(),
        }
    }

    /// Attempts before [`OccError::Conflict`] (at least 1).
    #[must_use]
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n.max(1);
        self
    }

    /// The wait after the first conflict; it doubles after each further
    /// one, and each wait is drawn uniformly from its upper half.
    #[must_use]
    pub fn backoff(mut self, base: Duration) -> Self {
        self.backoff.base = base;
        self
    }

    /// The longest wait between attempts.
    #[must_use]
    pub fn max_backoff(mut self, cap: Duration) -> Self {
        self.backoff.max = cap;
        self
    }

    /// Seed the jitter (deterministic waits, e.g. in tests).
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Only write the object with this uid: a same-named successor is
    /// [`OccError::Replaced`], never patched or deleted.
    #[must_use]
    pub fn expect_uid(mut self, uid: impl Into<String>) -> Self {
        self.expect_uid = Some(uid.into());
        self
    }

    /// Test (and for deletes: precondition) the resourceVersion (default
    /// true). Off, only the changed values and the uid are tested, so
    /// writes to other fields do not conflict.
    #[must_use]
    pub fn test_resource_version(mut self, on: bool) -> Self {
        self.pins.resource_version = on;
        self
    }

    /// Test the uid in patches (default true; deletes always precondition it).
    #[must_use]
    pub fn test_uid(mut self, on: bool) -> Self {
        self.pins.uid = on;
        self
    }

    /// Parameters of each PATCH (field manager, ...).
    #[must_use]
    pub fn patch_params(mut self, pp: PatchParams) -> Self {
        self.patch_params = pp;
        self
    }

    /// Parameters of each DELETE (propagation, grace); the preconditions
    /// are always set from the fresh object.
    #[must_use]
    pub fn delete_params(mut self, dp: DeleteParams) -> Self {
        self.delete_params = dp;
        self
    }

    /// Patch `name` as `decide` says on the freshly read object; after a
    /// conflict, read again and decide again.
    pub async fn update<D>(&self, name: &str, mut decide: D) -> Result<Outcome<K>, OccError>
    where
        D: FnMut(&K) -> Decision,
    {
        let mut jitter = jitter(self.seed);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let Some((raw, obj)) = self.read(name).await? else {
                return Ok(Outcome::Gone);
            };
            let changes = match decide(&obj) {
                Decision::Patch(c) if !c.is_empty() => c,
                Decision::Patch(_) | Decision::Nothing => return Ok(Outcome::Unchanged(obj)),
                Decision::Abort(r) => return Err(OccError::Aborted(r)),
            };
            let patch = build_patch(&raw, &changes, self.pins)?;
            let tested = tested_paths(&patch);
            let sent = Patch::<()>::Json(patch.clone());
            let err = match self.api.patch(name, &self.patch_params, &sent).await {
                Ok(o) => return Ok(Outcome::Patched(o)),
                Err(e) => e,
            };
            let conflict = match classify(&err, &tested) {
                ErrorClass::Conflict | ErrorClass::NotFound => true,
                ErrorClass::MaybeConflict => match self.read(name).await? {
                    Some((now, _)) => !tests_hold(&patch, &now),
                    None => true,
                },
                ErrorClass::Other => false,
            };
            if !conflict {
                return Err(OccError::Kube(err));
            }
            self.conflicted("update", name, attempt, &err, &mut jitter)
                .await?;
        }
    }

    /// Delete `name` if `decide` says so on the freshly read object, with
    /// preconditions {uid, resourceVersion} of that object; after a
    /// conflict, read again and decide again.
    pub async fn delete<D>(&self, name: &str, mut decide: D) -> Result<Outcome<K>, OccError>
    where
        D: FnMut(&K) -> DeleteDecision,
    {
        let mut jitter = jitter(self.seed);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let Some((raw, obj)) = self.read(name).await? else {
                return Ok(Outcome::Gone);
            };
            match decide(&obj) {
                DeleteDecision::Delete => {}
                DeleteDecision::Keep => return Ok(Outcome::Unchanged(obj)),
                DeleteDecision::Abort(r) => return Err(OccError::Aborted(r)),
            }
            let field = |p: &str| match raw.pointer(p).and_then(Value::as_str) {
                Some(v) if !v.is_empty() => Ok(v.to_string()),
                _ => Err(OccError::Invalid(format!("the object has no {p}"))),
            };
            let rv = self.pins.resource_version;
            let mut dp = self.delete_params.clone();
            dp.preconditions = Some(Preconditions {
                uid: Some(field("/metadata/uid")?),
                resource_version: rv.then(|| field("/metadata/resourceVersion")).transpose()?,
            });
            let err = match self.api.delete(name, &dp).await {
                Ok(res) => {
                    return Ok(match res.left() {
                        Some(k) if k.meta().deletion_timestamp.is_some() => Outcome::Terminating(k),
                        _ => Outcome::Deleted,
                    });
                }
                Err(e) => e,
            };
            match classify(&err, &[]) {
                ErrorClass::NotFound => return Ok(Outcome::Gone),
                ErrorClass::Conflict => {}
                ErrorClass::MaybeConflict | ErrorClass::Other => return Err(OccError::Kube(err)),
            }
            self.conflicted("delete", name, attempt, &err, &mut jitter)
                .await?;
        }
    }

    /// Count a conflict; give up after the last attempt, else wait.
    async fn conflicted(
        &self,
        verb: &'static str,
        name: &str,
        attempt: u32,
        err: &kube::Error,
        jitter: &mut Rng,
    ) -> Result<(), OccError> {
        metrics::counter!("ward_occ_conflicts_total", "verb" => verb).increment(1);
        tracing::debug!(verb, name, attempt, error = %err, "conflict: re-reading to decide again");
        if attempt >= self.max_attempts {
            return Err(OccError::Conflict { attempts: attempt });
        }
        tokio::time::sleep(self.backoff.jittered(attempt, jitter)).await;
        Ok(())
    }

    /// A quorum GET of `name`: the object as the server sent it (tests are
    /// built from this, not from a re-serialized `K`) and decoded.
    async fn read(&self, name: &str) -> Result<Option<(Value, K)>, OccError> {
        let req = kube::core::Request::new(self.api.resource_url())
            .get(name, &GetParams::default())
            .map_err(kube::Error::BuildRequest)?;
        let raw: Value = match self.client.request(req).await {
            Ok(v) => v,
            Err(kube::Error::Api(s)) if s.is_not_found() => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        if let Some(expected) = &self.expect_uid {
            let found = raw.pointer("/metadata/uid").and_then(Value::as_str);
            if found != Some(expected.as_str()) {
                return Err(OccError::Replaced {
                    expected: expected.clone(),
                    found: found.unwrap_or_default().to_string(),
                });
            }
        }
        let obj = serde_json::from_value(raw.clone()).map_err(OccError::Decode)?;
        Ok(Some((raw, obj)))
    }
}

/// [`OccPatch::update`] with the defaults.
pub async fn update<K, D>(api: &Api<K>, name: &str, decide: D) -> Result<Outcome<K>, OccError>
where
    K: Resource + Clone + DeserializeOwned + Debug,
    D: FnMut(&K) -> Decision,
{
    OccPatch::new(api.clone()).update(name, decide).await
}

/// [`OccPatch::delete`] with the defaults.
pub async fn delete<K, D>(api: &Api<K>, name: &str, decide: D) -> Result<Outcome<K>, OccError>
where
    K: Resource + Clone + DeserializeOwned + Debug,
    D: FnMut(&K) -> DeleteDecision,
{
    OccPatch::new(api.clone()).delete(name, decide).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn pool() -> Value {
        json!({
            "metadata": {"name": "pool", "uid": "p1", "resourceVersion": "41"},
            "data": {"47": "default/web-2", "a/b": "x"}
        })
    }

    fn ops(p: &json_patch::Patch) -> Value {
        serde_json::to_value(p).unwrap()
    }

    #[test]
    fn tests_come_first_with_exact_values() {
        let p = build_patch(
            &pool(),
            &[
                Change::remove("/data/47"),
                Change::replace(json_pointer(["data", "a/b"]), json!("y")),
                Change::add("/data/48", json!("default/web-3")),
            ],
            Pins::default(),
        )
        .unwrap();
        assert_eq!(
            ops(&p),
            json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": "41"},
                {"op": "test", "path": "/metadata/uid", "value": "p1"},
                {"op": "test", "path": "/data/47", "value": "default/web-2"},
                {"op": "test", "path": "/data/a~1b", "value": "x"},
                {"op": "remove", "path": "/data/47"},
                {"op": "replace", "path": "/data/a~1b", "value": "y"},
                {"op": "add", "path": "/data/48", "value": "default/web-3"},
            ])
        );
        let mut applied = pool();
        json_patch::patch(&mut applied, &p.0).unwrap();
        assert_eq!(applied["data"], json!({"a/b": "y", "48": "default/web-3"}));
        assert!(tests_hold(&p, &pool()));
    }

    #[test]
    fn pins_are_optional() {
        let paths = |ch: Change, resource_version, uid| {
            let pins = Pins {
                resource_version,
                uid,
            };
            tested_paths(&build_patch(&pool(), &[ch], pins).unwrap())
        };
        let rm = || Change::remove("/data/47");
        assert_eq!(
            paths(rm(), true, false),
            ["/metadata/resourceVersion", "/data/47"]
        );
        assert_eq!(paths(rm(), false, false), ["/data/47"]);
        // Without the rv pin, an add to an absent key tests its parent...
        let add = |k| Change::add(format!("/data/{k}"), json!("z"));
        assert_eq!(paths(add("48"), false, true), ["/metadata/uid", "/data"]);
        assert_eq!(
            paths(add("48"), true, true),
            ["/metadata/resourceVersion", "/metadata/uid"]
        );
        // ...and an add over an existing key tests the old value.
        assert_eq!(paths(add("47"), false, false), ["/data/47"]);
    }

    #[test]
    fn impossible_changes_are_refused() {
        let bad = |ch: Change, pins| {
            matches!(build_patch(&pool(), &[ch], pins), Err(OccError::Invalid(_)))
        };
        let d = Pins::default();
        assert!(bad(Change::remove("/data/46"), d));
        assert!(bad(Change::replace("/data/46", json!(1)), d));
        assert!(bad(Change::add("/spec/allocations/1", json!(1)), d));
        assert!(bad(Change::add("data/48", json!(1)), d));
        assert!(bad(Change::replace("", json!({})), d));
        let mut no_rv = pool();
        no_rv["metadata"]["resourceVersion"] = json!("");
        let res = build_patch(&no_rv, &[Change::remove("/data/47")], d);
        assert!(matches!(res, Err(OccError::Invalid(_))));
    }

    #[test]
    fn a_changed_object_fails_the_tests() {
        let p = build_patch(&pool(), &[Change::remove("/data/47")], Pins::default()).unwrap();
        let mut moved = pool();
        moved["data"]["47"] = json!("default/web-9");
        moved["metadata"]["resourceVersion"] = json!("42");
        assert!(!tests_hold(&p, &moved));
        let mut target = moved.clone();
        assert!(json_patch::patch(&mut target, &p.0).is_err());
        assert_eq!(target, moved);
    }

    #[test]
    fn conflict_classification() {
        use ErrorClass::*;
        let tested = ["/metadata/resourceVersion", "/data/47"].map(String::from);
        let modified = "Operation cannot be fulfilled on configmaps \"pool\": the object has been modified; please apply your changes to the latest version and try again";
        #[rustfmt::skip]
        let rows = [
            (409, modified, Conflict),
            (409, "Precondition failed: UID in precondition: a, UID in object meta: b", Conflict),
            // ward-apiserver's text, and the Go json-patch library's.
            (422, "ConfigMap \"pool\" is invalid: testing value /metadata/resourceVersion failed: test failed", Conflict),
            (422, "testing value /data/47 failed: test failed", Conflict),
            (500, "Testing value /metadata/resourceVersion failed", Other),
            (422, "Testing value /metadata/resourceVersion failed", Conflict),
            (422, "test operation does not apply: is missing path: /data/47: missing value", Conflict),
            // Not one of our tests: a prefix of a tested path, another path.
            (422, "test operation does not apply: is missing path: /data/4: missing value", Other),
            (422, "testing value /data/48 failed: test failed", Other),
            // Other 422s: a failed remove, validation.
            (422, "ConfigMap \"pool\" is invalid: unable to remove nonexistent key: /data/46: missing value", Other),
            (422, "ConfigMap \"pool\" is invalid: data[a b]: Invalid value: \"a b\": a valid config key must consist of alphanumeric characters", Other),
            // kube-apiserver's detail-less answer needs a re-read.
            (422, GENERIC_INVALID_PATCH, MaybeConflict),
            (404, "configmaps \"pool\" not found", NotFound),
            (500, "testing value /data/47 failed", Other),
            (429, "slow down", Other),
        ];
        for (code, msg, want) in rows {
            let err = kube::Error::Api(Status::failure(msg, "").with_code(code).boxed());
            assert_eq!(classify(&err, &tested), want, "{code} {msg}");
        }
    }

    #[test]
    fn backoff_bounds_and_determinism() {
        let b = |base, max| Backoff { base, max };
        let (base, cap) = (Duration::from_millis(100), Duration::from_secs(1));
        let mut j = jitter(Some(7));
        for _ in 0..200 {
            for (retry, hi) in [
                (1, 100),
                (2, 200),
                (3, 400),
                (4, 800),
                (5, 1000),
                (40, 1000),
            ] {
                let (d, hi) = (
                    b(base, cap).jittered(retry, &mut j),
                    Duration::from_millis(hi),
                );
                assert!(d >= hi / 2 && d <= hi, "retry {retry}: {d:?}");
            }
        }
        assert_eq!(b(Duration::ZERO, cap).jittered(1, &mut j), Duration::ZERO);
        let d = b(Duration::MAX, cap).jittered(u32::MAX, &mut j);
        assert!(d >= cap / 2 && d <= cap, "saturates at the cap: {d:?}");
        let run = |seed| {
            let mut j = jitter(Some(seed));
            (1..=6)
                .map(|r| b(base, cap).jittered(r, &mut j))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
    }

    #[test]
    fn pointers_escape() {
        let annotation = [
            "metadata",
            "annotations",
            "k8s.v1.cni.cncf.io/network-status",
        ];
        let want = "/metadata/annotations/k8s.v1.cni.cncf.io~1network-status";
        assert_eq!(json_pointer(annotation), want);
        assert_eq!(json_pointer(["data", "47"]), "/data/47");
        assert_eq!(json_pointer(["a~b"]), "/a~0b");
        assert_eq!(json_pointer([]), "");
    }
}
