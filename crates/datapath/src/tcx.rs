//! Pinned TCX ingress links: creating, repointing, sweeping and removing them.
//!
//! A TCX link only lives as long as something references it; weft's reference is
//! its pin, so attachments outlive the agent and the CNI plugin. Shared by the agent
//! (`attach_overlay`, program replacement) and the CNI plugin (`attach_pod`).

use crate::error::{Error, Result};
use crate::sys;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

/// A program, as links refer to it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ProgRef<'a> {
    pub fd: BorrowedFd<'a>,
    pub id: u32,
}

/// What attaching a program to a device's ingress had to do (a TCX link or, in the
/// clsact fallback, weft's cls_bpf filter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkChange {
    /// The device's attachment already ran the program.
    Unchanged,
    /// The device's attachment ran another program (or, for a filter, was not in
    /// direct-action mode); it now runs this one, swapped atomically.
    Updated,
    /// No usable attachment existed (for TCX: none pinned, defunct, or on another
    /// device); one was created.
    Created,
}

/// The TCX link pinned at `pin`, opened and described; `None` when nothing is pinned.
pub(crate) fn open_link(pin: &Path) -> Result<Option<(OwnedFd, sys::LinkInfo)>> {
    let Some(fd) = sys::obj_get_opt(pin)? else {
        return Ok(None);
    };
    let info =
        sys::link_info(fd.as_fd()).map_err(|e| Error::bpf("BPF_OBJ_GET_INFO_BY_FD", pin, e))?;
    if info.link_type != sys::BPF_LINK_TYPE_TCX {
        return Err(Error::WrongObject {
            path: pin.to_path_buf(),
            expected: "a TCX link",
        });
    }
    Ok(Some((fd, info)))
}

/// Makes `pin` a live TCX link of `attach_type` on `ifindex` running `prog`, reusing a
/// link that is already there when it can (so a retried ADD or an agent restart changes
/// nothing on the wire).
pub(crate) fn ensure_link(
    pin: &Path,
    ifindex: u32,
    attach_type: u32,
    prog: ProgRef<'_>,
) -> Result<LinkChange> {
    if let Some((link, info)) = open_link(pin)? {
        if info.ifindex == ifindex && info.attach_type == attach_type {
            if info.prog_id == prog.id {
                return Ok(LinkChange::Unchanged);
            }
            sys::link_update(link.as_fd(), prog.fd, None)
                .map_err(|e| Error::bpf("BPF_LINK_UPDATE", pin, e))?;
            return Ok(LinkChange::Updated);
        }
        // Defunct (device gone) or on another device that reused the name: a live
        // stale link must not keep running next to the new one.
        remove_link(pin, link.as_fd())?;
    }
    let link = sys::tcx_link_create(prog.fd, ifindex, attach_type)
        .map_err(|e| Error::bpf("BPF_LINK_CREATE (TCX, Linux 6.6+)", pin, e))?;
    // If pinning fails, dropping `link` releases the last reference and detaches it,
    // so a failed attach leaves nothing behind.
    sys::obj_pin(link.as_fd(), pin)?;
    Ok(LinkChange::Created)
}

/// Detaches the link at `pin` and removes the pin. Idempotent: nothing pinned is
/// success, and a defunct link (device already gone) is simply unpinned.
pub(crate) fn detach_link(pin: &Path) -> Result<()> {
    match sys::obj_get_opt(pin)? {
        Some(link) => remove_link(pin, link.as_fd()),
        None => Ok(()),
    }
}

fn remove_link(pin: &Path, link: BorrowedFd<'_>) -> Result<()> {
    // Detaching explicitly (rather than only unpinning) makes the hook stop running
    // the program now, even if some other process still holds the link open.
    match sys::link_detach(link) {
        Ok(()) => {}
        // Already detached / defunct.
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOLINK) | Some(libc::EINVAL)) => {}
        Err(e) => return Err(Error::bpf("BPF_LINK_DETACH", pin, e)),
    }
    unlink_pin(pin)
}

pub(crate) fn unlink_pin(pin: &Path) -> Result<()> {
    match std::fs::remove_file(pin) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::bpf("unlink", pin, e)),
    }
}

/// What a sweep over a program's attachments did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Live links and cls_bpf filters moved to the current program.
    pub updated: usize,
    /// Defunct links (device gone) unpinned.
    pub removed_defunct: usize,
}

/// Moves every live link pinned in `dir` to `prog` (each one atomically) and unpins
/// the defunct ones.
pub(crate) fn sweep_links(dir: &Path, prog: ProgRef<'_>) -> Result<SweepReport> {
    let mut report = SweepReport::default();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(report),
        Err(e) => return Err(Error::bpf("readdir", dir, e)),
    };
    for entry in entries {
        let path = entry.map_err(|e| Error::bpf("readdir", dir, e))?.path();
        // Gone since readdir: a concurrent detach, nothing to do.
        let Some((link, info)) = open_link(&path)? else {
            continue;
        };
        if info.ifindex == 0 {
            unlink_pin(&path)?;
            report.removed_defunct += 1;
            continue;
        }
        if info.prog_id == prog.id {
            continue;
        }
        match sys::link_update(link.as_fd(), prog.fd, None) {
            Ok(()) => report.updated += 1,
            // The device went away between the info query and the update.
            Err(e) if e.raw_os_error() == Some(libc::ENOLINK) => {
                unlink_pin(&path)?;
                report.removed_defunct += 1;
            }
            Err(e) => return Err(Error::bpf("BPF_LINK_UPDATE", &path, e)),
        }
    }
    Ok(report)
}
