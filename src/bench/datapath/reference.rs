//! The reference the weft datapath is measured against: two "nodes" whose pods are attached
//! by Debian's `bridge` + `host-local` plugins (run inside the node namespace, as a
//! kubelet's runtime would), joined flannel-style by the kernel's VXLAN (a fixed-VNI device,
//! and for the peer's pod subnet a route via its VTEP address, a permanent neighbour entry
//! and a forwarding entry to its underlay address). This is `research/files/vxlan_two_nodes.sh`
//! in Rust, on the same routed underlay as the weft nodes.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use anyhow::Context;
use ipnet::{IpNet, Ipv4Net};
use serde_json::json;
use weft_cni::NetConfList;
use weft_netlink::{AddrFlags, Handle, Mac, Netns, RouteSpec, Scope, VethSpec, VxlanSpec};

use crate::chain::{Attachment, Chain};
use crate::lab::netns::in_netns;
use crate::lab::topology::host;

/// Where Debian installs the reference plugins.
pub const REFERENCE_PLUGIN_DIR: &str = "/usr/lib/cni";
/// The reference cluster's pod CIDR (node i gets 10.245.i.0/24); distinct from the weft
/// lab's 10.244.0.0/16 so a stray route could never make one carry the other's traffic.
pub const CLUSTER: Ipv4Net = Ipv4Net::new_assert(Ipv4Addr::new(10, 245, 0, 0), 16);
/// Flannel's VXLAN defaults on Linux are VNI 1 / port 8472; the research script (and the
/// Linux default port from IANA) uses 42 / 4789. The numbers do not change the cost.
pub const VNI: u32 = 42;
pub const PORT: u16 = 4789;
pub const VXLAN_DEVICE: &str = "vxlan0";
pub const BRIDGE: &str = "cbr0";
/// The node-side uplink, named like the weft lab's.
pub const UPLINK: &str = crate::lab::topology::NODE_UPLINK;

/// One reference node.
#[derive(Debug, Clone)]
pub struct RefNode {
    pub index: u8,
    pub netns: PathBuf,
    pub underlay_ip: Ipv4Addr,
}

impl RefNode {
    pub fn pod_cidr(&self) -> Ipv4Net {
        Ipv4Net::new_assert(Ipv4Addr::new(10, 245, self.index, 0), 24)
    }

    /// The VTEP's address: the subnet's network address, as flannel does.
    pub fn vtep_ip(&self) -> Ipv4Addr {
        self.pod_cidr().network()
    }

    pub fn vtep_mac(&self) -> Mac {
        [0x02, 0x42, 0x0a, 0xf5, self.index, 0x00]
    }
}

/// Joins the node to the router with a veth, exactly like a weft lab node: a /32 on each
/// end, host routes both ways, the node's default route via the router.
pub fn link_to_router(
    router: &Path,
    router_if: &str,
    router_ip: Ipv4Addr,
    node: &RefNode,
) -> anyhow::Result<()> {
    let node_ns = Netns::open(&node.netns)?;
    let router_if = router_if.to_string();
    let node_ip = node.underlay_ip;
    in_netns(router, move || {
        let mut h = Handle::new()?;
        let index = h.create_veth(&VethSpec {
            name: &router_if,
            up: true,
            peer_name: UPLINK,
            peer_netns: Some(&node_ns),
            ..Default::default()
        })?;
        h.add_address(index, host(router_ip), AddrFlags::default())?;
        h.add_route(&RouteSpec {
            oif: Some(index),
            scope: Scope::Link,
            ..RouteSpec::new(host(node_ip))
        })?;
        Ok(())
    })?;
    in_netns(&node.netns, move || {
        let mut h = Handle::new()?;
        let link = h.link_by_name(UPLINK)?.context("uplink missing")?;
        h.set_up(link.index)?;
        h.add_address(link.index, host(node_ip), AddrFlags::default())?;
        h.add_route(&RouteSpec {
            oif: Some(link.index),
            scope: Scope::Link,
            ..RouteSpec::new(host(router_ip))
        })?;
        h.add_route(&RouteSpec {
            gateway: Some(IpAddr::V4(router_ip)),
            oif: Some(link.index),
            onlink: true,
            ..RouteSpec::new("0.0.0.0/0".parse()?)
        })?;
        weft_netlink::write_sysctl("net/ipv4/ip_forward", "1")?;
        Ok(())
    })
}

