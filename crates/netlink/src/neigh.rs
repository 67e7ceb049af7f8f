//! Neighbour (ARP / NDP) entries.

use crate::error::Result;
use crate::handle::Handle;
use crate::{mac_to_string, Mac};
use netlink_packet_core::{NLM_F_CREATE, NLM_F_REPLACE};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState as NlState,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use std::net::IpAddr;

/// The state of a neighbour entry (NUD_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeighbourState {
    Incomplete,
    Reachable,
    Stale,
    Delay,
    Probe,
    Failed,
    Noarp,
    Permanent,
    None,
    Other(u16),
}

/// A neighbour entry as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbour {
    pub ip: IpAddr,
    /// `None` while the address is still being resolved or failed to.
    pub mac: Option<Mac>,
    pub state: NeighbourState,
}

impl Handle {
    /// Adds or replaces the entry for `ip` on interface `index`. A permanent entry never
    /// expires and is never re-resolved; otherwise it starts as reachable and ages.
    pub fn add_neighbour(
        &mut self,
        index: u32,
        ip: IpAddr,
        mac: Mac,
        permanent: bool,
    ) -> Result<()> {
        let mut message = neighbour_message(index, ip);
        message.header.state = if permanent {
            NlState::Permanent
        } else {
            NlState::Reachable
        };
        message
            .attributes
            .push(NeighbourAttribute::LinkLayerAddress(mac.to_vec()));
        self.ack(
            RouteNetlinkMessage::NewNeighbour(message),
            NLM_F_CREATE | NLM_F_REPLACE,
            |h| {
                format!(
                    "add neighbour {ip} lladdr {} dev {}",
                    mac_to_string(&mac),
                    h.link_label(index)
                )
            },
        )
    }

    /// Removes the entry for `ip`; a missing one is [`crate::Error::NotFound`].
    pub fn delete_neighbour(&mut self, index: u32, ip: IpAddr) -> Result<()> {
        self.ack(
            RouteNetlinkMessage::DelNeighbour(neighbour_message(index, ip)),
            0,
            |h| format!("delete neighbour {ip} dev {}", h.link_label(index)),
        )
    }

    /// The IPv4 and IPv6 neighbour entries of one interface (the kernel filters by
    /// interface).
    pub fn neighbours(&mut self, index: u32) -> Result<Vec<Neighbour>> {
        let mut request = NeighbourMessage::default();
        request.attributes.push(NeighbourAttribute::IfIndex(index));
        self.dump(
            RouteNetlinkMessage::GetNeighbour(request),
            |h| format!("list neighbours of {}", h.link_label(index)),
            |reply| match reply {
                RouteNetlinkMessage::NewNeighbour(message) if message.header.ifindex == index => {
                    neighbour_of(message)
                }
                _ => None,
            },
        )
    }
}

fn neighbour_message(index: u32, ip: IpAddr) -> NeighbourMessage {
    let mut message = NeighbourMessage::default();
    message.header.ifindex = index;
    message.header.family = match ip {
        IpAddr::V4(_) => AddressFamily::Inet,
        IpAddr::V6(_) => AddressFamily::Inet6,
    };
    message
        .attributes
        .push(NeighbourAttribute::Destination(NeighbourAddress::from(ip)));
    message
}

fn neighbour_of(message: NeighbourMessage) -> Option<Neighbour> {
    let mut ip = None;
    let mut mac = None;
    for attribute in message.attributes {
        match attribute {
            NeighbourAttribute::Destination(NeighbourAddress::Inet(v4)) => ip = Some(v4.into()),
            NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6)) => ip = Some(v6.into()),
            NeighbourAttribute::LinkLayerAddress(bytes) => {
                mac = Mac::try_from(bytes.as_slice()).ok()
            }
            _ => {}
        }
    }
    Some(Neighbour {
        ip: ip?,
        mac,
        state: state_from_netlink(message.header.state),
    })
}

fn state_from_netlink(state: NlState) -> NeighbourState {
    match state {
        NlState::Incomplete => NeighbourState::Incomplete,
        NlState::Reachable => NeighbourState::Reachable,
        NlState::Stale => NeighbourState::Stale,
        NlState::Delay => NeighbourState::Delay,
        NlState::Probe => NeighbourState::Probe,
        NlState::Failed => NeighbourState::Failed,
        NlState::Noarp => NeighbourState::Noarp,
        NlState::Permanent => NeighbourState::Permanent,
        NlState::None => NeighbourState::None,
        other => NeighbourState::Other(other.into()),
    }
}
