//! One tc hook of weft's (a program of the table on one device: a pod veth, the VXLAN
//! device, ...) across both attach mechanisms: a pinned TCX link or a cls_bpf filter.
//!
//! The rule that keeps a node from mixing them on one interface: an existing
//! attachment decides. A live TCX link pinned for the device is used (and a filter
//! of ours left beside it is removed); otherwise a filter of ours is used; only a
//! device with neither gets a new attachment in the requested [`AttachMode`].
//! Detaching removes whichever is there, so DEL needs no mode.

use crate::clsact::{self, Place};
use crate::error::{Error, Result};
use crate::mode::{self, AttachMode, Backend};
use crate::pins::PinLayout;
use crate::programs::{Attach, Program, TcHook};
use crate::sys;
use crate::tcx::{self, LinkChange, ProgRef, SweepReport};
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use weft_netlink::{BpfFilterInfo, Handle};

/// Where weft's attachment of `program` on `ifname` lives, in both mechanisms.
#[derive(Clone, Debug)]
pub(crate) struct Hook<'a> {
    pub program: Program,
    pub ifname: &'a str,
    pub side: TcHook,
    /// The TCX link's pin.
    pub link_pin: PathBuf,
    /// The cls_bpf filter's name.
    pub filter_name: String,
}

impl<'a> Hook<'a> {
    /// `program` (a tc program of the table) on the device `ifname`.
    pub fn new(pins: &PinLayout, program: Program, ifname: &'a str) -> Result<Hook<'a>> {
        let Attach::Tc { hook: side, .. } = program.attach() else {
            return Err(Error::Unsupported {
                program,
                what: "attaching to a network device (it is not a tc program)",
            });
        };
        Ok(Hook {
            program,
            ifname,
            side,
            link_pin: pins.device_link(program, ifname)?,
            filter_name: clsact::filter_name(pins.root(), program)?,
        })
    }

    pub fn pod(pins: &PinLayout, ifname: &'a str) -> Result<Hook<'a>> {
        Hook::new(pins, Program::FromPod, ifname)
    }

    /// The TCX attach type of this hook.
    pub fn tcx_attach_type(&self) -> u32 {
        tcx_attach_type(self.side)
    }

    fn netlink(&self) -> Result<Handle> {
        clsact::open_handle(self.ifname)
    }
}

/// What is attached at a hook now.
#[derive(Debug)]
pub(crate) struct Observed {
    /// The TCX link pinned for the hook, wherever it is attached (0: defunct).
    pub link: Option<(OwnedFd, sys::LinkInfo)>,
    /// What holds weft's cls_bpf place on the device.
    pub place: Place,
}

pub(crate) fn tcx_attach_type(side: TcHook) -> u32 {
    match side {
        TcHook::Ingress => sys::BPF_TCX_INGRESS,
        TcHook::Egress => sys::BPF_TCX_EGRESS,
    }
}

impl Observed {
    /// The pinned link, if it is live on `ifindex` at the hook's side.
    pub fn live_link(&self, ifindex: u32, attach_type: u32) -> Option<&sys::LinkInfo> {
        self.link
            .as_ref()
            .map(|(_, info)| info)
            .filter(|info| info.ifindex == ifindex && info.attach_type == attach_type)
    }

    pub fn filter(&self) -> Option<&BpfFilterInfo> {
        match &self.place {
            Place::Ours(f) => Some(f),
            _ => None,
        }
    }
}

pub(crate) fn observe(hook: &Hook<'_>, ifindex: u32) -> Result<Observed> {
    observe_with(hook, &mut hook.netlink()?, ifindex)
}

fn observe_with(hook: &Hook<'_>, netlink: &mut Handle, ifindex: u32) -> Result<Observed> {
    // weft-netlink's tc operations cover clsact ingress only; an egress hook can only
    // ever have a TCX link.
    let place = match hook.side {
        TcHook::Ingress => clsact::place(netlink, ifindex, &hook.filter_name)
            .map_err(|e| clsact::tc_error("filter dump", hook.ifname, e))?,
        TcHook::Egress => Place::Empty,
    };
    Ok(Observed {
        link: tcx::open_link(&hook.link_pin)?,
        place,
    })
}

/// Makes `prog` run at ingress of `ifindex`, reusing the attachment already there
/// (see the module docs for which). Returns what changed and through which
/// mechanism.
pub(crate) fn ensure(
    hook: &Hook<'_>,
    ifindex: u32,
    prog: ProgRef<'_>,
    mode: AttachMode,
) -> Result<(LinkChange, Backend)> {
    let mut netlink = hook.netlink()?;
    let observed = observe_with(hook, &mut netlink, ifindex)?;
    let has_link = observed
        .live_link(ifindex, hook.tcx_attach_type())
        .is_some();
    let has_filter = observed.filter().is_some();
    drop(observed);

    let backend = match (has_link, has_filter) {
        (true, _) => Backend::Tcx,
        (false, true) => Backend::Clsact,
        (false, false) => mode::backend_for(mode, prog.fd)?,
    };
    if backend == Backend::Clsact && hook.side == TcHook::Egress {
        return Err(Error::Unsupported {
            program: hook.program,
            what: "the clsact (cls_bpf) fallback on the egress side: it needs TCX (Linux 6.6+)",
        });
    }
    match backend {
        Backend::Tcx => {
            let mut change =
                tcx::ensure_link(&hook.link_pin, ifindex, hook.tcx_attach_type(), prog)?;
            // Both present: the TCX link runs first and may redirect past the
            // filter, so the filter is only confusion; the link stays.
            if has_filter
                && clsact::remove_filter(&mut netlink, ifindex, hook.ifname, &hook.filter_name)?
                && change == LinkChange::Unchanged
            {
                change = LinkChange::Updated;
            }
            Ok((change, Backend::Tcx))
        }
        Backend::Clsact => {
            // A link pinned for a former device of that name (defunct, or on another
            // device) must not keep running.
            tcx::detach_link(&hook.link_pin)?;
            let change =
                clsact::ensure_filter(&mut netlink, ifindex, hook.ifname, &hook.filter_name, prog)?;
            Ok((change, Backend::Clsact))
        }
    }
}

/// After [`ensure`]: moves the attachment from `attached` to `current` only if it
/// still runs `attached` (so it can never undo a newer replacement).
pub(crate) fn follow_replacement(
    hook: &Hook<'_>,
    ifindex: u32,
    backend: Backend,
    attached: ProgRef<'_>,
    current: ProgRef<'_>,
) -> Result<()> {
    match backend {
        Backend::Tcx => {
            let (link, _) = tcx::open_link(&hook.link_pin)?.ok_or_else(|| Error::NotPinned {
                path: hook.link_pin.clone(),
            })?;
            match sys::link_update(link.as_fd(), current.fd, Some(attached.fd)) {
                Ok(()) => Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EPERM) => Ok(()), // already moved on
                Err(e) => Err(Error::bpf("BPF_LINK_UPDATE", &hook.link_pin, e)),
            }
        }
        Backend::Clsact => clsact::replace_if_running(
            &mut hook.netlink()?,
            ifindex,
            hook.ifname,
            &hook.filter_name,
            current,
            attached.id,
        )
        .map(drop),
    }
}

/// Removes weft's attachment from the hook, whichever mechanism it uses.
/// Idempotent: nothing attached, or the device already gone, is success.
pub(crate) fn detach(hook: &Hook<'_>) -> Result<()> {
    tcx::detach_link(&hook.link_pin)?;
    if hook.side == TcHook::Egress {
        return Ok(());
    }
    let ifindex = match crate::loader::ifindex_of(hook.ifname) {
        Ok(ifindex) => ifindex,
        // The filter went with the device.
        Err(Error::Interface { source, .. }) if source.raw_os_error() == Some(libc::ENODEV) => {
            return Ok(())
        }
        Err(e) => return Err(e),
    };
    clsact::remove_filter(
        &mut hook.netlink()?,
        ifindex,
        hook.ifname,
        &hook.filter_name,
    )
    .map(drop)
}

/// Moves every attachment of `program` under `pins` to `prog`: the pinned links
/// (defunct ones are unpinned) and, for tc ingress programs, weft's filters on every
/// interface of the calling thread's network namespace.
pub(crate) fn sweep(pins: &PinLayout, program: Program, prog: ProgRef<'_>) -> Result<SweepReport> {
    let mut report = tcx::sweep_links(&pins.links_dir_of(program), prog)?;
    if let Attach::Tc {
        hook: TcHook::Ingress,
        ..
    } = program.attach()
    {
        report.updated += clsact::sweep_filters(&clsact::filter_name(pins.root(), program)?, prog)?;
    }
    Ok(report)
}
