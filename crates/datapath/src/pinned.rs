//! Opening the pinned maps and programs, with the checks that keep a plugin or agent
//! of one version from writing another version's layout into a map.

use crate::error::{Error, Result};
use crate::layout::MapSpec;
use crate::pins::PinLayout;
use crate::programs::{Attach, Program};
use crate::sys;
use std::os::fd::{AsFd, OwnedFd};

/// Opens the pinned map `spec` (`maps/<name>_v<version>`) and checks that its shape is the one this build
/// was compiled against: the kernel copies `key_size`/`value_size` bytes from our
/// buffers, so a mismatch would read past them or truncate silently.
pub(crate) fn open_map(pins: &PinLayout, spec: &MapSpec) -> Result<OwnedFd> {
    let path = pins.map_pin(spec);
    let Some(fd) = sys::obj_get_opt(&path)? else {
        return Err(Error::NotPinned { path });
    };
    check_map(&path, fd.as_fd(), spec)?;
    Ok(fd)
}

pub(crate) fn check_map(
    path: &std::path::Path,
    fd: std::os::fd::BorrowedFd<'_>,
    spec: &MapSpec,
) -> Result<()> {
    let info = sys::map_info(fd).map_err(|e| Error::bpf("BPF_OBJ_GET_INFO_BY_FD", path, e))?;
    if !spec.accepts(&info.shape) {
        return Err(Error::MapMismatch {
            path: path.to_path_buf(),
            expected: spec.shape,
            found: info.shape,
        });
    }
    Ok(())
}

/// Opens the pinned program and checks it has the type its attach kind needs.
pub(crate) fn open_program(pins: &PinLayout, program: Program) -> Result<(OwnedFd, sys::ProgInfo)> {
    let path = pins.program(program);
    let Some(fd) = sys::obj_get_opt(&path)? else {
        return Err(Error::NotPinned { path });
    };
    let info =
        sys::prog_info(fd.as_fd()).map_err(|e| Error::bpf("BPF_OBJ_GET_INFO_BY_FD", &path, e))?;
    let (prog_type, expected) = match program.attach() {
        Attach::Tc { .. } => (sys::BPF_PROG_TYPE_SCHED_CLS, "a tc classifier program"),
        Attach::Cgroup(_) => (
            sys::BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
            "a cgroup sock_addr program",
        ),
        Attach::Lsm { .. } => (sys::BPF_PROG_TYPE_LSM, "a BPF-LSM program"),
    };
    if info.prog_type != prog_type {
        return Err(Error::WrongObject { path, expected });
    }
    Ok((fd, info))
}
