//! The NodeNetworkConfig custom resource (`acn.azure.com/v1alpha`), as the
//! Azure network controller (DNC-RC) writes it for CNS: one per Node, named
//! like the Node in `kube-system`, controlled by the Node (ownerReference
//! with the Node's uid).

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{CustomResource, Resource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::whereabouts::model::{ModelError, Range};

/// The namespace NodeNetworkConfigs live in.
pub const NAMESPACE: &str = "kube-system";

/// The pod annotation the CNI side writes with the address CNS gave the pod
/// (it stands in for the CNI result the kubelet keeps; CNS rebuilds its
/// assignments from it on restart).
pub const POD_IP: &str = "cns.ward.dev/ip";

/// The type of an overlay network container.
pub const OVERLAY: &str = "Overlay";

/// What CNS asks of the network controller.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "acn.azure.com",
    version = "v1alpha",
    kind = "NodeNetworkConfig",
    namespaced,
    status = "NodeNetworkConfigStatus",
    shortname = "nnc"
)]
#[serde(rename_all = "camelCase")]
pub struct NodeNetworkConfigSpec {
    /// How many IPs CNS wants for the node.
    #[serde(default, rename = "requestedIPCount")]
    pub requested_ip_count: i64,
    /// IPs CNS no longer uses (a scale-down); unused by this example.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ips_not_in_use: Vec<String>,
}

/// What the network controller gave the node.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeNetworkConfigStatus {
    /// The node's network containers.
    #[serde(default)]
    pub network_containers: Vec<NetworkContainer>,
}

/// One network container: in overlay, a prefix of pod addresses carved for
/// the node.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkContainer {
    /// Its id (a GUID upstream).
    pub id: String,
    /// `Overlay` here.
    #[serde(rename = "type")]
    pub type_: String,
    /// In overlay, the node's prefix as a CIDR; every address in it is a
    /// pod IP.
    #[serde(rename = "primaryIP")]
    pub primary_ip: String,
    /// The subnet the prefix is carved from.
    pub subnet_address_space: String,
    /// Explicit IPs (not overlay); empty in overlay.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_assignments: Vec<IpAssignment>,
    /// The NC's version; the host agent reports the version it programmed.
    pub version: i64,
}

/// One explicitly assigned IP of a (non-overlay) network container.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct IpAssignment {
    /// Its id.
    pub name: String,
    /// The address.
    pub ip: String,
}

impl NetworkContainer {
    /// The pod addresses it carries: every address of the overlay prefix,
    /// or the explicit assignments.
    pub fn ips(&self) -> Result<Vec<String>, ModelError> {
        if self.type_ != OVERLAY {
            return Ok(self.ip_assignments.iter().map(|a| a.ip.clone()).collect());
        }
        let range = Range::parse(&self.primary_ip)?;
        (0..range.size())
            .map(|o| range.ip(o).map(|ip| ip.to_string()))
            .collect()
    }
}

impl NodeNetworkConfig {
    /// The NNC the network controller writes for `node`: named like it, in
    /// [`NAMESPACE`], controlled by it (its uid).
    #[must_use]
    pub fn for_node(node: &Node, requested_ip_count: i64) -> Self {
        let mut nnc = NodeNetworkConfig::new(
            &node.name_any(),
            NodeNetworkConfigSpec {
                requested_ip_count,
                ips_not_in_use: Vec::new(),
            },
        );
        nnc.metadata.namespace = Some(NAMESPACE.into());
        nnc.metadata.owner_references = node.controller_owner_ref(&()).map(|mut r| {
            r.block_owner_deletion = Some(true);
            vec![r]
        });
        nnc
    }

    /// Its controller ownerReference, if any.
    #[must_use]
    pub fn controller(&self) -> Option<&OwnerReference> {
        crate::meta::controller_ref(&self.metadata)
    }

    /// Its network containers (none before the controller wrote status).
    #[must_use]
    pub fn containers(&self) -> &[NetworkContainer] {
        self.status
            .as_ref()
            .map_or(&[], |s| s.network_containers.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_overlay_container_carries_every_address_of_its_prefix() {
        let nc = NetworkContainer {
            id: "nc".into(),
            type_: OVERLAY.into(),
            primary_ip: "10.244.1.0/30".into(),
            subnet_address_space: "10.244.0.0/16".into(),
            ip_assignments: vec![],
            version: 1,
        };
        assert_eq!(
            nc.ips().unwrap(),
            ["10.244.1.0", "10.244.1.1", "10.244.1.2", "10.244.1.3"]
        );
        let bad = NetworkContainer {
            primary_ip: "10.244.1.0".into(),
            ..nc
        };
        assert!(bad.ips().is_err());
    }

    #[test]
    fn the_nnc_of_a_node_is_controlled_by_its_uid() {
        let mut node = Node::default();
        node.metadata.name = Some("node-a".into());
        node.metadata.uid = Some("U1".into());
        let nnc = NodeNetworkConfig::for_node(&node, 16);
        assert_eq!(nnc.name_any(), "node-a");
        assert_eq!(nnc.namespace().as_deref(), Some(NAMESPACE));
        let c = nnc.controller().unwrap();
        assert_eq!((c.kind.as_str(), c.uid.as_str()), ("Node", "U1"));
        assert_eq!(c.block_owner_deletion, Some(true));
    }
}
