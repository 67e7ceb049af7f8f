//! Routes, IPv4 and IPv6, including default routes through an on-link gateway
//! (169.254.1.1 / fe80::1) the way a pod's namespace needs them.

use crate::error::{Error, Result};
use crate::handle::Handle;
use ipnet::IpNet;
use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteMetric,
    RouteProtocol, RouteScope, RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use std::fmt::Write as _;
use std::net::IpAddr;

/// The kernel's main routing table.
pub const MAIN_TABLE: u32 = 254;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpFamily {
    V4,
    V6,
}

/// How far a route's destination is: `Link` for a destination directly on the
/// interface (a pod's /32 on the host side), `Host` for the local machine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Scope {
    #[default]
    Universe,
    Site,
    Link,
    Host,
    Nowhere,
    Other(u8),
}

/// What the kernel does with packets matching a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteKind {
    Unicast,
    Local,
    Broadcast,
    Anycast,
    Multicast,
    Blackhole,
    Unreachable,
    Prohibit,
    Throw,
    Other(u8),
}

/// A unicast route to add, replace or delete.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteSpec {
    pub dst: IpNet,
    pub gateway: Option<IpAddr>,
    pub oif: Option<u32>,
    pub scope: Scope,
    /// Use the gateway even though no route says it is reachable on `oif`.
    pub onlink: bool,
    /// Preferred source address for traffic the host originates.
    pub src: Option<IpAddr>,
    /// `None` is the main table.
    pub table: Option<u32>,
    pub mtu: Option<u32>,
    /// Route priority; the kernel's default when `None` (0 for IPv4, 1024 for IPv6).
    pub metric: Option<u32>,
}

impl RouteSpec {
    /// A route to `dst` with every other field unset.
    pub fn new(dst: IpNet) -> RouteSpec {
        RouteSpec {
            dst,
            ..RouteSpec::default()
        }
    }
}

/// A route as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteInfo {
    pub dst: IpNet,
    pub gateway: Option<IpAddr>,
    pub oif: Option<u32>,
    pub scope: Scope,
    pub onlink: bool,
    pub src: Option<IpAddr>,
    pub table: u32,
    pub mtu: Option<u32>,
    pub metric: Option<u32>,
    pub kind: RouteKind,
    /// Who installed it (RTPROT_*: 2 kernel, 3 boot, 4 static, ...).
    pub protocol: u8,
    /// A multipath route: its next hops are not reflected in `gateway`/`oif`.
    pub multipath: bool,
}

impl Handle {
    /// Adds a route; an identical one already present is [`crate::Error::Exists`].
    pub fn add_route(&mut self, spec: &RouteSpec) -> Result<()> {
        let message = route_message(spec, Purpose::Change, "add")?;
        self.ack(
            RouteNetlinkMessage::NewRoute(message),
            NLM_F_CREATE | NLM_F_EXCL,
            |h| describe_route(h, "add", spec),
        )
    }

    /// Adds a route or replaces the one with the same destination (idempotent).
    pub fn replace_route(&mut self, spec: &RouteSpec) -> Result<()> {
        let message = route_message(spec, Purpose::Change, "replace")?;
        self.ack(
            RouteNetlinkMessage::NewRoute(message),
            NLM_F_CREATE | NLM_F_REPLACE,
            |h| describe_route(h, "replace", spec),
        )
    }

    /// Deletes the route to `spec.dst` (narrowed by gateway, oif and metric when set);
    /// a missing one is [`crate::Error::NotFound`].
    pub fn delete_route(&mut self, spec: &RouteSpec) -> Result<()> {
        let message = route_message(spec, Purpose::Delete, "delete")?;
        self.ack(RouteNetlinkMessage::DelRoute(message), 0, |h| {
            describe_route(h, "delete", spec)
        })
    }

    /// The routes of one family in the main table.
    pub fn routes(&mut self, family: IpFamily) -> Result<Vec<RouteInfo>> {
        self.routes_in_table(family, MAIN_TABLE)
    }

