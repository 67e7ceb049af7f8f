//! The lab's names and addresses, all derived from the lab name and indices.
//!
//! Addresses are the lab's own configuration, from ranges reserved for documentation and
//! private use so nothing leaves the machine: the underlay is 198.51.100.0/24 and
//! fd00:198:51:100::/64 (node i at .10+i), the "world" outside the cluster is 203.0.113.0/24
//! and 2001:db8::/64, pods get 10.244.i.0/24 and fd00:10:244:i::/64 out of the cluster CIDRs
//! 10.244.0.0/16 and fd00:10:244::/48. Every node is a network namespace joined to a router
//! namespace by its own veth (a routed underlay, like a leaf-spine fabric).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

pub const CLUSTER_V4: &str = "10.244.0.0/16";
pub const CLUSTER_V6: &str = "fd00:10:244::/48";
pub const ROUTER_V4: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 1);
pub const ROUTER_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x198, 0x51, 0x100, 0, 0, 0, 1);
pub const WORLD_V4: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 1);
pub const WORLD_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
pub const WORLD_GW_V4: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 254);
pub const WORLD_GW_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0xfe);
/// Interface names inside the lab's namespaces (each namespace has its own).
pub const NODE_UPLINK: &str = "uplink";
pub const WORLD_IF: &str = "eth0";
pub const ROUTER_WORLD_IF: &str = "world";
/// Most nodes a lab supports: node indices become the third octet of pod CIDRs.
pub const MAX_NODES: u32 = 200;

#[derive(Debug, Clone)]
pub struct Topology {
    pub lab: String,
}

impl Topology {
    pub fn new(lab: &str) -> Topology {
        Topology {
            lab: lab.to_string(),
        }
    }

    pub fn router_ns(&self) -> String {
        format!("{}-router", self.lab)
    }

    pub fn world_ns(&self) -> String {
        format!("{}-world", self.lab)
    }

    pub fn node_name(&self, i: u32) -> String {
        format!("node{i}")
    }

    pub fn node_ns(&self, i: u32) -> String {
        format!("{}-node{i}", self.lab)
    }

    pub fn pod_name(&self, node: u32, pod: u32) -> String {
        format!("pod{node}-{pod}")
    }

    pub fn pod_ns(&self, node: u32, pod: u32) -> String {
        format!("{}-pod{node}-{pod}", self.lab)
    }

    /// The router's end of node i's link.
    pub fn router_if(&self, i: u32) -> String {
        format!("node{i}")
    }

    pub fn node_v4(&self, i: u32) -> Ipv4Addr {
        Ipv4Addr::new(198, 51, 100, (10 + i) as u8)
    }

    pub fn node_v6(&self, i: u32) -> Ipv6Addr {
        Ipv6Addr::new(0xfd00, 0x198, 0x51, 0x100, 0, 0, 0, (0x10 + i) as u16)
    }

    pub fn pod_cidrs(&self, i: u32) -> Vec<IpNet> {
        vec![
            format!("10.244.{i}.0/24").parse().expect("valid"),
            format!("fd00:10:244:{i:x}::/64").parse().expect("valid"),
        ]
    }

    pub fn cluster_cidrs(&self) -> Vec<IpNet> {
        vec![
            CLUSTER_V4.parse().expect("valid"),
            CLUSTER_V6.parse().expect("valid"),
        ]
    }

    /// The node's Kubernetes Node object, as the standalone source reads it.
    pub fn node_yaml(&self, i: u32) -> String {
        let cidrs: Vec<String> = self
            .pod_cidrs(i)
            .iter()
            .map(|c| format!("\"{c}\""))
            .collect();
        format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\nspec:\n  podCIDRs: [{cidrs}]\nstatus:\n  addresses:\n  - type: InternalIP\n    address: {v4}\n  - type: InternalIP\n    address: \"{v6}\"\n",
            name = self.node_name(i),
            cidrs = cidrs.join(", "),
            v4 = self.node_v4(i),
            v6 = self.node_v6(i),
        )
    }

    /// Pin root of node i's datapath: one per simulated node so they share one kernel.
    pub fn pin_root(&self, i: u32) -> std::path::PathBuf {
        std::path::PathBuf::from(format!("/sys/fs/bpf/{}/node{i}", self.lab))
    }

    pub fn pin_base(&self) -> std::path::PathBuf {
        std::path::PathBuf::from(format!("/sys/fs/bpf/{}", self.lab))
    }
}

pub fn host(addr: impl Into<IpAddr>) -> IpNet {
    let addr = addr.into();
    IpNet::new(addr, if addr.is_ipv4() { 32 } else { 128 }).expect("full-length prefix")
}
