//! CNS's in-memory IPAM state: network containers (NCs) by id with the
//! version the host programmed, and one IP config per pod address with its
//! NC and state.
//!
//! Two models of it, behind one trait ([`Ipam`]):
//!
//! - [`ByAddress`], upstream's: IP configs keyed by the address string
//!   (in overlay the IP id IS the address). It carries the three open bugs
//!   of the seed report: a dropped NC's IPs stay behind, still naming it;
//!   an IP that "already exists" under another NC is skipped on ingest; and
//!   marking an NC programmed flips every config of its addresses, whatever
//!   NC they name.
//! - [`ByContainer`], Ward's: IP configs keyed by (NC id, address), so none
//!   of the three can be written. Dropping an NC purges its IPs (an
//!   Assigned one moves to the NC that now carries its address, or is
//!   dropped when none does); ingesting an address that another NC still
//!   holds is refused ([`IpamError::ForeignIp`]), atomically; marking an NC
//!   programmed touches only its own IPs.
//!
//! Both are pure state machines (no I/O, no clock): the agent drives them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::model::NetworkContainer;

/// Errors of the IPAM state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IpamError {
    /// No IP is Available.
    #[error("no IP is available")]
    NoneAvailable,
    /// The Available IP picked names an NC that is not in state (the
    /// seed's "Assignment error": the node cannot assign any IP).
    #[error("IP {ip} names network container {nc}, which is not in state")]
    NcNotFound {
        /// The address.
        ip: String,
        /// The NC it names.
        nc: String,
    },
    /// Ingest refused: the address is held by another NC that stays.
    #[error("IP {ip} of network container {nc} already exists under network container {held_by}")]
    ForeignIp {
        /// The address.
        ip: String,
        /// The NC being ingested.
        nc: String,
        /// The NC that holds it.
        held_by: String,
    },
    /// An NC's addresses cannot be read.
    #[error("network container {nc}: {detail}")]
    BadContainer {
        /// The NC.
        nc: String,
        /// What is wrong.
        detail: String,
    },
    /// A pod's address (on restore) is assigned to another pod.
    #[error("pod {pod}'s IP {ip} is assigned to {holder}")]
    HeldByAnother {
        /// The pod.
        pod: String,
        /// Its address.
        ip: String,
        /// The pod CNS has it assigned to.
        holder: String,
    },
    /// A pod's address (on restore) is not in state.
    #[error("pod {pod}'s IP {ip} is not in state")]
    UnknownIp {
        /// The pod.
        pod: String,
        /// Its address.
        ip: String,
    },
}

/// The state of one IP config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum IpState {
    /// Loaded from an NC the host has not programmed yet.
    PendingProgramming,
    /// Free to assign.
    Available,
    /// Held by a pod.
    Assigned,
}

/// One IP config.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct IpConfig {
    /// The address.
    pub ip: String,
    /// The NC it was loaded from.
    pub nc: String,
    /// Its state.
    pub state: IpState,
    /// The pod holding it (Assigned).
    pub pod: Option<String>,
}

/// One NC in state.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NcState {
    /// Its version in the NNC.
    pub version: i64,
    /// The version the host reported programmed (-1 until it does).
    pub host_version: i64,
    /// Its addresses.
    pub ips: Vec<String>,
}

/// The IPAM state CNS keeps; see the module docs for the two models.
pub trait Ipam: Send + fmt::Debug {
    /// Reconcile state with the NNC's NCs (the full list).
    /// Returns what changed, for the journal.
    fn ingest(&mut self, ncs: &[NetworkContainer]) -> Result<Vec<String>, IpamError>;
    /// The host reports `nc` programmed at `host_version`; IPs of the NC
    /// become Available once it is at the NC's version. Returns how many.
    fn mark_programmed(&mut self, nc: &str, host_version: i64) -> usize;
    /// CNI ADD: an IP for `pod` (the one it holds, if any).
    fn request(&mut self, pod: &str) -> Result<IpConfig, IpamError>;
    /// CNI DEL: free `pod`'s IP.
    fn release(&mut self, pod: &str) -> Option<IpConfig>;
    /// On restart: `pod` holds `ip` (from the pod's record).
    fn restore(&mut self, pod: &str, ip: &str) -> Result<(), IpamError>;
    /// The NCs in state.
    fn ncs(&self) -> &BTreeMap<String, NcState>;
    /// Every IP config.
    fn configs(&self) -> Vec<IpConfig>;

