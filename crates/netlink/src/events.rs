//! Link notifications: waiting for the kernel to announce that a link is gone.
//!
//! Deleting a link returns only after the kernel has finished unregistering it, which
//! includes waiting for every pending RCU callback in the system (tens of milliseconds on a
//! busy machine). The link is unlisted, and its addresses, routes and neighbours are gone,
//! long before that, and the kernel announces that moment to RTNLGRP_LINK listeners. A
//! caller that only needs the link gone can wait for that announcement instead.

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

use crate::error::{Error, Result};

const RTMGRP_LINK: u32 = 1;
const RTM_DELLINK: u16 = 17;
const NLMSG_HDRLEN: usize = 16;
/// Offset of `ifi_index` in `struct ifinfomsg` (family, pad, type come first).
const IFI_INDEX_OFFSET: usize = 4;

/// A socket subscribed to link notifications in the calling thread's network namespace.
/// Subscribe before acting on a link, so its announcement cannot be missed.
#[derive(Debug)]
pub struct LinkEvents {
    socket: Socket,
    buf: Vec<u8>,
}

impl LinkEvents {
    pub fn subscribe() -> Result<LinkEvents> {
        let io = |source| Error::Io {
            context: "subscribe to link notifications".into(),
            source,
        };
        let mut socket = Socket::new(NETLINK_ROUTE).map_err(io)?;
        socket.bind(&SocketAddr::new(0, RTMGRP_LINK)).map_err(io)?;
        Ok(LinkEvents {
            socket,
            buf: vec![0; 64 * 1024],
        })
    }

    /// Waits until the kernel announces the removal of link `index`. `Ok(false)` when the
    /// timeout passes first, or when notifications were lost (the socket overflowed): the
    /// caller must then look at the link itself.
    pub fn wait_removed(&mut self, index: u32, timeout: Duration) -> Result<bool> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            let mut fds = libc::pollfd {
                fd: self.socket.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let millis = left.as_millis().clamp(1, i32::MAX as u128) as i32;
            // SAFETY: one valid pollfd for the duration of the call.
            let ready = unsafe { libc::poll(&mut fds, 1, millis) };
            if ready < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(Error::Io {
                    context: "wait for link notifications".into(),
                    source: e,
                });
            }
            if ready == 0 {
                return Ok(false);
            }
            let n = match self.socket.recv(&mut &mut self.buf[..], 0) {
                Ok(n) => n,
                // ENOBUFS: the kernel dropped notifications; the caller checks directly.
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => return Ok(false),
                Err(e) => {
                    return Err(Error::Io {
                        context: "read link notifications".into(),
                        source: e,
                    })
                }
            };
            if removal_announced(&self.buf[..n], index) {
                return Ok(true);
            }
        }
    }
}

/// True when the datagram holds an RTM_DELLINK for `index`.
fn removal_announced(mut datagram: &[u8], index: u32) -> bool {
    while datagram.len() >= NLMSG_HDRLEN {
        let len = u32::from_ne_bytes([datagram[0], datagram[1], datagram[2], datagram[3]]) as usize;
        let kind = u16::from_ne_bytes([datagram[4], datagram[5]]);
        if len < NLMSG_HDRLEN || len > datagram.len() {
            return false;
        }
        let at = NLMSG_HDRLEN + IFI_INDEX_OFFSET;
        if kind == RTM_DELLINK && len >= at + 4 {
            let ifi = i32::from_ne_bytes([
                datagram[at],
                datagram[at + 1],
                datagram[at + 2],
                datagram[at + 3],
            ]);
            if ifi >= 0 && ifi as u32 == index {
                return true;
            }
        }
        datagram = &datagram[crate::bytes::align4(len).min(datagram.len())..];
    }
    false
}

#[cfg(test)]
mod tests {
    use super::removal_announced;

    fn message(kind: u16, index: i32) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&32u32.to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(&[0, 0, 1, 0]);
        m.extend_from_slice(&index.to_ne_bytes());
        m.extend_from_slice(&[0; 8]);
        m
    }

    #[test]
    fn finds_the_removal_of_the_right_link_only() {
        let mut datagram = message(16, 7);
        datagram.extend(message(17, 8));
        assert!(removal_announced(&datagram, 8));
        assert!(!removal_announced(&datagram, 7));
        assert!(!removal_announced(&[1, 2, 3], 8));
        assert!(!removal_announced(&message(17, 8)[..20], 8));
    }
}
