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
//!
//! The rtnetlink requests themselves are `weft-netlink`'s tc operations; this module
//! holds only weft's policy: where its filter sits, what makes one its own, and
//! what to do about someone else's.

use crate::error::{Error, Result};
use crate::programs::Program;
use crate::tcx::{LinkChange, ProgRef};
use std::io;
use std::path::Path;
use weft_netlink::{
    BpfFilterInfo, BpfFilterSpec, Handle, TcFilter, BPF_FILTER_NAME_MAX, ETH_P_ALL,
};

/// Ingress pref of weft's filter: 1 runs before any other filter on the hook, so
/// anti-spoofing cannot be bypassed by an earlier classifier.
pub const FILTER_PREF: u16 = 1;
/// Handle of weft's filter within its pref.
pub const FILTER_HANDLE: u32 = 1;

const FILTER_KIND: &str = "bpf";

/// The name that marks `program`'s filters of the datapath pinned at `pin_root`,
/// e.g. `weft:from_pod@/sys/fs/bpf/weft`. Several pin roots (the lab's simulated
/// nodes, tests) can then share a network namespace without touching each other's
/// filters.
pub(crate) fn filter_name(pin_root: &Path, program: Program) -> Result<String> {
    // `components` drops a trailing `/` and `.` segments, so `/x/` and `/x` agree.
    let root: std::path::PathBuf = pin_root.components().collect();
    let name = format!("weft:{program}@{}", root.display());
    if name.len() > BPF_FILTER_NAME_MAX {
        return Err(Error::InvalidPinRoot {
            path: pin_root.to_path_buf(),
            reason: "too long to name a cls_bpf filter (at most about 240 bytes)",
        });
    }
    Ok(name)
}

/// Who holds weft's place on a device's ingress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    Empty,
    /// Our filter, and what it runs.
    Ours(BpfFilterInfo),
    /// Something else at pref [`FILTER_PREF`] (cls_bpf keeps one kind and protocol
    /// per pref, so any filter there blocks ours).
    Taken(TcFilter),
}

/// `filter`'s details when it is weft's filter named `name` at weft's place.
fn as_ours<'f>(filter: &'f TcFilter, name: &str) -> Option<&'f BpfFilterInfo> {
    let at_our_place =
        filter.pref == FILTER_PREF && filter.handle == FILTER_HANDLE && filter.chain == 0;
    filter
        .bpf
        .as_ref()
        .filter(|bpf| at_our_place && bpf.name.as_deref() == Some(name))
}

fn describe(filter: &TcFilter) -> String {
    match filter.bpf.as_ref().and_then(|bpf| bpf.name.as_ref()) {
        Some(name) => format!("{} filter {name:?}", filter.kind),
        None => format!("{} filter", filter.kind),
    }
}

/// The kernel's answer for `target` (an interface name, for messages) as an
/// [`Error`]: the errno and the kernel's explanation when it refused, the failure
/// itself otherwise.
pub(crate) fn tc_error(op: &'static str, target: &str, e: weft_netlink::Error) -> Error {
    use weft_netlink::Error as Nl;
    let (source, message) = match e {
        Nl::Kernel {
            errno,
            kernel_message,
            ..
        }
        | Nl::NotFound {
            errno,
            kernel_message,
            ..
        } => (io::Error::from_raw_os_error(errno), kernel_message),
        Nl::Exists { .. } => (io::Error::from_raw_os_error(libc::EEXIST), None),
        Nl::Io { source, .. } => (source, None),
        other => {
            let kind = match other {
                Nl::Decode { .. } => io::ErrorKind::InvalidData,
                Nl::DumpInterrupted { .. } => io::ErrorKind::Interrupted,
                Nl::InvalidInput { .. } => io::ErrorKind::InvalidInput,
                _ => io::ErrorKind::Other,
            };
            (io::Error::new(kind, other.to_string()), None)
        }
    };
    Error::Tc {
        op,
        target: target.to_string(),
        message,
        source,
    }
}

pub(crate) fn open_handle(target: &str) -> Result<Handle> {
    Handle::new().map_err(|e| tc_error("open rtnetlink socket", target, e))
}

