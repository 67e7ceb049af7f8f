//! What the node should look like, computed from the model alone (no I/O), so the
//! reconcilers only compare and apply.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use ipnet::IpNet;
use weft_datapath::RouteKind;
use weft_model::{ClusterConfig, Model, NodeSpec};

use super::config::VXLAN_OVERHEAD;

/// Another node, as this node's overlay needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub name: String,
    pub underlay_ip: Ipv4Addr,
    pub vtep_mac: [u8; 6],
    /// (pod CIDR, that node's VTEP address in it).
    pub cidrs: Vec<(IpNet, IpAddr)>,
}

/// The desired state of this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePlan {
    pub local: NodeSpec,
    pub vtep_mac: [u8; 6],
    /// The VTEP addresses as host prefixes, carried by the VXLAN device.
    pub vtep_prefixes: Vec<IpNet>,
    pub peers: Vec<Peer>,
    /// Every entry of the datapath's route table.
    pub lpm: BTreeMap<IpNet, RouteKind>,
    pub cluster_cidrs: Vec<IpNet>,
}

/// The reason this node cannot be programmed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("Node/{0} is not in the model (missing, or refused: see the issues above)")]
    LocalNodeMissing(String),
    #[error("the node model has not been built yet")]
    NotBuilt,
}

pub fn host_prefix(addr: IpAddr) -> IpNet {
    IpNet::new(addr, if addr.is_ipv4() { 32 } else { 128 }).expect("full-length prefix is valid")
}

pub fn plan(
    model: &Model,
    cluster: &ClusterConfig,
    node_name: &str,
) -> Result<NodePlan, PlanError> {
    let local = model
        .nodes
        .get(node_name)
        .cloned()
        .ok_or_else(|| PlanError::LocalNodeMissing(node_name.into()))?;
    let mut lpm = BTreeMap::new();
    for cidr in &local.pod_cidrs {
        lpm.insert(*cidr, RouteKind::LocalCidr);
    }
    let vtep_prefixes: Vec<IpNet> = local
        .vtep_addresses()
        .into_iter()
        .map(host_prefix)
        .collect();
    for p in &vtep_prefixes {
        lpm.insert(*p, RouteKind::Host);
    }
    let peers: Vec<Peer> = model
        .nodes
        .values()
        .filter(|n| n.name != node_name)
        .map(|n| Peer {
            name: n.name.clone(),
            underlay_ip: n.internal_ip,
            vtep_mac: n.vtep_mac(),
            cidrs: n.pod_cidrs.iter().map(|c| (*c, c.network())).collect(),
        })
        .collect();
    for peer in &peers {
        for (cidr, _) in &peer.cidrs {
            lpm.insert(
                *cidr,
                RouteKind::RemoteCidr {
                    vtep_mac: peer.vtep_mac,
                },
            );
        }
    }
    Ok(NodePlan {
        vtep_mac: local.vtep_mac(),
        vtep_prefixes,
        peers,
        lpm,
        cluster_cidrs: cluster.cluster_cidrs.clone(),
        local,
    })
}

/// The pod MTU: the configured one, else the underlay's minus the VXLAN overhead.
pub fn pod_mtu(configured: Option<u32>, underlay_mtu: u32) -> u32 {
    configured.unwrap_or(underlay_mtu.saturating_sub(VXLAN_OVERHEAD))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, cidrs: &[&str], ip: &str) -> NodeSpec {
        let json = serde_json::json!({
            "metadata": {"name": name},
            "spec": {"podCIDRs": cidrs},
            "status": {"addresses": [{"type": "InternalIP", "address": ip}]}
        });
        weft_model::decode::decode_str::<NodeSpec>(&json.to_string())
            .value
            .unwrap()
    }

    #[test]
    fn plan_routes_local_host_and_remote_prefixes() {
        let cluster = ClusterConfig::new(vec![
            "10.244.0.0/16".parse().unwrap(),
            "fd00:10:244::/48".parse().unwrap(),
        ])
        .unwrap();
        let nodes = [
            node(
                "a",
                &["10.244.1.0/24", "fd00:10:244:1::/64"],
                "198.51.100.11",
            ),
            node(
                "b",
                &["10.244.2.0/24", "fd00:10:244:2::/64"],
                "198.51.100.12",
            ),
        ];
        let (model, issues) = Model::build(&cluster, &nodes);
        assert!(issues.is_empty());
        let p = plan(&model, &cluster, "a").unwrap();
        assert_eq!(
            p.lpm[&"10.244.1.0/24".parse().unwrap()],
            RouteKind::LocalCidr
        );
        assert_eq!(p.lpm[&"10.244.1.0/32".parse().unwrap()], RouteKind::Host);
        assert_eq!(
            p.lpm[&"fd00:10:244:1::/128".parse().unwrap()],
            RouteKind::Host
        );
        assert_eq!(
            p.lpm[&"10.244.2.0/24".parse().unwrap()],
            RouteKind::RemoteCidr {
                vtep_mac: [0x0e, 0x77, 198, 51, 100, 12]
            }
        );
        assert_eq!(p.peers.len(), 1);
        assert_eq!(
            p.peers[0].cidrs[0],
            (
                "10.244.2.0/24".parse().unwrap(),
                "10.244.2.0".parse().unwrap()
            )
        );
        assert_eq!(
            plan(&model, &cluster, "zz").unwrap_err(),
            PlanError::LocalNodeMissing("zz".into())
        );
        assert_eq!(pod_mtu(None, 1500), 1450);
        assert_eq!(pod_mtu(Some(1400), 1500), 1400);
    }
}
