//! What starts a round before the timer does: a watch on the ring's member
//! Leases that signals when another member's Lease appears, goes, or
//! changes its holder or the slots it lists. Renewals alone — every
//! member's Lease, every round — change neither, and start nothing.

use std::collections::HashMap;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;

use super::member::{ANNOTATION, LABEL};

/// What of a member Lease matters to the others: its holder and the
/// slots it lists (as written).
type Claim = (Option<String>, Option<String>);

fn claim(lease: &Lease) -> Claim {
    (
        lease.spec.as_ref().and_then(|s| s.holder_identity.clone()),
        lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION).cloned()),
    )
}

/// Watch the Leases of `ring` on `api` forever, bumping `changed` at every
/// change of another member's claim (the member's own Lease, `own`, is
/// ignored). A watch that fails is resumed with kube-runtime's default
/// backoff; meanwhile rounds run on their timer alone.
pub(crate) async fn watch_ring(
    api: Api<Lease>,
    ring: &str,
    own: &str,
    changed: watch::Sender<u64>,
) {
    let config = watcher::Config::default().labels(&format!("{LABEL}={ring}"));
    let mut events = watcher(api, config).default_backoff().boxed();
    let mut claims: HashMap<String, Claim> = HashMap::new();
    let mut relisted: HashMap<String, Claim> = HashMap::new();
    let bump = || changed.send_modify(|n| *n = n.wrapping_add(1));
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(e) => e,
            Err(e) => {
                tracing::debug!(ring, error = %e, "member Lease watch failed; retrying");
                continue;
            }
        };
        let name = |l: &Lease| l.metadata.name.clone().unwrap_or_default();
        match event {
            watcher::Event::Init => relisted.clear(),
            watcher::Event::InitApply(l) if name(&l) != own => {
                relisted.insert(name(&l), claim(&l));
            }
            watcher::Event::InitDone => {
                if relisted != claims {
                    claims = std::mem::take(&mut relisted);
                    bump();
                }
            }
            watcher::Event::Apply(l) if name(&l) != own => {
                let c = claim(&l);
                if claims.get(&name(&l)) != Some(&c) {
                    claims.insert(name(&l), c);
                    bump();
                }
            }
            watcher::Event::Delete(l) if name(&l) != own => {
                if claims.remove(&name(&l)).is_some() {
                    bump();
                }
            }
            _ => {}
        }
    }
}
