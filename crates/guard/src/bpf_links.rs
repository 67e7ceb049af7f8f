//! BPF programs attached to netfilter hooks (BPF_LINK_TYPE_NETFILTER, Linux 6.4+).
//!
//! Such a program on LOCAL_OUT with a priority at or before the fence's runs first and
//! nftables cannot see it. The kernel does not say which network namespace a link belongs
//! to, so every such link on the node counts against every fence (fail closed).

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

// bpf(2) commands and the link type, from linux/bpf.h.
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
const BPF_LINK_GET_FD_BY_ID: libc::c_long = 30;
const BPF_LINK_GET_NEXT_ID: libc::c_long = 31;
const BPF_LINK_TYPE_NETFILTER: u32 = 10;

/// NF_INET_LOCAL_OUT.
pub const HOOK_LOCAL_OUT: u32 = 3;

/// Bytes of `struct bpf_link_info` we hand the kernel: larger than any version of the
/// struct, zero-filled (the kernel accepts a larger buffer whose tail is zero).
const LINK_INFO_LEN: usize = 256;
// Offsets in struct bpf_link_info: type, id, prog_id, then the union, which is 8-byte
// aligned; its netfilter member is { pf, hooknum, priority, flags }.
const OFF_TYPE: usize = 0;
const OFF_ID: usize = 4;
const OFF_PROG_ID: usize = 8;
const OFF_NF_PF: usize = 16;
const OFF_NF_HOOKNUM: usize = 20;
const OFF_NF_PRIORITY: usize = 24;

/// One netfilter BPF link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetfilterLink {
    pub id: u32,
    pub prog_id: u32,
    /// NFPROTO_* (2 IPv4, 10 IPv6).
    pub pf: u32,
    pub hooknum: u32,
    pub priority: i32,
}

impl std::fmt::Display for NetfilterLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let family = match self.pf {
            2 => "ipv4".to_string(),
            10 => "ipv6".to_string(),
            n => format!("pf {n}"),
        };
        write!(
            f,
            "BPF netfilter link {} (program {}) on {family} hook {} priority {}",
            self.id, self.prog_id, self.hooknum, self.priority
        )
    }
}

/// Every netfilter BPF link on the node.
pub fn netfilter_links() -> io::Result<Vec<NetfilterLink>> {
    let mut links = Vec::new();
    let mut id = 0u32;
    while let Some(next) = next_link_id(id)? {
        id = next;
        let fd = match link_fd(id) {
            Ok(fd) => fd,
            // Gone between the two calls.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
            Err(e) => return Err(e),
        };
        let info = link_info(&fd)?;
        if read_u32(&info, OFF_TYPE) == BPF_LINK_TYPE_NETFILTER {
            links.push(NetfilterLink {
                id: read_u32(&info, OFF_ID),
                prog_id: read_u32(&info, OFF_PROG_ID),
                pf: read_u32(&info, OFF_NF_PF),
                hooknum: read_u32(&info, OFF_NF_HOOKNUM),
                priority: read_u32(&info, OFF_NF_PRIORITY) as i32,
            });
        }
    }
    Ok(links)
}

/// The links that run on LOCAL_OUT no later than `priority`.
pub fn ahead_of_output(links: &[NetfilterLink], priority: i32) -> Vec<NetfilterLink> {
    links
        .iter()
        .filter(|l| l.hooknum == HOOK_LOCAL_OUT && l.priority <= priority)
        .copied()
        .collect()
}

fn read_u32(buf: &[u8; LINK_INFO_LEN], offset: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&buf[offset..offset + 4]);
    u32::from_ne_bytes(word)
}

fn bpf(cmd: libc::c_long, attr: &mut [u8]) -> io::Result<libc::c_long> {
    // SAFETY: attr is a valid, writable buffer of the length passed; the kernel reads at
    // most that many bytes of it and writes only fields inside it.
    let rc = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), attr.len()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc)
}

fn next_link_id(start: u32) -> io::Result<Option<u32>> {
    // { start_id, next_id, open_flags }
    let mut attr = [0u8; 12];
    attr[0..4].copy_from_slice(&start.to_ne_bytes());
    match bpf(BPF_LINK_GET_NEXT_ID, &mut attr) {
        Ok(_) => {
            let mut next = [0u8; 4];
            next.copy_from_slice(&attr[4..8]);
            Ok(Some(u32::from_ne_bytes(next)))
        }
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

fn link_fd(id: u32) -> io::Result<OwnedFd> {
    // { link_id, next_id (unused), open_flags }
    let mut attr = [0u8; 12];
    attr[0..4].copy_from_slice(&id.to_ne_bytes());
    let fd = bpf(BPF_LINK_GET_FD_BY_ID, &mut attr)?;
    let fd = RawFd::try_from(fd).map_err(|_| io::Error::other("fd out of range"))?;
    // SAFETY: the kernel just returned this new fd to us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn link_info(fd: &OwnedFd) -> io::Result<[u8; LINK_INFO_LEN]> {
    use std::os::fd::AsRawFd;
    let mut info = [0u8; LINK_INFO_LEN];
    // { bpf_fd: u32, info_len: u32, info: u64 pointer }
    let mut attr = [0u8; 16];
    attr[0..4].copy_from_slice(&(fd.as_raw_fd() as u32).to_ne_bytes());
    attr[4..8].copy_from_slice(&(LINK_INFO_LEN as u32).to_ne_bytes());
    attr[8..16].copy_from_slice(&(info.as_mut_ptr() as u64).to_ne_bytes());
    bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr)?;
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_links_ahead_of_the_fence() {
        let link = |hooknum, priority| NetfilterLink {
            id: 1,
            prog_id: 2,
            pf: 2,
            hooknum,
            priority,
        };
        let links = [link(3, -300), link(3, -190), link(3, -100), link(1, -300)];
        let ahead = ahead_of_output(&links, -190);
        assert_eq!(ahead, vec![link(3, -300), link(3, -190)]);
        assert_eq!(
            ahead[0].to_string(),
            "BPF netfilter link 1 (program 2) on ipv4 hook 3 priority -300"
        );
    }
}
