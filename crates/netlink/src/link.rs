//! Links: lookup, dump, veth pairs (peer created directly in its namespace), VXLAN
//! devices, and the usual attribute changes.

use crate::error::{Error, Result};
use crate::handle::Handle;
use crate::netns::Netns;
use crate::{mac_to_string, Mac};
use netlink_packet_core::{NLM_F_CREATE, NLM_F_ECHO, NLM_F_EXCL};
use netlink_packet_route::link::{
    InfoData, InfoKind, InfoVeth, InfoVxlan, LinkAttribute, LinkExtentMask, LinkFlags, LinkInfo,
    LinkMessage, VxlanDf,
};
use netlink_packet_route::RouteNetlinkMessage;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd};

/// The kernel's limit on interface names, without the terminating NUL (IFNAMSIZ - 1).
const MAX_IFNAME_LEN: usize = 15;
/// VXLAN network identifiers are 24 bits.
const MAX_VNI: u32 = (1 << 24) - 1;

/// A network interface as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub index: u32,
    pub name: String,
    pub mac: Option<Mac>,
    pub mtu: u32,
    pub alias: Option<String>,
    /// The driver kind for virtual devices ("veth", "vxlan", "bridge"); `None` for
    /// physical devices and loopback.
    pub kind: Option<String>,
    /// Administratively up (IFF_UP).
    pub up: bool,
}

/// A veth pair to create in one request. The peer is created directly inside
/// `peer_netns` under its final name: it never appears in this namespace or under a
/// temporary name.
///
/// The peer starts down: the kernel cannot bring it up inside the creating request
/// (its other end does not exist yet at that point; it answers ENOTCONN). Bring it up
/// from a handle in its namespace.
#[derive(Debug, Clone, Default)]
pub struct VethSpec<'a> {
    pub name: &'a str,
    pub mac: Option<Mac>,
    /// Applied to both ends.
    pub mtu: Option<u32>,
    /// Set on this end. The kernel ignores aliases at creation, so this costs one more
    /// request.
    pub alias: Option<&'a str>,
    /// Bring this end up in the same request.
    pub up: bool,
    pub peer_name: &'a str,
    pub peer_mac: Option<Mac>,
    /// Where the peer is created; `None` is beside the first end.
    pub peer_netns: Option<&'a Netns>,
}

/// A VXLAN device with a fixed VNI whose forwarding entries are managed from user
/// space (not an external/collect_md device).
#[derive(Debug, Clone, Default)]
pub struct VxlanSpec<'a> {
    pub name: &'a str,
    pub vni: u32,
    /// Source address of the outer packets.
    pub local: Option<IpAddr>,
    /// The underlay device outer packets leave through.
    pub underlay_index: Option<u32>,
    /// UDP destination port; 0 keeps the kernel's default (8472).
    pub port: u16,
    pub learning: bool,
    pub mtu: Option<u32>,
    pub mac: Option<Mac>,
    /// Set DF on the outer IPv4 header.
    pub df_set: bool,
    /// Bring the device up in the same request.
    pub up: bool,
}

impl Handle {
    /// The link called `name`, or `None` when there is none. One request.
    pub fn link_by_name(&mut self, name: &str) -> Result<Option<Link>> {
        check_ifname(name, || format!("get link {name}"))?;
        let mut message = lookup_message();
        message
            .attributes
            .push(LinkAttribute::IfName(name.to_string()));
        self.get_link(message, || format!("get link {name}"))
    }

    /// The link with this index, or `None` when there is none. One request.
    pub fn link_by_index(&mut self, index: u32) -> Result<Option<Link>> {
        let mut message = lookup_message();
        message.header.index = index;
        self.get_link(message, || format!("get link with index {index}"))
    }

    /// Every link in the namespace, in one dump.
    pub fn links(&mut self) -> Result<Vec<Link>> {
        self.dump(
            RouteNetlinkMessage::GetLink(lookup_message()),
            |_| "list links".to_string(),
            |reply| match reply {
                RouteNetlinkMessage::NewLink(message) => Link::from_message(message),
                _ => None,
            },
        )
    }

