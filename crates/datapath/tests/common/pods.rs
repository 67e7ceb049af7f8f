//! Pods wired the way the CNI plugin wires them, for tests that send real packets.

use std::net::IpAddr;
use weft_testkit::{Netns, VethPair};

/// The MAC every host-side pod veth carries; pods reach their link-local gateway by it.
pub const GATEWAY_MAC: &str = "ee:ee:ee:ee:ee:ee";

/// A pod: its namespace, the host side of its veth (in the node namespace), the pod side
/// (`eth0`-like, inside `ns`) and its addresses.
pub struct Pod {
    pub ns: Netns,
    pub host_veth: String,
    pub pod_veth: String,
    pub v4: IpAddr,
    pub v6: IpAddr,
}

impl Pod {
    pub fn addrs(&self) -> [IpAddr; 2] {
        [self.v4, self.v6]
    }

    /// The pod's address of the family of `like`.
    pub fn addr_like(&self, like: IpAddr) -> IpAddr {
        if like.is_ipv4() {
            self.v4
        } else {
            self.v6
        }
    }

    /// The MAC of the pod side of its veth.
    pub fn mac(&self) -> [u8; 6] {
        // /sys/class/net shows the namespace sysfs was mounted in, so ask netlink.
        let out = self.ns.ip(&["-j", "link", "show", "dev", &self.pod_veth]);
        let links: serde_json::Value = serde_json::from_str(&out.stdout).expect("ip -j");
        let text = links[0]["address"].as_str().expect("address").to_string();
        let mut mac = [0u8; 6];
        for (byte, part) in mac.iter_mut().zip(text.split(':')) {
            *byte = u8::from_str_radix(part, 16).expect("MAC byte");
        }
        mac
    }
}

/// A pod wired as the CNI plugin does it: /32 and /128 on its side, a permanent
/// neighbour for the link-local gateways, default routes through them.
pub fn pod(node: &Netns, v4: &str, v6: &str) -> Pod {
    let ns = Netns::new("pd");
    let veth = VethPair::new(node, &[], &ns, &[&format!("{v4}/32"), &format!("{v6}/128")]);
    node.ip(&["link", "set", &veth.a, "address", GATEWAY_MAC]);
    let dev = veth.b.as_str();
    ns.ip(&["route", "add", "169.254.1.1", "dev", dev, "scope", "link"]);
    ns.ip(&["route", "add", "default", "via", "169.254.1.1", "dev", dev]);
    ns.ip(&[
        "neigh",
        "add",
        "169.254.1.1",
        "lladdr",
        GATEWAY_MAC,
        "dev",
        dev,
        "nud",
        "permanent",
    ]);
    ns.ip(&[
        "-6", "route", "add", "default", "via", "fe80::1", "dev", dev,
    ]);
    ns.ip(&[
        "-6",
        "neigh",
        "add",
        "fe80::1",
        "lladdr",
        GATEWAY_MAC,
        "dev",
        dev,
        "nud",
        "permanent",
    ]);
    Pod {
        ns,
        host_veth: veth.a,
        pod_veth: veth.b,
        v4: v4.parse().expect("pod v4"),
        v6: v6.parse().expect("pod v6"),
    }
}
