//! The few raw `bpf(2)` commands the datapath needs beyond loading: opening and
//! pinning objects, reading their info, TCX links, and single map elements.
//!
//! The CNI plugin's ADD path uses only these (no ELF parsing, no object load), one
//! syscall per step. Each attribute struct is a prefix of the kernel's `union
//! bpf_attr` for that command; the kernel zero-fills the rest.

use crate::error::Error;
use std::ffi::CString;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::Path;

const BPF_MAP_LOOKUP_ELEM: u32 = 1;
const BPF_MAP_UPDATE_ELEM: u32 = 2;
const BPF_MAP_DELETE_ELEM: u32 = 3;
const BPF_MAP_GET_NEXT_KEY: u32 = 4;
const BPF_OBJ_PIN: u32 = 6;
const BPF_OBJ_GET: u32 = 7;
const BPF_OBJ_GET_INFO_BY_FD: u32 = 15;
const BPF_LINK_CREATE: u32 = 28;
const BPF_LINK_UPDATE: u32 = 29;
const BPF_LINK_DETACH: u32 = 34;

/// `BPF_TCX_INGRESS` and `BPF_TCX_EGRESS` (kernel 6.6+; newer than Debian 12's UAPI
/// headers).
pub(crate) const BPF_TCX_INGRESS: u32 = 46;
pub(crate) const BPF_TCX_EGRESS: u32 = 47;
/// `BPF_LINK_TYPE_TCX`.
pub(crate) const BPF_LINK_TYPE_TCX: u32 = 11;
/// `BPF_PROG_TYPE_SCHED_CLS`, `BPF_PROG_TYPE_CGROUP_SOCK_ADDR`, `BPF_PROG_TYPE_LSM`.
pub(crate) const BPF_PROG_TYPE_SCHED_CLS: u32 = 3;
pub(crate) const BPF_PROG_TYPE_CGROUP_SOCK_ADDR: u32 = 18;
pub(crate) const BPF_PROG_TYPE_LSM: u32 = 29;
/// `BPF_F_REPLACE`: update a link only if it still runs the given old program.
const BPF_F_REPLACE: u32 = 1 << 2;
/// `BPF_ANY`: create or replace a map element.
pub(crate) const BPF_ANY: u64 = 0;

/// CLOCK_MONOTONIC in nanoseconds: the clock of `bpf_ktime_get_ns()`, which the
/// programs stamp connection-table expiries and affinity with.
pub(crate) fn monotonic_ns() -> u64 {
    // SAFETY: clock_gettime writes into the timespec we own.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

#[repr(C)]
#[derive(Default)]
struct ObjAttr {
    pathname: u64,
    bpf_fd: u32,
    file_flags: u32,
}

#[repr(C)]
#[derive(Default)]
struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
    relative_fd: u32,
    _pad: u32,
    expected_revision: u64,
}

#[repr(C)]
#[derive(Default)]
struct LinkUpdateAttr {
    link_fd: u32,
    new_prog_fd: u32,
    flags: u32,
    old_prog_fd: u32,
}

#[repr(C)]
#[derive(Default)]
struct LinkDetachAttr {
    link_fd: u32,
}

#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// The head of `struct bpf_prog_info`, up to and including `map_ids`.
#[repr(C)]
#[derive(Default)]
struct RawProgInfo {
    prog_type: u32,
    id: u32,
    tag: [u8; 8],
    jited_prog_len: u32,
    xlated_prog_len: u32,
    jited_prog_insns: u64,
    xlated_prog_insns: u64,
    load_time: u64,
    created_by_uid: u32,
    nr_map_ids: u32,
    map_ids: u64,
}

/// The head of `struct bpf_map_info`.
#[repr(C)]
#[derive(Default)]
struct RawMapInfo {
    map_type: u32,
    id: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
}

/// The head of `struct bpf_link_info` with the `tcx` member of its union.
#[repr(C)]
#[derive(Default)]
struct RawLinkInfo {
    link_type: u32,
    id: u32,
    prog_id: u32,
    _pad: u32,
    tcx_ifindex: u32,
    tcx_attach_type: u32,
}

fn bpf<T>(cmd: u32, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, initialised `repr(C)` prefix of `union bpf_attr` for
    // `cmd`, and the size we pass is exactly its size; pointers inside it reference
    // buffers that outlive the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd as libc::c_long,
            attr as *mut T,
            size_of::<T>() as libc::c_long,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn bpf_fd<T>(cmd: u32, attr: &mut T) -> io::Result<OwnedFd> {
    let fd = bpf(cmd, attr)?;
    // SAFETY: on success these commands return a new file descriptor we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn raw(fd: BorrowedFd<'_>) -> u32 {
    fd.as_raw_fd() as u32
}

pub(crate) fn c_path(path: &Path) -> Result<CString, Error> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        Error::bpf(
            "encode path",
            path,
            io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"),
        )
    })
}

