//! What the plan needs to know about this node and about configuration.

use std::net::IpAddr;

use ipnet::IpNet;

use crate::ids::Family;
use crate::ip::{family_of, net_family, parse_cidr};

/// Which of the node's addresses serve NodePorts (kube-proxy's `--nodeport-addresses`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum NodePortAddresses {
    /// The node's primary address of each family (nftables kube-proxy's default).
    #[default]
    Primary,
    /// Every node address inside one of these CIDRs. A family with no CIDR here falls
    /// back to its primary address; a zero-length prefix selects every address of the
    /// family.
    Cidrs(Vec<IpNet>),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    #[error("nodePortAddresses: {0:?} is not a CIDR or \"primary\"")]
    NodePortAddress(String),
    #[error("nodePortAddresses: \"primary\" cannot be combined with CIDRs")]
    PrimaryWithCidrs,
    #[error("serviceCIDRs: {0:?} is not a CIDR")]
    ServiceCidr(String),
}

impl NodePortAddresses {
    /// Reads the setting as kube-proxy's flag spells it: empty or `["primary"]` for the
    /// primary addresses, else CIDRs.
    pub fn parse<S: AsRef<str>>(values: &[S]) -> Result<NodePortAddresses, SettingsError> {
        let values: Vec<&str> = values.iter().map(|v| v.as_ref().trim()).collect();
        if values.is_empty() || values == ["primary"] {
            return Ok(NodePortAddresses::Primary);
        }
        if values.contains(&"primary") {
            return Err(SettingsError::PrimaryWithCidrs);
        }
        values
            .iter()
            .map(|v| parse_cidr(v).ok_or_else(|| SettingsError::NodePortAddress(v.to_string())))
            .collect::<Result<Vec<_>, _>>()
            .map(NodePortAddresses::Cidrs)
    }

    /// The node's NodePort addresses of one family, sorted. Loopback addresses never serve
    /// NodePorts (as with nftables kube-proxy).
    pub fn select(&self, node: &NodeContext, family: Family) -> Vec<IpAddr> {
        let cidrs: Vec<IpNet> = match self {
            NodePortAddresses::Primary => Vec::new(),
            NodePortAddresses::Cidrs(all) => all
                .iter()
                .copied()
                .filter(|c| net_family(c) == family)
                .collect(),
        };
        let everything = node.addresses(family);
        let chosen: Vec<IpAddr> = if cidrs.is_empty() {
            match node.primary(family) {
                Some(primary) => vec![primary],
                // No primary address of the family: kube-proxy then serves every address.
                None => everything,
            }
        } else if cidrs.iter().any(|c| c.prefix_len() == 0) {
            everything
        } else {
            everything
                .into_iter()
                .filter(|ip| cidrs.iter().any(|c| c.contains(ip)))
                .collect()
        };
        chosen.into_iter().filter(|ip| !ip.is_loopback()).collect()
    }
}

/// The node the plan is for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeContext {
    /// Matched against endpoints' `nodeName` to tell local endpoints.
    pub name: String,
    /// The `topology.kubernetes.io/zone` label, for topology hints.
    pub zone: Option<String>,
    /// The node's primary address per family (its Node object's InternalIPs).
    pub primary_addresses: Vec<IpAddr>,
    /// Every address assigned on the node (the candidates `nodePortAddresses` picks from);
    /// the primary addresses count whether listed here or not.
    pub local_addresses: Vec<IpAddr>,
}

impl NodeContext {
    pub fn primary(&self, family: Family) -> Option<IpAddr> {
        self.primary_addresses
            .iter()
            .copied()
            .find(|ip| family_of(ip) == family)
    }

    /// Every address of the node of one family, sorted and without duplicates.
    pub fn addresses(&self, family: Family) -> Vec<IpAddr> {
        let mut all: Vec<IpAddr> = self
            .primary_addresses
            .iter()
            .chain(&self.local_addresses)
            .copied()
            .filter(|ip| family_of(ip) == family)
            .collect();
        all.sort();
        all.dedup();
        all
    }

    pub fn is_local(&self, ip: &IpAddr) -> bool {
        self.primary_addresses.contains(ip) || self.local_addresses.contains(ip)
    }
}

/// Proxy-wide configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub node_port_addresses: NodePortAddresses,
    /// The cluster's service CIDRs: traffic to an address inside them that no Service owns
    /// is dropped. Empty: no such check.
    pub service_cidrs: Vec<IpNet>,
    /// Masquerade every connection to a cluster IP, from pods too (off by default).
    pub masquerade_all: bool,
    /// weft's datapath always knows which traffic comes from pods, so this stays true. It
    /// exists to express kube-proxy's configuration without a LocalTrafficDetector: pod
    /// traffic then is treated as external and cluster IPs are not masqueraded.
    pub local_traffic_detector: bool,
    /// `None`: serve Services without the `service.kubernetes.io/service-proxy-name` label
    /// (kube-proxy). `Some(name)`: serve only Services whose label is `name`.
    pub service_proxy_name: Option<String>,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            node_port_addresses: NodePortAddresses::Primary,
            service_cidrs: Vec::new(),
            masquerade_all: false,
            local_traffic_detector: true,
            service_proxy_name: None,
        }
    }
}

impl Settings {
    /// Reads service CIDRs from text, normalising host bits away.
    pub fn parse_service_cidrs<S: AsRef<str>>(values: &[S]) -> Result<Vec<IpNet>, SettingsError> {
        values
            .iter()
            .map(|v| {
                parse_cidr(v.as_ref()).ok_or_else(|| SettingsError::ServiceCidr(v.as_ref().into()))
            })
            .collect()
    }

    /// Whether this proxy serves a Service with the given proxy-name label.
    pub fn serves(&self, proxy_name: Option<&str>) -> bool {
        proxy_name == self.service_proxy_name.as_deref()
    }
}