/// The conflist a runtime on this node would use: bridge + host-local, pod MTU `mtu`.
pub fn conflist(node: &RefNode, mtu: u32, ipam_dir: &Path) -> serde_json::Value {
    json!({
        "cniVersion": "1.0.0",
        "name": "weft-bench-reference",
        "plugins": [{
            "type": "bridge",
            "bridge": BRIDGE,
            "isGateway": true,
            "ipMasq": false,
            "mtu": mtu,
            "ipam": {
                "type": "host-local",
                "ranges": [[{ "subnet": node.pod_cidr().to_string() }]],
                "routes": [{ "dst": CLUSTER.to_string() }],
                "dataDir": ipam_dir,
            },
        }],
    })
}

/// Adds a pod through the reference plugins, run inside the node's namespace; returns the
/// pod's IPv4 address.
pub fn add_pod(
    node: &RefNode,
    mtu: u32,
    ipam_dir: &Path,
    pod_netns: &Path,
    container_id: &str,
) -> anyhow::Result<Ipv4Addr> {
    let list = NetConfList::from_value(&conflist(node, mtu, ipam_dir))
        .map_err(|e| anyhow::anyhow!("reference conflist: {e}"))?;
    let chain = Chain::new(list, vec![PathBuf::from(REFERENCE_PLUGIN_DIR)]).in_netns(&node.netns);
    let result = chain
        .add(&Attachment {
            container_id: container_id.into(),
            netns: pod_netns.display().to_string(),
            ifname: "eth0".into(),
            ..Attachment::default()
        })
        .with_context(|| format!("reference bridge plugin ADD of {container_id}"))?;
    result
        .ips
        .iter()
        .find_map(|ip| match ip.address {
            IpNet::V4(v4) => Some(v4.addr()),
            IpNet::V6(_) => None,
        })
        .with_context(|| format!("the bridge plugin gave {container_id} no IPv4 address"))
}

/// The node's VTEP: a fixed-VNI device bound to the uplink, without learning, holding the
/// subnet's network address. MTU `mtu` (the same as the weft overlay device).
pub fn add_vtep(node: &RefNode, mtu: u32) -> anyhow::Result<()> {
    let node = node.clone();
    in_netns(&node.netns.clone(), move || {
        let mut h = Handle::new()?;
        let uplink = h.link_by_name(UPLINK)?.context("uplink missing")?;
        let index = h.create_vxlan(&VxlanSpec {
            name: VXLAN_DEVICE,
            vni: VNI,
            local: Some(IpAddr::V4(node.underlay_ip)),
            underlay_index: Some(uplink.index),
            port: PORT,
            learning: false,
            mtu: Some(mtu),
            mac: Some(node.vtep_mac()),
            df_set: false,
            up: true,
        })?;
        h.add_address(
            index,
            host(IpAddr::V4(node.vtep_ip())),
            AddrFlags::default(),
        )?;
        Ok(())
    })
}

/// What flannel programs on `node` for `peer`: route, permanent neighbour, forwarding entry.
pub fn add_peer(node: &RefNode, peer: &RefNode) -> anyhow::Result<()> {
    let peer = peer.clone();
    in_netns(&node.netns, move || {
        let mut h = Handle::new()?;
        let vxlan = h.link_by_name(VXLAN_DEVICE)?.context("VTEP missing")?.index;
        let vtep = IpAddr::V4(peer.vtep_ip());
        // A unicast MAC has one destination: replace is `bridge fdb append` for it.
        h.replace_fdb(vxlan, peer.vtep_mac(), IpAddr::V4(peer.underlay_ip))?;
        h.add_neighbour(vxlan, vtep, peer.vtep_mac(), true)?;
        h.add_route(&RouteSpec {
            gateway: Some(vtep),
            oif: Some(vxlan),
            onlink: true,
            ..RouteSpec::new(IpNet::V4(peer.pod_cidr()))
        })?;
        Ok(())
    })
}

