use std::net::{IpAddr, Ipv4Addr};

use ipnet::IpNet;
use k8s_openapi::api::core::v1::Node;

use crate::issue::Issue;

/// First two bytes of every VTEP MAC: locally administered, unicast. The other four are the
/// node's IPv4 underlay address, so every node can compute every peer's VTEP MAC from the
/// Node objects alone, with no extra annotation to publish.
pub const VTEP_MAC_PREFIX: [u8; 2] = [0x0e, 0x77];

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
    pub fn from_node(node: &Node) -> Result<NodeSpec, Vec<Issue>> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let object = format!("Node/{}", if name.is_empty() { "<unnamed>" } else { &name });
        let mut issues = Vec::new();
        if name.is_empty() {
            issues.push(Issue::new(&object, "metadata.name", "missing"));
        }

        let spec = node.spec.as_ref();
        let mut cidr_texts: Vec<String> =
            spec.and_then(|s| s.pod_cidrs.clone()).unwrap_or_default();
        if cidr_texts.is_empty() {
            if let Some(single) = spec.and_then(|s| s.pod_cidr.clone()) {
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

        let addresses: Vec<(String, IpAddr)> = node
            .status
            .as_ref()
            .and_then(|s| s.addresses.clone())
            .unwrap_or_default()
            .into_iter()
            .filter_map(|a| a.address.parse::<IpAddr>().ok().map(|ip| (a.type_, ip)))
            .collect();
        let internal_ip = addresses.iter().find_map(|(kind, ip)| match ip {
            IpAddr::V4(v4) if kind == "InternalIP" => Some(*v4),
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
            }),
            _ => Err(issues),
        }
    }
}
