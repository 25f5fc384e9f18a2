//! Optimistic-concurrency patches and deletes that re-decide on fresh state.
//!
//! The race it stops (whereabouts: a stale decision replayed under a fresh rv):
//!
//! ```text
//! 1. reconciler: GET pool @R1 (47 -> default/web-2), judges web-2 dead: "remove 47"
//! 2. CNI ADD elsewhere: PATCH pool [test rv R1, replace /spec/allocations/47 {podref: default/web-9}] -> R2
//! 3. reconciler: PATCH [test rv R1, remove /spec/allocations/47] -> 422 (kube-apiserver names no field)
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
//! exponential backoff, until the write lands or its deadline passes
//! (default [`OccPatch::DEFAULT_DEADLINE`]: conflicts are ordinary under
//! contention, and an allocator that gave up after a few would lose the
//! allocation; an attempt cap is there for a caller who chooses it
//! knowingly). [`OccPatch::update_with`] lets the decision return a value
//! (the port it picked) from the attempt that landed. [`OccPatch::delete`]
//! does the same for deletes, with `DeleteOptions.preconditions` {uid,
//! resourceVersion} so a same-named successor is never deleted on a
//! predecessor's verdict.
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::Api;
//! use ward_guards::occ_patch::{Change, Decision, OccPatch, UpdateOutcome, json_pointer};
//!
//! # async fn demo(api: Api<ConfigMap>) -> Result<(), ward_guards::occ_patch::OccError> {
//! let dead = |podref: &str| podref == "default/web-2";
//! let occ = OccPatch::new(api);
//! let outcome = occ
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
//!
//! // Allocate the lowest free port; the decision returns it.
//! let outcome = occ
//!     .update_with("ports", |ports: &ConfigMap| {
//!         let taken = ports.data.clone().unwrap_or_default();
//!         let port = (8000..9000).find(|p| !taken.contains_key(&p.to_string()));
//!         match port {
//!             Some(p) => {
//!                 let path = json_pointer(["data", &p.to_string()]);
//!                 let add = Change::add(path, "default/web-2".into());
//!                 (Decision::Patch(vec![add]), Some(p))
//!             }
//!             None => (Decision::Abort("no free port".into()), None),
//!         }
//!     })
//!     .await?;
//! if let UpdateOutcome::Patched(_, Some(port)) = outcome {
//!     println!("web-2 got port {port}");
//! }
//! # Ok(()) }
//! ```
//!
//! Adding a key that must be absent: RFC 6902 has no "test absent" (Go's
//! json-patch happens to pass `test` of `null` on a missing key, the
//! Rust crate does not, so it is not portable). The resourceVersion test
//! covers it — the decision saw the key absent at exactly that rv. With
//! [`OccPatch::test_resource_version`] off, the parent's whole current
//! value is tested instead (coarse but sound).
mod change;
mod classify;
mod error;

pub use change::{Change, Op, Pins, build_patch, json_pointer, tested_paths, tests_hold};
pub use classify::{ErrorClass, classify};
pub use error::{BoxError, GENERIC_INVALID_PATCH, OccError};

use std::fmt::{self, Debug};
use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

use kube::api::{Api, DeleteParams, GetParams, Patch, PatchParams, Preconditions};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::Value;
use ward_base::{Backoff, Rng};

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

/// How an update ended. `T` is what the decision returned alongside
/// itself ([`OccPatch::update_with`]; `()` for [`OccPatch::update`]), from
/// the attempt that ended the write.
#[derive(Debug, Clone, PartialEq)]
pub enum UpdateOutcome<K, T = ()> {
    /// Patched; the object as written.
    Patched(K, T),
    /// `decide` chose to do nothing; the fresh object it saw.
    Unchanged(K, T),
    /// No object of that name (before the write, or it went meanwhile):
    /// nothing was decided.
    Gone,
}

impl<K, T> UpdateOutcome<K, T> {
    /// What the deciding attempt returned (None when gone).
    #[must_use]
    pub fn into_value(self) -> Option<T> {
        match self {
            UpdateOutcome::Patched(_, t) | UpdateOutcome::Unchanged(_, t) => Some(t),
            UpdateOutcome::Gone => None,
        }
    }
}

