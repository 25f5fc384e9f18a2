//! Admission webhooks, called as kube-apiserver calls them: every
//! Mutating- and ValidatingWebhookConfiguration in the store is read
//! ([`Registered`]), each write a webhook's rules, selectors and
//! `matchConditions` take is sent to it as an AdmissionReview v1 over
//! HTTPS ([`call`], [`review`]), mutating webhooks first (in configuration
//! name order, JSONPatch answers applied, `reinvocationPolicy: IfNeeded`
//! honoured), then the object is validated, then the validating webhooks
//! are called together; a denial or a failed call under `failurePolicy:
//! Fail` fails the write with kube's status, nothing stored.
//!
//! ## How a synchronous write waits for an HTTPS call
//!
//! A write is decided in one synchronous pass (the store's optimistic
//! update, [`crate::storage::store::Store::update_with`]); a webhook is a network
//! call. So a write that a webhook applies to runs more than once, as
//! kube-apiserver's `GuaranteedUpdate` runs its update function again
//! after a conflict. Each pass that reaches an admission step
//! ([`Admission::mutate`], [`Admission::validate`]) with objects no
//! webhook has answered for yet stops there (nothing is written) and says
//! what it needs ([`Admission::take_pending`]); the handler calls the
//! webhooks and runs the write again, which finds the answer for the very
//! same (old, new) pair and goes on. If the object changed meanwhile the
//! pair differs and the webhooks are asked again: no write is stored that
//! a webhook did not see. After [`MAX_ROUNDS`] passes for one object the
//! write fails with 409. A write no webhook's rules name runs once, as
//! before, and with no configuration stored nothing is read or cloned.
//!
//! ## Differences from kube-apiserver
//!
//! - A Service is called at its EndpointSlices' ready addresses (as
//!   `--enable-aggregator-routing` does), not its cluster IP: nothing here
//!   routes cluster IPs.
//! - `matchPolicy: Equivalent` is `Exact`: each resource is served at one
//!   version, so there is no equivalent to convert to.
//! - An empty `caBundle` trusts nothing (kube-apiserver trusts the
//!   system's roots); calls are HTTP/1.1 on a connection of their own.
//! - On a create the validating webhooks see the object before the store
//!   gives it a uid and creationTimestamp.
//! - Writes the server makes itself (garbage collection, namespace
//!   cleanup) are not sent to webhooks.
//! - `matchConditions` cannot use `authorizer`.

pub mod call;
/// Webhooks as registered (the kinds' specs live below the request path).
pub use crate::registry::spec::webhook as config;
mod context;
mod dispatch;
pub mod matching;
pub mod policy;
mod trust;
/// ValidatingAdmissionPolicies and bindings as registered.
pub use crate::registry::spec::policy as policy_config;
pub mod review;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

use crate::machinery::status::ApiError;
use crate::registry::resources::{ResourceInfo, StorageKey};
use crate::storage::store::Store;
pub use config::Webhook;
pub use context::Context;
pub use dispatch::resolve;
pub(crate) use dispatch::review_uid;
use dispatch::{mutate, validate};
use policy::run_policies;
pub use review::{Operation, Request};

/// How many times one object's write may go back to the webhooks because
/// it changed under them before it fails with 409.
pub const MAX_ROUNDS: usize = 8;

/// The webhooks registered now.
#[derive(Debug, Default)]
pub struct Hooks {
    /// Mutating webhooks, in call order (configuration name, then position).
    pub mutating: Vec<Arc<Webhook>>,
    /// Validating webhooks.
    pub validating: Vec<Arc<Webhook>>,
    /// ValidatingAdmissionPolicies, each with a binding that names it
    /// (bindings in name order).
    pub policies: Vec<(Arc<policy::Policy>, Arc<policy::Binding>)>,
}

impl Hooks {
    fn any_rule_takes(&self, mutating: bool, r: &Request<'_>) -> bool {
        let hooks = if mutating {
            &self.mutating
        } else {
            &self.validating
        };
        (!exempt(r.group, r.resource, false)
            && hooks.iter().any(|h| matching::rules_match(&h.rules, r)))
            || (!mutating
                && !exempt(r.group, r.resource, true)
                && self.policies.iter().any(|(p, b)| b.may_take(p, r)))
    }
}