    /// How many IPs are Available.
    fn available(&self) -> usize {
        self.configs()
            .iter()
            .filter(|c| c.state == IpState::Available)
            .count()
    }
}

fn addresses(nc: &NetworkContainer) -> Result<Vec<String>, IpamError> {
    nc.ips().map_err(|e| IpamError::BadContainer {
        nc: nc.id.clone(),
        detail: e.to_string(),
    })
}

/// Upsert `nc` into `ncs`, keeping the host version it had.
fn upsert(ncs: &mut BTreeMap<String, NcState>, nc: &NetworkContainer, ips: Vec<String>) {
    let e = ncs.entry(nc.id.clone()).or_insert(NcState {
        version: nc.version,
        host_version: -1,
        ips: Vec::new(),
    });
    e.version = nc.version;
    e.ips = ips;
}

/// Mark the NC programmed; whether its IPs may become Available now.
fn programmed<'a>(
    ncs: &'a mut BTreeMap<String, NcState>,
    nc: &str,
    host_version: i64,
) -> Option<&'a NcState> {
    let s = ncs.get_mut(nc)?;
    s.host_version = host_version;
    (host_version >= s.version).then_some(&*s)
}

/// CNI ADD over either model's configs: the IP `pod` holds, or the first
/// Available one, provided its NC is in state (else the seed's assignment
/// error, and the IP stays Available).
fn request<K>(
    ips: &mut BTreeMap<K, IpConfig>,
    ncs: &BTreeMap<String, NcState>,
    pod: &str,
) -> Result<IpConfig, IpamError> {
    if let Some(c) = ips.values().find(|c| c.pod.as_deref() == Some(pod)) {
        return Ok(c.clone());
    }
    let c = ips
        .values_mut()
        .find(|c| c.state == IpState::Available)
        .ok_or(IpamError::NoneAvailable)?;
    if !ncs.contains_key(&c.nc) {
        return Err(IpamError::NcNotFound {
            ip: c.ip.clone(),
            nc: c.nc.clone(),
        });
    }
    c.state = IpState::Assigned;
    c.pod = Some(pod.to_string());
    Ok(c.clone())
}

/// CNI DEL over either model's configs.
fn release<K>(ips: &mut BTreeMap<K, IpConfig>, pod: &str) -> Option<IpConfig> {
    let c = ips.values_mut().find(|c| c.pod.as_deref() == Some(pod))?;
    c.state = IpState::Available;
    c.pod = None;
    Some(c.clone())
}

/// Restore: `c` is `pod`'s, unless another pod holds it.
fn assign(c: &mut IpConfig, pod: &str) -> Result<(), IpamError> {
    if let Some(holder) = c.pod.as_deref().filter(|h| *h != pod) {
        return Err(IpamError::HeldByAnother {
            pod: pod.into(),
            ip: c.ip.clone(),
            holder: holder.into(),
        });
    }
    c.state = IpState::Assigned;
    c.pod = Some(pod.to_string());
    Ok(())
}

/// Upstream's IPAM state: IP configs keyed by address string.
#[derive(Debug, Default)]
pub struct ByAddress {
    ncs: BTreeMap<String, NcState>,
    ips: BTreeMap<String, IpConfig>,
}

