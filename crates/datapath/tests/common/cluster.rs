//! A two-node cluster in namespaces, wired as the agent and the CNI plugin wire a node:
//! an underlay veth between the node namespaces, a fixed-VNI VXLAN device per node with
//! FDB, neighbour and route entries for the peer, and pods on each node. What runs on it
//! is up to the test: today's datapath ([`Cluster::install`]) or an earlier release's
//! (`common::legacy`).

use super::pods::{pod, Pod};
use super::{in_netns, PinRoot};
use ipnet::IpNet;
use std::net::IpAddr;
use weft_datapath::{pod as cni, Datapath, EndpointInfo, NodeConfig, RouteKind};
use weft_testkit::{Netns, VethPair};

pub const VNI: &str = "1";
pub const VXLAN_PORT: &str = "8472";
/// The VXLAN device's MTU (the underlay's 1500 minus the 50 bytes of encapsulation),
/// which the plugin gives pods too.
pub const POD_MTU: &str = "1450";

/// One node of the cluster (index 1 or 2).
pub struct ClusterNode {
    pub index: u8,
    pub ns: Netns,
    pub root: PinRoot,
    pub vxlan: String,
    pub pods: Vec<Pod>,
}

impl ClusterNode {
    pub fn cidr_v4(&self) -> IpNet {
        cidr_v4(self.index)
    }

    pub fn cidr_v6(&self) -> IpNet {
        cidr_v6(self.index)
    }

    /// Its VTEP addresses: the network address of each pod CIDR.
    pub fn vteps(&self) -> [IpAddr; 2] {
        [vtep_v4(self.index), vtep_v6(self.index)]
    }

    pub fn vtep_mac(&self) -> [u8; 6] {
        vtep_mac(self.index)
    }

    /// The routes the agent writes on this node (the other node is `peer`).
    pub fn routes(&self, peer: &ClusterNode) -> Vec<(IpNet, RouteKind)> {
        let mut routes = vec![
            (self.cidr_v4(), RouteKind::LocalCidr),
            (self.cidr_v6(), RouteKind::LocalCidr),
            (peer.cidr_v4(), remote(peer)),
            (peer.cidr_v6(), remote(peer)),
        ];
        for vtep in self.vteps() {
            routes.push((host_net(vtep), RouteKind::Host));
        }
        routes.sort_by_key(|(net, _)| *net);
        routes
    }

    /// ifindex of a device of this node's namespace.
    pub fn ifindex(&self, dev: &str) -> u32 {
        let dev = dev.to_string();
        in_netns(self.ns.path(), move || super::ifindex(&dev))
    }

    /// The endpoints the CNI plugin writes for this node's pods.
    pub fn endpoints(&self) -> Vec<(IpAddr, EndpointInfo)> {
        let mut out = Vec::new();
        for p in &self.pods {
            let info = EndpointInfo {
                ifindex: self.ifindex(&p.host_veth),
                mac: p.mac(),
            };
            for addr in p.addrs() {
                out.push((addr, info));
            }
        }
        out.sort_by_key(|(ip, _)| *ip);
        out
    }
}

fn remote(peer: &ClusterNode) -> RouteKind {
    RouteKind::RemoteCidr {
        vtep_mac: peer.vtep_mac(),
    }
}

pub fn cidr_v4(node: u8) -> IpNet {
    format!("10.244.{node}.0/24").parse().expect("cidr")
}

pub fn cidr_v6(node: u8) -> IpNet {
    format!("fd00:10:244:{node}::/64").parse().expect("cidr")
}

pub fn vtep_v4(node: u8) -> IpAddr {
    cidr_v4(node).network()
}

pub fn vtep_v6(node: u8) -> IpAddr {
    cidr_v6(node).network()
}

pub fn vtep_mac(node: u8) -> [u8; 6] {
    [0x02, 0x77, 0, 0, 0, node]
}

pub fn underlay(node: u8) -> String {
    // TEST-NET-1: only ever inside these namespaces.
    format!("192.0.2.{node}")
}

pub fn host_net(addr: IpAddr) -> IpNet {
    IpNet::new(addr, if addr.is_ipv4() { 32 } else { 128 }).expect("host prefix")
}