    /// The routes of one family in one table (the kernel filters by table). A table
    /// that does not exist yet has no routes.
    pub fn routes_in_table(&mut self, family: IpFamily, table: u32) -> Result<Vec<RouteInfo>> {
        let mut request = RouteMessage::default();
        request.header.address_family = address_family(family);
        request.header.table = header_table(table);
        request.attributes.push(RouteAttribute::Table(table));
        let dumped = self.dump(
            RouteNetlinkMessage::GetRoute(request),
            |_| format!("list {family:?} routes in table {table}"),
            |reply| match reply {
                RouteNetlinkMessage::NewRoute(message) => {
                    route_info(message).filter(|route| route.table == table)
                }
                _ => None,
            },
        );
        match dumped {
            Err(Error::NotFound { .. }) => Ok(Vec::new()),
            other => other,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Purpose {
    Change,
    Delete,
}

fn route_message(spec: &RouteSpec, purpose: Purpose, verb: &str) -> Result<RouteMessage> {
    check_spec(spec, purpose)
        .map_err(|reason| Error::invalid(format!("{verb} route {}", spec.dst), reason))?;
    let family = match spec.dst {
        IpNet::V4(_) => AddressFamily::Inet,
        IpNet::V6(_) => AddressFamily::Inet6,
    };
    let table = spec.table.unwrap_or(MAIN_TABLE);

    let mut message = RouteMessage::default();
    message.header.address_family = family;
    message.header.destination_prefix_length = spec.dst.prefix_len();
    message.header.table = header_table(table);
    match purpose {
        Purpose::Change => {
            message.header.protocol = RouteProtocol::Boot;
            message.header.scope = scope_to_netlink(spec.scope);
            message.header.kind = RouteType::Unicast;
        }
        Purpose::Delete => {
            // Wildcards: match the route whatever its scope, type and protocol.
            message.header.protocol = RouteProtocol::Unspec;
            message.header.scope = RouteScope::NoWhere;
            message.header.kind = RouteType::Unspec;
        }
    }
    if spec.onlink {
        message.header.flags |= RouteFlags::Onlink;
    }

    let attributes = &mut message.attributes;
    attributes.push(RouteAttribute::Table(table));
    if spec.dst.prefix_len() > 0 {
        attributes.push(RouteAttribute::Destination(spec.dst.addr().into()));
    }
    if let Some(gateway) = spec.gateway {
        attributes.push(RouteAttribute::Gateway(gateway.into()));
    }
    if let Some(oif) = spec.oif {
        attributes.push(RouteAttribute::Oif(oif));
    }
    if let Some(src) = spec.src {
        attributes.push(RouteAttribute::PrefSource(src.into()));
    }
    if let Some(metric) = spec.metric {
        attributes.push(RouteAttribute::Priority(metric));
    }
    if let Some(mtu) = spec.mtu {
        attributes.push(RouteAttribute::Metrics(vec![RouteMetric::Mtu(mtu)]));
    }
    Ok(message)
}

fn check_spec(spec: &RouteSpec, purpose: Purpose) -> std::result::Result<(), String> {
    if spec.dst != spec.dst.trunc() {
        return Err(format!(
            "destination has host bits set (the network is {})",
            spec.dst.trunc()
        ));
    }
    let v4 = matches!(spec.dst, IpNet::V4(_));
    for (what, addr) in [("gateway", spec.gateway), ("source", spec.src)] {
        if let Some(addr) = addr {
            if addr.is_ipv4() != v4 {
                return Err(format!(
                    "{what} {addr} is not in the destination's address family"
                ));
            }
        }
    }
    if purpose == Purpose::Change && spec.gateway.is_none() && spec.oif.is_none() {
        return Err("a route needs a gateway or an output interface".into());
    }
    Ok(())
}

fn describe_route(handle: &mut Handle, verb: &str, spec: &RouteSpec) -> String {
    let mut text = format!("{verb} route {}", spec.dst);
    if let Some(gateway) = spec.gateway {
        let _ = write!(text, " via {gateway}");
    }
    if let Some(oif) = spec.oif {
        let _ = write!(text, " dev {}", handle.link_label(oif));
    }
    if let Some(table) = spec.table.filter(|t| *t != MAIN_TABLE) {
        let _ = write!(text, " table {table}");
    }
    text
}

fn route_info(message: RouteMessage) -> Option<RouteInfo> {
    let header = &message.header;
    let unspecified: IpAddr = match header.address_family {
        AddressFamily::Inet => std::net::Ipv4Addr::UNSPECIFIED.into(),
        AddressFamily::Inet6 => std::net::Ipv6Addr::UNSPECIFIED.into(),
        _ => return None,
    };
    let mut dst = unspecified;
    let mut route = RouteInfo {
        dst: IpNet::new(unspecified, 0).ok()?,
        gateway: None,
        oif: None,
        scope: scope_from_netlink(header.scope),
        onlink: header.flags.contains(RouteFlags::Onlink),
        src: None,
        table: u32::from(header.table),
        mtu: None,
        metric: None,
        kind: kind_from_netlink(header.kind),
        protocol: header.protocol.into(),
        multipath: false,
    };
    for attribute in &message.attributes {
        match attribute {
            RouteAttribute::Destination(address) => dst = ip_of(address)?,
            RouteAttribute::Gateway(address) => route.gateway = ip_of(address),
            RouteAttribute::PrefSource(address) => route.src = ip_of(address),
            RouteAttribute::Oif(oif) => route.oif = Some(*oif),
            RouteAttribute::Table(table) => route.table = *table,
            RouteAttribute::Priority(metric) => route.metric = Some(*metric),
            RouteAttribute::MultiPath(_) => route.multipath = true,
            RouteAttribute::Metrics(metrics) => {
                for metric in metrics {
                    if let RouteMetric::Mtu(mtu) = metric {
                        route.mtu = Some(*mtu);
                    }
                }
            }
            _ => {}
        }
    }
    route.dst = IpNet::new(dst, header.destination_prefix_length).ok()?;
    Some(route)
}

fn ip_of(address: &RouteAddress) -> Option<IpAddr> {
    match address {
        RouteAddress::Inet(ip) => Some((*ip).into()),
        RouteAddress::Inet6(ip) => Some((*ip).into()),
        _ => None,
    }
}

fn address_family(family: IpFamily) -> AddressFamily {
    match family {
        IpFamily::V4 => AddressFamily::Inet,
        IpFamily::V6 => AddressFamily::Inet6,
    }
}

/// Tables above 255 only fit in RTA_TABLE; the header then says "unspecified".
fn header_table(table: u32) -> u8 {
    u8::try_from(table).unwrap_or(RouteHeader::RT_TABLE_UNSPEC)
}

fn scope_to_netlink(scope: Scope) -> RouteScope {
    match scope {
        Scope::Universe => RouteScope::Universe,
        Scope::Site => RouteScope::Site,
        Scope::Link => RouteScope::Link,
        Scope::Host => RouteScope::Host,
        Scope::Nowhere => RouteScope::NoWhere,
        Scope::Other(value) => RouteScope::Other(value),
    }
}

fn scope_from_netlink(scope: RouteScope) -> Scope {
    match scope {
        RouteScope::Universe => Scope::Universe,
        RouteScope::Site => Scope::Site,
        RouteScope::Link => Scope::Link,
        RouteScope::Host => Scope::Host,
        RouteScope::NoWhere => Scope::Nowhere,
        other => Scope::Other(other.into()),
    }
}

fn kind_from_netlink(kind: RouteType) -> RouteKind {
    match kind {
        RouteType::Unicast => RouteKind::Unicast,
        RouteType::Local => RouteKind::Local,
        RouteType::Broadcast => RouteKind::Broadcast,
        RouteType::Anycast => RouteKind::Anycast,
        RouteType::Multicast => RouteKind::Multicast,
        RouteType::BlackHole => RouteKind::Blackhole,
        RouteType::Unreachable => RouteKind::Unreachable,
        RouteType::Prohibit => RouteKind::Prohibit,
        RouteType::Throw => RouteKind::Throw,
        other => RouteKind::Other(other.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(dst: &str) -> RouteSpec {
        RouteSpec {
            oif: Some(3),
            ..RouteSpec::new(dst.parse().unwrap())
        }
    }

    #[test]
    fn specs_are_checked_before_sending() {
        assert!(route_message(&spec("10.244.1.5/32"), Purpose::Change, "add").is_ok());
        let host_bits = route_message(&spec("10.244.1.5/24"), Purpose::Change, "add").unwrap_err();
        assert!(host_bits.to_string().contains("host bits"), "{host_bits}");

        let mixed = RouteSpec {
            gateway: Some("fe80::1".parse().unwrap()),
            ..spec("0.0.0.0/0")
        };
        assert!(matches!(
            route_message(&mixed, Purpose::Change, "add"),
            Err(Error::InvalidInput { .. })
        ));
        let nowhere = RouteSpec::new("10.0.0.0/8".parse().unwrap());
        assert!(route_message(&nowhere, Purpose::Change, "add").is_err());
        assert!(route_message(&nowhere, Purpose::Delete, "delete").is_ok());
    }

    #[test]
    fn large_tables_go_in_the_attribute_only() {
        let message = route_message(
            &RouteSpec {
                table: Some(1000),
                ..spec("10.0.0.0/8")
            },
            Purpose::Change,
            "add",
        )
        .unwrap();
        assert_eq!(message.header.table, RouteHeader::RT_TABLE_UNSPEC);
        assert!(message.attributes.contains(&RouteAttribute::Table(1000)));
    }

    #[test]
    fn deletes_match_any_scope_and_type() {
        let message = route_message(&spec("10.244.1.5/32"), Purpose::Delete, "delete").unwrap();
        assert_eq!(message.header.scope, RouteScope::NoWhere);
        assert_eq!(message.header.kind, RouteType::Unspec);
    }
}