/// Opens a pinned object. `ErrorKind::NotFound` when nothing is pinned there.
pub(crate) fn obj_get(path: &Path) -> Result<OwnedFd, Error> {
    let c = c_path(path)?;
    let mut attr = ObjAttr {
        pathname: c.as_ptr() as u64,
        ..Default::default()
    };
    bpf_fd(BPF_OBJ_GET, &mut attr).map_err(|e| Error::bpf("BPF_OBJ_GET", path, e))
}

/// Like [`obj_get`], but `Ok(None)` when nothing is pinned at `path`.
pub(crate) fn obj_get_opt(path: &Path) -> Result<Option<OwnedFd>, Error> {
    match obj_get(path) {
        Ok(fd) => Ok(Some(fd)),
        Err(Error::Bpf { source, .. }) if source.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

pub(crate) fn obj_pin(fd: BorrowedFd<'_>, path: &Path) -> Result<(), Error> {
    let c = c_path(path)?;
    let mut attr = ObjAttr {
        pathname: c.as_ptr() as u64,
        bpf_fd: raw(fd),
        ..Default::default()
    };
    bpf(BPF_OBJ_PIN, &mut attr)
        .map(|_| ())
        .map_err(|e| Error::bpf("BPF_OBJ_PIN", path, e))
}

fn obj_info<T>(fd: BorrowedFd<'_>, info: &mut T) -> io::Result<()> {
    let mut attr = InfoAttr {
        bpf_fd: raw(fd),
        info_len: size_of::<T>() as u32,
        info: info as *mut T as u64,
    };
    bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr).map(|_| ())
}

/// What the kernel says about a loaded program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ProgInfo {
    pub prog_type: u32,
    pub id: u32,
    /// The kernel's digest of the instructions (map references zeroed), which is what
    /// "same program" means when deciding between adopting and replacing.
    pub tag: [u8; 8],
    /// The maps the program uses, sorted.
    pub map_ids: Vec<u32>,
}