/// Gives the node the netfilter tables a weft node has (see `agent::apply::nat`): the
/// masquerade of pod traffic leaving the cluster, and notrack for the tunnel's UDP port.
/// A real flannel node has at least as much (flannel's own masquerade rules, kube-proxy),
/// and the tables are not free: once a NAT table exists, every packet in the namespace,
/// every received tunnel packet included, passes the conntrack and NAT hooks.
pub fn add_netfilter(node: &RefNode) -> anyhow::Result<()> {
    use crate::agent::apply::nat::{nat_spec, raw_spec, NAT_TABLE_V4};
    use weft_nft::{Family, NftSocket};
    let nat = nat_spec(Family::Ip, NAT_TABLE_V4, IpNet::V4(CLUSTER))?;
    let raw = raw_spec(PORT)?;
    let sock = NftSocket::open_in_netns(&node.netns)?;
    for spec in [raw, nat] {
        sock.replace_table(&spec)
            .with_context(|| format!("install {} in {}", spec.table.name, node.netns.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::datapath::rr;
    use weft_testkit::{require_root, Netns as TestNetns};

    #[test]
    fn the_conflist_is_bridge_and_host_local_with_the_pod_mtu() {
        let node = RefNode {
            index: 2,
            netns: "/run/netns/x".into(),
            underlay_ip: Ipv4Addr::new(198, 51, 100, 222),
        };
        let v = conflist(&node, 1450, Path::new("/tmp/ipam"));
        assert_eq!(v["plugins"][0]["type"], "bridge");
        assert_eq!(v["plugins"][0]["mtu"], 1450);
        assert_eq!(
            v["plugins"][0]["ipam"]["ranges"][0][0]["subnet"],
            "10.245.2.0/24"
        );
        assert_eq!(node.vtep_ip(), Ipv4Addr::new(10, 245, 2, 0));
        assert_eq!(node.vtep_mac(), [0x02, 0x42, 0x0a, 0xf5, 2, 0]);
        assert!(NetConfList::from_value(&v).is_ok());
    }

    #[test]
    fn reference_nodes_carry_pod_traffic_over_kernel_vxlan() {
        require_root();
        assert!(
            Path::new(REFERENCE_PLUGIN_DIR).join("bridge").is_file(),
            "this test needs Debian's containernetworking-plugins"
        );
        let router = TestNetns::new("rt");
        router.sysctl("net.ipv4.ip_forward", "1");
        let node_ns = [TestNetns::new("n1"), TestNetns::new("n2")];
        let pod_ns = [TestNetns::new("p1"), TestNetns::new("p2")];
        let ipam = std::env::temp_dir().join(weft_testkit::unique_name("ip"));
        let router_ip = Ipv4Addr::new(198, 51, 100, 1);
        let nodes: Vec<RefNode> = node_ns
            .iter()
            .zip(1u8..)
            .map(|(ns, i)| RefNode {
                index: i,
                netns: ns.path().to_path_buf(),
                underlay_ip: Ipv4Addr::new(198, 51, 100, 220 + i),
            })
            .collect();
        let mut pod_ips = Vec::new();
        for (node, pod) in nodes.iter().zip(&pod_ns) {
            link_to_router(
                router.path(),
                &format!("ref{}", node.index),
                router_ip,
                node,
            )
            .unwrap();
            pod_ips.push(
                add_pod(
                    node,
                    1450,
                    &ipam.join(node.index.to_string()),
                    pod.path(),
                    pod.name(),
                )
                .unwrap(),
            );
            add_vtep(node, 1450).unwrap();
        }
        add_peer(&nodes[0], &nodes[1]).unwrap();
        add_peer(&nodes[1], &nodes[0]).unwrap();
        assert!(CLUSTER.contains(&pod_ips[1]));

        let rx_before = vxlan_rx_packets(&node_ns[1]);
        let sample = rr::run(
            pod_ns[0].path(),
            pod_ns[1].path(),
            std::net::SocketAddrV4::new(pod_ips[1], 5202),
            std::net::SocketAddrV4::new(pod_ips[1], 5202),
            rr::RrOptions {
                warmup: 5,
                timed: 50,
                ..rr::RrOptions::default()
            },
        )
        .unwrap();
        assert_eq!(sample.round_trips, 50);
        // The traffic went through the tunnel, not around it.
        assert!(vxlan_rx_packets(&node_ns[1]) >= rx_before + 50);

        // With a weft node's netfilter tables the reference still carries traffic.
        for node in &nodes {
            add_netfilter(node).unwrap();
        }
        let tables = node_ns[1].exec_ok("nft", &["list", "tables"]).stdout;
        assert!(
            tables.contains("inet weft_raw") && tables.contains("ip weft_nat"),
            "{tables}"
        );
        let again = rr::run(
            pod_ns[0].path(),
            pod_ns[1].path(),
            std::net::SocketAddrV4::new(pod_ips[1], 5202),
            std::net::SocketAddrV4::new(pod_ips[1], 5202),
            rr::RrOptions {
                warmup: 5,
                timed: 20,
                ..rr::RrOptions::default()
            },
        )
        .unwrap();
        assert_eq!(again.round_trips, 20);
        let eth0_mtu = in_netns(pod_ns[0].path(), || {
            Ok(Handle::new()?.link_by_name("eth0")?.context("eth0")?.mtu)
        })
        .unwrap();
        assert_eq!(eth0_mtu, 1450);
        let _ = std::fs::remove_dir_all(&ipam);
    }

    fn vxlan_rx_packets(node: &TestNetns) -> u64 {
        let out = node.ip(&["-s", "-j", "link", "show", VXLAN_DEVICE]);
        let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
        v[0]["stats64"]["rx"]["packets"].as_u64().unwrap()
    }
}