    /// Creates a veth pair in one request and returns the index of the end in this
    /// handle's namespace. Either name being taken is [`Error::Exists`] naming it.
    pub fn create_veth(&mut self, spec: &VethSpec<'_>) -> Result<u32> {
        let context = || format!("create veth {}", spec.name);
        check_ifname(spec.name, context)?;
        check_ifname(spec.peer_name, context)?;
        if spec.peer_netns.is_none() && spec.name == spec.peer_name {
            return Err(Error::invalid(
                context(),
                "both ends have the same name in one namespace",
            ));
        }

        let mut peer = LinkMessage::default();
        peer.attributes
            .push(LinkAttribute::IfName(spec.peer_name.to_string()));
        if let Some(mtu) = spec.mtu {
            peer.attributes.push(LinkAttribute::Mtu(mtu));
        }
        if let Some(mac) = spec.peer_mac {
            peer.attributes.push(LinkAttribute::Address(mac.to_vec()));
        }
        if let Some(netns) = spec.peer_netns {
            peer.attributes
                .push(LinkAttribute::NetNsFd(netns.as_fd().as_raw_fd()));
        }

        let mut message = new_link_message(spec.name, spec.mtu, spec.mac, spec.up);
        message.attributes.push(LinkAttribute::LinkInfo(vec![
            LinkInfo::Kind(InfoKind::Veth),
            LinkInfo::Data(InfoData::Veth(InfoVeth::Peer(peer))),
        ]));

        let created = self.ack_with_echo(
            RouteNetlinkMessage::NewLink(message),
            NLM_F_CREATE | NLM_F_EXCL | NLM_F_ECHO,
            |_| describe_veth(spec),
        );
        let echo = match created {
            Ok(echo) => echo,
            Err(Error::Exists { .. }) => return Err(self.which_veth_end_exists(spec)),
            Err(err) => return Err(err),
        };
        // From here on the pair exists: a failure must not leave it behind, or a caller
        // that only undoes what succeeded would leak it.
        let finish = |this: &mut Self| -> Result<u32> {
            let index = this.created_index(echo, spec.name)?;
            if let Some(alias) = spec.alias {
                this.set_alias(index, alias)?;
            }
            Ok(index)
        };
        match finish(self) {
            Ok(index) => Ok(index),
            Err(err) => {
                let _ = self.delete_link_by_name(spec.name);
                Err(err)
            }
        }
    }

    /// Creates a fixed-VNI VXLAN device and returns its index. One request.
    pub fn create_vxlan(&mut self, spec: &VxlanSpec<'_>) -> Result<u32> {
        let context = || format!("create vxlan {} (vni {})", spec.name, spec.vni);
        check_ifname(spec.name, context)?;
        if spec.vni > MAX_VNI {
            return Err(Error::invalid(
                context(),
                format!("VNI exceeds 24 bits (max {MAX_VNI})"),
            ));
        }

        let mut vxlan = vec![InfoVxlan::Id(spec.vni), InfoVxlan::Learning(spec.learning)];
        match spec.local {
            Some(IpAddr::V4(local)) => vxlan.push(InfoVxlan::Local(local)),
            Some(IpAddr::V6(local)) => vxlan.push(InfoVxlan::Local6(local)),
            None => {}
        }
        if let Some(underlay) = spec.underlay_index {
            vxlan.push(InfoVxlan::Link(underlay));
        }
        if spec.port != 0 {
            vxlan.push(InfoVxlan::Port(spec.port));
        }
        if spec.df_set {
            vxlan.push(InfoVxlan::Df(VxlanDf::Set));
        }

        let mut message = new_link_message(spec.name, spec.mtu, spec.mac, spec.up);
        message.attributes.push(LinkAttribute::LinkInfo(vec![
            LinkInfo::Kind(InfoKind::Vxlan),
            LinkInfo::Data(InfoData::Vxlan(vxlan)),
        ]));
        let echo = self.ack_with_echo(
            RouteNetlinkMessage::NewLink(message),
            NLM_F_CREATE | NLM_F_EXCL | NLM_F_ECHO,
            |_| context(),
        )?;
        self.created_index(echo, spec.name)
    }

    /// Deletes a link; a missing one is [`Error::NotFound`]. Deleting one end of a veth
    /// pair deletes both.
    pub fn delete_link(&mut self, index: u32) -> Result<()> {
        let mut message = LinkMessage::default();
        message.header.index = index;
        self.ack(RouteNetlinkMessage::DelLink(message), 0, |h| {
            format!("delete link {}", h.link_label(index))
        })
    }

    /// Deletes the link called `name`; `Ok(false)` when it did not exist. One request.
    pub fn delete_link_by_name(&mut self, name: &str) -> Result<bool> {
        let context = || format!("delete link {name}");
        check_ifname(name, context)?;
        let mut message = LinkMessage::default();
        message
            .attributes
            .push(LinkAttribute::IfName(name.to_string()));
        match self.ack(RouteNetlinkMessage::DelLink(message), 0, |_| context()) {
            Ok(()) => Ok(true),
            Err(err) if err.is_not_found() => Ok(false),
            Err(err) => Err(err),
        }
    }

