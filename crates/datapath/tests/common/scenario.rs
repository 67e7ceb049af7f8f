//! One simulated node's datapath state, for both address families.

use ipnet::IpNet;
use std::net::IpAddr;
use std::path::Path;
use weft_datapath::{pod, Datapath, EndpointInfo, NodeConfig, RouteKind};

pub const REMOTE_VTEP_MAC: [u8; 6] = [0x02, 0x77, 0, 0, 0, 0x02];
pub const LOCAL_VTEP_MAC: [u8; 6] = [0x02, 0x77, 0, 0, 0, 0x01];
/// Without a context, BPF_PROG_TEST_RUN runs on the namespace's loopback.
pub const TEST_RUN_IFINDEX: u32 = 1;
pub const POD_B_IFINDEX: u32 = 42;

/// Addresses of one family on node 1 of a two-node cluster.
#[derive(Clone, Copy, Debug)]
pub struct Addrs {
    pub local_cidr: &'static str,
    /// The pod whose veth the test run pretends to be (ifindex 1).
    pub pod_a: &'static str,
    /// Another pod on this node.
    pub pod_b: &'static str,
    /// In this node's CIDR, but no such pod.
    pub unknown_local: &'static str,
    /// This node's VTEP address (network address of its CIDR).
    pub local_vtep: &'static str,
    pub remote_cidr: &'static str,
    pub remote_pod: &'static str,
    /// In no route at all: outside the cluster.
    pub world: &'static str,
    /// A pod on this node that serves as a backend; on the test run's ifindex too, so its
    /// replies can be run through from_pod.
    pub backend_local: &'static str,
    /// The node's service CIDR, a ClusterIP in it, and an address in it no service has.
    pub service_cidr: &'static str,
    pub service: &'static str,
    pub unallocated: &'static str,
}

pub const V4: Addrs = Addrs {
    local_cidr: "10.244.1.0/24",
    pod_a: "10.244.1.10",
    pod_b: "10.244.1.11",
    unknown_local: "10.244.1.99",
    local_vtep: "10.244.1.0",
    remote_cidr: "10.244.2.0/24",
    remote_pod: "10.244.2.20",
    world: "203.0.113.1",
    backend_local: "10.244.1.12",
    service_cidr: "10.96.0.0/16",
    service: "10.96.0.10",
    unallocated: "10.96.0.99",
};

pub const V6: Addrs = Addrs {
    local_cidr: "fd00:10:244:1::/64",
    pod_a: "fd00:10:244:1::10",
    pod_b: "fd00:10:244:1::11",
    unknown_local: "fd00:10:244:1::99",
    local_vtep: "fd00:10:244:1::",
    remote_cidr: "fd00:10:244:2::/64",
    remote_pod: "fd00:10:244:2::20",
    world: "2001:db8::1",
    backend_local: "fd00:10:244:1::12",
    service_cidr: "fd00:10:96::/112",
    service: "fd00:10:96::10",
    unallocated: "fd00:10:96::99",
};

pub fn ip(s: &str) -> IpAddr {
    s.parse().expect("test address")
}

pub fn net(s: &str) -> IpNet {
    s.parse().expect("test prefix")
}

fn host_net(addr: IpAddr) -> IpNet {
    IpNet::new(addr, if addr.is_ipv4() { 32 } else { 128 }).expect("host prefix")
}

/// Loads the datapath under `root` and fills it as the agent and the CNI plugin
/// would on node 1, for both families. `vxlan_ifindex` 0 leaves the overlay unset.
pub fn node(root: &Path, vxlan_ifindex: u32) -> Datapath {
    let mut dp = Datapath::load_or_adopt(root).expect("load datapath");
    for a in [V4, V6] {
        pod::add_endpoint(
            root,
            ip(a.pod_a),
            EndpointInfo {
                ifindex: TEST_RUN_IFINDEX,
                mac: super::frames::POD_A_MAC,
            },
        )
        .expect("add endpoint a");
        pod::add_endpoint(
            root,
            ip(a.pod_b),
            EndpointInfo {
                ifindex: POD_B_IFINDEX,
                mac: super::frames::POD_B_MAC,
            },
        )
        .expect("add endpoint b");
        dp.upsert_route(net(a.local_cidr), RouteKind::LocalCidr)
            .expect("local route");
        dp.upsert_route(host_net(ip(a.local_vtep)), RouteKind::Host)
            .expect("vtep route");
        dp.upsert_route(
            net(a.remote_cidr),
            RouteKind::RemoteCidr {
                vtep_mac: REMOTE_VTEP_MAC,
            },
        )
        .expect("remote route");
    }
    if vxlan_ifindex != 0 {
        dp.set_config(NodeConfig {
            vxlan_ifindex,
            vtep_mac: LOCAL_VTEP_MAC,
        })
        .expect("config");
    }
    dp
}

pub const BACKEND_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x0c, 0x01];

/// [`node`], plus a local backend pod and the service CIDRs, for the service tests.
pub fn service_node(root: &Path, vxlan_ifindex: u32) -> (Datapath, weft_datapath::Services) {
    let dp = node(root, vxlan_ifindex);
    for a in [V4, V6] {
        pod::add_endpoint(
            root,
            ip(a.backend_local),
            EndpointInfo {
                ifindex: TEST_RUN_IFINDEX,
                mac: BACKEND_MAC,
            },
        )
        .expect("add backend endpoint");
    }
    let mut services = dp.services().expect("open services");
    services
        .set_service_cidrs(&[net(V4.service_cidr), net(V6.service_cidr)])
        .expect("service CIDRs");
    (dp, services)
}
