//! What a Service's registry allocates rather than defaults, as
//! kube-apiserver's `pkg/registry/core/service` does: a clusterIP from the
//! service CIDR (`--service-cluster-ip-range`, default `10.96.0.0/12`), its
//! IP families, and node ports from `30000-32767` for NodePort and
//! LoadBalancer Services.
//!
//! What is allocated is read from the stored Services themselves, so every
//! removal (DELETE, deletecollection, namespace deletion, the garbage
//! collector) frees an object's address and ports the moment it leaves the
//! store, a dry run or a failed write holds nothing, and the
//! `default/kubernetes` Service's `10.96.0.1` counts as taken. Every write
//! of a Service holds [`ServiceAllocator::lock`] from reading what is taken
//! until its store write is done, so two writes never take the same
//! address or port.
//!
//! IPv4 single-stack only. Dynamic choices are deterministic: the first
//! free address (port) of the range's upper band, then of its lower band,
//! as kube-apiserver keeps the lower band for static requests.

use std::collections::HashSet;
use std::fmt;
use std::net::Ipv4Addr;
use std::ops::RangeInclusive;
use std::str::FromStr;
use std::sync::{Mutex, MutexGuard};

use serde_json::{Value, json};

use crate::machinery::status::ApiError;
use crate::registry::resources::ResourceInfo;
use crate::storage::store::Store;

/// A malformed service CIDR.
#[derive(Debug, thiserror::Error)]
pub enum AllocError {
    /// Not `a.b.c.d/prefix` with an IPv4 address and a prefix of 1-30.
    #[error("invalid IPv4 service CIDR {0:?} (want e.g. 10.96.0.0/12, prefix 1-30)")]
    Cidr(String),
}

/// An IPv4 service CIDR, e.g. `10.96.0.0/12`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceCidr {
    base: u32,
    prefix: u8,
}

impl ServiceCidr {
    /// The network of `addr/prefix` (host bits cleared).
    ///
    /// # Errors
    /// `prefix` is not within 1-30 (a range with no usable address).
    pub fn new(addr: Ipv4Addr, prefix: u8) -> Result<Self, AllocError> {
        if !(1..=30).contains(&prefix) {
            return Err(AllocError::Cidr(format!("{addr}/{prefix}")));
        }
        let mask = u32::MAX << (32 - prefix);
        Ok(ServiceCidr {
            base: u32::from(addr) & mask,
            prefix,
        })
    }

    /// Number of addresses, network and broadcast included.
    fn size(self) -> u64 {
        1u64 << (32 - self.prefix)
    }

    /// The usable addresses: all but the network and broadcast ones.
    fn usable(self) -> RangeInclusive<u32> {
        let last = self.base as u64 + self.size() - 2;
        self.base + 1..=last as u32
    }

    /// Whether `ip` is a usable address of the range.
    fn contains(self, ip: u32) -> bool {
        self.usable().contains(&ip)
    }
}

impl Default for ServiceCidr {
    /// `10.96.0.0/12`, as kubeadm configures.
    fn default() -> Self {
        ServiceCidr {
            base: u32::from(Ipv4Addr::new(10, 96, 0, 0)),
            prefix: 12,
        }
    }
}

impl fmt::Display for ServiceCidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from(self.base), self.prefix)
    }
}

impl FromStr for ServiceCidr {
    type Err = AllocError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || AllocError::Cidr(s.to_string());
        let (addr, prefix) = s.split_once('/').ok_or_else(bad)?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| bad())?;
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        ServiceCidr::new(addr, prefix).map_err(|_| bad())
    }
}

/// The default node port range, `30000-32767`.
pub const DEFAULT_NODE_PORTS: RangeInclusive<u16> = 30000..=32767;

/// The allocator of Services' cluster IPs and node ports.
#[derive(Debug)]
pub struct ServiceAllocator {
    cidr: ServiceCidr,
    node_ports: RangeInclusive<u16>,
    lock: Mutex<()>,
}