    pub fn set_up(&mut self, index: u32) -> Result<()> {
        let mut message = LinkMessage::default();
        set_up_flag(&mut message, true);
        self.set_link(index, message, |label| format!("set link {label} up"))
    }

    pub fn set_down(&mut self, index: u32) -> Result<()> {
        let mut message = LinkMessage::default();
        message.header.change_mask = LinkFlags::Up;
        self.set_link(index, message, |label| format!("set link {label} down"))
    }

    pub fn set_mtu(&mut self, index: u32, mtu: u32) -> Result<()> {
        let mut message = LinkMessage::default();
        message.attributes.push(LinkAttribute::Mtu(mtu));
        self.set_link(index, message, |label| {
            format!("set mtu {mtu} on link {label}")
        })
    }

    pub fn set_mac(&mut self, index: u32, mac: Mac) -> Result<()> {
        let mut message = LinkMessage::default();
        message
            .attributes
            .push(LinkAttribute::Address(mac.to_vec()));
        self.set_link(index, message, |label| {
            format!("set mac {} on link {label}", mac_to_string(&mac))
        })
    }

    /// Sets the interface alias; an empty alias removes it.
    pub fn set_alias(&mut self, index: u32, alias: &str) -> Result<()> {
        let mut message = LinkMessage::default();
        message
            .attributes
            .push(LinkAttribute::IfAlias(alias.to_string()));
        self.set_link(index, message, |label| {
            format!("set alias {alias:?} on link {label}")
        })
    }

    /// A name for messages: the interface name when the kernel still knows it.
    pub(crate) fn link_label(&mut self, index: u32) -> String {
        match self.link_by_index(index) {
            Ok(Some(link)) => link.name,
            _ => format!("with index {index}"),
        }
    }

    fn set_link(
        &mut self,
        index: u32,
        mut message: LinkMessage,
        context: impl FnOnce(&str) -> String,
    ) -> Result<()> {
        message.header.index = index;
        self.ack(RouteNetlinkMessage::SetLink(message), 0, |h| {
            context(&h.link_label(index))
        })
    }

