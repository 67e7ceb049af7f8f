//! Interface addresses.

use crate::error::Result;
use crate::handle::Handle;
use ipnet::IpNet;
use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE};
use netlink_packet_route::address::{
    AddressAttribute, AddressFlags, AddressHeaderFlags, AddressMessage,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use std::net::IpAddr;

/// Options for a new address.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddrFlags {
    /// Skip IPv6 duplicate address detection, so the address is usable at once
    /// (the pod's addresses are allocated by IPAM, not discovered).
    pub nodad: bool,
}

impl Handle {
    /// Adds an address; one that is already there is [`crate::Error::Exists`].
    pub fn add_address(&mut self, index: u32, address: IpNet, flags: AddrFlags) -> Result<()> {
        self.ack(
            RouteNetlinkMessage::NewAddress(address_message(index, address, flags)),
            NLM_F_CREATE | NLM_F_EXCL,
            |h| format!("add address {address} dev {}", h.link_label(index)),
        )
    }

    /// Adds an address, or updates it when it is already there (idempotent).
    pub fn replace_address(&mut self, index: u32, address: IpNet, flags: AddrFlags) -> Result<()> {
        self.ack(
            RouteNetlinkMessage::NewAddress(address_message(index, address, flags)),
            NLM_F_CREATE | NLM_F_REPLACE,
            |h| format!("replace address {address} dev {}", h.link_label(index)),
        )
    }

    /// Removes an address; a missing one is [`crate::Error::NotFound`].
    pub fn delete_address(&mut self, index: u32, address: IpNet) -> Result<()> {
        self.ack(
            RouteNetlinkMessage::DelAddress(address_message(index, address, AddrFlags::default())),
            0,
            |h| format!("delete address {address} dev {}", h.link_label(index)),
        )
    }

    /// The IPv4 and IPv6 addresses of one interface (the kernel filters by interface).
    pub fn addresses(&mut self, index: u32) -> Result<Vec<IpNet>> {
        let mut request = AddressMessage::default();
        request.header.index = index;
        self.dump(
            RouteNetlinkMessage::GetAddress(request),
            |h| format!("list addresses of {}", h.link_label(index)),
            |reply| match reply {
                RouteNetlinkMessage::NewAddress(message) if message.header.index == index => {
                    address_of(&message)
                }
                _ => None,
            },
        )
    }
}

fn address_message(index: u32, address: IpNet, flags: AddrFlags) -> AddressMessage {
    let mut message = AddressMessage::default();
    message.header.index = index;
    message.header.prefix_len = address.prefix_len();
    message.header.family = match address {
        IpNet::V4(_) => AddressFamily::Inet,
        IpNet::V6(_) => AddressFamily::Inet6,
    };
    // IFA_LOCAL is the interface's own address; IFA_ADDRESS equal to it means "not a
    // point-to-point peer" (what `ip addr add` sends).
    message
        .attributes
        .push(AddressAttribute::Local(address.addr()));
    message
        .attributes
        .push(AddressAttribute::Address(address.addr()));
    if flags.nodad {
        message.header.flags |= AddressHeaderFlags::Nodad;
        message
            .attributes
            .push(AddressAttribute::Flags(AddressFlags::Nodad));
    }
    message
}

fn address_of(message: &AddressMessage) -> Option<IpNet> {
    let mut local = None;
    let mut address = None;
    for attribute in &message.attributes {
        match attribute {
            AddressAttribute::Local(ip) => local = Some(*ip),
            AddressAttribute::Address(ip) => address = Some(*ip),
            _ => {}
        }
    }
    let ip: IpAddr = local.or(address)?;
    IpNet::new(ip, message.header.prefix_len).ok()
}
