//! The typed view of map contents that callers use, and its conversion to and from
//! the raw layouts in [`crate::layout`].

use crate::layout::{
    ConfigValue, Counter, EndpointValue, Event, IpKey, RouteValue, COUNTER_MAX, EVENT_MAX,
    FAMILY_IPV4, FAMILY_IPV6, LPM_FAMILY_BITS, ROUTE_HOST, ROUTE_LOCAL_CIDR, ROUTE_REMOTE_CIDR,
};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A pod on this node, as the CNI plugin records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndpointInfo {
    /// ifindex of the host-side veth in the node's network namespace.
    pub ifindex: u32,
    /// MAC of the pod's eth0.
    pub mac: [u8; 6],
}

/// What a route entry tells the programs about a prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteKind {
    /// One of this node's pod CIDRs: destinations without an endpoint are dropped.
    LocalCidr,
    /// Another node's pod CIDR, reached through the overlay towards that node's VTEP.
    RemoteCidr { vtep_mac: [u8; 6] },
    /// A VTEP address: delivered to the node's kernel stack.
    Host,
}

/// Node-wide settings of the programs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeConfig {
    /// ifindex of the VXLAN device in the node namespace; 0 leaves cross-node
    /// traffic to the kernel routes.
    pub vxlan_ifindex: u32,
    /// This node's VTEP MAC (the VXLAN device's address).
    pub vtep_mac: [u8; 6],
}

/// Per-CPU counters summed over CPUs, one per [`Counter`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    values: [u64; COUNTER_MAX as usize],
}

impl Counters {
    pub(crate) fn from_values(values: [u64; COUNTER_MAX as usize]) -> Counters {
        Counters { values }
    }

    pub fn get(&self, counter: Counter) -> u64 {
        self.values.get(counter as usize).copied().unwrap_or(0)
    }

    /// `(name, value)` for every counter, in enum order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        Counter::ALL.iter().map(|c| (c.name(), self.get(*c)))
    }

    /// All drops, whatever the reason.
    pub fn drops(&self) -> u64 {
        Counter::ALL
            .iter()
            .filter(|c| c.is_drop())
            .map(|c| self.get(*c))
            .sum()
    }
}

/// Per-CPU events summed over CPUs, one per [`Event`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Events {
    values: [u64; EVENT_MAX as usize],
}

impl Events {
    pub(crate) fn from_values(values: [u64; EVENT_MAX as usize]) -> Events {
        Events { values }
    }

    pub fn get(&self, event: Event) -> u64 {
        self.values.get(event as usize).copied().unwrap_or(0)
    }

    /// `(name, value)` for every event, in enum order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        Event::ALL.iter().map(|e| (e.name(), self.get(*e)))
    }
}

pub(crate) fn ip_key(ip: IpAddr) -> IpKey {
    let mut key = IpKey::default();
    match ip {
        IpAddr::V4(v4) => {
            key.family = FAMILY_IPV4;
            key.addr[..4].copy_from_slice(&v4.octets());
        }
        IpAddr::V6(v6) => {
            key.family = FAMILY_IPV6;
            key.addr = v6.octets();
        }
    }
    key
}

/// The LPM key of a prefix: host bits cleared, prefix length counting the family.
pub(crate) fn route_key(net: IpNet) -> (u32, IpKey) {
    let net = net.trunc();
    (
        LPM_FAMILY_BITS + u32::from(net.prefix_len()),
        ip_key(net.network()),
    )
}

pub(crate) fn ip_from_key(key: &IpKey) -> Option<IpAddr> {
    match key.family {
        FAMILY_IPV4 => {
            let [a, b, c, d, ..] = key.addr;
            Some(IpAddr::V4(Ipv4Addr::new(a, b, c, d)))
        }
        FAMILY_IPV6 => Some(IpAddr::V6(Ipv6Addr::from(key.addr))),
        _ => None,
    }
}