impl Ipam for ByAddress {
    fn ingest(&mut self, ncs: &[NetworkContainer]) -> Result<Vec<String>, IpamError> {
        let mut notes = Vec::new();
        let keep: BTreeSet<&str> = ncs.iter().map(|n| n.id.as_str()).collect();
        let dropped: Vec<String> = self
            .ncs
            .keys()
            .filter(|id| !keep.contains(id.as_str()))
            .cloned()
            .collect();
        for id in dropped {
            // The bug: the NC goes, its IPs stay and still name it.
            self.ncs.remove(&id);
            let left = self.ips.values().filter(|c| c.nc == id).count();
            notes.push(format!("dropped NC {id}; its {left} IPs stay in state"));
        }
        for nc in ncs {
            let ips = addresses(nc)?;
            let (mut added, mut skipped) = (0, 0);
            for ip in &ips {
                if self.ips.contains_key(ip) {
                    // The bug: "already loaded" — under whichever NC.
                    skipped += 1;
                } else {
                    self.ips.insert(
                        ip.clone(),
                        IpConfig {
                            ip: ip.clone(),
                            nc: nc.id.clone(),
                            state: IpState::PendingProgramming,
                            pod: None,
                        },
                    );
                    added += 1;
                }
            }
            upsert(&mut self.ncs, nc, ips);
            notes.push(format!(
                "NC {} v{}: {added} IPs loaded, {skipped} already present",
                nc.id, nc.version
            ));
        }
        Ok(notes)
    }

    fn mark_programmed(&mut self, nc: &str, host_version: i64) -> usize {
        let Some(s) = programmed(&mut self.ncs, nc, host_version) else {
            return 0;
        };
        let mut n = 0;
        for ip in &s.ips {
            // The bug: by address only, whatever NC the config names.
            if let Some(c) = self.ips.get_mut(ip)
                && c.state == IpState::PendingProgramming
            {
                c.state = IpState::Available;
                n += 1;
            }
        }
        n
    }

    fn request(&mut self, pod: &str) -> Result<IpConfig, IpamError> {
        request(&mut self.ips, &self.ncs, pod)
    }

    fn release(&mut self, pod: &str) -> Option<IpConfig> {
        release(&mut self.ips, pod)
    }

    fn restore(&mut self, pod: &str, ip: &str) -> Result<(), IpamError> {
        let c = self.ips.get_mut(ip).ok_or_else(|| IpamError::UnknownIp {
            pod: pod.into(),
            ip: ip.into(),
        })?;
        assign(c, pod)
    }

    fn ncs(&self) -> &BTreeMap<String, NcState> {
        &self.ncs
    }

    fn configs(&self) -> Vec<IpConfig> {
        self.ips.values().cloned().collect()
    }
}

/// Ward's IPAM state: IP configs keyed by (NC id, address).
#[derive(Debug, Default)]
pub struct ByContainer {
    ncs: BTreeMap<String, NcState>,
    ips: BTreeMap<(String, String), IpConfig>,
}