/// How a delete ended.
#[derive(Debug, Clone, PartialEq)]
pub enum DeleteOutcome<K> {
    /// Deleted.
    Deleted,
    /// Deletion started; the object lingers (finalizers, a grace period).
    Terminating(K),
    /// `decide` chose to keep it; the fresh object it saw.
    Kept(K),
    /// No object of that name (before the write, or it went meanwhile).
    Gone,
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
    budget: Budget,
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
            .field("budget", &self.budget)
            .field("expect_uid", &self.expect_uid)
            .field("pins", &self.pins)
            .finish_non_exhaustive()
    }
}

impl<K> OccPatch<K>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    /// How long a write keeps re-deciding after conflicts by default.
    pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(30);

    /// Writes through `api`: re-decide after each conflict until
    /// [`Self::DEFAULT_DEADLINE`] has passed, no attempt cap, 50 ms base
    /// delay (cap 2 s), resourceVersion and uid tested, jitter seeded at
    /// random.
    #[must_use]
    pub fn new(api: Api<K>) -> Self {
        let client = api.clone().into_client();
        OccPatch {
            api,
            client,
            budget: Budget {
                deadline: Self::DEFAULT_DEADLINE,
                max_attempts: None,
                backoff: Backoff {
                    base: Duration::from_millis(50),
                    max: Duration::from_secs(2),
                },
            },
            seed: None,
            expect_uid: None,
            pins: Pins::default(),
            patch_params: PatchParams::default(),
            delete_params: DeleteParams::default(),
        }
    }

    /// Stop re-deciding once this much time (tokio time, from the first
    /// read) has passed: the next conflict is [`OccError::Conflict`]. The
    /// last wait is cut short so one attempt is made at the deadline.
    #[must_use]
    pub fn deadline(mut self, d: Duration) -> Self {
        self.budget.deadline = d;
        self
    }

    /// Also stop after `n` attempts (at least 1), deadline or not. A cap
    /// turns ordinary contention into [`OccError::Conflict`]: set it only
    /// when the caller retries the whole operation itself.
    #[must_use]
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.budget.max_attempts = Some(n.max(1));
        self
    }

    /// The wait after the first conflict; it doubles after each further
    /// one, and each wait is drawn uniformly from its upper half. Zero
    /// retries at once.
    #[must_use]
    pub fn backoff(mut self, base: Duration) -> Self {
        self.budget.backoff.base = base;
        self
    }

    /// The longest wait between attempts.
    #[must_use]
    pub fn max_backoff(mut self, cap: Duration) -> Self {
        self.budget.backoff.max = cap;
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
    pub async fn update<D>(&self, name: &str, mut decide: D) -> Result<UpdateOutcome<K>, OccError>
    where
        D: FnMut(&K) -> Decision,
    {
        self.update_with(name, |k| (decide(k), ())).await
    }

    /// [`Self::update`] whose `decide` also returns a value — what it chose
    /// (a port, an offset) — handed back in the outcome from the attempt
    /// that ended the write; earlier attempts' values are dropped with
    /// their decisions.
    pub async fn update_with<T, D>(
        &self,
        name: &str,
        mut decide: D,
    ) -> Result<UpdateOutcome<K, T>, OccError>
    where
        D: FnMut(&K) -> (Decision, T),
    {
        let mut retry = self.retry();
        loop {
            let Some((raw, obj)) = self.read(name).await? else {
                return Ok(UpdateOutcome::Gone);
            };
            let (decision, value) = decide(&obj);
            let changes = match decision {
                Decision::Patch(c) if !c.is_empty() => c,
                Decision::Patch(_) | Decision::Nothing => {
                    return Ok(UpdateOutcome::Unchanged(obj, value));
                }
                Decision::Abort(r) => return Err(OccError::Aborted(r)),
            };
            let patch = build_patch(&raw, &changes, self.pins)?;
            let tested = tested_paths(&patch);
            let sent = Patch::<()>::Json(patch.clone());
            let err = match self.api.patch(name, &self.patch_params, &sent).await {
                Ok(o) => return Ok(UpdateOutcome::Patched(o, value)),
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
            retry.conflicted("update", name, &err).await?;
        }
    }

    /// Delete `name` if `decide` says so on the freshly read object, with
    /// preconditions {uid, resourceVersion} of that object; after a
    /// conflict, read again and decide again.
    pub async fn delete<D>(&self, name: &str, mut decide: D) -> Result<DeleteOutcome<K>, OccError>
    where
        D: FnMut(&K) -> DeleteDecision,
    {
        let mut retry = self.retry();
        loop {
            let Some((raw, obj)) = self.read(name).await? else {
                return Ok(DeleteOutcome::Gone);
            };
            match decide(&obj) {
                DeleteDecision::Delete => {}
                DeleteDecision::Keep => return Ok(DeleteOutcome::Kept(obj)),
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
                        Some(k) if k.meta().deletion_timestamp.is_some() => {
                            DeleteOutcome::Terminating(k)
                        }
                        _ => DeleteOutcome::Deleted,
                    });
                }
                Err(e) => e,
            };
            match classify(&err, &[]) {
                ErrorClass::NotFound => return Ok(DeleteOutcome::Gone),
                ErrorClass::Conflict => {}
                ErrorClass::MaybeConflict | ErrorClass::Other => return Err(OccError::Kube(err)),
            }
            retry.conflicted("delete", name, &err).await?;
        }
    }

    /// The retry state of one write, starting now.
    fn retry(&self) -> Retry {
        Retry {
            jitter: jitter(self.seed),
            attempts: 0,
            started: tokio::time::Instant::now(),
            budget: self.budget,
        }
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

/// How long a write keeps re-deciding: the builder's settings, copied
/// into each write's [`Retry`].
#[derive(Debug, Clone, Copy)]
struct Budget {
    deadline: Duration,
    max_attempts: Option<u32>,
    backoff: Backoff,
}

/// The retry state of one write: attempts so far, since when, the jitter.
struct Retry {
    jitter: Rng,
    attempts: u32,
    started: tokio::time::Instant,
    budget: Budget,
}

impl Retry {
    /// Count a conflict; give up past the deadline or the attempt cap,
    /// else wait (never beyond the deadline).
    async fn conflicted(
        &mut self,
        verb: &'static str,
        name: &str,
        err: &kube::Error,
    ) -> Result<(), OccError> {
        self.attempts += 1;
        let attempt = self.attempts;
        metrics::counter!("ward_occ_conflicts_total", "verb" => verb).increment(1);
        tracing::debug!(verb, name, attempt, error = %err, "conflict: re-reading to decide again");
        let elapsed = self.started.elapsed();
        let Budget {
            deadline,
            max_attempts,
            backoff,
        } = self.budget;
        let capped = max_attempts.is_some_and(|n| attempt >= n);
        if capped || elapsed >= deadline {
            metrics::counter!("ward_occ_gave_up_total", "verb" => verb).increment(1);
            return Err(OccError::Conflict {
                attempts: attempt,
                elapsed,
            });
        }
        let wait = backoff
            .jittered(attempt, &mut self.jitter)
            .min(deadline - elapsed);
        // A zero backoff retries at once, without yielding to the runtime.
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        Ok(())
    }
}

/// [`OccPatch::update`] with the defaults.
pub async fn update<K, D>(api: &Api<K>, name: &str, decide: D) -> Result<UpdateOutcome<K>, OccError>
where
    K: Resource + Clone + DeserializeOwned + Debug,
    D: FnMut(&K) -> Decision,
{
    OccPatch::new(api.clone()).update(name, decide).await
}

/// [`OccPatch::delete`] with the defaults.
pub async fn delete<K, D>(api: &Api<K>, name: &str, decide: D) -> Result<DeleteOutcome<K>, OccError>
where
    K: Resource + Clone + DeserializeOwned + Debug,
    D: FnMut(&K) -> DeleteDecision,
{
    OccPatch::new(api.clone()).delete(name, decide).await
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
