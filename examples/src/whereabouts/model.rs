//! The whereabouts data model: the `IPPool` custom resource
//! (`whereabouts.cni.cncf.io/v1alpha1`) and the pod annotation
//! `k8s.v1.cni.cncf.io/network-status`, in their upstream shapes.

use std::collections::BTreeMap;
use std::net::IpAddr;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The pod annotation multus writes once the pod's networks are up.
pub const NETWORK_STATUS: &str = "k8s.v1.cni.cncf.io/network-status";

/// Errors in the model: a range that does not parse, an offset outside it.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ModelError {
    /// Not `address/prefix`.
    #[error("invalid range {0:?}: expected a CIDR such as 10.128.40.0/24 or fd00::/120")]
    Range(String),
    /// The offset is outside the range.
    #[error("offset {offset} is outside {range}")]
    Offset {
        /// The range.
        range: String,
        /// The offset.
        offset: u128,
    },
}

/// `spec` of an IPPool.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "whereabouts.cni.cncf.io",
    version = "v1alpha1",
    kind = "IPPool",
    plural = "ippools",
    namespaced
)]
#[serde(rename_all = "camelCase")]
pub struct IPPoolSpec {
    /// The CIDR allocated from, e.g. `10.128.40.0/24`.
    pub range: String,
    /// Allocations by decimal offset into the range.
    #[serde(default)]
    pub allocations: BTreeMap<String, IPAllocation>,
}

/// One allocation: which container of which pod holds the offset.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct IPAllocation {
    /// The container id (CNI ADD's `CNI_CONTAINERID`).
    pub id: String,
    /// `namespace/name` of the pod.
    pub podref: String,
    /// The interface, e.g. `net1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ifname: Option<String>,
    /// Ward's extension: the pod's uid (upstream does not record it; the
    /// naive reconciler ignores it).
    #[serde(default, rename = "podUid", skip_serializing_if = "Option::is_none")]
    pub pod_uid: Option<String>,
    /// Ward's extension: when the allocation was made (RFC 3339), the start
    /// of the liveness grace bound.
    #[serde(
        default,
        rename = "allocatedAt",
        skip_serializing_if = "Option::is_none"
    )]
    pub allocated_at: Option<String>,
}

/// One entry of the network-status annotation.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct NetworkStatus {
    /// The network (NetworkAttachmentDefinition) name, e.g. `default/net-a`.
    pub name: String,
    /// The interface in the pod, e.g. `net1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    /// Its addresses.
    #[serde(default)]
    pub ips: Vec<String>,
    /// Its MAC address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// Whether this is the pod's default network.
    #[serde(default)]
    pub default: bool,
}

/// A parsed range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    base: IpAddr,
    prefix: u8,
}

impl Range {
    /// Parse `address/prefix` (the address is masked to the network).
    pub fn parse(s: &str) -> Result<Range, ModelError> {
        let err = || ModelError::Range(s.to_string());
        let (addr, prefix) = s.split_once('/').ok_or_else(err)?;
        let addr: IpAddr = addr.parse().map_err(|_| err())?;
        let prefix: u8 = prefix.parse().map_err(|_| err())?;
        let bits = if addr.is_ipv4() { 32 } else { 128 };
        if prefix > bits {
            return Err(err());
        }
        let host_bits = u32::from(bits - prefix);
        let mask = if host_bits >= 128 {
            0
        } else {
            u128::MAX << host_bits
        };
        let base = match addr {
            IpAddr::V4(a) => IpAddr::V4(((u128::from(u32::from(a)) & mask) as u32).into()),
            IpAddr::V6(a) => IpAddr::V6((u128::from(a) & mask).into()),
        };
        Ok(Range { base, prefix })
    }

    /// The number of addresses.
    #[must_use]
    pub fn size(&self) -> u128 {
        let bits = if self.base.is_ipv4() { 32 } else { 128 };
        let host = u32::from(bits - self.prefix);
        if host >= 128 {
            u128::MAX
        } else {
            1u128 << host
        }
    }

    /// The address at `offset`.
    pub fn ip(&self, offset: u128) -> Result<IpAddr, ModelError> {
        if offset >= self.size() {
            return Err(ModelError::Offset {
                range: self.to_string(),
                offset,
            });
        }
        Ok(match self.base {
            IpAddr::V4(a) => IpAddr::V4((u32::from(a) + offset as u32).into()),
            IpAddr::V6(a) => IpAddr::V6((u128::from(a) + offset).into()),
        })
    }

    /// The offset of `ip`, if it is in the range.
    #[must_use]
    pub fn offset(&self, ip: &str) -> Option<u128> {
        let ip: IpAddr = ip.parse().ok()?;
        let off = match (self.base, ip) {
            (IpAddr::V4(b), IpAddr::V4(i)) => u128::from(u32::from(i).checked_sub(u32::from(b))?),
            (IpAddr::V6(b), IpAddr::V6(i)) => u128::from(i).checked_sub(u128::from(b))?,
            _ => return None,
        };
        (off < self.size()).then_some(off)
    }

    /// The pool name upstream derives from the range: `10.128.40.0-24`
    /// (`:` becomes `-` too, for IPv6).
    #[must_use]
    pub fn pool_name(&self) -> String {
        self.to_string().replace(['/', ':'], "-")
    }
}

impl std::fmt::Display for Range {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.base, self.prefix)
    }
}

/// The addresses a pod's network-status annotation shows (none when the
/// annotation is absent or malformed).
#[must_use]
pub fn annotated_ips(annotations: Option<&BTreeMap<String, String>>) -> Vec<String> {
    annotations
        .and_then(|a| a.get(NETWORK_STATUS))
        .and_then(|s| serde_json::from_str::<Vec<NetworkStatus>>(s).ok())
        .map(|v| v.into_iter().flat_map(|n| n.ips).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_offsets() {
        let r = Range::parse("10.128.40.7/24").unwrap();
        assert_eq!(r.to_string(), "10.128.40.0/24");
        assert_eq!(r.pool_name(), "10.128.40.0-24");
        assert_eq!(r.size(), 256);
        assert_eq!(r.ip(47).unwrap().to_string(), "10.128.40.47");
        assert_eq!(r.offset("10.128.40.47"), Some(47));
        assert_eq!(r.offset("10.128.41.1"), None);
        assert!(r.ip(256).is_err());
        let v6 = Range::parse("fd00::/120").unwrap();
        assert_eq!(v6.ip(5).unwrap().to_string(), "fd00::5");
        assert_eq!(v6.pool_name(), "fd00---120");
        assert_eq!(v6.offset("fd00::5"), Some(5));
        assert!(Range::parse("10.0.0.0").is_err());
        assert!(Range::parse("10.0.0.0/33").is_err());
        assert!(Range::parse("nope/8").is_err());
    }

    #[test]
    fn annotation_in_the_real_shape() {
        let ann: BTreeMap<String, String> = [(
            NETWORK_STATUS.to_string(),
            r#"[{"name":"cbr0","interface":"eth0","ips":["10.244.0.5"],"mac":"aa:bb","default":true},
                {"name":"default/net-a","interface":"net1","ips":["10.128.40.47"],"mac":"cc:dd"}]"#
                .to_string(),
        )]
        .into();
        assert_eq!(annotated_ips(Some(&ann)), ["10.244.0.5", "10.128.40.47"]);
        let bad: BTreeMap<String, String> =
            [(NETWORK_STATUS.to_string(), "{not json".to_string())].into();
        assert!(annotated_ips(Some(&bad)).is_empty());
        assert!(annotated_ips(None).is_empty());
    }
}