impl Ipam for ByContainer {
    fn ingest(&mut self, ncs: &[NetworkContainer]) -> Result<Vec<String>, IpamError> {
        // Check everything first: a refused ingest changes nothing.
        let mut incoming: Vec<(&NetworkContainer, Vec<String>)> = Vec::new();
        let mut carrier: BTreeMap<String, String> = BTreeMap::new();
        for nc in ncs {
            let ips = addresses(nc)?;
            for ip in &ips {
                if let Some(other) = carrier.insert(ip.clone(), nc.id.clone()) {
                    return Err(IpamError::ForeignIp {
                        ip: ip.clone(),
                        nc: nc.id.clone(),
                        held_by: other,
                    });
                }
            }
            incoming.push((nc, ips));
        }
        let keep: BTreeSet<&str> = ncs.iter().map(|n| n.id.as_str()).collect();
        for (nc, ip) in self.ips.keys() {
            if let Some(new) = carrier.get(ip)
                && new != nc
                && keep.contains(nc.as_str())
            {
                return Err(IpamError::ForeignIp {
                    ip: ip.clone(),
                    nc: new.clone(),
                    held_by: nc.clone(),
                });
            }
        }
        let mut notes = Vec::new();
        // Purge every IP config whose NC no longer carries its address (the
        // NC was dropped, or its prefix changed); Assigned ones move to the
        // NC that now carries the address.
        let dropped: Vec<String> = self
            .ncs
            .keys()
            .filter(|id| !keep.contains(id.as_str()))
            .cloned()
            .collect();
        let stale: Vec<(String, String)> = self
            .ips
            .keys()
            .filter(|(nc, ip)| carrier.get(ip) != Some(nc))
            .cloned()
            .collect();
        let mut moving: BTreeMap<String, String> = BTreeMap::new();
        let mut counts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for key in stale {
            let c = self.ips.remove(&key).expect("listed above");
            let (purged, moved) = counts.entry(key.0).or_default();
            match (c.state, c.pod) {
                (IpState::Assigned, Some(pod)) if carrier.contains_key(&c.ip) => {
                    moving.insert(c.ip, pod);
                    *moved += 1;
                }
                (IpState::Assigned, Some(pod)) => {
                    notes.push(format!("pod {pod} loses {}: no NC carries it now", c.ip));
                    *purged += 1;
                }
                _ => *purged += 1,
            }
        }
        for id in dropped {
            self.ncs.remove(&id);
            let (purged, moved) = counts.remove(&id).unwrap_or_default();
            notes.push(format!(
                "dropped NC {id} with its IPs ({purged} purged, {moved} assigned moved)"
            ));
        }
        for (id, (purged, moved)) in counts {
            notes.push(format!(
                "NC {id} no longer carries {} IPs ({purged} purged, {moved} assigned moved)",
                purged + moved
            ));
        }
        for (nc, ips) in incoming {
            let mut added = 0;
            for ip in &ips {
                let key = (nc.id.clone(), ip.clone());
                if self.ips.contains_key(&key) {
                    continue;
                }
                let pod = moving.remove(ip);
                let state = if pod.is_some() {
                    IpState::Assigned
                } else {
                    IpState::PendingProgramming
                };
                self.ips.insert(
                    key,
                    IpConfig {
                        ip: ip.clone(),
                        nc: nc.id.clone(),
                        state,
                        pod,
                    },
                );
                added += 1;
            }
            upsert(&mut self.ncs, nc, ips);
            notes.push(format!("NC {} v{}: {added} IPs loaded", nc.id, nc.version));
        }
        Ok(notes)
    }

    fn mark_programmed(&mut self, nc: &str, host_version: i64) -> usize {
        if programmed(&mut self.ncs, nc, host_version).is_none() {
            return 0;
        }
        let mut n = 0;
        for (_, c) in self
            .ips
            .range_mut((nc.to_string(), String::new())..)
            .take_while(|((id, _), _)| id == nc)
        {
            if c.state == IpState::PendingProgramming {
                c.state = IpState::Available;
                n += 1;
            }
        }
        n
    }

    fn request(&mut self, pod: &str) -> Result<IpConfig, IpamError> {
        // An Available IP always names an NC in state here (dropping an NC
        // purges its IPs); `request` still checks.
        request(&mut self.ips, &self.ncs, pod)
    }

    fn release(&mut self, pod: &str) -> Option<IpConfig> {
        release(&mut self.ips, pod)
    }

    fn restore(&mut self, pod: &str, ip: &str) -> Result<(), IpamError> {
        let c = self
            .ips
            .values_mut()
            .find(|c| c.ip == ip)
            .ok_or_else(|| IpamError::UnknownIp {
                pod: pod.into(),
                ip: ip.into(),
            })?;
        assign(c, pod)
    }

    fn ncs(&self) -> &BTreeMap<String, NcState> {
        &self.ncs
    }