/// Whether a resource is never sent to webhooks (admission's own
/// configuration: `policies` false) or checked by policies (the policies
/// and bindings themselves, and the access and token reviews).
fn exempt(group: &str, plural: &str, policies: bool) -> bool {
    if policies {
        matches!(
            (group, plural),
            (
                "admissionregistration.k8s.io",
                "validatingadmissionpolicies" | "validatingadmissionpolicybindings"
            ) | ("authentication.k8s.io" | "authorization.k8s.io", _)
        )
    } else {
        group == "admissionregistration.k8s.io"
    }
}

fn key(plural: &str) -> StorageKey {
    StorageKey {
        group: "admissionregistration.k8s.io".into(),
        plural: plural.into(),
    }
}

/// The webhooks of the configurations in a store, compiled again only
/// after a configuration is written.
#[derive(Debug)]
pub struct Registered {
    mutating_writes: Arc<AtomicU64>,
    validating_writes: Arc<AtomicU64>,
    policy_writes: Arc<AtomicU64>,
    binding_writes: Arc<AtomicU64>,
    cached: Mutex<(u64, Option<Arc<Hooks>>)>,
}

impl Registered {
    /// Follow the configurations in `store`.
    #[must_use]
    pub fn new(store: &Store) -> Registered {
        Registered {
            mutating_writes: store.writes_to(&key("mutatingwebhookconfigurations")),
            validating_writes: store.writes_to(&key("validatingwebhookconfigurations")),
            policy_writes: store.writes_to(&key("validatingadmissionpolicies")),
            binding_writes: store.writes_to(&key("validatingadmissionpolicybindings")),
            cached: Mutex::new((u64::MAX, None)),
        }
    }

    /// The webhooks registered now (None when there are none).
    pub fn current(&self, store: &Store) -> Option<Arc<Hooks>> {
        // Writes only add up: a sum that moved means one of them did.
        let stamp = [
            &self.mutating_writes,
            &self.validating_writes,
            &self.policy_writes,
            &self.binding_writes,
        ]
        .iter()
        .fold(0u64, |s, c| s.wrapping_add(c.load(Ordering::Acquire)));
        let mut cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        if cached.0 != stamp {
            let read = |plural: &str, mutating: bool| -> Vec<Arc<Webhook>> {
                let page = store.list(&key(plural), None, None, None, |_| true);
                // Listed in name order: mutating webhooks run in that order.
                (page.items.iter())
                    .flat_map(|c| Webhook::all_of(&c.value(), mutating))
                    .map(Arc::new)
                    .collect()
            };
            let hooks = Hooks {
                mutating: read("mutatingwebhookconfigurations", true),
                validating: read("validatingwebhookconfigurations", false),
                policies: policies(store),
            };
            let any = !hooks.mutating.is_empty()
                || !hooks.validating.is_empty()
                || !hooks.policies.is_empty();
            *cached = (stamp, any.then(|| Arc::new(hooks)));
        }
        cached.1.clone()
    }
}

/// The stored policies joined with the bindings that name them; one that
/// does not compile is left out with a warning in the log.
fn policies(store: &Store) -> Vec<(Arc<policy::Policy>, Arc<policy::Binding>)> {
    let all = |plural: &str| store.list(&key(plural), None, None, None, |_| true).items;
    let compiled: Vec<Arc<policy::Policy>> = all("validatingadmissionpolicies")
        .iter()
        .filter_map(|p| match policy::Policy::compile(&p.value()) {
            Ok(p) => Some(Arc::new(p)),
            Err(e) => {
                tracing::warn!(policy = p.name(), error = %e, "a policy is not enforced");
                None
            }
        })
        .collect();
    let mut out = Vec::new();
    for b in all("validatingadmissionpolicybindings") {
        let binding = match policy::Binding::compile(&b.value()) {
            Ok(b) => Arc::new(b),
            Err(e) => {
                tracing::warn!(binding = b.name(), error = %e, "a binding is not enforced");
                continue;
            }
        };
        if let Some(p) = compiled.iter().find(|p| p.name == binding.policy) {
            out.push((p.clone(), binding));
        }
    }
    out
}

