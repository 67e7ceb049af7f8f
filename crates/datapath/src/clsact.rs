//! The fallback for kernels without TCX (before Linux 6.6): a classic `clsact` qdisc
//! and one `cls_bpf` filter in direct-action mode on the device's ingress.
//!
//! Each weft filter sits at a fixed place, ingress pref [`FILTER_PREF`], handle
//! [`FILTER_HANDLE`], protocol all, chain 0, so that:
//! - moving it to a new program is an `NLM_F_REPLACE` of that same filter, which the
//!   kernel swaps in one step (packets see the old or the new program, never neither);
//! - detaching deletes exactly that filter, leaving anyone else's filters and the
//!   qdisc in place (the qdisc goes with the device).
//!
//! Filters are kernel state: they need no pin and outlive the agent and the plugin.
//! What makes one weft's is its name ([`filter_name`]), which names the program and
//! the pin root; a filter at our place with another name is someone else's and is
//! never replaced or deleted. The name is also how the agent finds the filters to
//! move when it replaces a program ([`sweep_filters`]): the kernel's filter dump is
//! the record, so there is no list of ours to keep in step with it.

use crate::error::{Error, Result};
use crate::programs::Program;
use crate::rtnl::{self, NlError, Rtnl};
use crate::tcx::{LinkChange, ProgRef};
use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE};
use netlink_packet_route::tc::{
    TcAttribute, TcBpfFlags, TcFilterBpfOption, TcHandle, TcHeader, TcMessage, TcOption,
};
use netlink_packet_route::RouteNetlinkMessage;
use std::os::fd::AsRawFd;
use std::path::Path;

/// Ingress pref of weft's filter: 1 runs before any other filter on the hook, so
/// anti-spoofing cannot be bypassed by an earlier classifier.
pub const FILTER_PREF: u16 = 1;
/// Handle of weft's filter within its pref.
pub const FILTER_HANDLE: u32 = 1;

/// `ETH_P_ALL`: the filter sees every protocol.
const ETH_P_ALL: u16 = 0x0003;
/// `TC_H_CLSACT` (= `TC_H_INGRESS`), the parent a clsact qdisc is created under.
const TC_H_CLSACT: u32 = 0xffff_fff1;
/// The clsact qdisc's own handle, `ffff:`.
const CLSACT_HANDLE: u32 = 0xffff_0000;
/// `TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS)`: the ingress side of clsact.
const INGRESS_PARENT: u32 = 0xffff_fff2;
/// `CLS_BPF_NAME_LEN`: the kernel refuses longer filter names.
const MAX_NAME_LEN: usize = 255;

/// Size of `struct tcmsg`, which heads every tc message.
const TCMSG_LEN: usize = 20;
const TCA_KIND: u16 = 1;
const TCA_OPTIONS: u16 = 2;
const TCA_CHAIN: u16 = 11;
const TCA_BPF_NAME: u16 = 7;
const TCA_BPF_FLAGS: u16 = 8;
const TCA_BPF_ID: u16 = 11;
const TCA_BPF_FLAG_ACT_DIRECT: u32 = 1;

/// The name that marks `program`'s filters of the datapath pinned at `pin_root`,
/// e.g. `weft:from_pod@/sys/fs/bpf/weft`. Several pin roots (the lab's simulated
/// nodes, tests) can then share a network namespace without touching each other's
/// filters.
pub(crate) fn filter_name(pin_root: &Path, program: Program) -> Result<String> {
    // `components` drops a trailing `/` and `.` segments, so `/x/` and `/x` agree.
    let root: std::path::PathBuf = pin_root.components().collect();
    let name = format!("weft:{program}@{}", root.display());
    if name.len() > MAX_NAME_LEN {
        return Err(Error::InvalidPinRoot {
            path: pin_root.to_path_buf(),
            reason: "too long to name a cls_bpf filter (at most about 240 bytes)",
        });
    }
    Ok(name)
}