    fn configs(&self) -> Vec<IpConfig> {
        self.ips.values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cns::model::OVERLAY;

    fn nc(id: &str, prefix: &str) -> NetworkContainer {
        NetworkContainer {
            id: id.into(),
            type_: OVERLAY.into(),
            primary_ip: prefix.into(),
            subnet_address_space: "10.244.0.0/16".into(),
            ip_assignments: vec![],
            version: 1,
        }
    }

    /// IP configs naming an NC that is not in state (invariant I1).
    fn orphans(s: &dyn Ipam) -> Vec<IpConfig> {
        s.configs()
            .into_iter()
            .filter(|c| !s.ncs().contains_key(&c.nc))
            .collect()
    }

    /// The seed, steps 4–8: a stale NC loaded, then replaced by a new NC
    /// with the same prefix that the host programs.
    fn seed_sequence(s: &mut dyn Ipam) -> Result<IpConfig, IpamError> {
        s.ingest(&[nc("nc1", "10.244.1.0/30")])?;
        s.ingest(&[nc("nc2", "10.244.1.0/30")])?;
        s.mark_programmed("nc2", 1);
        s.request("pod-a")
    }

    #[test]
    fn upstream_state_reproduces_the_seed_node_that_cannot_assign() {
        let mut s = ByAddress::default();
        let err = seed_sequence(&mut s).unwrap_err();
        assert_eq!(
            err,
            IpamError::NcNotFound {
                ip: "10.244.1.0".into(),
                nc: "nc1".into()
            }
        );
        // Every config still names the stale NC, yet all are Available.
        assert_eq!(orphans(&s).len(), 4);
        assert_eq!(s.available(), 4);
        // ... and it never recovers.
        assert!(s.request("pod-b").is_err());
    }

    #[test]
    fn wards_state_purges_the_stale_nc_and_assigns_from_the_new_one() {
        let mut s = ByContainer::default();
        let got = seed_sequence(&mut s).unwrap();
        assert_eq!((got.ip.as_str(), got.nc.as_str()), ("10.244.1.0", "nc2"));
        assert!(orphans(&s).is_empty());
        assert_eq!(s.available(), 3);
    }

    #[test]
    fn marking_available_touches_only_the_ncs_own_ips() {
        // Upstream: NC2 programmed flips NC1's configs (same addresses).
        let mut up = ByAddress::default();
        up.ingest(&[nc("nc1", "10.244.1.0/30")]).unwrap();
        up.ingest(&[nc("nc2", "10.244.1.0/30")]).unwrap();
        assert_eq!(up.mark_programmed("nc2", 1), 4);
        assert!(up.configs().iter().all(|c| c.nc == "nc1"));
        // Ward: nothing of another NC is touched; unprogrammed versions
        // mark nothing.
        let mut w = ByContainer::default();
        w.ingest(&[nc("nc1", "10.244.1.0/30"), nc("nc3", "10.244.2.0/30")])
            .unwrap();
        assert_eq!(w.mark_programmed("nc1", 0), 0);
        assert_eq!(w.mark_programmed("nc1", 1), 4);
        assert!(
            w.configs()
                .iter()
                .filter(|c| c.nc == "nc3")
                .all(|c| c.state == IpState::PendingProgramming)
        );
        assert_eq!(w.mark_programmed("gone", 1), 0);
    }

    #[test]
    fn ingesting_an_address_another_nc_holds_is_refused_and_changes_nothing() {
        let mut w = ByContainer::default();
        w.ingest(&[nc("nc1", "10.244.1.0/30")]).unwrap();
        let before = w.configs();
        // nc1 stays and nc2 overlaps it: refused.
        let err = w
            .ingest(&[nc("nc1", "10.244.1.0/30"), nc("nc2", "10.244.1.2/31")])
            .unwrap_err();
        assert_eq!(
            err,
            IpamError::ForeignIp {
                ip: "10.244.1.2".into(),
                nc: "nc2".into(),
                held_by: "nc1".into()
            }
        );
        assert_eq!(w.configs(), before);
        assert!(!w.ncs().contains_key("nc2"));
        // Upstream skips the overlap silently: nc2 "has" addresses whose
        // configs name nc1.
        let mut up = ByAddress::default();
        up.ingest(&[nc("nc1", "10.244.1.0/30")]).unwrap();
        up.ingest(&[nc("nc1", "10.244.1.0/30"), nc("nc2", "10.244.1.2/31")])
            .unwrap();
        assert!(up.configs().iter().all(|c| c.nc == "nc1"));
    }

    #[test]
    fn a_dropped_nc_with_assigned_ips_does_not_panic_and_keeps_its_pods() {
        let mut w = ByContainer::default();
        w.ingest(&[nc("nc1", "10.244.1.0/30")]).unwrap();
        w.mark_programmed("nc1", 1);
        let held = w.request("pod-a").unwrap();
        // nc1 replaced by nc2 carrying the same prefix: pod-a keeps its IP,
        // now under nc2; the rest wait for nc2 to be programmed.
        w.ingest(&[nc("nc2", "10.244.1.0/30")]).unwrap();
        assert!(orphans(&w).is_empty());
        let now = w.request("pod-a").unwrap();
        assert_eq!(
            (now.ip, now.nc, now.state),
            (held.ip, "nc2".into(), IpState::Assigned)
        );
        assert_eq!(w.request("pod-b"), Err(IpamError::NoneAvailable));
        w.mark_programmed("nc2", 1);
        assert_eq!(w.request("pod-b").unwrap().ip, "10.244.1.1");
        // Dropped with no NC carrying its address: the pod loses it.
        let notes = w.ingest(&[nc("nc3", "10.244.9.0/30")]).unwrap();
        assert!(
            notes.iter().any(|n| n.contains("pod-a loses 10.244.1.0")),
            "{notes:?}"
        );
        assert!(orphans(&w).is_empty());
        assert_eq!(w.release("pod-a"), None);
    }

    #[test]
    fn a_kept_nc_whose_prefix_changed_drops_the_addresses_it_no_longer_carries() {
        let mut w = ByContainer::default();
        w.ingest(&[nc("nc1", "10.244.1.0/30")]).unwrap();
        w.mark_programmed("nc1", 1);
        w.request("pod-a").unwrap();
        let notes = w.ingest(&[nc("nc1", "10.244.1.2/31")]).unwrap();
        assert!(
            notes.iter().any(|n| n.contains("pod-a loses 10.244.1.0")),
            "{notes:?}"
        );
        let ips: Vec<String> = w.configs().into_iter().map(|c| c.ip).collect();
        assert_eq!(ips, ["10.244.1.2", "10.244.1.3"]);
        // The freed addresses can go to another NC without a refusal.
        w.ingest(&[nc("nc1", "10.244.1.2/31"), nc("nc2", "10.244.1.0/31")])
            .unwrap();
    }

    #[test]
    fn request_release_and_restore() {
        for s in [
            &mut ByAddress::default() as &mut dyn Ipam,
            &mut ByContainer::default(),
        ] {
            s.ingest(&[nc("nc1", "10.244.1.0/31")]).unwrap();
            assert_eq!(s.request("p"), Err(IpamError::NoneAvailable));
            s.restore("old", "10.244.1.1").unwrap();
            assert!(matches!(
                s.restore("other", "10.244.1.1"),
                Err(IpamError::HeldByAnother { .. })
            ));
            assert!(matches!(
                s.restore("x", "10.9.9.9"),
                Err(IpamError::UnknownIp { .. })
            ));
            s.mark_programmed("nc1", 1);
            let a = s.request("p").unwrap();
            assert_eq!(a.ip, "10.244.1.0", "the restored address is not handed out");
            assert_eq!(s.request("p").unwrap(), a, "a retried ADD gets the same IP");
            assert_eq!(s.request("q"), Err(IpamError::NoneAvailable));
            assert_eq!(s.release("old").unwrap().ip, "10.244.1.1");
            assert_eq!(s.request("q").unwrap().ip, "10.244.1.1");
        }
    }
}