    fn get_link(
        &mut self,
        message: LinkMessage,
        context: impl Fn() -> String,
    ) -> Result<Option<Link>> {
        match self.get(RouteNetlinkMessage::GetLink(message), |_| context()) {
            Ok(RouteNetlinkMessage::NewLink(reply)) => match Link::from_message(reply) {
                Some(link) => Ok(Some(link)),
                None => Err(decode_error(context(), "link without a name")),
            },
            Ok(_) => Err(decode_error(context(), "reply is not a link")),
            Err(err) if err.is_not_found() => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// The index of a link just created: from the kernel's echo, or (kernels that do not
    /// echo RTM_NEWLINK) from one lookup.
    fn created_index(&mut self, echo: Option<RouteNetlinkMessage>, name: &str) -> Result<u32> {
        if let Some(RouteNetlinkMessage::NewLink(message)) = echo {
            if message.header.index != 0 {
                return Ok(message.header.index);
            }
        }
        match self.link_by_name(name)? {
            Some(link) => Ok(link.index),
            None => Err(Error::NotFound {
                context: format!("find link {name} just created"),
                errno: libc::ENODEV,
                kernel_message: None,
            }),
        }
    }

    /// The kernel says EEXIST for either end without saying which; one lookup on this
    /// (error) path tells the caller which name is taken.
    fn which_veth_end_exists(&mut self, spec: &VethSpec<'_>) -> Error {
        let here_exists = matches!(self.link_by_name(spec.name), Ok(Some(_)));
        let context = if here_exists {
            format!("create veth {}", spec.name)
        } else {
            match spec.peer_netns {
                Some(netns) => format!(
                    "create veth peer {} in network namespace {}",
                    spec.peer_name,
                    netns.path().display()
                ),
                None => format!("create veth peer {}", spec.peer_name),
            }
        };
        Error::Exists { context }
    }
}

impl Link {
    fn from_message(message: LinkMessage) -> Option<Link> {
        let mut link = Link {
            index: message.header.index,
            name: String::new(),
            mac: None,
            mtu: 0,
            alias: None,
            kind: None,
            up: message.header.flags.contains(LinkFlags::Up),
        };
        for attribute in message.attributes {
            match attribute {
                LinkAttribute::IfName(name) => link.name = name,
                LinkAttribute::Address(bytes) => link.mac = Mac::try_from(bytes.as_slice()).ok(),
                LinkAttribute::Mtu(mtu) => link.mtu = mtu,
                LinkAttribute::IfAlias(alias) if !alias.is_empty() => link.alias = Some(alias),
                LinkAttribute::LinkInfo(infos) => {
                    for info in infos {
                        if let LinkInfo::Kind(kind) = info {
                            link.kind = Some(kind.to_string());
                        }
                    }
                }
                _ => {}
            }
        }
        (!link.name.is_empty()).then_some(link)
    }
}

/// A GET/dump request for links, without the statistics blocks nobody here reads.
fn lookup_message() -> LinkMessage {
    let mut message = LinkMessage::default();
    message
        .attributes
        .push(LinkAttribute::ExtMask(vec![LinkExtentMask::SkipStats]));
    message
}

fn new_link_message(name: &str, mtu: Option<u32>, mac: Option<Mac>, up: bool) -> LinkMessage {
    let mut message = LinkMessage::default();
    set_up_flag(&mut message, up);
    message
        .attributes
        .push(LinkAttribute::IfName(name.to_string()));
    if let Some(mtu) = mtu {
        message.attributes.push(LinkAttribute::Mtu(mtu));
    }
    if let Some(mac) = mac {
        message
            .attributes
            .push(LinkAttribute::Address(mac.to_vec()));
    }
    message
}

fn set_up_flag(message: &mut LinkMessage, up: bool) {
    if up {
        message.header.flags |= LinkFlags::Up;
        message.header.change_mask |= LinkFlags::Up;
    }
}

fn describe_veth(spec: &VethSpec<'_>) -> String {
    match spec.peer_netns {
        Some(netns) => format!(
            "create veth {} (peer {} in network namespace {})",
            spec.name,
            spec.peer_name,
            netns.path().display()
        ),
        None => format!("create veth {} (peer {})", spec.name, spec.peer_name),
    }
}

fn decode_error(context: String, detail: &str) -> Error {
    Error::Decode {
        context,
        detail: detail.to_string(),
    }
}

/// Rejects names the kernel would refuse anyway, before a request is built.
pub(crate) fn check_ifname(name: &str, context: impl FnOnce() -> String) -> Result<()> {
    let reason = if name.is_empty() {
        "empty interface name"
    } else if name.len() > MAX_IFNAME_LEN {
        "interface name longer than 15 bytes"
    } else if name == "." || name == ".." {
        "interface name cannot be . or .."
    } else if name
        .bytes()
        .any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace() || b == 0)
    {
        "interface name contains '/', ':', whitespace or NUL"
    } else {
        return Ok(());
    };
    Err(Error::invalid(context(), format!("{reason}: {name:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_names_are_checked_before_sending() {
        for good in ["eth0", "weft1234abcdef0", "a.b-c_d"] {
            assert!(check_ifname(good, String::new).is_ok(), "{good}");
        }
        for bad in [
            "",
            "weft1234abcdef01",
            ".",
            "..",
            "a/b",
            "a b",
            "a:b",
            "a\0",
        ] {
            let err = check_ifname(bad, || "create veth".into()).unwrap_err();
            assert!(matches!(err, Error::InvalidInput { .. }), "{bad:?}");
        }
    }

    #[test]
    fn link_from_message_reads_the_fields() {
        let mut message = LinkMessage::default();
        message.header.index = 7;
        message.header.flags = LinkFlags::Up | LinkFlags::Broadcast;
        message.attributes = vec![
            LinkAttribute::IfName("wf0".into()),
            LinkAttribute::Address(vec![2, 0, 0, 0, 0, 1]),
            LinkAttribute::Mtu(1450),
            LinkAttribute::IfAlias("pod a".into()),
            LinkAttribute::LinkInfo(vec![LinkInfo::Kind(InfoKind::Veth)]),
        ];
        let link = Link::from_message(message).unwrap();
        assert_eq!(
            link,
            Link {
                index: 7,
                name: "wf0".into(),
                mac: Some([2, 0, 0, 0, 0, 1]),
                mtu: 1450,
                alias: Some("pod a".into()),
                kind: Some("veth".into()),
                up: true,
            }
        );
        assert!(Link::from_message(LinkMessage::default()).is_none());
    }
}