/// A filter as the kernel reports it, reduced to what weft looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Filter {
    pub ifindex: u32,
    pub pref: u16,
    pub protocol: u16,
    pub handle: u32,
    pub chain: u32,
    pub kind: String,
    /// `TCA_BPF_NAME`, for bpf filters.
    pub name: Option<String>,
    /// The program a bpf filter runs.
    pub prog_id: Option<u32>,
    pub direct_action: bool,
}

impl Filter {
    fn at_our_place(&self) -> bool {
        self.pref == FILTER_PREF && self.handle == FILTER_HANDLE && self.chain == 0
    }

    fn is_named(&self, name: &str) -> bool {
        self.kind == "bpf" && self.name.as_deref() == Some(name)
    }

    pub fn describe(&self) -> String {
        match &self.name {
            Some(name) => format!("{} filter {name:?}", self.kind),
            None => format!("{} filter", self.kind),
        }
    }
}

/// Who holds weft's place on a device's ingress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    Empty,
    Ours(Filter),
    /// Something else at pref [`FILTER_PREF`] (cls_bpf keeps one kind and protocol
    /// per pref, so any filter there blocks ours).
    Taken(Filter),
}

/// The kernel's answer for `target` (an interface name, for messages) as an [`Error`].
pub(crate) fn tc_error(op: &'static str, target: &str, e: NlError) -> Error {
    Error::Tc {
        op,
        target: target.to_string(),
        message: e.message(),
        source: e.into_io(),
    }
}

pub(crate) fn open_rtnl(target: &str) -> Result<Rtnl> {
    Rtnl::new().map_err(|e| tc_error("open rtnetlink socket", target, e))
}

/// The ingress filters of `ifindex` (empty when it has no clsact qdisc).
pub(crate) fn ingress_filters(rtnl: &mut Rtnl, ifindex: u32) -> Result<Vec<Filter>, NlError> {
    let request = TcMessage::from_parts(
        TcHeader {
            index: ifindex as i32,
            parent: TcHandle::from(INGRESS_PARENT),
            ..Default::default()
        },
        Vec::new(),
    );
    let payloads = rtnl.dump(RouteNetlinkMessage::GetTrafficFilter(request))?;
    Ok(payloads.iter().filter_map(|p| parse_filter(p)).collect())
}

/// Where weft's filter named `name` would sit on `ifindex`, and who is there.
pub(crate) fn place(rtnl: &mut Rtnl, ifindex: u32, name: &str) -> Result<Place, NlError> {
    let filters = ingress_filters(rtnl, ifindex)?;
    if let Some(ours) = filters
        .iter()
        .find(|f| f.at_our_place() && f.is_named(name))
    {
        return Ok(Place::Ours(ours.clone()));
    }
    Ok(
        match filters
            .into_iter()
            .find(|f| f.pref == FILTER_PREF && f.chain == 0)
        {
            Some(other) => Place::Taken(other),
            None => Place::Empty,
        },
    )
}

/// Makes weft's filter on `ifindex` run `prog`: creates the clsact qdisc and the
/// filter if needed, or swaps the program of the filter already there.
pub(crate) fn ensure_filter(
    rtnl: &mut Rtnl,
    ifindex: u32,
    ifname: &str,
    name: &str,
    prog: ProgRef<'_>,
) -> Result<LinkChange> {
    match place(rtnl, ifindex, name).map_err(|e| tc_error("filter dump", ifname, e))? {
        Place::Ours(f) if f.prog_id == Some(prog.id) && f.direct_action => {
            Ok(LinkChange::Unchanged)
        }
        Place::Ours(_) => {
            set_filter(rtnl, ifindex, name, prog, NLM_F_REPLACE)
                .map_err(|e| tc_error("filter replace", ifname, e))?;
            Ok(LinkChange::Updated)
        }
        Place::Taken(other) => Err(Error::ForeignFilter {
            ifname: ifname.to_string(),
            pref: FILTER_PREF,
            detail: other.describe(),
        }),
        Place::Empty => {
            ensure_clsact(rtnl, ifindex).map_err(|e| tc_error("qdisc add clsact", ifname, e))?;
            // EXCL: a filter that appeared since the dump is not silently overwritten.
            set_filter(rtnl, ifindex, name, prog, NLM_F_CREATE | NLM_F_EXCL)
                .map_err(|e| tc_error("filter add", ifname, e))?;
            Ok(LinkChange::Created)
        }
    }
}

