//! weft-netlink: synchronous rtnetlink for the CNI plugin and the node agent.
//!
//! No async runtime: a [`Handle`] is a netlink socket bound to one network namespace
//! and a request/ack/dump loop built on `netlink-packet-route`. It configures links,
//! addresses, routes, neighbours, VXLAN forwarding entries, and the clsact qdisc with
//! bpf filters on its ingress (where TCX links are not available). Every single-object
//! operation is one round trip (no hidden dumps), errors are typed ([`Error`]) and name
//! the operation and the object, and nothing here runs `ip` or `bridge`.
//!
//! ```no_run
//! # fn main() -> weft_netlink::Result<()> {
//! use weft_netlink::{AddrFlags, Handle, Netns, RouteSpec, Scope, VethSpec};
//! let pod = Netns::open("/var/run/netns/pod")?;
//! let mut host = Handle::new()?;
//! let host_index = host.create_veth(&VethSpec {
//!     name: "wf1234",
//!     peer_name: "eth0",
//!     peer_netns: Some(&pod),
//!     mtu: Some(1450),
//!     up: true,
//!     ..Default::default()
//! })?;
//! host.add_route(&RouteSpec {
//!     oif: Some(host_index),
//!     scope: Scope::Link,
//!     ..RouteSpec::new("10.244.1.5/32".parse().unwrap())
//! })?;
//! let mut inside = Handle::new_in(&pod)?;
//! let eth0 = inside.link_by_name("eth0")?.expect("just created");
//! inside.set_up(eth0.index)?;
//! inside.add_address(eth0.index, "10.244.1.5/32".parse().unwrap(), AddrFlags::default())?;
//! # Ok(()) }
//! ```

mod address;
mod bytes;
mod error;
mod events;
mod fdb;
mod handle;
mod link;
mod neigh;
mod netns;
mod reply;
mod route;
mod sysctl;
mod tc;

pub use address::AddrFlags;
pub use error::{Error, Result};
pub use events::LinkEvents;
pub use handle::Handle;
pub use link::{Link, VethSpec, VxlanSpec};
pub use neigh::{Neighbour, NeighbourState};
pub use netns::{Netns, NetnsGuard};
pub use route::{IpFamily, RouteInfo, RouteKind, RouteSpec, Scope, MAIN_TABLE};
pub use sysctl::{read_sysctl, write_sysctl};
pub use tc::{BpfFilterInfo, BpfFilterSpec, Qdisc, TcFilter, BPF_FILTER_NAME_MAX, ETH_P_ALL};

/// An Ethernet address.
pub type Mac = [u8; 6];

/// `aa:bb:cc:dd:ee:ff`, for messages.
pub fn mac_to_string(mac: &Mac) -> String {
    let [a, b, c, d, e, f] = mac;
    format!("{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{f:02x}")
}

#[cfg(test)]
mod tests {
    fn assert_send<T: Send>() {}

    #[test]
    fn handles_and_namespaces_can_move_between_threads() {
        // A handle's socket is bound to its namespace, not to the thread that made it.
        assert_send::<super::Handle>();
        assert_send::<super::Netns>();
    }

    #[test]
    fn macs_print_in_the_usual_form() {
        assert_eq!(
            super::mac_to_string(&[0x02, 0, 0xab, 1, 2, 0xff]),
            "02:00:ab:01:02:ff"
        );
    }
}
