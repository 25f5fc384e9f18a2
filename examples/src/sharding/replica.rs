//! One replica, naive or guarded, and the reconcile both run.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use tokio::sync::watch;
use ward_guards::await_deletion::AwaitDeletion;
use ward_runtime::GuardedController;
use ward_runtime::clock::Clock;
use ward_runtime::shard::{ANNOTATION, LABEL, Member, Ring, ShardKey, Slots};

use super::invariants::Running;

pub use super::{BY, NAMESPACE, RING, SEEN, WANT};
/// How long a member Lease lasts.
pub const LEASE: Duration = Duration::from_secs(6);
/// How often a member renews (and looks at the ring).
pub const RENEW: Duration = Duration::from_secs(1);
/// How long a reconcile decides before it writes, at most: 300 ms plus
/// 13 ms per object number (`obj-07`: 391 ms), so that reconciles started
/// together end apart. kube-runtime releases triggers held for an object
/// under reconcile in the order of a foldhash set, whose seed no
/// simulation controls: two released at one instant would make a run
/// replay differently (see `ward_campaign::entropy`).
pub const WORK: Duration = Duration::from_millis(300 + 13 * 31);

/// [`WORK`] for one object.
fn work(name: &str) -> Duration {
    let n: u64 = name.trim_start_matches("obj-").parse().unwrap_or(0);
    Duration::from_millis(300 + 13 * (n % 32))
}
/// How soon an object is reconciled again.
pub const AGAIN: Duration = Duration::from_secs(3);

/// Which replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Each replica reconciles what its own current view of the ring gives it.
    Naive,
    /// Ward's hand-over protocol.
    Guarded,
}

impl Mode {
    /// Both, naive first.
    pub const ALL: [Mode; 2] = [Mode::Naive, Mode::Guarded];
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Naive => "naive",
            Mode::Guarded => "guarded",
        })
    }
}

/// What every reconcile of one replica shares.
struct Ctx {
    who: String,
    api: Api<ConfigMap>,
    secrets: Api<Secret>,
    running: Running,
    /// When this replica last wrote each object.
    wrote: Mutex<HashMap<String, tokio::time::Instant>>,
}

impl Ctx {
    fn new(who: String, client: &Client, running: Running) -> Arc<Ctx> {
        Arc::new(Ctx {
            who,
            api: Api::namespaced(client.clone(), NAMESPACE),
            secrets: Api::namespaced(client.clone(), NAMESPACE),
            running,
            wrote: Mutex::default(),
        })
    }
}

/// The guard both variants run before every reconcile: it reads the
/// object fresh (a consistent read, from the shard-filtered watch cache
/// once that has caught up) and skips a reconcile of an object gone or
/// replaced, then waits while a Secret of its name belongs to another
/// owner. Each reconcile makes that Secret, so the child check has work;
/// the fresh read is what a sharded guard must get right (issue #44: a
/// cache listed under the slots held before a takeover read the owners
/// in the gained slots as gone, and they were never reconciled — I3).
fn guard() -> AwaitDeletion<ConfigMap, Secret> {
    AwaitDeletion::new(ResourceExt::name_any)
}