/// Moves weft's filter on `ifindex` to `new`, but only if it still runs
/// `expected_old` (so a late caller cannot undo a newer replacement). Returns
/// whether it moved. There is no compare-and-swap for filters; the window between
/// the dump and the replace is one round trip.
pub(crate) fn replace_if_running(
    rtnl: &mut Rtnl,
    ifindex: u32,
    ifname: &str,
    name: &str,
    new: ProgRef<'_>,
    expected_old: u32,
) -> Result<bool> {
    match place(rtnl, ifindex, name).map_err(|e| tc_error("filter dump", ifname, e))? {
        Place::Ours(f) if f.prog_id == Some(expected_old) => {
            set_filter(rtnl, ifindex, name, new, NLM_F_REPLACE)
                .map_err(|e| tc_error("filter replace", ifname, e))?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Deletes weft's filter named `name` from `ifindex`, and nothing else. Idempotent:
/// `Ok(false)` when it is not there (or the device is gone).
pub(crate) fn remove_filter(
    rtnl: &mut Rtnl,
    ifindex: u32,
    ifname: &str,
    name: &str,
) -> Result<bool> {
    match place(rtnl, ifindex, name) {
        Ok(Place::Ours(_)) => {}
        Ok(_) => return Ok(false),
        Err(e) if is_gone(&e) => return Ok(false),
        Err(e) => return Err(tc_error("filter dump", ifname, e)),
    }
    let request = TcMessage::from_parts(
        filter_header(ifindex),
        vec![TcAttribute::Kind("bpf".to_string())],
    );
    match rtnl.request(RouteNetlinkMessage::DelTrafficFilter(request), 0) {
        Ok(()) => Ok(true),
        Err(e) if is_gone(&e) => Ok(false),
        Err(e) => Err(tc_error("filter delete", ifname, e)),
    }
}

/// Moves every filter named `name` in the calling thread's network namespace to
/// `prog`. Returns how many moved.
pub(crate) fn sweep_filters(name: &str, prog: ProgRef<'_>) -> Result<usize> {
    const TARGET: &str = "every interface";
    let mut rtnl = open_rtnl(TARGET)?;
    let mut moved = 0;
    for ifindex in
        ingress_qdisc_devices(&mut rtnl).map_err(|e| tc_error("qdisc dump", TARGET, e))?
    {
        let target = format!("ifindex {ifindex}");
        let current = match place(&mut rtnl, ifindex, name) {
            Ok(Place::Ours(f)) => f,
            Ok(_) => continue,
            // Deleted since the qdisc dump.
            Err(e) if is_gone(&e) => continue,
            Err(e) => return Err(tc_error("filter dump", &target, e)),
        };
        if current.prog_id == Some(prog.id) && current.direct_action {
            continue;
        }
        match set_filter(&mut rtnl, ifindex, name, prog, NLM_F_REPLACE) {
            Ok(()) => moved += 1,
            Err(e) if is_gone(&e) => {}
            Err(e) => return Err(tc_error("filter replace", &target, e)),
        }
    }
    Ok(moved)
}

/// The devices that have an ingress-capable qdisc (clsact, or the older `ingress`),
/// so a sweep only dumps the filters of those.
fn ingress_qdisc_devices(rtnl: &mut Rtnl) -> Result<Vec<u32>, NlError> {
    let payloads = rtnl.dump(RouteNetlinkMessage::GetQueueDiscipline(TcMessage::default()))?;
    let mut devices: Vec<u32> = payloads
        .iter()
        .filter_map(|p| {
            let ifindex = rtnl::read_u32(p, 4)?;
            let attributes = p.get(TCMSG_LEN..)?;
            let kind = rtnl::attributes_of(attributes)
                .find(|(k, _)| *k == TCA_KIND)
                .map(|(_, v)| rtnl::c_string(v))?;
            matches!(kind.as_str(), "clsact" | "ingress").then_some(ifindex)
        })
        .collect();
    devices.sort_unstable();
    devices.dedup();
    Ok(devices)
}

/// The device, or the filter, went away under us: for removal and sweeps, done.
fn is_gone(e: &NlError) -> bool {
    matches!(e.errno(), Some(libc::ENOENT) | Some(libc::ENODEV))
}

fn ensure_clsact(rtnl: &mut Rtnl, ifindex: u32) -> Result<(), NlError> {
    let request = TcMessage::from_parts(
        TcHeader {
            index: ifindex as i32,
            parent: TcHandle::from(TC_H_CLSACT),
            handle: TcHandle::from(CLSACT_HANDLE),
            ..Default::default()
        },
        vec![TcAttribute::Kind("clsact".to_string())],
    );
    match rtnl.request(
        RouteNetlinkMessage::NewQueueDiscipline(request),
        NLM_F_CREATE | NLM_F_EXCL,
    ) {
        // Already there (ours from an earlier pod on this device, or anyone's): the
        // filter add below says whether it can hold our filter.
        Err(e) if e.errno() == Some(libc::EEXIST) => Ok(()),
        other => other,
    }
}

fn filter_header(ifindex: u32) -> TcHeader {
    TcHeader {
        index: ifindex as i32,
        parent: TcHandle::from(INGRESS_PARENT),
        handle: TcHandle::from(FILTER_HANDLE),
        // TC_H_MAKE(pref << 16, htons(protocol)).
        info: (u32::from(FILTER_PREF) << 16) | u32::from(ETH_P_ALL.to_be()),
        ..Default::default()
    }
}

fn set_filter(
    rtnl: &mut Rtnl,
    ifindex: u32,
    name: &str,
    prog: ProgRef<'_>,
    flags: u16,
) -> Result<(), NlError> {
    let request = TcMessage::from_parts(
        filter_header(ifindex),
        vec![
            TcAttribute::Kind("bpf".to_string()),
            TcAttribute::Options(vec![
                TcOption::Bpf(TcFilterBpfOption::ProgFd(prog.fd.as_raw_fd() as u32)),
                TcOption::Bpf(TcFilterBpfOption::ProgName(name.to_string())),
                // Direct action: the program's return value is the verdict.
                TcOption::Bpf(TcFilterBpfOption::Flags(TcBpfFlags::DirectAction)),
            ]),
        ],
    );
    rtnl.request(RouteNetlinkMessage::NewTrafficFilter(request), flags)
}

/// Decodes one message of a filter dump; `None` for the per-pref headers the kernel
/// sends before a pref's filters (handle 0) and for anything malformed.
fn parse_filter(payload: &[u8]) -> Option<Filter> {
    let ifindex = rtnl::read_u32(payload, 4)?;
    let handle = rtnl::read_u32(payload, 8)?;
    let info = rtnl::read_u32(payload, 16)?;
    if handle == 0 {
        return None;
    }
    let mut filter = Filter {
        ifindex,
        pref: (info >> 16) as u16,
        protocol: u16::from_be(info as u16),
        handle,
        chain: 0,
        kind: String::new(),
        name: None,
        prog_id: None,
        direct_action: false,
    };
    let mut options = None;
    for (kind, value) in rtnl::attributes_of(payload.get(TCMSG_LEN..)?) {
        match kind {
            TCA_KIND => filter.kind = rtnl::c_string(value),
            TCA_CHAIN => filter.chain = rtnl::read_u32(value, 0)?,
            TCA_OPTIONS => options = Some(value),
            _ => {}
        }
    }
    if filter.kind == "bpf" {
        for (kind, value) in rtnl::attributes_of(options.unwrap_or_default()) {
            match kind {
                TCA_BPF_NAME => filter.name = Some(rtnl::c_string(value)),
                TCA_BPF_ID => filter.prog_id = rtnl::read_u32(value, 0),
                TCA_BPF_FLAGS => {
                    filter.direct_action =
                        rtnl::read_u32(value, 0).unwrap_or(0) & TCA_BPF_FLAG_ACT_DIRECT != 0
                }
                _ => {}
            }
        }
    }
    Some(filter)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attribute(kind: u16, value: &[u8]) -> Vec<u8> {
        let len = 4 + value.len();
        let mut out = Vec::new();
        out.extend_from_slice(&(len as u16).to_ne_bytes());
        out.extend_from_slice(&kind.to_ne_bytes());
        out.extend_from_slice(value);
        out.resize((len + 3) & !3, 0);
        out
    }

    fn tcmsg(ifindex: u32, handle: u32, info: u32) -> Vec<u8> {
        let mut out = vec![0u8; 4];
        for field in [ifindex, handle, INGRESS_PARENT, info] {
            out.extend_from_slice(&field.to_ne_bytes());
        }
        out
    }

    #[test]
    fn a_dumped_bpf_filter_is_decoded() {
        let mut msg = tcmsg(7, 1, (1 << 16) | u32::from(ETH_P_ALL.to_be()));
        msg.extend(attribute(TCA_KIND, b"bpf\0"));
        msg.extend(attribute(TCA_CHAIN, &0u32.to_ne_bytes()));
        let mut options = attribute(TCA_BPF_ID, &42u32.to_ne_bytes());
        options.extend(attribute(TCA_BPF_NAME, b"weft:from_pod@/sys/fs/bpf/weft\0"));
        options.extend(attribute(TCA_BPF_FLAGS, &1u32.to_ne_bytes()));
        msg.extend(attribute(TCA_OPTIONS, &options));
        let f = parse_filter(&msg).expect("decoded");
        assert_eq!(
            f,
            Filter {
                ifindex: 7,
                pref: 1,
                protocol: ETH_P_ALL,
                handle: 1,
                chain: 0,
                kind: "bpf".into(),
                name: Some("weft:from_pod@/sys/fs/bpf/weft".into()),
                prog_id: Some(42),
                direct_action: true,
            }
        );
        assert!(f.at_our_place());
        assert!(f.is_named("weft:from_pod@/sys/fs/bpf/weft"));
        assert!(!f.is_named("weft:from_pod@/sys/fs/bpf/other"));
    }

    #[test]
    fn pref_headers_and_short_messages_are_skipped() {
        let mut header = tcmsg(7, 0, 1 << 16);
        header.extend(attribute(TCA_KIND, b"bpf\0"));
        assert_eq!(parse_filter(&header), None);
        assert_eq!(parse_filter(&[0; 10]), None);
    }

    #[test]
    fn filter_names_identify_program_and_root() {
        assert_eq!(
            filter_name(Path::new("/sys/fs/bpf/weft/"), Program::FromPod).unwrap(),
            "weft:from_pod@/sys/fs/bpf/weft"
        );
        assert_eq!(
            filter_name(Path::new("/sys/fs/bpf/weft-n1"), Program::FromOverlay).unwrap(),
            "weft:from_overlay@/sys/fs/bpf/weft-n1"
        );
        let long = format!("/sys/fs/bpf/{}", "x".repeat(300));
        assert!(matches!(
            filter_name(Path::new(&long), Program::FromPod),
            Err(Error::InvalidPinRoot { .. })
        ));
    }

    #[test]
    fn the_filter_sits_at_pref_1_handle_1_protocol_all_on_clsact_ingress() {
        let h = filter_header(9);
        assert_eq!(h.index, 9);
        assert_eq!(u32::from(h.parent), 0xffff_fff2);
        assert_eq!(u32::from(h.handle), 1);
        assert_eq!(h.info >> 16, 1);
        assert_eq!(u16::from_be(h.info as u16), 0x0003);
    }
}