/// Where weft's filter named `name` would sit on `ifindex`, and who is there.
pub(crate) fn place(netlink: &mut Handle, ifindex: u32, name: &str) -> weft_netlink::Result<Place> {
    let filters = netlink.ingress_filters(ifindex)?;
    if let Some(ours) = filters.iter().find_map(|f| as_ours(f, name)) {
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
    netlink: &mut Handle,
    ifindex: u32,
    ifname: &str,
    name: &str,
    prog: ProgRef<'_>,
) -> Result<LinkChange> {
    match place(netlink, ifindex, name).map_err(|e| tc_error("filter dump", ifname, e))? {
        Place::Ours(f) if f.prog_id == Some(prog.id) && f.direct_action => {
            Ok(LinkChange::Unchanged)
        }
        Place::Ours(_) => {
            set_filter(netlink, ifindex, name, prog, true)
                .map_err(|e| tc_error("filter replace", ifname, e))?;
            Ok(LinkChange::Updated)
        }
        Place::Taken(other) => Err(Error::ForeignFilter {
            ifname: ifname.to_string(),
            pref: FILTER_PREF,
            detail: describe(&other),
        }),
        Place::Empty => {
            // A qdisc already there (ours from an earlier pod on this device, or
            // anyone's) is fine: the filter add says whether it can hold our filter.
            netlink
                .ensure_clsact(ifindex)
                .map_err(|e| tc_error("qdisc add clsact", ifname, e))?;
            // An add, not a replace: a filter that appeared since the dump is not
            // silently overwritten.
            set_filter(netlink, ifindex, name, prog, false)
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
    netlink: &mut Handle,
    ifindex: u32,
    ifname: &str,
    name: &str,
    new: ProgRef<'_>,
    expected_old: u32,
) -> Result<bool> {
    match place(netlink, ifindex, name).map_err(|e| tc_error("filter dump", ifname, e))? {
        Place::Ours(f) if f.prog_id == Some(expected_old) => {
            set_filter(netlink, ifindex, name, new, true)
                .map_err(|e| tc_error("filter replace", ifname, e))?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Deletes weft's filter named `name` from `ifindex`, and nothing else. Idempotent:
/// `Ok(false)` when it is not there (or the device is gone).
pub(crate) fn remove_filter(
    netlink: &mut Handle,
    ifindex: u32,
    ifname: &str,
    name: &str,
) -> Result<bool> {
    match place(netlink, ifindex, name) {
        Ok(Place::Ours(_)) => {}
        Ok(_) => return Ok(false),
        Err(e) if is_gone(&e) => return Ok(false),
        Err(e) => return Err(tc_error("filter dump", ifname, e)),
    }
    match netlink.delete_filter(ifindex, FILTER_PREF, FILTER_HANDLE, FILTER_KIND) {
        Ok(()) => Ok(true),
        Err(e) if is_gone(&e) => Ok(false),
        Err(e) => Err(tc_error("filter delete", ifname, e)),
    }
}

/// Moves every filter named `name` in the calling thread's network namespace to
/// `prog`. Returns how many moved.
pub(crate) fn sweep_filters(name: &str, prog: ProgRef<'_>) -> Result<usize> {
    const TARGET: &str = "every interface";
    let mut netlink = open_handle(TARGET)?;
    let mut moved = 0;
    for ifindex in
        ingress_qdisc_devices(&mut netlink).map_err(|e| tc_error("qdisc dump", TARGET, e))?
    {
        let target = format!("ifindex {ifindex}");
        let current = match place(&mut netlink, ifindex, name) {
            Ok(Place::Ours(f)) => f,
            Ok(_) => continue,
            // Deleted since the qdisc dump.
            Err(e) if is_gone(&e) => continue,
            Err(e) => return Err(tc_error("filter dump", &target, e)),
        };
        if current.prog_id == Some(prog.id) && current.direct_action {
            continue;
        }
        match set_filter(&mut netlink, ifindex, name, prog, true) {
            Ok(()) => moved += 1,
            Err(e) if is_gone(&e) => {}
            Err(e) => return Err(tc_error("filter replace", &target, e)),
        }
    }
    Ok(moved)
}

/// The devices that have an ingress-capable qdisc (clsact, or the older `ingress`),
/// so a sweep only dumps the filters of those.
fn ingress_qdisc_devices(netlink: &mut Handle) -> weft_netlink::Result<Vec<u32>> {
    let mut devices: Vec<u32> = netlink
        .qdiscs()?
        .into_iter()
        .filter(|q| matches!(q.kind.as_str(), "clsact" | "ingress"))
        .map(|q| q.index)
        .collect();
    devices.sort_unstable();
    devices.dedup();
    Ok(devices)
}

/// The device, or the filter, went away under us: for removal and sweeps, done.
fn is_gone(e: &weft_netlink::Error) -> bool {
    matches!(e.errno(), Some(libc::ENOENT) | Some(libc::ENODEV))
}

/// Writes weft's filter at its place (pref [`FILTER_PREF`], handle
/// [`FILTER_HANDLE`], protocol all), running `prog` in direct-action mode: the
/// program's return value is the verdict.
fn set_filter(
    netlink: &mut Handle,
    ifindex: u32,
    name: &str,
    prog: ProgRef<'_>,
    replace: bool,
) -> weft_netlink::Result<()> {
    let spec = BpfFilterSpec {
        pref: FILTER_PREF,
        protocol: ETH_P_ALL,
        handle: FILTER_HANDLE,
        prog_fd: prog.fd,
        name,
        direct_action: true,
    };
    netlink.add_bpf_filter(ifindex, &spec, replace)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(pref: u16, handle: u32, chain: u32, bpf_name: Option<&str>) -> TcFilter {
        TcFilter {
            pref,
            protocol: ETH_P_ALL,
            handle,
            chain,
            kind: if bpf_name.is_some() { "bpf" } else { "u32" }.into(),
            bpf: bpf_name.map(|name| BpfFilterInfo {
                prog_id: Some(42),
                name: Some(name.into()),
                direct_action: true,
            }),
        }
    }

    #[test]
    fn ours_is_the_named_bpf_filter_at_pref_1_handle_1_chain_0() {
        const NAME: &str = "weft:from_pod@/sys/fs/bpf/weft";
        assert!(as_ours(&filter(1, 1, 0, Some(NAME)), NAME).is_some());
        assert!(as_ours(&filter(1, 1, 0, Some(NAME)), "weft:from_pod@/other").is_none());
        assert!(as_ours(&filter(2, 1, 0, Some(NAME)), NAME).is_none());
        assert!(as_ours(&filter(1, 2, 0, Some(NAME)), NAME).is_none());
        assert!(as_ours(&filter(1, 1, 3, Some(NAME)), NAME).is_none());
        assert!(as_ours(&filter(1, 1, 0, None), NAME).is_none());
        assert_eq!(describe(&filter(1, 1, 0, Some("x"))), "bpf filter \"x\"");
        assert_eq!(describe(&filter(1, 0x800, 0, None)), "u32 filter");
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
}