/// Read, decide, write back: a counter, the writer's name, and the mark
/// of the last change it saw (`want` copied to `seen`); the first
/// reconcile of an object makes its Secret.
///
/// Its own write comes back on its watch and triggers a reconcile: that
/// one writes nothing until [`AGAIN`] has passed since the write (unless
/// `want` moved meanwhile), so each object is written about every
/// [`AGAIN`] plus [`WORK`], not back to back.
async fn reconcile(cm: Arc<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
    let data = cm.data.as_ref();
    let echo = cm.annotations().get(BY) == Some(&ctx.who)
        && data.and_then(|d| d.get(SEEN)) == data.and_then(|d| d.get(WANT));
    let last = lock(&ctx.wrote).get(&cm.name_any()).copied();
    if echo
        && let Some(since) = last.map(|t| t.elapsed())
        && since < AGAIN
    {
        return Ok(Action::requeue(AGAIN - since));
    }
    let _running = ctx.running.enter(&ctx.who, &cm.name_any());
    tokio::time::sleep(work(&cm.name_any())).await;
    let mut next = (*cm).clone();
    let data = next.data.get_or_insert_with(BTreeMap::new);
    let count: u64 = data.get("count").and_then(|c| c.parse().ok()).unwrap_or(0);
    if count == 0 {
        // The first reconcile makes the Secret (until a write of the
        // count lands, every reconcile tries: AlreadyExists is fine).
        let mut secret = Secret::default();
        secret.metadata.name = Some(cm.name_any());
        secret.metadata.owner_references = cm.controller_owner_ref(&()).map(|r| vec![r]);
        match ctx.secrets.create(&PostParams::default(), &secret).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    data.insert("count".into(), (count + 1).to_string());
    if let Some(want) = data.get(WANT).cloned() {
        data.insert(SEEN.into(), want);
    }
    next.annotations_mut().insert(BY.into(), ctx.who.clone());
    match ctx
        .api
        .replace(&cm.name_any(), &PostParams::default(), &next)
        .await
    {
        Ok(_) => {
            lock(&ctx.wrote).insert(cm.name_any(), tokio::time::Instant::now());
            Ok(Action::requeue(AGAIN))
        }
        // Someone wrote it since the cache saw it: the watch brings it back.
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(Action::requeue(AGAIN)),
        Err(e) => Err(e),
    }
}

/// Run replica `who` in `mode` on `client` until `leave` says so (a
/// graceful leave); dropping the future is a crash.
pub async fn run(
    mode: Mode,
    client: Client,
    who: String,
    clock: Clock,
    running: Running,
    mut leave: watch::Receiver<bool>,
) {
    let leaving = async move {
        let _ = leave.wait_for(|l| *l).await;
    };
    match mode {
        Mode::Guarded => {
            let member = Member::new(client.clone(), NAMESPACE, RING, who.clone())
                .key(ShardKey::Uid)
                .lease_duration(LEASE)
                .renew_every(RENEW)
                .retry_every(RENEW)
                .drain_timeout(Duration::from_secs(2))
                .clock(clock);
            let _ = member
                .run(
                    |shard| async move {
                        let ctx = Ctx::new(who, &shard.client(client), running);
                        GuardedController::new(ctx.api.clone(), watcher::Config::default())
                            .shard(shard.clone())
                            .guard(guard())
                            .graceful_shutdown_on(shard.stopping())
                            .run(reconcile, |_, _, _| Action::requeue(AGAIN), ctx)
                            .for_each(|_| async {})
                            .await;
                    },
                    leaving,
                )
                .await;
        }
        Mode::Naive => naive(client, who, clock, running, leaving).await,
    }
}

/// The naive replica: a member Lease renewed with the slots its own view
/// gives it, and a controller that reconciles exactly those, at once.
async fn naive(
    client: Client,
    who: String,
    clock: Clock,
    running: Running,
    leaving: impl Future<Output = ()>,
) {
    let mine = Arc::new(Mutex::new(Slots::NONE));
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let ctx = Ctx::new(who.clone(), &client, running);
    let (stop_tx, stop_rx) = watch::channel(false);
    let gate = mine.clone();
    let controller = GuardedController::new(ctx.api.clone(), watcher::Config::default())
        .guard(guard())
        .graceful_shutdown_on(async move {
            let mut rx = stop_rx;
            let _ = rx.wait_for(|s| *s).await;
        })
        .run(
            move |cm: Arc<ConfigMap>, ctx: Arc<Ctx>| {
                let ours = ShardKey::Uid.hash(&cm.metadata).is_some_and(|h| {
                    gate.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .contains_hash(h)
                });
                async move {
                    if !ours {
                        return Ok(Action::await_change());
                    }
                    reconcile(cm, ctx).await
                }
            },
            |_, _, _| Action::requeue(AGAIN),
            ctx,
        )
        .for_each(|_| async {});
    let name = format!("{RING}-{who}");
    let membership = async {
        loop {
            let _ = renew(&leases, &name, &who, &clock, &mine).await;
            tokio::time::sleep(RENEW).await;
        }
    };
    tokio::select! {
        biased;
        () = controller => {}
        () = membership => {}
        () = leaving => {
            let _ = stop_tx.send(true);
            let _ = leases.delete(&name, &DeleteParams::default()).await;
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One naive round: list the Leases, take the slots the view gives, renew.
async fn renew(
    leases: &Api<Lease>,
    name: &str,
    who: &str,
    clock: &Clock,
    mine: &Mutex<Slots>,
) -> Result<(), kube::Error> {
    let list = leases
        .list(&ListParams::default().labels(&format!("{LABEL}={RING}")))
        .await?;
    let now = clock.now();
    let mut members: BTreeSet<String> = [who.to_string()].into();
    let mut current = None;
    for l in list.items {
        if l.metadata.name.as_deref() == Some(name) {
            current = Some(l);
            continue;
        }
        let Some(spec) = &l.spec else { continue };
        let (Some(holder), Some(renewed), Some(secs)) = (
            &spec.holder_identity,
            &spec.renew_time,
            spec.lease_duration_seconds,
        ) else {
            continue;
        };
        if renewed.0 + jiff::SignedDuration::from_secs(i64::from(secs)) > now {
            members.insert(holder.clone());
        }
    }
    let slots = Ring::new(members).slots_of(who);
    *mine.lock().unwrap_or_else(|e| e.into_inner()) = slots;
    let mut lease = current.unwrap_or_else(|| {
        let mut l = Lease::default();
        l.metadata.name = Some(name.to_string());
        l
    });
    lease.labels_mut().insert(LABEL.into(), RING.into());
    lease
        .annotations_mut()
        .insert(ANNOTATION.into(), slots.to_hex());
    lease.spec = Some(LeaseSpec {
        holder_identity: Some(who.to_string()),
        renew_time: Some(MicroTime(now)),
        lease_duration_seconds: Some(LEASE.as_secs() as i32),
        ..LeaseSpec::default()
    });
    match lease.metadata.resource_version {
        None => leases.create(&PostParams::default(), &lease).await?,
        Some(_) => leases.replace(name, &PostParams::default(), &lease).await?,
    };
    Ok(())
}