/// Addresses and node ports taken by other Services, read under
/// [`ServiceAllocator::lock`]; hold it until the write is stored.
#[derive(Debug)]
pub struct Held<'a> {
    alloc: &'a ServiceAllocator,
    ips: HashSet<u32>,
    ports: HashSet<u16>,
    _guard: MutexGuard<'a, ()>,
}

impl ServiceAllocator {
    /// An allocator over `cidr` and `node_ports`.
    #[must_use]
    pub fn new(cidr: ServiceCidr, node_ports: RangeInclusive<u16>) -> Self {
        ServiceAllocator {
            cidr,
            node_ports,
            lock: Mutex::new(()),
        }
    }

    /// Take the allocator and read what the Services in `store` (of
    /// `info`'s collection) hold, but the one at `ns`/`name` (the object
    /// being written keeps its own).
    pub fn lock(&self, store: &Store, info: &ResourceInfo, ns: &str, name: &str) -> Held<'_> {
        let guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let (mut ips, mut ports) = (HashSet::new(), HashSet::new());
        let page = store.list(&info.storage_key(), None, None, None, |o| {
            o.namespace() != ns || o.name() != name
        });
        for obj in &page.items {
            let svc = obj.value();
            let spec = &svc["spec"];
            let kind = spec["type"].as_str().unwrap_or("ClusterIP");
            if kind == "ExternalName" {
                continue;
            }
            ips.extend(cluster_ips(spec).iter().filter_map(|ip| parse_ip(ip)));
            if needs_node_ports(kind) {
                ports.extend(node_ports(spec).into_iter().map(|(_, p)| p));
            }
        }
        Held {
            alloc: self,
            ips,
            ports,
            _guard: guard,
        }
    }
}

fn parse_ip(s: &str) -> Option<u32> {
    s.parse::<Ipv4Addr>().ok().map(u32::from)
}

fn needs_node_ports(kind: &str) -> bool {
    matches!(kind, "NodePort" | "LoadBalancer")
}

/// `spec.clusterIPs`, else `[spec.clusterIP]`, without empty strings.
fn cluster_ips(spec: &Value) -> Vec<String> {
    let list: Vec<String> = spec["clusterIPs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    if list.is_empty() {
        spec["clusterIP"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(|s| vec![s.to_string()])
            .unwrap_or_default()
    } else {
        list
    }
}

/// (index, nodePort) of each port with a non-zero nodePort.
fn node_ports(spec: &Value) -> Vec<(usize, u16)> {
    spec["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, p)| {
            let n = p["nodePort"].as_u64().filter(|n| *n != 0)?;
            Some((i, u16::try_from(n).unwrap_or(0)))
        })
        .collect()
}

/// The first value of `upper`, then of `lower`, that is not `taken`.
fn first_free<T: Copy>(
    upper: impl Iterator<Item = T>,
    lower: impl Iterator<Item = T>,
    taken: impl Fn(T) -> bool,
) -> Option<T> {
    upper.chain(lower).find(|v| !taken(*v))
}

