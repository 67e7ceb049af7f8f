//! Traffic control: the `clsact` qdisc and filters on its ingress side, as an eBPF
//! datapath attaches through them where TCX links do not exist (before Linux 6.6).
//!
//! Filters are addressed by their place on clsact ingress, chain 0: a pref (the
//! kernel keeps one kind and one protocol per pref) and a handle within it. Writing
//! a bpf filter at a fixed place makes a later `NLM_F_REPLACE` of that place swap
//! its program in one step, and a delete of that place remove exactly it.
//!
//! Requests are encoded with `netlink-packet-route`'s tc types. Dumps are decoded by
//! hand, for the few fields callers look at: a device can carry anyone's filters, of
//! kinds and with attributes this crate's message types may not decode, and one such
//! filter must never fail the listing of the others. An attribute that does not
//! decode is left out of the result instead.

use crate::bytes::{attributes, c_string, read_u32};
use crate::error::{Error, Result};
use crate::handle::Handle;
use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE};
use netlink_packet_route::tc::{
    TcAttribute, TcBpfFlags, TcFilterBpfOption, TcHandle, TcHeader, TcMessage, TcOption,
};
use netlink_packet_route::RouteNetlinkMessage;
use std::os::fd::{AsRawFd, BorrowedFd};

/// `ETH_P_ALL`: a filter for every protocol (tc's `protocol all`).
pub const ETH_P_ALL: u16 = 0x0003;
/// The longest name a bpf filter can carry (`CLS_BPF_NAME_LEN` less its NUL).
pub const BPF_FILTER_NAME_MAX: usize = 255;

/// The clsact qdisc's own handle, `ffff:`.
const CLSACT_HANDLE: TcHandle = TcHandle {
    major: 0xffff,
    minor: 0,
};
/// The ingress side of clsact, `ffff:fff2`: the parent of ingress filters.
const INGRESS_PARENT: TcHandle = TcHandle {
    major: 0xffff,
    minor: TcHandle::MIN_INGRESS,
};

const RTM_NEWQDISC: u16 = 36;
const RTM_NEWTFILTER: u16 = 44;
/// Size of `struct tcmsg`, which heads every tc message.
const TCMSG_LEN: usize = 20;
/// Offsets in `struct tcmsg` (family and padding come first).
const TCM_IFINDEX: usize = 4;
const TCM_HANDLE: usize = 8;
const TCM_PARENT: usize = 12;
const TCM_INFO: usize = 16;
const TCA_KIND: u16 = 1;
const TCA_OPTIONS: u16 = 2;
const TCA_CHAIN: u16 = 11;
const TCA_BPF_NAME: u16 = 7;
const TCA_BPF_FLAGS: u16 = 8;
const TCA_BPF_ID: u16 = 11;
const TCA_BPF_FLAG_ACT_DIRECT: u32 = 1;

/// A queueing discipline as the kernel reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Qdisc {
    /// The interface it is attached to.
    pub index: u32,
    /// `major:minor` packed as the kernel does (`ffff0000` for clsact's `ffff:`).
    pub handle: u32,
    /// `ffff_fff1` for clsact and ingress, `ffff_ffff` for a root qdisc.
    pub parent: u32,
    /// `clsact`, `ingress`, `noqueue`, `fq_codel`, ...
    pub kind: String,
}

/// A filter on clsact ingress, reduced to what identifies it and, for a bpf
/// filter, what it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcFilter {
    pub pref: u16,
    /// Host byte order (`ETH_P_ALL` for `protocol all`).
    pub protocol: u16,
    pub handle: u32,
    pub chain: u32,
    /// `bpf`, `u32`, `matchall`, `flower`, ...
    pub kind: String,
    /// The bpf filter's details; `None` for every other kind.
    pub bpf: Option<BpfFilterInfo>,
}

/// What a `bpf` (cls_bpf) filter runs. A field the kernel did not send, or sent
/// malformed, is `None` / `false`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BpfFilterInfo {
    /// The eBPF program's id (a classic-BPF filter has none).
    pub prog_id: Option<u32>,
    /// The filter's name, as given when it was added.
    pub name: Option<String>,
    /// Direct-action mode: the program's return value is the verdict.
    pub direct_action: bool,
}

/// A bpf filter to add, or to put in place of the one at the same place.
#[derive(Clone, Copy, Debug)]
pub struct BpfFilterSpec<'a> {
    /// Must not be 0 (the kernel would pick one).
    pub pref: u16,
    /// Host byte order; [`ETH_P_ALL`] for every protocol.
    pub protocol: u16,
    /// Must not be 0 (the kernel would pick one).
    pub handle: u32,
    /// The loaded `BPF_PROG_TYPE_SCHED_CLS` program to run.
    pub prog_fd: BorrowedFd<'a>,
    /// At most [`BPF_FILTER_NAME_MAX`] bytes, no NUL.
    pub name: &'a str,
    pub direct_action: bool,
}

