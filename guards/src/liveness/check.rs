//! How a pod shows the resource a record holds: the explicit choice every
//! [`LivenessPolicy`](super::LivenessPolicy) is built with.
//!
//! A check answers [`Shown::Yes`], [`Shown::No`] or [`Shown::CannotTell`].
//! Only a positive `No` lets a Running pod lose its record (after the grace
//! bound); `CannotTell` keeps it. So a check that does not understand a
//! resource can never free a live pod's port, volume or lease by failing to
//! find it.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

/// The multus annotation listing a pod's networks and their IPs.
pub const NETWORK_STATUS_ANNOTATION: &str = "k8s.v1.cni.cncf.io/network-status";

/// What a [`ResourceCheck`] can say about a pod and a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Shown {
    /// The pod positively shows (uses) the resource.
    Yes,
    /// The pod positively does not show it: everything it shows is known,
    /// and the resource is not among it.
    No,
    /// The pod does not say (the resource is of a kind the check does not
    /// understand, or the pod does not publish what it uses).
    CannotTell,
}

impl From<bool> for Shown {
    /// `true` is [`Shown::Yes`], `false` a positive [`Shown::No`]: use it
    /// only when the check sees everything the pod uses.
    fn from(shown: bool) -> Self {
        if shown { Shown::Yes } else { Shown::No }
    }
}

type CustomCheck = Arc<dyn Fn(&Pod, &str) -> Shown + Send + Sync>;

/// How to tell whether a pod shows a record's resource.
#[derive(Clone)]
pub enum ResourceCheck {
    /// Resources are IP addresses ([`shows_ip`]): `Yes` when the pod lists
    /// the IP in `status.podIPs`/`podIP` or its network-status annotation,
    /// `No` when the annotation lists the pod's networks and neither shows
    /// it, `CannotTell` when the resource is not an IP or the pod has no
    /// (well-formed) network-status annotation.
    Ips,
    /// Judge by phase and age alone: a Running pod keeps its records until
    /// it finishes or goes; a Pending one until the grace bound. For
    /// resources a pod does not publish (ports, volumes, GPU slots, leases).
    PhaseOnly,
    /// The caller's own check (see [`ResourceCheck::custom`]).
    Custom(CustomCheck),
}

impl fmt::Debug for ResourceCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResourceCheck::Ips => f.write_str("Ips"),
            ResourceCheck::PhaseOnly => f.write_str("PhaseOnly"),
            ResourceCheck::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

impl ResourceCheck {
    /// The caller's check. Answer [`Shown::No`] only when the pod shows
    /// everything it uses of this kind: that answer frees a Running pod's
    /// record once the grace bound has passed.
    #[must_use]
    pub fn custom(f: impl Fn(&Pod, &str) -> Shown + Send + Sync + 'static) -> Self {
        ResourceCheck::Custom(Arc::new(f))
    }

    /// Whether `pod` shows `resource`.
    #[must_use]
    pub fn shows(&self, pod: &Pod, resource: &str) -> Shown {
        match self {
            ResourceCheck::Ips => shows_ip(pod, resource),
            ResourceCheck::PhaseOnly => Shown::CannotTell,
            ResourceCheck::Custom(f) => f(pod, resource),
        }
    }
}

/// [`ResourceCheck::Ips`]: whether `pod` shows the IP `ip`. Addresses
/// compare as IPs (`fd00::1` equals `fd00:0::1`; a `/prefix` suffix is
/// ignored).
#[must_use]
pub fn shows_ip(pod: &Pod, ip: &str) -> Shown {
    let Some(wanted) = parse_ip(ip) else {
        return Shown::CannotTell;
    };
    let status = pod.status.as_ref();
    let pod_ips = status
        .and_then(|s| s.pod_ips.as_ref())
        .into_iter()
        .flatten()
        .map(|p| p.ip.as_str());
    let pod_ip = status.and_then(|s| s.pod_ip.as_deref());
    let networks = network_status_ips(pod);
    let listed = networks.iter().flatten().map(String::as_str);
    if pod_ips
        .chain(pod_ip)
        .chain(listed)
        .any(|s| parse_ip(s) == Some(wanted))
    {
        Shown::Yes
    } else if networks.is_some() {
        Shown::No
    } else {
        Shown::CannotTell
    }
}

/// The IPs listed in `pod`'s [`NETWORK_STATUS_ANNOTATION`] (a JSON array of
/// `{name, interface, ips, mac, default}`); None when the annotation is
/// missing or malformed.
#[must_use]
pub fn network_status_ips(pod: &Pod) -> Option<Vec<String>> {
    #[derive(serde::Deserialize)]
    struct Network {
        #[serde(default)]
        ips: Vec<String>,
    }
    let raw = pod.annotations().get(NETWORK_STATUS_ANNOTATION)?;
    match serde_json::from_str::<Vec<Network>>(raw) {
        Ok(nets) => Some(nets.into_iter().flat_map(|n| n.ips).collect()),
        Err(e) => {
            tracing::debug!(error = %e, "ignoring a malformed network-status annotation");
            None
        }
    }
}

