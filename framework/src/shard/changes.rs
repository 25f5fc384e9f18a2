//! What starts a round before the timer does: a watch on the ring's member
//! Leases that signals when another member's Lease appears, goes, changes
//! its holder, or stops listing a slot — the changes after which this
//! member may have to release (a join) or may claim (a leave, a release).
//! Renewals — every member's Lease, every round — and claims (a Lease
//! listing more) start nothing: a claim gives this member nothing to do
//! that its own rounds' verification does not already cover, and
//! answering claims would chain rounds across the ring.

use std::collections::HashMap;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;

use super::lease::{ANNOTATION, LABEL};
use super::ring::Slots;

/// What of a member Lease matters to the others: its holder and the
/// slots it lists (an unreadable list counts as every slot, as a round
/// counts it).
type Claim = (Option<String>, Slots);

fn claim(lease: &Lease) -> Claim {
    let slots = lease
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION))
        .map_or(Slots::NONE, |h| Slots::from_hex(h).unwrap_or(Slots::ALL));
    (
        lease.spec.as_ref().and_then(|s| s.holder_identity.clone()),
        slots,
    )
}

/// Whether going from `before` to `after` may give this member work: a
/// Lease that appeared or went, a new holder, or a slot no longer listed.
fn matters(before: Option<&Claim>, after: Option<&Claim>) -> bool {
    match (before, after) {
        (Some((h0, s0)), Some((h1, s1))) => h0 != h1 || !s0.minus(*s1).is_empty(),
        (None, None) => false,
        _ => true,
    }
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
                let changed = claims
                    .keys()
                    .chain(relisted.keys())
                    .any(|n| matters(claims.get(n), relisted.get(n)));
                claims = std::mem::take(&mut relisted);
                if changed {
                    bump();
                }
            }
            watcher::Event::Apply(l) if name(&l) != own => {
                let c = claim(&l);
                if matters(claims.get(&name(&l)), Some(&c)) {
                    bump();
                }
                claims.insert(name(&l), c);
            }
            watcher::Event::Delete(l) if name(&l) != own => {
                let gone = claims.remove(&name(&l));
                if gone.is_some() {
                    bump();
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_leaves_new_holders_and_releases_matter_claims_and_renewals_do_not() {
        let some = |bits: &[usize]| {
            let mut s = Slots::NONE;
            for b in bits {
                s = s.union(Slots::one(*b));
            }
            s
        };
        let a = |slots| (Some("a".to_string()), slots);
        assert!(matters(None, Some(&a(Slots::NONE))), "a join");
        assert!(matters(Some(&a(some(&[1]))), None), "a leave");
        assert!(
            matters(Some(&a(some(&[1, 2]))), Some(&a(some(&[1])))),
            "a release"
        );
        assert!(
            matters(Some(&a(some(&[1]))), Some(&(Some("b".into()), some(&[1])))),
            "a new holder"
        );
        assert!(
            !matters(Some(&a(some(&[1]))), Some(&a(some(&[1, 2])))),
            "a claim"
        );
        assert!(
            !matters(Some(&a(some(&[1]))), Some(&a(some(&[1])))),
            "a renewal"
        );
    }
}
