//! Network namespaces as open file descriptors, and a guard that moves the calling
//! thread into one and back.
//!
//! A namespace is held by fd, not by path: the fd keeps it alive and is what the
//! kernel wants for `IFLA_NET_NS_FD` and `setns`. Only the *calling thread* changes
//! namespace (network namespaces are per thread), so other threads are unaffected.

use crate::error::{Error, Result};
use nix::sched::{setns, CloneFlags};
use std::fs::File;
use std::io;
use std::marker::PhantomData;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

/// `NS_GET_NSTYPE` from linux/nsfs.h: `_IO(0xb7, 0x3)`.
const NS_GET_NSTYPE: libc::c_ulong = 0xb703;

/// The calling thread's own namespace. `/proc/self` would name the main thread's,
/// which differs while another thread holds a [`NetnsGuard`].
const THREAD_NETNS: &str = "/proc/thread-self/ns/net";

/// An open network namespace.
#[derive(Debug)]
pub struct Netns {
    fd: OwnedFd,
    path: PathBuf,
}

impl Netns {
    /// Opens the namespace at `path` (`/var/run/netns/<name>`, `/proc/<pid>/ns/net`, a
    /// CNI_NETNS path). A missing path is [`Error::NetnsNotFound`]; a file that is not a
    /// network namespace is [`Error::InvalidInput`].
    pub fn open(path: impl AsRef<Path>) -> Result<Netns> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|source| {
            if source.kind() == io::ErrorKind::NotFound {
                Error::NetnsNotFound {
                    path: path.to_path_buf(),
                }
            } else {
                Error::Io {
                    context: format!("open network namespace {}", path.display()),
                    source,
                }
            }
        })?;
        let ns = Netns {
            fd: OwnedFd::from(file),
            path: path.to_path_buf(),
        };
        ns.check_is_network_namespace()?;
        Ok(ns)
    }

    /// The calling thread's current network namespace.
    pub fn current() -> Result<Netns> {
        Netns::open(THREAD_NETNS)
    }

    /// The path this namespace was opened from (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Moves the calling thread into this namespace until the guard is dropped.
    pub fn enter(&self) -> Result<NetnsGuard> {
        NetnsGuard::enter(self)
    }

    /// Whether both handles refer to the same namespace (same nsfs inode).
    pub fn is_same(&self, other: &Netns) -> Result<bool> {
        Ok(self.identity()? == other.identity()?)
    }

    fn identity(&self) -> Result<(u64, u64)> {
        let stat = nix::sys::stat::fstat(&self.fd).map_err(|errno| Error::Io {
            context: format!("stat network namespace {}", self.path.display()),
            source: errno.into(),
        })?;
        Ok((stat.st_dev, stat.st_ino))
    }

    fn check_is_network_namespace(&self) -> Result<()> {
        // SAFETY: NS_GET_NSTYPE takes no argument and only reads the fd we own.
        let kind = unsafe { libc::ioctl(self.fd.as_raw_fd(), NS_GET_NSTYPE) };
        if kind == libc::CLONE_NEWNET {
            return Ok(());
        }
        Err(Error::invalid(
            format!("open network namespace {}", self.path.display()),
            "not a network namespace",
        ))
    }
}

impl AsFd for Netns {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Keeps the calling thread inside a network namespace; dropping it returns the thread
/// to the namespace it was in before. Not `Send`: it must be dropped on the thread that
/// entered.
#[derive(Debug)]
pub struct NetnsGuard {
    previous: Option<Netns>,
    _same_thread: PhantomData<*const ()>,
}

impl NetnsGuard {
    /// Moves the calling thread into `target`, remembering where it was.
    pub fn enter(target: &Netns) -> Result<NetnsGuard> {
        let previous = Netns::current()?;
        switch_thread_to(target)?;
        Ok(NetnsGuard {
            previous: Some(previous),
            _same_thread: PhantomData,
        })
    }

    /// Returns to the previous namespace now, reporting a failure instead of panicking.
    pub fn restore(mut self) -> Result<()> {
        match self.previous.take() {
            Some(previous) => switch_thread_to(&previous),
            None => Ok(()),
        }
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        if let Some(previous) = self.previous.take() {
            // A thread silently left in a pod's namespace would configure the wrong
            // namespace from then on; stopping is the only safe answer. setns back to a
            // namespace we hold an fd of does not fail in practice.
            if let Err(err) = switch_thread_to(&previous) {
                panic!("cannot return the thread to its network namespace: {err}");
            }
        }
    }
}

fn switch_thread_to(target: &Netns) -> Result<()> {
    setns(target.as_fd(), CloneFlags::CLONE_NEWNET).map_err(|errno| Error::Io {
        context: format!("enter network namespace {}", target.path.display()),
        source: errno.into(),
    })
}
