//! The pod's network namespace, held open by fd for the whole command.
//!
//! The calling thread enters it by that fd ([`PodNetns::enter`]; network namespaces are
//! per thread), so the path is resolved once: a path reused for another namespace halfway
//! through cannot redirect part of the work. The namespace is
//! identified by its nsfs inode (`dev`, `ino`) and by its cookie, which the kernel never
//! reuses (inode numbers can be reused once a namespace is freed).

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use weft_nft::NftSocket;

use crate::error::GuardError;

/// `NS_GET_NSTYPE` from linux/nsfs.h: `_IO(0xb7, 0x3)`.
const NS_GET_NSTYPE: libc::c_ulong = 0xb703;
/// `SO_NETNS_COOKIE` (asm-generic/socket.h; the same on x86_64 and arm64). Linux 5.14+.
const SO_NETNS_COOKIE: libc::c_int = 71;

/// Which namespace a path referred to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetnsId {
    pub dev: u64,
    pub ino: u64,
    /// The namespace cookie; never reused while the system runs.
    pub cookie: u64,
}

/// An open network namespace.
#[derive(Debug)]
pub struct PodNetns {
    file: File,
    path: PathBuf,
}

impl PodNetns {
    /// Opens the namespace at `path`; a file that is not a network namespace is refused.
    pub fn open(path: &Path) -> Result<PodNetns, GuardError> {
        Self::open_if_exists(path)?
            .ok_or_else(|| GuardError::netns(path.display().to_string(), "does not exist"))
    }

    /// Like [`PodNetns::open`], but `None` when nothing is at `path` any more.
    pub fn open_if_exists(path: &Path) -> Result<Option<PodNetns>, GuardError> {
        let shown = path.display().to_string();
        let file = match File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(GuardError::netns(shown, e)),
        };
        // SAFETY: NS_GET_NSTYPE takes no argument and only inspects the fd we own.
        let kind = unsafe { libc::ioctl(file.as_raw_fd(), NS_GET_NSTYPE) };
        if kind != libc::CLONE_NEWNET {
            return Err(GuardError::netns(shown, "is not a network namespace"));
        }
        Ok(Some(PodNetns {
            file,
            path: path.to_path_buf(),
        }))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Moves the calling thread into this namespace until the returned guard is dropped.
    /// Threads spawned meanwhile start inside it too. Everything the plugin does in a pod
    /// runs this way on the main thread: no thread hop per netlink socket (each one costs
    /// a wake-up on a busy node).
    pub fn enter(&self) -> Result<Entered<'_>, GuardError> {
        let shown = self.path.display().to_string();
        let previous = File::open(THREAD_NETNS).map_err(|e| {
            GuardError::netns(
                THREAD_NETNS,
                format!("cannot remember the current namespace: {e}"),
            )
        })?;
        nix::sched::setns(self.file.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET)
            .map_err(|e| GuardError::netns(shown, format!("setns: {e}")))?;
        Ok(Entered {
            pod: self,
            previous,
        })
    }
}

/// The calling thread's own namespace (`/proc/self` would name the main thread's).
const THREAD_NETNS: &str = "/proc/thread-self/ns/net";

/// The calling thread is inside a pod's namespace until this is dropped.
#[derive(Debug)]
pub struct Entered<'a> {
    pod: &'a PodNetns,
    previous: File,
}

impl Entered<'_> {
    pub fn path(&self) -> &Path {
        self.pod.path()
    }

    /// An nftables socket bound to the pod's namespace (for the rest of its life).
    pub fn nft_socket(&self) -> Result<NftSocket, GuardError> {
        NftSocket::open().map_err(|e| {
            GuardError::nft(format!("open nftables in {}", self.pod.path.display()), e)
        })
    }

    /// The namespace's identity, using a socket opened inside it for the cookie.
    pub fn identity(&self, sock: &NftSocket) -> Result<NetnsId, GuardError> {
        let shown = self.pod.path.display().to_string();
        let stat = nix::sys::stat::fstat(self.pod.file.as_fd())
            .map_err(|e| GuardError::netns(shown.clone(), format!("fstat: {e}")))?;
        let cookie = netns_cookie(sock).map_err(|e| {
            GuardError::netns(shown, format!("SO_NETNS_COOKIE (needs Linux 5.14+): {e}"))
        })?;
        Ok(NetnsId {
            dev: stat.st_dev,
            ino: stat.st_ino,
            cookie,
        })
    }
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        // Nothing the plugin does after leaving depends on the thread's namespace: API
        // lookups happen before entering, and the next namespace of a GC is entered by its
        // own fd. So a failure to go back cannot make later work land in this pod.
        let _ = nix::sched::setns(self.previous.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET);
    }
}

/// The cookie of the namespace a socket lives in.
fn netns_cookie(sock: &impl AsFd) -> io::Result<u64> {
    let mut cookie: u64 = 0;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `cookie`, which is that large.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            SO_NETNS_COOKIE,
            (&mut cookie as *mut u64).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if len as usize != std::mem::size_of::<u64>() {
        return Err(io::Error::other(format!("cookie of {len} bytes")));
    }
    Ok(cookie)
}