/// Where in a write an admission step is.
#[derive(Debug, Clone)]
pub struct At<'a> {
    /// The operation.
    pub operation: Operation,
    /// The resource written.
    pub info: &'a ResourceInfo,
    /// Its subresource, if any.
    pub sub: Option<&'static str>,
    /// The namespace (`""` cluster-scoped).
    pub namespace: &'a str,
    /// The object's name (`""` at the mutating step of a generateName
    /// create).
    pub name: &'a str,
}

/// One admission step's question: the objects as the webhooks are (to be)
/// shown them.
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    /// The mutating (true) or validating step.
    pub mutating: bool,
    /// The operation.
    pub operation: Operation,
    /// group, version, plural, kind.
    pub resource: [String; 4],
    /// Whether the resource is namespaced.
    pub namespaced: bool,
    /// The subresource (`""` none).
    pub sub: String,
    /// The namespace.
    pub namespace: String,
    /// The name.
    pub name: String,
    /// The new object (None on DELETE).
    pub object: Option<Value>,
    /// The old object.
    pub old: Option<Value>,
}

impl Ask {
    fn new(at: &At<'_>, mutating: bool, old: Option<&Value>, object: Option<&Value>) -> Ask {
        let i = at.info;
        Ask {
            mutating,
            operation: at.operation,
            resource: [
                i.group.clone(),
                i.version.clone(),
                i.plural.clone(),
                i.kind.clone(),
            ],
            namespaced: i.namespaced,
            sub: at.sub.unwrap_or_default().to_owned(),
            namespace: at.namespace.to_owned(),
            name: at.name.to_owned(),
            object: object.cloned(),
            old: old.cloned(),
        }
    }

    fn request<'a>(
        &'a self,
        user: &'a crate::auth::UserInfo,
        dry_run: bool,
        options: Value,
    ) -> Request<'a> {
        let [group, version, resource, kind] = &self.resource;
        Request {
            operation: self.operation,
            group,
            version,
            resource,
            subresource: &self.sub,
            kind,
            namespace: &self.namespace,
            name: &self.name,
            namespaced: self.namespaced,
            object: self.object.as_ref(),
            old_object: self.old.as_ref(),
            user,
            dry_run,
            options,
        }
    }

    /// Same object and step, whatever its contents (the rounds counted
    /// against [`MAX_ROUNDS`]).
    fn same_target(&self, other: &Ask) -> bool {
        self.mutating == other.mutating
            && self.resource == other.resource
            && self.sub == other.sub
            && self.namespace == other.namespace
            && self.name == other.name
            // A collection's deletes name no object: each its own target.
            && self.old.as_ref().map(|o| &o["metadata"]["name"])
                == other.old.as_ref().map(|o| &o["metadata"]["name"])
    }
}

#[derive(Debug, Default)]
struct Rounds {
    /// Mutating steps answered: the question, the object made of it.
    mutated: Vec<(Ask, Value)>,
    /// Validating steps allowed.
    validated: Vec<Ask>,
    pending: Option<Pending>,
    asked: Vec<Ask>,
    /// Conversions done: (object, desired apiVersion) and the result.
    converted: Vec<((Value, String), Value)>,
    warnings: Vec<String>,
    generated_name: Option<String>,
    now: Option<String>,
}

/// One request's admission: the webhooks registered when it arrived and
/// what they have answered in its earlier passes.
#[derive(Debug, Default)]
pub struct Admission {
    hooks: Option<Arc<Hooks>>,
    rounds: Mutex<Rounds>,
}

impl Admission {
    /// A request's admission by `hooks` (None: no webhook registered).
    #[must_use]
    pub fn new(hooks: Option<Arc<Hooks>>) -> Admission {
        Admission {
            hooks,
            rounds: Mutex::default(),
        }
    }