fn mac_string(mac: [u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Two nodes; `pods[i]` pods on node `i + 1`. Pod `j` of node `n` has 10.244.n.(10+j) and
/// fd00:10:244:n::(10+j).
pub struct Cluster {
    pub nodes: [ClusterNode; 2],
}

impl Cluster {
    pub fn new(pods: [usize; 2]) -> Cluster {
        let n1 = Netns::new("n1");
        let n2 = Netns::new("n2");
        let uplink = VethPair::new(
            &n1,
            &[&format!("{}/24", underlay(1))],
            &n2,
            &[&format!("{}/24", underlay(2))],
        );
        let mut nodes = Vec::new();
        for (index, (ns, dev, count)) in [(n1, uplink.a, pods[0]), (n2, uplink.b, pods[1])]
            .into_iter()
            .enumerate()
        {
            let index = index as u8 + 1;
            let vxlan = weft_testkit::unique_name("vx");
            ns.ip(&[
                "link",
                "add",
                &vxlan,
                "address",
                &mac_string(vtep_mac(index)),
                "type",
                "vxlan",
                "id",
                VNI,
                "local",
                &underlay(index),
                "dev",
                &dev,
                "dstport",
                VXLAN_PORT,
                "nolearning",
            ]);
            ns.ip(&["link", "set", &vxlan, "mtu", POD_MTU, "up"]);
            for vtep in [vtep_v4(index), vtep_v6(index)] {
                let prefix = host_net(vtep).to_string();
                let mut args = vec!["addr", "add", &prefix, "dev", &vxlan];
                if vtep.is_ipv6() {
                    args.push("nodad");
                }
                ns.ip(&args);
            }
            // As the agent sets them up.
            ns.sysctl("net.ipv4.ip_forward", "1");
            ns.sysctl("net.ipv6.conf.all.forwarding", "1");
            let pods = (0..count)
                .map(|j| {
                    let j = 10 + j;
                    let p = pod(
                        &ns,
                        &format!("10.244.{index}.{j}"),
                        &format!("fd00:10:244:{index}::{j}"),
                    );
                    // The plugin gives pods the overlay's MTU.
                    ns.ip(&["link", "set", &p.host_veth, "mtu", POD_MTU]);
                    p.ns.ip(&["link", "set", &p.pod_veth, "mtu", POD_MTU]);
                    p
                })
                .collect();
            nodes.push(ClusterNode {
                index,
                ns,
                root: PinRoot::new(&format!("c{index}")),
                vxlan,
                pods,
            });
        }
        let [a, b]: [ClusterNode; 2] = nodes.try_into().ok().expect("two nodes");
        for (node, peer) in [(&a, &b), (&b, &a)] {
            let peer_mac = mac_string(peer.vtep_mac());
            weft_testkit::run_ok(std::process::Command::new("bridge").args([
                "-n",
                node.ns.name(),
                "fdb",
                "append",
                &peer_mac,
                "dev",
                &node.vxlan,
                "dst",
                &underlay(peer.index),
            ]));
            for (vtep, cidr) in [
                (vtep_v4(peer.index), peer.cidr_v4()),
                (vtep_v6(peer.index), peer.cidr_v6()),
            ] {
                let family = if vtep.is_ipv4() { "-4" } else { "-6" };
                let vtep = vtep.to_string();
                let cidr = cidr.to_string();
                node.ns.ip(&[
                    family,
                    "neigh",
                    "add",
                    &vtep,
                    "lladdr",
                    &peer_mac,
                    "dev",
                    &node.vxlan,
                    "nud",
                    "permanent",
                ]);
                node.ns.ip(&[
                    family,
                    "route",
                    "add",
                    &cidr,
                    "via",
                    &vtep,
                    "dev",
                    &node.vxlan,
                    "onlink",
                ]);
            }
        }
        Cluster { nodes: [a, b] }
    }

    pub fn node(&self, index: u8) -> &ClusterNode {
        &self.nodes[usize::from(index) - 1]
    }

    /// Node `node`'s pod `j`.
    pub fn pod(&self, node: u8, j: usize) -> &Pod {
        &self.node(node).pods[j]
    }

    /// Loads today's datapath on both nodes and fills it as the agent and the plugin do.
    pub fn install(&self) {
        for (node, peer) in [
            (&self.nodes[0], &self.nodes[1]),
            (&self.nodes[1], &self.nodes[0]),
        ] {
            let root = node.root.path().to_path_buf();
            let routes = node.routes(peer);
            let endpoints = node.endpoints();
            let vxlan = node.vxlan.clone();
            let vtep_mac = node.vtep_mac();
            let hosts: Vec<String> = node.pods.iter().map(|p| p.host_veth.clone()).collect();
            in_netns(node.ns.path(), move || {
                let mut dp = Datapath::load_or_adopt(&root).expect("load datapath");
                for (net, kind) in routes {
                    dp.upsert_route(net, kind).expect("route");
                }
                dp.set_config(NodeConfig {
                    vxlan_ifindex: super::ifindex(&vxlan),
                    vtep_mac,
                })
                .expect("config");
                dp.attach_overlay(&vxlan).expect("attach overlay");
                for (addr, info) in endpoints {
                    cni::add_endpoint(&root, addr, info).expect("endpoint");
                }
                for host in hosts {
                    cni::attach_pod(&root, super::ifindex(&host), &host).expect("attach pod");
                }
            });
        }
    }
}
