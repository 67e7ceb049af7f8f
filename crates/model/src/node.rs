use std::net::{IpAddr, Ipv4Addr};

use ipnet::IpNet;
use serde::Deserialize;

use crate::issue::Issue;
use crate::kind::{KindInfo, Watched};
use crate::meta::{null_default, Meta, MetaView};

/// First two bytes of every VTEP MAC: locally administered, unicast. The other four are the
/// node's IPv4 underlay address, so every node can compute every peer's VTEP MAC from the
/// Node objects alone, with no extra annotation to publish.
pub const VTEP_MAC_PREFIX: [u8; 2] = [0x0e, 0x77];

/// The taint the agent keeps on its node until the node's network is ready.
pub const AGENT_NOT_READY_TAINT: &str = "node.weft.dev/agent-not-ready";
/// Its effect: running pods stay, new ones are not scheduled.
pub const AGENT_NOT_READY_EFFECT: &str = "NoSchedule";
/// The node condition network plugins set (kubelet and the node controller read it).
pub const NETWORK_UNAVAILABLE: &str = "NetworkUnavailable";
/// The reason weft gives when it sets `NetworkUnavailable=False`.
pub const NETWORK_UP_REASON: &str = "WeftIsUp";

/// The fields of a Node weft reads, as the API server sends them.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct NodeWire {
    #[serde(default, deserialize_with = "null_default")]
    pub metadata: Meta,
    #[serde(default, deserialize_with = "null_default")]
    pub spec: NodeWireSpec,
    #[serde(default, deserialize_with = "null_default")]
    pub status: NodeWireStatus,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct NodeWireSpec {
    #[serde(rename = "podCIDR", default)]
    pub pod_cidr: Option<String>,
    #[serde(rename = "podCIDRs", default, deserialize_with = "null_default")]
    pub pod_cidrs: Vec<String>,
    #[serde(default, deserialize_with = "null_default")]
    pub taints: Vec<TaintWire>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct TaintWire {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub effect: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct NodeWireStatus {
    #[serde(default, deserialize_with = "null_default")]
    pub addresses: Vec<AddressWire>,
    #[serde(default, deserialize_with = "null_default")]
    pub conditions: Vec<ConditionWire>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct AddressWire {
    #[serde(rename = "type", default)]
    pub type_: String,
    #[serde(default)]
    pub address: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ConditionWire {
    #[serde(rename = "type", default)]
    pub type_: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub reason: Option<String>,
}

/// What the node object says about weft's readiness marks (the agent compares this with
/// what it wants and patches only on a difference).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadinessMarks {
    /// [`AGENT_NOT_READY_TAINT`] is on the node.
    pub not_ready_taint: bool,
    /// `NetworkUnavailable=False` with reason [`NETWORK_UP_REASON`].
    pub network_up: bool,
}

/// A node as the datapath needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    pub name: String,
    /// At most one IPv4 and one IPv6 CIDR, as `spec.podCIDRs` lists them.
    pub pod_cidrs: Vec<IpNet>,
    /// The IPv4 `InternalIP`: the overlay's underlay address.
    pub internal_ip: Ipv4Addr,
    /// Every `status.addresses` entry that is an IP, whatever its type.
    pub addresses: Vec<IpAddr>,
    /// `metadata.creationTimestamp`: on a pod CIDR clash the older node keeps its CIDRs.
    pub created: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    pub marks: ReadinessMarks,
}

impl Watched for NodeSpec {
    const KIND: KindInfo = KindInfo {
        group: "",
        version: "v1",
        kind: "Node",
        plural: "nodes",
        namespaced: false,
    };
    type Wire = NodeWire;

    fn meta(wire: &NodeWire) -> MetaView<'_> {
        wire.metadata.view()
    }

    fn from_wire(wire: &NodeWire) -> Result<NodeSpec, Vec<Issue>> {
        NodeSpec::from_node(wire)
    }
}

impl NodeSpec {
    pub fn object_name(&self) -> String {
        format!("Node/{}", self.name)
    }

    /// The node's VTEP MAC, derived from its underlay address (see [`VTEP_MAC_PREFIX`]).
    pub fn vtep_mac(&self) -> [u8; 6] {
        let o = self.internal_ip.octets();
        [
            VTEP_MAC_PREFIX[0],
            VTEP_MAC_PREFIX[1],
            o[0],
            o[1],
            o[2],
            o[3],
        ]
    }

    /// The node's VTEP address in each pod CIDR: the CIDR's network address, which IPAM never
    /// hands to a pod. Host-to-remote-pod traffic leaves with this source so replies return
    /// through the overlay instead of being masqueraded.
    pub fn vtep_addresses(&self) -> Vec<IpAddr> {
        self.pod_cidrs.iter().map(|c| c.network()).collect()
    }

    pub fn pod_cidr_v4(&self) -> Option<IpNet> {
        self.pod_cidrs
            .iter()
            .copied()
            .find(|c| matches!(c, IpNet::V4(_)))
    }

    pub fn pod_cidr_v6(&self) -> Option<IpNet> {
        self.pod_cidrs
            .iter()
            .copied()
            .find(|c| matches!(c, IpNet::V6(_)))
    }

    /// Reads the fields weft uses from a Kubernetes Node, reporting every problem found.
    pub fn from_node(node: &NodeWire) -> Result<NodeSpec, Vec<Issue>> {
        let name = node.metadata.name.clone();
        let object = format!("Node/{}", if name.is_empty() { "<unnamed>" } else { &name });
        let mut issues = Vec::new();
        if name.is_empty() {
            issues.push(Issue::new(&object, "metadata.name", "missing"));
        }

        let spec = &node.spec;
        let mut cidr_texts: Vec<String> = spec.pod_cidrs.clone();
        if cidr_texts.is_empty() {
            if let Some(single) = spec.pod_cidr.clone().filter(|c| !c.is_empty()) {
                cidr_texts.push(single);
            }
        }
        if cidr_texts.is_empty() {
            issues.push(Issue::new(
                &object,
                "spec.podCIDRs",
                "missing: the node has no pod CIDR, so weft cannot give its pods addresses",
            ));
        }
        let mut pod_cidrs = Vec::new();
        for (i, text) in cidr_texts.iter().enumerate() {
            match text.parse::<IpNet>() {
                Ok(net) if net.trunc() != net => issues.push(Issue::new(
                    &object,
                    format!("spec.podCIDRs[{i}]"),
                    format!("{text} has host bits set (did you mean {}?)", net.trunc()),
                )),
                Ok(net) => pod_cidrs.push(net),
                Err(_) => issues.push(Issue::new(
                    &object,
                    format!("spec.podCIDRs[{i}]"),
                    format!("{text:?} is not a CIDR"),
                )),
            }
        }
        let v4 = pod_cidrs
            .iter()
            .filter(|c| matches!(c, IpNet::V4(_)))
            .count();
        let v6 = pod_cidrs.len() - v4;
        if v4 > 1 || v6 > 1 {
            issues.push(Issue::new(
                &object,
                "spec.podCIDRs",
                "at most one IPv4 and one IPv6 CIDR are allowed",
            ));
        }
        for cidr in &pod_cidrs {
            let too_small = match cidr {
                IpNet::V4(n) => n.prefix_len() > 30,
                IpNet::V6(n) => n.prefix_len() > 126,
            };
            if too_small {
                issues.push(Issue::new(
                    &object,
                    "spec.podCIDRs",
                    format!("{cidr} is too small to hold pods"),
                ));
            }
        }

        let addresses: Vec<(&str, IpAddr)> = node
            .status
            .addresses
            .iter()
            .filter_map(|a| {
                a.address
                    .parse::<IpAddr>()
                    .ok()
                    .map(|ip| (a.type_.as_str(), ip))
            })
            .collect();
        let internal_ip = addresses.iter().find_map(|(kind, ip)| match ip {
            IpAddr::V4(v4) if *kind == "InternalIP" => Some(*v4),
            _ => None,
        });
        if internal_ip.is_none() {
            issues.push(Issue::new(
                &object,
                "status.addresses",
                "no IPv4 InternalIP: the overlay runs over an IPv4 underlay and needs the node's address",
            ));
        }

        match internal_ip {
            Some(internal_ip) if issues.is_empty() => Ok(NodeSpec {
                name,
                pod_cidrs,
                internal_ip,
                addresses: addresses.into_iter().map(|(_, ip)| ip).collect(),
                created: node.metadata.creation_timestamp.clone(),
                marks: ReadinessMarks {
                    not_ready_taint: spec.taints.iter().any(|t| {
                        t.key == AGENT_NOT_READY_TAINT && t.effect == AGENT_NOT_READY_EFFECT
                    }),
                    network_up: node.status.conditions.iter().any(|c| {
                        c.type_ == NETWORK_UNAVAILABLE
                            && c.status == "False"
                            && c.reason.as_deref() == Some(NETWORK_UP_REASON)
                    }),
                },
            }),
            _ => Err(issues),
        }
    }
}