pub(crate) fn prog_info(fd: BorrowedFd<'_>) -> io::Result<ProgInfo> {
    // More slots than the datapath has maps, so a count above it means "not ours".
    let mut ids = [0u32; 64];
    let mut info = RawProgInfo {
        nr_map_ids: ids.len() as u32,
        map_ids: ids.as_mut_ptr() as u64,
        ..Default::default()
    };
    obj_info(fd, &mut info)?;
    let n = (info.nr_map_ids as usize).min(ids.len());
    let mut map_ids = ids.get(..n).unwrap_or_default().to_vec();
    map_ids.sort_unstable();
    Ok(ProgInfo {
        prog_type: info.prog_type,
        id: info.id,
        tag: info.tag,
        map_ids,
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MapInfo {
    pub id: u32,
    pub shape: crate::layout::MapShape,
}

pub(crate) fn map_info(fd: BorrowedFd<'_>) -> io::Result<MapInfo> {
    let mut info = RawMapInfo::default();
    obj_info(fd, &mut info)?;
    Ok(MapInfo {
        id: info.id,
        shape: crate::layout::MapShape {
            map_type: info.map_type,
            key_size: info.key_size,
            value_size: info.value_size,
            max_entries: info.max_entries,
            flags: info.map_flags,
        },
    })
}

/// What the kernel says about a link. For TCX links `ifindex` is 0 once the device
/// is gone (the link is then defunct and only its pin keeps it around).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LinkInfo {
    pub link_type: u32,
    pub id: u32,
    pub prog_id: u32,
    pub ifindex: u32,
    pub attach_type: u32,
}

pub(crate) fn link_info(fd: BorrowedFd<'_>) -> io::Result<LinkInfo> {
    let mut info = RawLinkInfo::default();
    obj_info(fd, &mut info)?;
    Ok(LinkInfo {
        link_type: info.link_type,
        id: info.id,
        prog_id: info.prog_id,
        ifindex: info.tcx_ifindex,
        attach_type: info.tcx_attach_type,
    })
}

/// Attaches `prog` at the end of the TCX chain `attach_type` ([`BPF_TCX_INGRESS`] or
/// [`BPF_TCX_EGRESS`]) of `ifindex` (in the calling thread's network namespace). The link
/// detaches when its last reference goes, so callers pin it.
pub(crate) fn tcx_link_create(
    prog: BorrowedFd<'_>,
    ifindex: u32,
    attach_type: u32,
) -> io::Result<OwnedFd> {
    let mut attr = LinkCreateAttr {
        prog_fd: raw(prog),
        target_ifindex: ifindex,
        attach_type,
        ..Default::default()
    };
    bpf_fd(BPF_LINK_CREATE, &mut attr)
}

/// Swaps the program a link runs, atomically: packets see either the old or the new
/// program, never neither. With `expected_old`, fails with `EPERM` unless the link
/// still runs that program (so a stale updater cannot undo a newer update).
pub(crate) fn link_update(
    link: BorrowedFd<'_>,
    new_prog: BorrowedFd<'_>,
    expected_old: Option<BorrowedFd<'_>>,
) -> io::Result<()> {
    let mut attr = LinkUpdateAttr {
        link_fd: raw(link),
        new_prog_fd: raw(new_prog),
        ..Default::default()
    };
    if let Some(old) = expected_old {
        attr.flags = BPF_F_REPLACE;
        attr.old_prog_fd = raw(old);
    }
    bpf(BPF_LINK_UPDATE, &mut attr).map(|_| ())
}

/// Detaches a link from its hook now, even if other references (pins, fds) remain.
pub(crate) fn link_detach(link: BorrowedFd<'_>) -> io::Result<()> {
    let mut attr = LinkDetachAttr { link_fd: raw(link) };
    bpf(BPF_LINK_DETACH, &mut attr).map(|_| ())
}

/// Writes the first key of the map (`key` = `None`) or the one after `key` into `next`.
/// `Ok(false)` when there is none. A `key` that is no longer in a hash map restarts from
/// the first key (the kernel's rule), so iterate from keys known to be present.
pub(crate) fn map_next_key_raw(
    map: BorrowedFd<'_>,
    key: Option<&[u8]>,
    next: &mut [u8],
) -> io::Result<bool> {
    let mut attr = MapElemAttr {
        map_fd: raw(map),
        key: key.map_or(0, |k| k.as_ptr() as u64),
        value: next.as_mut_ptr() as u64,
        ..Default::default()
    };
    match bpf(BPF_MAP_GET_NEXT_KEY, &mut attr) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Reads the value of `key` into `value` (sized by the caller for the map, per-CPU maps
/// included). `Ok(false)` when the key is not there.
pub(crate) fn map_lookup_raw(
    map: BorrowedFd<'_>,
    key: &[u8],
    value: &mut [u8],
) -> io::Result<bool> {
    let mut attr = MapElemAttr {
        map_fd: raw(map),
        key: key.as_ptr() as u64,
        value: value.as_mut_ptr() as u64,
        ..Default::default()
    };
    match bpf(BPF_MAP_LOOKUP_ELEM, &mut attr) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

pub(crate) fn map_update_raw(
    map: BorrowedFd<'_>,
    key: &[u8],
    value: &[u8],
    flags: u64,
) -> io::Result<()> {
    let mut attr = MapElemAttr {
        map_fd: raw(map),
        key: key.as_ptr() as u64,
        value: value.as_ptr() as u64,
        flags,
        ..Default::default()
    };
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(|_| ())
}

/// `Ok(false)` when the key was not there.
pub(crate) fn map_delete_raw(map: BorrowedFd<'_>, key: &[u8]) -> io::Result<bool> {
    let mut attr = MapElemAttr {
        map_fd: raw(map),
        key: key.as_ptr() as u64,
        ..Default::default()
    };
    match bpf(BPF_MAP_DELETE_ELEM, &mut attr) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

pub(crate) fn map_update<K: aya::Pod, V: aya::Pod>(
    map: BorrowedFd<'_>,
    key: &K,
    value: &V,
    flags: u64,
) -> io::Result<()> {
    let mut attr = MapElemAttr {
        map_fd: raw(map),
        key: key as *const K as u64,
        value: value as *const V as u64,
        flags,
        ..Default::default()
    };
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(|_| ())
}

/// `Ok(None)` when the key is not there.
pub(crate) fn map_lookup<K: aya::Pod, V: aya::Pod + Default>(
    map: BorrowedFd<'_>,
    key: &K,
) -> io::Result<Option<V>> {
    let mut value = V::default();
    let mut attr = MapElemAttr {
        map_fd: raw(map),
        key: key as *const K as u64,
        value: &mut value as *mut V as u64,
        ..Default::default()
    };
    match bpf(BPF_MAP_LOOKUP_ELEM, &mut attr) {
        Ok(_) => Ok(Some(value)),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The first key (`key` = `None`) or the one after `key`; `Ok(None)` at the end. A `key`
/// no longer in a hash map restarts from the first key (the kernel's rule).
pub(crate) fn map_next_key<K: aya::Pod + Default>(
    map: BorrowedFd<'_>,
    key: Option<&K>,
) -> io::Result<Option<K>> {
    let mut next = K::default();
    let mut attr = MapElemAttr {
        map_fd: raw(map),
        key: key.map_or(0, |k| k as *const K as u64),
        value: &mut next as *mut K as u64,
        ..Default::default()
    };
    match bpf(BPF_MAP_GET_NEXT_KEY, &mut attr) {
        Ok(_) => Ok(Some(next)),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `BPF_EXIST`: update an element only if it is there.
pub(crate) const BPF_EXIST: u64 = 2;

/// `Ok(false)` when the key was not there.
pub(crate) fn map_delete<K: aya::Pod>(map: BorrowedFd<'_>, key: &K) -> io::Result<bool> {
    let mut attr = MapElemAttr {
        map_fd: raw(map),
        key: key as *const K as u64,
        ..Default::default()
    };
    match bpf(BPF_MAP_DELETE_ELEM, &mut attr) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}