fn parse_ip(s: &str) -> Option<IpAddr> {
    s.split('/').next()?.trim().parse().ok()
}

/// Whether `pod` shows `ip` in its network-status annotation or its status.
#[deprecated(
    since = "0.2.0",
    note = "use `shows_ip`, which tells `No` from `CannotTell`"
)]
#[must_use]
pub fn pod_shows_ip(pod: &Pod, ip: &str) -> bool {
    shows_ip(pod, ip) == Shown::Yes
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodIP, PodStatus};

    const IP: &str = "10.128.40.47";

    fn running() -> Pod {
        Pod {
            status: Some(PodStatus {
                phase: Some("Running".into()),
                ..PodStatus::default()
            }),
            ..Pod::default()
        }
    }

    fn annotated(value: &str) -> Pod {
        let mut p = running();
        let a = [(NETWORK_STATUS_ANNOTATION.to_string(), value.to_string())];
        p.metadata.annotations = Some(a.into_iter().collect());
        p
    }

    #[test]
    fn where_an_ip_is_shown() {
        let mut p = running();
        assert_eq!(shows_ip(&p, IP), Shown::CannotTell, "publishes nothing");
        p.status.as_mut().unwrap().pod_ip = Some(IP.into());
        assert_eq!(shows_ip(&p, IP), Shown::Yes);
        let mut p = running();
        let ips = ["fd00::2f", IP].map(|ip| PodIP { ip: ip.into() });
        p.status.as_mut().unwrap().pod_ips = Some(ips.to_vec());
        assert_eq!(shows_ip(&p, IP), Shown::Yes);
        assert_eq!(shows_ip(&p, "fd00:0:0::2f"), Shown::Yes);
        assert_eq!(
            shows_ip(&p, "10.128.40.4"),
            Shown::CannotTell,
            "podIPs alone do not list secondary networks"
        );
        // Secondary networks: any network's ips, CIDR-style entries too.
        let p = annotated(
            r#"[{"name":"ovn","interface":"eth0","ips":["10.0.0.9"],"default":true},
                {"name":"macvlan","interface":"net1","ips":["10.128.40.47/24"]}]"#,
        );
        assert_eq!(shows_ip(&p, IP), Shown::Yes);
        assert_eq!(shows_ip(&p, "10.128.40.48"), Shown::No);
        assert_eq!(
            network_status_ips(&p),
            Some(vec!["10.0.0.9".into(), "10.128.40.47/24".into()])
        );
        for not_an_ip in ["8080", "gpu-3", "lease-a", ""] {
            assert_eq!(shows_ip(&p, not_an_ip), Shown::CannotTell, "{not_an_ip}");
        }
    }

    #[test]
    #[allow(deprecated)]
    fn pod_shows_ip_is_shown_yes() {
        let p = annotated(r#"[{"name":"macvlan","ips":["10.128.40.47/24"]}]"#);
        assert!(pod_shows_ip(&p, IP));
        assert!(!pod_shows_ip(&p, "10.128.40.48"), "shown: no");
        assert!(!pod_shows_ip(&running(), IP), "cannot tell");
        let policy = crate::liveness::LivenessPolicy::new(ResourceCheck::Ips);
        assert!(policy.shows_resource(&p, IP));
        assert!(!policy.shows_resource(&p, "10.128.40.48"));
    }

    #[test]
    fn malformed_annotations_cannot_tell() {
        for bad in [
            "",
            "not json",
            r#"{"ips":["10.128.40.47"]}"#,
            r#"[{"ips":"10.128.40.47"}]"#,
            r#"[{"ips":["10.128.40.47"]"#,
        ] {
            let p = annotated(bad);
            assert_eq!(network_status_ips(&p), None, "{bad}");
            assert_eq!(shows_ip(&p, IP), Shown::CannotTell, "{bad}");
        }
        // Well-formed without ips: it lists the networks, none has .47.
        let p = annotated(r#"[{"name":"no ips"}]"#);
        assert_eq!(shows_ip(&p, IP), Shown::No);
    }

    #[test]
    fn the_named_checks() {
        let p = annotated(r#"[{"name":"ovn","ips":["10.0.0.9"]}]"#);
        assert_eq!(ResourceCheck::Ips.shows(&p, IP), Shown::No);
        assert_eq!(ResourceCheck::PhaseOnly.shows(&p, IP), Shown::CannotTell);
        let labelled = ResourceCheck::custom(|pod, res| {
            let labels = pod.metadata.labels.as_ref();
            labels
                .is_some_and(|l| l.get("lease").map(String::as_str) == Some(res))
                .into()
        });
        assert_eq!(labelled.shows(&p, "gpu-3"), Shown::No);
        assert_eq!(format!("{labelled:?}"), "Custom(..)");
    }
}
