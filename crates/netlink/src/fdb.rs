//! Forwarding entries of a VXLAN device: which remote VTEP gets frames for a MAC.
//!
//! The kernel keeps several destinations per MAC only for the all-zero MAC (the
//! flood list for broadcast and unknown unicast) and for multicast MACs; a unicast MAC
//! has exactly one. `append_fdb` is for the former and refuses unicast MACs, because
//! the kernel would silently keep the old destination; `replace_fdb` is for the latter.
//! Entries are NTF_SELF (the VXLAN device's own table; without it the kernel answers
//! EOPNOTSUPP) and permanent.

use crate::error::{Error, Result};
use crate::handle::Handle;
use crate::{mac_to_string, Mac};
use netlink_packet_core::{NLM_F_APPEND, NLM_F_CREATE, NLM_F_REPLACE};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

impl Handle {
    /// Adds `dst` to the destinations of the all-zero or a multicast `mac`. Appending a
    /// destination that is already there succeeds and changes nothing.
    pub fn append_fdb(&mut self, index: u32, mac: Mac, dst: IpAddr) -> Result<()> {
        if !is_flood_or_multicast(&mac) {
            return Err(Error::invalid(
                format!("append fdb {} dst {dst}", mac_to_string(&mac)),
                "a unicast MAC has a single destination; use replace_fdb",
            ));
        }
        self.ack(
            RouteNetlinkMessage::NewNeighbour(fdb_message(index, mac, dst)),
            NLM_F_CREATE | NLM_F_APPEND,
            |h| describe("append", h, index, &mac, dst),
        )
    }

    /// Points a unicast `mac` at `dst`, creating the entry or replacing its destination
    /// (idempotent).
    pub fn replace_fdb(&mut self, index: u32, mac: Mac, dst: IpAddr) -> Result<()> {
        self.ack(
            RouteNetlinkMessage::NewNeighbour(fdb_message(index, mac, dst)),
            NLM_F_CREATE | NLM_F_REPLACE,
            |h| describe("replace", h, index, &mac, dst),
        )
    }

    /// Removes one destination of `mac`; the entry goes with its last destination. An
    /// unknown MAC is [`crate::Error::NotFound`]; a known MAC without that destination
    /// is left as is and the kernel reports success.
    pub fn delete_fdb(&mut self, index: u32, mac: Mac, dst: IpAddr) -> Result<()> {
        self.ack(
            RouteNetlinkMessage::DelNeighbour(fdb_message(index, mac, dst)),
            0,
            |h| describe("delete", h, index, &mac, dst),
        )
    }

    /// Every (MAC, destination) pair of the device; a MAC with several destinations
    /// appears once per destination.
    pub fn fdb_entries(&mut self, index: u32) -> Result<Vec<(Mac, IpAddr)>> {
        let mut request = NeighbourMessage::default();
        request.header.family = AddressFamily::Bridge;
        request.header.ifindex = index;
        self.dump(
            RouteNetlinkMessage::GetNeighbour(request),
            |h| format!("list fdb entries of {}", h.link_label(index)),
            |reply| match reply {
                RouteNetlinkMessage::NewNeighbour(message) if message.header.ifindex == index => {
                    entry_of(message)
                }
                _ => None,
            },
        )
    }
}

fn fdb_message(index: u32, mac: Mac, dst: IpAddr) -> NeighbourMessage {
    let mut message = NeighbourMessage::default();
    message.header.family = AddressFamily::Bridge;
    message.header.ifindex = index;
    message.header.state = NeighbourState::Permanent;
    message.header.flags = NeighbourFlags::Own;
    message.attributes = vec![
        NeighbourAttribute::LinkLayerAddress(mac.to_vec()),
        NeighbourAttribute::Destination(NeighbourAddress::from(dst)),
    ];
    message
}

fn entry_of(message: NeighbourMessage) -> Option<(Mac, IpAddr)> {
    let mut mac = None;
    let mut dst = None;
    for attribute in message.attributes {
        match attribute {
            NeighbourAttribute::LinkLayerAddress(bytes) => {
                mac = Mac::try_from(bytes.as_slice()).ok()
            }
            NeighbourAttribute::Destination(address) => dst = ip_of(address),
            _ => {}
        }
    }
    Some((mac?, dst?))
}

/// Bridge-family replies carry NDA_DST as raw bytes; their length gives the family.
fn ip_of(address: NeighbourAddress) -> Option<IpAddr> {
    match address {
        NeighbourAddress::Inet(v4) => Some(v4.into()),
        NeighbourAddress::Inet6(v6) => Some(v6.into()),
        NeighbourAddress::Other(bytes) => {
            if let Ok(octets) = <[u8; 4]>::try_from(bytes.as_slice()) {
                Some(Ipv4Addr::from(octets).into())
            } else {
                <[u8; 16]>::try_from(bytes.as_slice())
                    .ok()
                    .map(|octets| Ipv6Addr::from(octets).into())
            }
        }
        _ => None,
    }
}

fn is_flood_or_multicast(mac: &Mac) -> bool {
    mac.iter().all(|b| *b == 0) || mac[0] & 1 == 1
}

fn describe(verb: &str, handle: &mut Handle, index: u32, mac: &Mac, dst: IpAddr) -> String {
    format!(
        "{verb} fdb {} dst {dst} dev {}",
        mac_to_string(mac),
        handle.link_label(index)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flood_and_multicast_macs_take_several_destinations() {
        assert!(is_flood_or_multicast(&[0; 6]));
        assert!(is_flood_or_multicast(&[0x01, 0, 0x5e, 0, 0, 1]));
        assert!(!is_flood_or_multicast(&[0x02, 0, 0, 0, 0, 1]));
    }

    #[test]
    fn raw_destinations_decode_by_length() {
        assert_eq!(
            ip_of(NeighbourAddress::Other(vec![203, 0, 113, 7])),
            Some("203.0.113.7".parse().unwrap())
        );
        let v6: Ipv6Addr = "2001:db8::7".parse().unwrap();
        assert_eq!(
            ip_of(NeighbourAddress::Other(v6.octets().to_vec())),
            Some(v6.into())
        );
        assert_eq!(ip_of(NeighbourAddress::Other(vec![1, 2, 3])), None);
    }
}