impl Held<'_> {
    /// Give the Service `new` (a create when `old` is `None`, else an
    /// update of `old`) its cluster IP, IP families and node ports, as
    /// kube-apiserver's Service REST storage does: an update keeps what the
    /// client leaves out, drops what the new type no longer uses, and may
    /// not change a cluster IP. `name` names the Service in errors.
    ///
    /// What is taken stays as read: the store may run an update's `assign`
    /// more than once.
    ///
    /// # Errors
    /// 422 for a requested address or port that is taken, out of range or
    /// malformed, or a changed cluster IP; 500 for an exhausted range.
    pub fn assign(&self, name: &str, old: Option<&Value>, new: &mut Value) -> Result<(), ApiError> {
        let invalid = |msg: String| ApiError::invalid("Service", name, msg);
        if !new["spec"].is_object() {
            return Ok(());
        }
        let old_spec = old.map(|o| &o["spec"]);
        let old_kind = old_spec.map(|s| s["type"].as_str().unwrap_or("ClusterIP"));
        let spec = &mut new["spec"];
        let kind = spec["type"].as_str().unwrap_or("ClusterIP").to_string();
        if let (Some(old_spec), Some(old_kind)) = (old_spec, old_kind) {
            keep_allocated(old_spec, old_kind, spec, &kind);
        }
        let spec = spec.as_object_mut().expect("checked above");
        // clusterIP and clusterIPs agree.
        let ip = spec
            .get("clusterIP")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let ips = cluster_ips(&json!({"clusterIPs": spec.get("clusterIPs").cloned()}));
        match (ip.is_empty(), ips.first()) {
            (false, None) => {
                spec.insert("clusterIPs".into(), json!([ip]));
            }
            (true, Some(first)) => {
                spec.insert("clusterIP".into(), first.clone().into());
            }
            (false, Some(first)) if *first != ip => {
                return Err(invalid(format!(
                    "spec.clusterIPs: Invalid value: {}: first value must match `clusterIP`",
                    json!(ips)
                )));
            }
            _ => {}
        }
        if kind == "ExternalName" {
            return Ok(());
        }
        let ips = cluster_ips(&Value::Object(spec.clone()));
        let old_ips = old_spec
            .filter(|_| old_kind != Some("ExternalName"))
            .map(cluster_ips)
            .unwrap_or_default();
        if let Some(old_first) = old_ips.first()
            && ips.first() != Some(old_first)
        {
            return Err(invalid(format!(
                "spec.clusterIPs[0]: Invalid value: {}: may not change once set",
                json!(ips)
            )));
        }
        let headless = ips.first().is_some_and(|ip| ip == "None");
        match ips.first() {
            None => {
                let cidr = self.alloc.cidr;
                let (start, end) = (*cidr.usable().start(), *cidr.usable().end());
                let offset = (cidr.size() / 16).clamp(16, 256) as u32;
                // Past the end for a small range: all of it is the lower band.
                let split = start.saturating_add(offset).min(end.saturating_add(1));
                let ip = first_free(split..=end, start..split, |v| self.ips.contains(&v))
                    .ok_or_else(|| {
                        ApiError::internal("failed to allocate a serviceIP: range is full")
                    })?;
                let ip = Ipv4Addr::from(ip).to_string();
                spec.insert("clusterIP".into(), ip.clone().into());
                spec.insert("clusterIPs".into(), json!([ip]));
            }
            Some(requested) if !headless && !old_ips.contains(requested) => {
                let fail = |why: String| {
                    invalid(format!(
                        "spec.clusterIPs: Invalid value: {}: failed to allocate IP {requested}: {why}",
                        json!(ips)
                    ))
                };
                let Some(n) = parse_ip(requested) else {
                    return Err(invalid(format!(
                        "spec.clusterIPs[0]: Invalid value: {}: must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                        json!(requested)
                    )));
                };
                if !self.alloc.cidr.contains(n) {
                    return Err(fail(format!(
                        "the provided IP ({requested}) is not in the valid range. The range of valid IPs is {}",
                        self.alloc.cidr
                    )));
                }
                if self.ips.contains(&n) {
                    return Err(fail("provided IP is already allocated".into()));
                }
            }
            Some(_) => {}
        }
        // IP families: IPv4 single stack; a headless Service without a
        // selector asks for both families, of which this cluster has one.
        let families = spec.get("ipFamilies").and_then(Value::as_array);
        if families.is_none_or(Vec::is_empty) {
            spec.insert("ipFamilies".into(), json!(["IPv4"]));
        }
        if spec.get("ipFamilyPolicy").is_none_or(Value::is_null) {
            let selector = spec
                .get("selector")
                .and_then(Value::as_object)
                .is_some_and(|m| !m.is_empty());
            let policy = if headless && !selector {
                "RequireDualStack"
            } else {
                "SingleStack"
            };
            spec.insert("ipFamilyPolicy".into(), policy.into());
        }
        let no_lb_ports = kind == "LoadBalancer"
            && spec.get("allocateLoadBalancerNodePorts") == Some(&json!(false));
        if !needs_node_ports(&kind) || no_lb_ports {
            return Ok(());
        }
        self.node_ports(name, old_spec, old_kind, spec)
    }

    /// Node ports for each port of a NodePort or LoadBalancer Service.
    fn node_ports(
        &self,
        name: &str,
        old_spec: Option<&Value>,
        old_kind: Option<&str>,
        spec: &mut serde_json::Map<String, Value>,
    ) -> Result<(), ApiError> {
        let own: HashSet<u16> = match (old_spec, old_kind) {
            (Some(s), Some(k)) if needs_node_ports(k) => {
                node_ports(s).into_iter().map(|(_, p)| p).collect()
            }
            _ => HashSet::new(),
        };
        let range = self.alloc.node_ports.clone();
        let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) else {
            return Ok(());
        };
        // Requested ones first, so that a dynamic choice never takes one.
        let mut mine: HashSet<u16> = HashSet::new();
        for (i, p) in ports.iter().enumerate() {
            let Some(n) = p["nodePort"].as_u64().filter(|n| *n != 0) else {
                continue;
            };
            let fail = |why: String| {
                ApiError::invalid(
                    "Service",
                    name,
                    format!("spec.ports[{i}].nodePort: Invalid value: {n}: {why}"),
                )
            };
            let port = u16::try_from(n).ok().filter(|p| range.contains(p));
            let Some(port) = port else {
                return Err(fail(format!(
                    "provided port is not in the valid range. The range of valid ports is {}-{}",
                    range.start(),
                    range.end()
                )));
            };
            if !own.contains(&port) && self.ports.contains(&port) {
                return Err(fail("provided port is already allocated".into()));
            }
            mine.insert(port);
        }
        let size = u32::from(*range.end()) - u32::from(*range.start()) + 1;
        let offset = (size / 32).clamp(16, 128);
        let split = u16::try_from(u32::from(*range.start()) + offset)
            .unwrap_or(*range.end())
            .min(*range.end());
        for p in ports.iter_mut() {
            if p["nodePort"].as_u64().is_some_and(|n| n != 0) {
                continue;
            }
            let taken = |v: u16| self.ports.contains(&v) || mine.contains(&v);
            let port = first_free(split..=*range.end(), *range.start()..split, taken).ok_or_else(
                || ApiError::internal("failed to allocate a nodePort: range is full"),
            )?;
            mine.insert(port);
            p["nodePort"] = port.into();
        }
        Ok(())
    }
}