    /// The mutating step: `new` becomes what the mutating webhooks made of
    /// it (unchanged when none applies); whether it changed.
    ///
    /// # Errors
    ///
    /// The pass must stop for the webhooks to be called
    /// ([`Admission::take_pending`] says what for).
    pub fn mutate(
        &self,
        at: &At<'_>,
        old: Option<&Value>,
        new: &mut Value,
    ) -> Result<bool, ApiError> {
        match self.step(at, true, old, Some(new))? {
            Some(made) if made != *new => {
                *new = made;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// A delete's mutating then validating steps, on the object deleted.
    ///
    /// # Errors
    ///
    /// As [`Admission::mutate`].
    pub fn delete(&self, at: &At<'_>, old: &Value) -> Result<(), ApiError> {
        self.step(at, true, Some(old), None)?;
        self.step(at, false, Some(old), None)?;
        Ok(())
    }

    /// Whether any webhook is registered (a delete then reads the object
    /// first).
    #[must_use]
    pub fn active(&self) -> bool {
        self.hooks.is_some()
    }

    /// The validating step on the object about to be stored (`new`; None
    /// for a delete).
    ///
    /// # Errors
    ///
    /// As [`Admission::mutate`].
    pub fn validate(
        &self,
        at: &At<'_>,
        old: Option<&Value>,
        new: Option<&Value>,
    ) -> Result<(), ApiError> {
        self.step(at, false, old, new).map(|_| ())
    }

    /// An admission step: the object the mutating webhooks made of `new`
    /// when they have answered for it (None for a validating step, or when
    /// no webhook's rules take the request); stops the pass when they have
    /// not answered yet.
    fn step(
        &self,
        at: &At<'_>,
        mutating: bool,
        old: Option<&Value>,
        new: Option<&Value>,
    ) -> Result<Option<Value>, ApiError> {
        let Some(hooks) = &self.hooks else {
            return Ok(None);
        };
        let user = crate::auth::UserInfo::default();
        let probe = Request {
            operation: at.operation,
            group: &at.info.group,
            version: &at.info.version,
            resource: &at.info.plural,
            subresource: at.sub.unwrap_or_default(),
            kind: &at.info.kind,
            namespace: "",
            name: "",
            namespaced: at.info.namespaced,
            object: None,
            old_object: None,
            user: &user,
            dry_run: false,
            options: Value::Null,
        };
        if !hooks.any_rule_takes(mutating, &probe) {
            return Ok(None);
        }
        let ask = Ask::new(at, mutating, old, new);
        let mut rounds = self.rounds();
        if mutating {
            if let Some((_, made)) = rounds.mutated.iter().find(|(a, _)| *a == ask) {
                return Ok(new.is_some().then(|| made.clone()));
            }
        } else if rounds.validated.contains(&ask) {
            return Ok(None);
        }
        let times = rounds.asked.iter().filter(|a| a.same_target(&ask)).count();
        if times >= MAX_ROUNDS {
            return Err(ApiError::conflict(format!(
                "Operation cannot be fulfilled on {} {:?}: the object kept changing while admission webhooks were called",
                crate::machinery::status::group_resource(&at.info.group, &at.info.plural),
                at.name
            )));
        }
        rounds.asked.push(ask.clone());
        rounds.pending = Some(Pending::Admit(ask));
        Err(ApiError::internal("admission webhooks are being called"))
    }

    /// `obj` in `desired` (an apiVersion of `info`'s group), by `info`'s
    /// conversion: the same object when it is there already or the
    /// resource has none; its apiVersion rewritten under `strategy: None`;
    /// the webhook's answer, once it has given one, under `Webhook`.
    ///
    /// # Errors
    ///
    /// The pass must stop for the webhook to be called
    /// ([`Admission::take_pending`]).
    pub fn convert(
        &self,
        info: &ResourceInfo,
        obj: &Value,
        desired: &str,
    ) -> Result<Value, ApiError> {
        let Some(conversion) = &info.conversion else {
            return Ok(obj.clone());
        };
        if obj["apiVersion"] == desired {
            return Ok(obj.clone());
        }
        if !conversion.by_webhook() {
            let mut out = obj.clone();
            conversion.rewrite(&mut out, desired);
            return Ok(out);
        }
        let mut rounds = self.rounds();
        if let Some((_, made)) = rounds
            .converted
            .iter()
            .find(|((o, d), _)| o == obj && d == desired)
        {
            return Ok(made.clone());
        }
        if rounds.converted.len() >= 4 * MAX_ROUNDS {
            return Err(ApiError::conflict(
                "the object kept changing while it was being converted",
            ));
        }
        rounds.pending = Some(Pending::Convert(
            conversion.clone(),
            obj.clone(),
            desired.to_owned(),
        ));
        Err(ApiError::internal("a conversion webhook is being called"))
    }

    /// Converts what the last pass stopped for and records the result.
    ///
    /// # Errors
    ///
    /// The conversion webhook failed (500, apiextensions-apiserver's
    /// message).
    pub async fn answer_conversion(
        &self,
        conversion: &crate::conversion::Conversion,
        obj: Value,
        desired: String,
        ctx: &Context<'_>,
    ) -> Result<(), ApiError> {
        let made = conversion
            .convert(vec![obj.clone()], &desired, ctx.store, ctx.faults)
            .await?
            .pop()
            .unwrap_or_default();
        self.rounds().converted.push(((obj, desired), made));
        Ok(())
    }

    fn rounds(&self) -> std::sync::MutexGuard<'_, Rounds> {
        self.rounds.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The step the last pass stopped at, if it stopped for webhooks.
    pub fn take_pending(&self) -> Option<Pending> {
        self.rounds().pending.take()
    }

    /// The name a generateName create gets, the same in every pass.
    pub fn generated_name(&self, make: impl FnOnce() -> String) -> String {
        self.rounds()
            .generated_name
            .get_or_insert_with(make)
            .clone()
    }

    /// The time a write records, the same in every pass.
    pub fn now(&self, make: impl FnOnce() -> String) -> String {
        self.rounds().now.get_or_insert_with(make).clone()
    }

    /// The webhooks' warnings, for the client.
    #[must_use]
    pub fn warnings(&self) -> Vec<String> {
        self.rounds().warnings.clone()
    }

    /// Asks the webhooks `ask` is for and records their answer, for the
    /// next pass to find.
    ///
    /// # Errors
    ///
    /// A denial (kube's `ToStatusErr`), a failed call under `failurePolicy:
    /// Fail` (500, `failed calling webhook ...`), a patch that does not
    /// apply, a condition that fails to evaluate under Fail (403).
    pub async fn answer(&self, ask: Ask, ctx: &Context<'_>) -> Result<(), ApiError> {
        let Some(hooks) = self.hooks.clone() else {
            return Ok(());
        };
        let namespace_labels = if ask.namespaced {
            namespace_labels(ctx.store, &ask.namespace)
        } else {
            None
        };
        let request = ask.request(ctx.user, ctx.dry_run, ctx.options.clone());
        let mut warnings = Vec::new();
        let labels = namespace_labels.as_ref();
        let outcome = if ask.mutating {
            mutate(&hooks.mutating, request, labels, ctx, &mut warnings)
                .await
                .map(Some)
        } else {
            // Policies first, then webhooks, as kube's admission chain.
            let [group, _, plural, _] = &ask.resource;
            let policies = if exempt(group, plural, true) {
                Ok(())
            } else {
                run_policies(&hooks.policies, &request, labels, ctx, &mut warnings)
            };
            match policies {
                Ok(()) if !exempt(group, plural, false) => {
                    validate(&hooks.validating, &request, labels, ctx, &mut warnings)
                        .await
                        .map(|()| None)
                }
                Ok(()) => Ok(None),
                Err(e) => Err(e),
            }
        };
        // Warnings reach the client even when a webhook denies.
        let mut rounds = self.rounds();
        rounds.warnings.extend(warnings);
        match outcome? {
            Some(made) => rounds.mutated.push((ask, made)),
            None => rounds.validated.push(ask),
        }
        Ok(())
    }
}

/// What a pass stopped for.
#[derive(Debug)]
pub enum Pending {
    /// An admission step ([`Admission::answer`]).
    Admit(Ask),
    /// A conversion ([`Admission::answer_conversion`]): by the resource's
    /// conversion, the object, into the apiVersion.
    Convert(Arc<crate::conversion::Conversion>, Value, String),
}

fn namespace_labels(store: &Store, ns: &str) -> Option<Map<String, Value>> {
    let found = store.get(&crate::storage::store::namespaces_key(), "", ns)?;
    found.value()["metadata"]["labels"].as_object().cloned()
}