impl Handle {
    /// Gives interface `index` a clsact qdisc. Idempotent: `Ok(false)` when the
    /// device already has one (or the older `ingress` qdisc in the same slot, which
    /// takes ingress filters just the same).
    pub fn ensure_clsact(&mut self, index: u32) -> Result<bool> {
        let request = TcMessage::from_parts(
            TcHeader {
                index: index as i32,
                parent: TcHandle::CLSACT,
                handle: CLSACT_HANDLE,
                ..Default::default()
            },
            vec![TcAttribute::Kind("clsact".to_string())],
        );
        match self.ack(
            RouteNetlinkMessage::NewQueueDiscipline(request),
            NLM_F_CREATE | NLM_F_EXCL,
            |h| format!("add clsact qdisc dev {}", h.link_label(index)),
        ) {
            Ok(()) => Ok(true),
            Err(e) if e.is_exists() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Every qdisc of every interface in the handle's namespace (one dump).
    pub fn qdiscs(&mut self) -> Result<Vec<Qdisc>> {
        self.dump_raw(
            RouteNetlinkMessage::GetQueueDiscipline(TcMessage::default()),
            |_| "list qdiscs".to_string(),
            |message_type, payload| match message_type {
                RTM_NEWQDISC => qdisc_of(payload),
                _ => None,
            },
        )
    }

    /// The filters on clsact ingress of interface `index`, every chain, in the
    /// kernel's order (one dump); empty when the device has no clsact qdisc.
    /// Filters of every kind are listed, whatever their attributes hold; left out
    /// are only the header the kernel sends ahead of each pref's filters and a
    /// message too short to hold a tc header.
    pub fn ingress_filters(&mut self, index: u32) -> Result<Vec<TcFilter>> {
        let request = TcMessage::from_parts(
            TcHeader {
                index: index as i32,
                parent: INGRESS_PARENT,
                ..Default::default()
            },
            Vec::new(),
        );
        self.dump_raw(
            RouteNetlinkMessage::GetTrafficFilter(request),
            |h| format!("list ingress filters of {}", h.link_label(index)),
            |message_type, payload| match message_type {
                RTM_NEWTFILTER => filter_of(index, payload),
                _ => None,
            },
        )
    }

    /// Adds the bpf filter `spec` on clsact ingress of interface `index` (chain 0),
    /// or, with `replace`, puts it in place of the filter already at its pref and
    /// handle, which the kernel does in one step (packets see the old program or
    /// the new one, never neither). Adding where a filter exists is
    /// [`Error::Exists`]; replacing where none exists is [`Error::NotFound`]. The
    /// device needs a clsact qdisc ([`Handle::ensure_clsact`]).
    pub fn add_bpf_filter(
        &mut self,
        index: u32,
        spec: &BpfFilterSpec<'_>,
        replace: bool,
    ) -> Result<()> {
        let verb = if replace { "replace" } else { "add" };
        let describe = |dev: &str| {
            format!(
                "{verb} bpf filter {:?} pref {} handle {:#x} dev {dev}",
                spec.name, spec.pref, spec.handle
            )
        };
        check_place(spec.pref, spec.handle, || {
            describe(&format!("with index {index}"))
        })?;
        if spec.name.len() > BPF_FILTER_NAME_MAX || spec.name.contains('\0') {
            return Err(Error::invalid(
                describe(&format!("with index {index}")),
                format!("a filter name has at most {BPF_FILTER_NAME_MAX} bytes and no NUL"),
            ));
        }
        let mut options = vec![
            TcOption::Bpf(TcFilterBpfOption::ProgFd(spec.prog_fd.as_raw_fd() as u32)),
            TcOption::Bpf(TcFilterBpfOption::ProgName(spec.name.to_string())),
        ];
        if spec.direct_action {
            options.push(TcOption::Bpf(TcFilterBpfOption::Flags(
                TcBpfFlags::DirectAction,
            )));
        }
        let request = TcMessage::from_parts(
            filter_header(index, spec.pref, spec.protocol, spec.handle),
            vec![
                TcAttribute::Kind("bpf".to_string()),
                TcAttribute::Options(options),
            ],
        );
        // Without NLM_F_CREATE a replace cannot create; with NLM_F_EXCL an add cannot
        // overwrite a filter that appeared since the caller looked.
        let flags = if replace {
            NLM_F_REPLACE
        } else {
            NLM_F_CREATE | NLM_F_EXCL
        };
        self.ack(RouteNetlinkMessage::NewTrafficFilter(request), flags, |h| {
            describe(&h.link_label(index))
        })
    }

    /// Deletes the one filter at `pref`/`handle` on clsact ingress of interface
    /// `index` (chain 0), and only if it is of `kind` (the kernel refuses another
    /// kind with EINVAL, so a filter that took the place since the caller looked is
    /// not removed). A missing filter or device is [`Error::NotFound`].
    pub fn delete_filter(&mut self, index: u32, pref: u16, handle: u32, kind: &str) -> Result<()> {
        let describe =
            |dev: &str| format!("delete {kind} filter pref {pref} handle {handle:#x} dev {dev}");
        // Zero here would not name one filter: the kernel deletes every filter of
        // the pref (handle 0) or of the chain (pref 0).
        check_place(pref, handle, || describe(&format!("with index {index}")))?;
        // Protocol 0: a pref holds one protocol, so the pref alone finds it.
        let request = TcMessage::from_parts(
            filter_header(index, pref, 0, handle),
            vec![TcAttribute::Kind(kind.to_string())],
        );
        self.ack(RouteNetlinkMessage::DelTrafficFilter(request), 0, |h| {
            describe(&h.link_label(index))
        })
    }
}

fn check_place(pref: u16, handle: u32, context: impl FnOnce() -> String) -> Result<()> {
    if pref == 0 || handle == 0 {
        return Err(Error::invalid(
            context(),
            "a filter is named by a non-zero pref and handle",
        ));
    }
    Ok(())
}

fn filter_header(index: u32, pref: u16, protocol: u16, handle: u32) -> TcHeader {
    TcHeader {
        index: index as i32,
        parent: INGRESS_PARENT,
        handle: TcHandle::from(handle),
        // TC_H_MAKE(pref << 16, htons(protocol)).
        info: (u32::from(pref) << 16) | u32::from(protocol.to_be()),
        ..Default::default()
    }
}

/// Decodes one message of a qdisc dump; `None` if it is too short to be one.
fn qdisc_of(payload: &[u8]) -> Option<Qdisc> {
    let attributes_at = payload.get(TCMSG_LEN..)?;
    Some(Qdisc {
        index: read_u32(payload, TCM_IFINDEX)?,
        handle: read_u32(payload, TCM_HANDLE)?,
        parent: read_u32(payload, TCM_PARENT)?,
        kind: attributes(attributes_at)
            .find(|(kind, _)| *kind == TCA_KIND)
            .map(|(_, value)| c_string(value))
            .unwrap_or_default(),
    })
}

/// Decodes one message of a filter dump of interface `index`. `None` for the
/// message the kernel sends ahead of each pref's filters (handle 0, no options),
/// for another interface's filter, and for a message too short for its header.
fn filter_of(index: u32, payload: &[u8]) -> Option<TcFilter> {
    let handle = read_u32(payload, TCM_HANDLE)?;
    let info = read_u32(payload, TCM_INFO)?;
    if handle == 0 || read_u32(payload, TCM_IFINDEX)? != index {
        return None;
    }
    let mut filter = TcFilter {
        pref: (info >> 16) as u16,
        protocol: u16::from_be(info as u16),
        handle,
        chain: 0,
        kind: String::new(),
        bpf: None,
    };
    let mut options: &[u8] = &[];
    for (kind, value) in attributes(payload.get(TCMSG_LEN..)?) {
        match kind {
            TCA_KIND => filter.kind = c_string(value),
            TCA_CHAIN => filter.chain = read_u32(value, 0).unwrap_or(0),
            TCA_OPTIONS => options = value,
            _ => {}
        }
    }
    if filter.kind == "bpf" {
        filter.bpf = Some(bpf_info_of(options));
    }
    Some(filter)
}

fn bpf_info_of(options: &[u8]) -> BpfFilterInfo {
    let mut info = BpfFilterInfo::default();
    for (kind, value) in attributes(options) {
        match kind {
            TCA_BPF_NAME => info.name = Some(c_string(value)),
            TCA_BPF_ID => info.prog_id = read_u32(value, 0),
            TCA_BPF_FLAGS => {
                info.direct_action =
                    read_u32(value, 0).is_some_and(|flags| flags & TCA_BPF_FLAG_ACT_DIRECT != 0)
            }
            _ => {}
        }
    }
    info
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::nla;

    fn tcmsg(index: u32, handle: u32, info: u32) -> Vec<u8> {
        let mut out = vec![0u8; 4];
        for field in [index, handle, u32::from(INGRESS_PARENT), info] {
            out.extend_from_slice(&field.to_ne_bytes());
        }
        out
    }

    fn info(pref: u16, protocol: u16) -> u32 {
        (u32::from(pref) << 16) | u32::from(protocol.to_be())
    }

    #[test]
    fn a_dumped_bpf_filter_is_decoded() {
        let mut message = tcmsg(7, 1, info(1, ETH_P_ALL));
        message.extend(nla(TCA_KIND, b"bpf\0"));
        message.extend(nla(TCA_CHAIN, &0u32.to_ne_bytes()));
        let mut options = nla(TCA_BPF_ID, &42u32.to_ne_bytes());
        options.extend(nla(TCA_BPF_NAME, b"weft:from_pod@/sys/fs/bpf/weft\0"));
        options.extend(nla(TCA_BPF_FLAGS, &1u32.to_ne_bytes()));
        message.extend(nla(TCA_OPTIONS | 0x8000, &options));
        assert_eq!(
            filter_of(7, &message),
            Some(TcFilter {
                pref: 1,
                protocol: ETH_P_ALL,
                handle: 1,
                chain: 0,
                kind: "bpf".into(),
                bpf: Some(BpfFilterInfo {
                    prog_id: Some(42),
                    name: Some("weft:from_pod@/sys/fs/bpf/weft".into()),
                    direct_action: true,
                }),
            })
        );
    }

    #[test]
    fn foreign_and_malformed_filters_still_decode() {
        // A kind this module knows nothing of, with options in its own layout.
        let mut message = tcmsg(7, 0x800_0800, info(2, 0x0800));
        message.extend(nla(TCA_KIND, b"u32\0"));
        message.extend(nla(TCA_OPTIONS, &[0xde, 0xad, 0xbe]));
        message.extend(nla(TCA_CHAIN, &5u32.to_ne_bytes()));
        let filter = filter_of(7, &message).expect("decoded");
        assert_eq!((filter.pref, filter.protocol, filter.chain), (2, 0x0800, 5));
        assert_eq!((filter.kind.as_str(), filter.bpf), ("u32", None));

        // A bpf filter whose options are cut short keeps what precedes the cut.
        let mut message = tcmsg(7, 1, info(3, ETH_P_ALL));
        message.extend(nla(TCA_KIND, b"bpf\0"));
        let mut options = nla(TCA_BPF_ID, &9u32.to_ne_bytes());
        options.extend_from_slice(&[64, 0, TCA_BPF_NAME as u8, 0, b'x']);
        message.extend(nla(TCA_OPTIONS, &options));
        let bpf = filter_of(7, &message).and_then(|f| f.bpf).expect("bpf");
        assert_eq!(
            bpf,
            BpfFilterInfo {
                prog_id: Some(9),
                name: None,
                direct_action: false
            }
        );

        // Every truncation of a message decodes or is skipped, never panics.
        for cut in 0..message.len() {
            let _ = filter_of(7, &message[..cut]);
            let _ = qdisc_of(&message[..cut]);
        }
    }

    #[test]
    fn pref_headers_other_devices_and_short_messages_are_skipped() {
        let mut header = tcmsg(7, 0, info(1, ETH_P_ALL));
        header.extend(nla(TCA_KIND, b"bpf\0"));
        assert_eq!(filter_of(7, &header), None);
        let mut elsewhere = tcmsg(8, 1, info(1, ETH_P_ALL));
        elsewhere.extend(nla(TCA_KIND, b"bpf\0"));
        assert_eq!(filter_of(7, &elsewhere), None);
        assert_eq!(filter_of(7, &[0; 10]), None);
    }

    #[test]
    fn a_dumped_qdisc_is_decoded() {
        let mut message = vec![0u8; 4];
        for field in [3u32, 0xffff_0000, 0xffff_fff1, 0] {
            message.extend_from_slice(&field.to_ne_bytes());
        }
        message.extend(nla(TCA_KIND, b"clsact\0"));
        assert_eq!(
            qdisc_of(&message),
            Some(Qdisc {
                index: 3,
                handle: 0xffff_0000,
                parent: 0xffff_fff1,
                kind: "clsact".into(),
            })
        );
    }

    #[test]
    fn filters_are_addressed_on_clsact_ingress() {
        let header = filter_header(9, 1, ETH_P_ALL, 1);
        assert_eq!(header.index, 9);
        assert_eq!(u32::from(header.parent), 0xffff_fff2);
        assert_eq!(u32::from(header.handle), 1);
        assert_eq!(header.info >> 16, 1);
        assert_eq!(u16::from_be(header.info as u16), 0x0003);
        assert_eq!(u32::from(CLSACT_HANDLE), 0xffff_0000);
        assert_eq!(u32::from(TcHandle::CLSACT), 0xffff_fff1);
    }
}