/// What an update keeps of the old Service when the client leaves it out
/// (kube-apiserver's `patchAllocatedValues`), and what it drops because the
/// new type no longer uses it, unchanged from the old
/// (`dropTypeDependentFields`).
fn keep_allocated(old: &Value, old_kind: &str, new: &mut Value, kind: &str) {
    let empty = |v: &Value, k: &str| match &v[k] {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    };
    // Which of the two linked fields the client meant to change
    // (kube-apiserver's `normalizeClusterIPs`).
    let ip = |v: &Value| v["clusterIP"].as_str().unwrap_or("").to_string();
    let ips = |v: &Value| {
        v["clusterIPs"]
            .as_array()
            .filter(|a| !a.is_empty())
            .cloned()
    };
    if ips(old).is_some() && ips(new).is_none() && ip(old) == ip(new) {
        new["clusterIPs"] = old["clusterIPs"].clone();
    }
    if ip(old) != ip(new) && ips(old) == ips(new) {
        if ip(new).is_empty() {
            if let Some(m) = new.as_object_mut() {
                m.remove("clusterIPs");
            }
        } else {
            new["clusterIPs"] = json!([ip(new)]);
        }
    }
    if old_kind != "ExternalName" && kind != "ExternalName" && ip(new).is_empty() {
        for k in ["clusterIP", "clusterIPs"] {
            if empty(new, k) && !empty(old, k) {
                new[k] = old[k].clone();
            }
        }
    }
    if kind == "ExternalName"
        && let Some(m) = new.as_object_mut()
    {
        for k in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            if m.get(k).is_some_and(|v| *v == old[k]) {
                m.remove(k);
            }
        }
    }
    let old_ports = node_ports(old);
    if needs_node_ports(old_kind) && needs_node_ports(kind) {
        let by_name: Vec<(String, u16)> = old_ports
            .iter()
            .map(|(i, p)| {
                (
                    old["ports"][*i]["name"].as_str().unwrap_or("").to_string(),
                    *p,
                )
            })
            .collect();
        let used: HashSet<u16> = node_ports(new).into_iter().map(|(_, p)| p).collect();
        for p in new["ports"].as_array_mut().into_iter().flatten() {
            if p["nodePort"].as_u64().is_some_and(|n| n != 0) {
                continue;
            }
            let pname = p["name"].as_str().unwrap_or("");
            if let Some((_, n)) = by_name.iter().find(|(n, _)| n == pname)
                && !used.contains(n)
            {
                p["nodePort"] = (*n).into();
            }
        }
    } else if !needs_node_ports(kind) {
        let old_set: HashSet<u16> = old_ports.into_iter().map(|(_, p)| p).collect();
        for p in new["ports"].as_array_mut().into_iter().flatten() {
            let same = p["nodePort"]
                .as_u64()
                .and_then(|n| u16::try_from(n).ok())
                .is_some_and(|n| old_set.contains(&n));
            if same && let Some(m) = p.as_object_mut() {
                m.remove("nodePort");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held<'a>(a: &'a ServiceAllocator, ips: &[&str], ports: &[u16]) -> Held<'a> {
        Held {
            alloc: a,
            ips: ips.iter().filter_map(|s| parse_ip(s)).collect(),
            ports: ports.iter().copied().collect(),
            _guard: a.lock.lock().unwrap(),
        }
    }

    fn svc(spec: Value) -> Value {
        json!({"metadata": {"name": "x"}, "spec": spec})
    }

    #[test]
    fn cidr_parses_and_prints() {
        let c: ServiceCidr = "10.96.0.0/12".parse().unwrap();
        assert_eq!(c, ServiceCidr::default());
        assert_eq!(c.to_string(), "10.96.0.0/12");
        assert_eq!(
            "10.0.0.7/24".parse::<ServiceCidr>().unwrap().to_string(),
            "10.0.0.0/24"
        );
        for bad in ["10.0.0.0", "10.0.0.0/31", "fd00::/64", "x/8"] {
            assert!(bad.parse::<ServiceCidr>().is_err(), "{bad}");
        }
        assert!(c.contains(u32::from(Ipv4Addr::new(10, 111, 255, 254))));
        assert!(!c.contains(u32::from(Ipv4Addr::new(10, 111, 255, 255))));
        assert!(!c.contains(u32::from(Ipv4Addr::new(10, 96, 0, 0))));
    }

    #[test]
    fn dynamic_addresses_come_from_the_upper_band_then_the_lower() {
        let a = ServiceAllocator::new("10.0.0.0/28".parse().unwrap(), DEFAULT_NODE_PORTS);
        // 16 addresses: the offset (16) is past the usable end, so all is the lower band.
        let h = held(&a, &["10.0.0.1"], &[]);
        let mut s = svc(json!({"type": "ClusterIP"}));
        h.assign("x", None, &mut s).unwrap();
        assert_eq!(s["spec"]["clusterIP"], "10.0.0.2");
        let a = ServiceAllocator::new(ServiceCidr::default(), DEFAULT_NODE_PORTS);
        let h = held(&a, &[], &[]);
        let mut s = svc(json!({"type": "NodePort", "ports": [{"port": 80}, {"port": 81}]}));
        h.assign("x", None, &mut s).unwrap();
        assert_eq!(s["spec"]["clusterIP"], "10.96.1.1");
        assert_eq!(s["spec"]["clusterIPs"], json!(["10.96.1.1"]));
        assert_eq!(s["spec"]["ipFamilies"], json!(["IPv4"]));
        assert_eq!(s["spec"]["ipFamilyPolicy"], "SingleStack");
        assert_eq!(s["spec"]["ports"][0]["nodePort"], 30086);
        assert_eq!(s["spec"]["ports"][1]["nodePort"], 30087);
    }

    #[test]
    fn updates_keep_what_the_client_leaves_out_and_drop_what_the_type_no_longer_uses() {
        let a = ServiceAllocator::new(ServiceCidr::default(), DEFAULT_NODE_PORTS);
        let old = svc(json!({"type": "NodePort", "clusterIP": "10.96.0.9",
            "clusterIPs": ["10.96.0.9"], "ports": [{"name": "a", "port": 80, "nodePort": 30001}]}));
        let mut new = svc(json!({"type": "NodePort", "ports": [{"name": "a", "port": 80}]}));
        held(&a, &[], &[])
            .assign("x", Some(&old), &mut new)
            .unwrap();
        assert_eq!(new["spec"]["clusterIP"], "10.96.0.9");
        assert_eq!(new["spec"]["ports"][0]["nodePort"], 30001);
        let mut new = svc(json!({"type": "ClusterIP", "clusterIP": "10.96.0.9",
            "ports": [{"name": "a", "port": 80, "nodePort": 30001}]}));
        held(&a, &[], &[])
            .assign("x", Some(&old), &mut new)
            .unwrap();
        assert!(new["spec"]["ports"][0].get("nodePort").is_none());
        let mut new = svc(json!({"type": "ClusterIP", "clusterIP": "10.96.0.10"}));
        let err = held(&a, &[], &[])
            .assign("x", Some(&old), &mut new)
            .unwrap_err();
        assert_eq!(
            err.message,
            "Service \"x\" is invalid: spec.clusterIPs[0]: Invalid value: [\"10.96.0.10\"]: may not change once set"
        );
        let mut new = svc(json!({"type": "ExternalName", "externalName": "a.b",
            "clusterIP": "10.96.0.9", "clusterIPs": ["10.96.0.9"]}));
        held(&a, &[], &[])
            .assign("x", Some(&old), &mut new)
            .unwrap();
        assert!(new["spec"].get("clusterIP").is_none() && new["spec"].get("ipFamilies").is_none());
    }

    #[test]
    fn requests_that_cannot_be_had_are_refused() {
        let a = ServiceAllocator::new(ServiceCidr::default(), DEFAULT_NODE_PORTS);
        let mut s = svc(json!({"clusterIP": "10.96.0.1"}));
        let err = held(&a, &["10.96.0.1"], &[])
            .assign("x", None, &mut s)
            .unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(
            err.message,
            "Service \"x\" is invalid: spec.clusterIPs: Invalid value: [\"10.96.0.1\"]: failed to allocate IP 10.96.0.1: provided IP is already allocated"
        );
        let mut s = svc(json!({"type": "NodePort", "ports": [{"port": 1, "nodePort": 80}]}));
        let err = held(&a, &[], &[]).assign("x", None, &mut s).unwrap_err();
        assert_eq!(
            err.message,
            "Service \"x\" is invalid: spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid range. The range of valid ports is 30000-32767"
        );
        let mut s = svc(json!({"clusterIP": "10.96.0.2", "clusterIPs": ["10.96.0.3"]}));
        assert!(held(&a, &[], &[]).assign("x", None, &mut s).is_err());
    }
}