pub(crate) fn net_from_key(prefix_len: u32, key: &IpKey) -> Option<IpNet> {
    let bits = u8::try_from(prefix_len.checked_sub(LPM_FAMILY_BITS)?).ok()?;
    match ip_from_key(key)? {
        IpAddr::V4(a) => Ipv4Net::new(a, bits).ok().map(IpNet::V4),
        IpAddr::V6(a) => Ipv6Net::new(a, bits).ok().map(IpNet::V6),
    }
}

impl From<EndpointInfo> for EndpointValue {
    fn from(e: EndpointInfo) -> Self {
        EndpointValue {
            ifindex: e.ifindex,
            mac: e.mac,
            flags: 0,
        }
    }
}

impl From<EndpointValue> for EndpointInfo {
    fn from(v: EndpointValue) -> Self {
        EndpointInfo {
            ifindex: v.ifindex,
            mac: v.mac,
        }
    }
}

impl From<RouteKind> for RouteValue {
    fn from(kind: RouteKind) -> Self {
        let (kind, vtep_mac) = match kind {
            RouteKind::LocalCidr => (ROUTE_LOCAL_CIDR, [0; 6]),
            RouteKind::RemoteCidr { vtep_mac } => (ROUTE_REMOTE_CIDR, vtep_mac),
            RouteKind::Host => (ROUTE_HOST, [0; 6]),
        };
        RouteValue {
            kind,
            vtep_mac,
            flags: 0,
        }
    }
}

impl RouteKind {
    pub(crate) fn from_value(v: &RouteValue) -> Option<RouteKind> {
        match v.kind {
            ROUTE_LOCAL_CIDR => Some(RouteKind::LocalCidr),
            ROUTE_REMOTE_CIDR => Some(RouteKind::RemoteCidr {
                vtep_mac: v.vtep_mac,
            }),
            ROUTE_HOST => Some(RouteKind::Host),
            _ => None,
        }
    }
}

impl From<NodeConfig> for ConfigValue {
    fn from(c: NodeConfig) -> Self {
        ConfigValue {
            vxlan_ifindex: c.vxlan_ifindex,
            vtep_mac: c.vtep_mac,
            flags: 0,
        }
    }
}

impl From<ConfigValue> for NodeConfig {
    fn from(c: ConfigValue) -> Self {
        NodeConfig {
            vxlan_ifindex: c.vxlan_ifindex,
            vtep_mac: c.vtep_mac,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v4_keys_use_the_first_word_only() {
        let key = ip_key("10.244.1.7".parse().unwrap());
        assert_eq!(key.family, 4);
        assert_eq!(key.addr[..4], [10, 244, 1, 7]);
        assert_eq!(key.addr[4..], [0; 12]);
        assert_eq!(ip_from_key(&key), Some("10.244.1.7".parse().unwrap()));
    }

    #[test]
    fn route_keys_clear_host_bits_and_count_the_family() {
        let (len, key) = route_key("10.244.1.7/24".parse().unwrap());
        assert_eq!(len, 32 + 24);
        assert_eq!(key.addr[..4], [10, 244, 1, 0]);
        assert_eq!(
            net_from_key(len, &key),
            Some("10.244.1.0/24".parse().unwrap())
        );
        let (len, key) = route_key("fd00:10:244:1::/64".parse().unwrap());
        assert_eq!(len, 32 + 64);
        assert_eq!(
            net_from_key(len, &key),
            Some("fd00:10:244:1::/64".parse().unwrap())
        );
    }

    #[test]
    fn garbage_keys_are_none_not_panics() {
        let key = IpKey {
            family: 9,
            ..Default::default()
        };
        assert_eq!(ip_from_key(&key), None);
        assert_eq!(net_from_key(5, &ip_key("10.0.0.1".parse().unwrap())), None);
        assert_eq!(
            net_from_key(32 + 33, &ip_key("10.0.0.1".parse().unwrap())),
            None
        );
    }

    #[test]
    fn route_kinds_round_trip() {
        for kind in [
            RouteKind::LocalCidr,
            RouteKind::Host,
            RouteKind::RemoteCidr {
                vtep_mac: [2, 0, 0, 0, 0, 9],
            },
        ] {
            assert_eq!(RouteKind::from_value(&RouteValue::from(kind)), Some(kind));
        }
    }
}
