//! The NETLINK_NETFILTER socket and its request/reply plumbing.

use crate::error::Error;
use crate::wire::attr::AttrWriter;
use crate::wire::consts::*;
use crate::wire::message::{nft_type, parse_replies, Header, MessageBuilder, ReplyBody};
use netlink_sys::{protocols::NETLINK_NETFILTER, Socket};
use nix::sys::socket::{setsockopt, sockopt};
use nix::sys::time::TimeVal;
use std::cell::Cell;
use std::io;
use std::path::Path;

/// Replies never exceed this: the kernel sizes dump datagrams after the largest
/// buffer we have read with, capped well below it.
const RECV_BUF: usize = 64 * 1024;

/// How long to wait for the kernel before calling a request lost. The kernel answers
/// synchronously, so this only guards against a reply that never comes.
const REPLY_TIMEOUT_SECS: i64 = 10;

/// Dumps interrupted by a concurrent ruleset change are retried this many times.
const DUMP_ATTEMPTS: u32 = 10;

/// One object of a dump: the family from its nfgenmsg, and its attributes.
pub(crate) type Dumped = (u8, Vec<u8>);

/// An nfnetlink socket bound to the network namespace it was opened in, for good:
/// moving threads between namespaces later does not move the socket.
///
/// Not `Sync`: replies are matched to requests by sequence number on one socket, so
/// requests must not interleave.
pub struct NftSocket {
    sock: Socket,
    seq: Cell<u32>,
    /// Buffer sizes this socket has been given (0: the kernel's default).
    sndbuf: Cell<usize>,
    rcvbuf: Cell<usize>,
}

impl NftSocket {
    /// Opens a socket in the calling thread's current network namespace.
    pub fn open() -> Result<NftSocket, Error> {
        let mut sock = Socket::new(NETLINK_NETFILTER).map_err(Error::Open)?;
        sock.bind_auto().map_err(Error::Open)?;
        // Error replies then carry only the header of the refused message, not all of
        // it: big batches cannot overflow the receive buffer with echoes.
        sock.set_cap_ack(true).map_err(Error::Open)?;
        setsockopt(
            &sock,
            sockopt::ReceiveTimeout,
            &TimeVal::new(REPLY_TIMEOUT_SECS, 0),
        )
        .map_err(|e| Error::Open(e.into()))?;
        Ok(NftSocket {
            sock,
            seq: Cell::new(1),
            sndbuf: Cell::new(0),
            rcvbuf: Cell::new(0),
        })
    }

    /// Opens a socket in the network namespace at `path` (e.g. `/var/run/netns/x` or
    /// `/proc/<pid>/ns/net`). A short-lived thread enters the namespace, so the
    /// calling thread's namespace never changes.
    pub fn open_in_netns(path: &Path) -> Result<NftSocket, Error> {
        let owned = path.to_path_buf();
        let enter = move || -> Result<NftSocket, Error> {
            let enter_err = |source: io::Error| Error::EnterNetns {
                path: owned.clone(),
                source,
            };
            let file = std::fs::File::open(&owned).map_err(enter_err)?;
            nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(|e| enter_err(e.into()))?;
            NftSocket::open()
        };
        std::thread::spawn(enter).join().unwrap_or_else(|_| {
            Err(Error::EnterNetns {
                path: path.to_path_buf(),
                source: io::Error::other("namespace thread panicked"),
            })
        })
    }

    pub(crate) fn next_seq(&self) -> u32 {
        let seq = self.seq.get();
        self.seq.set(seq.wrapping_add(1).max(1));
        seq
    }

    pub(crate) fn send(&self, what: &str, bytes: &[u8]) -> Result<(), Error> {
        let io_err = |source| Error::Io {
            what: what.to_string(),
            source,
        };
        let sent = self.sock.send(bytes, 0).map_err(io_err)?;
        if sent != bytes.len() {
            return Err(io_err(io::Error::other(format!(
                "sent {sent} of {} bytes",
                bytes.len()
            ))));
        }
        Ok(())
    }

    /// Reads one datagram into `buf` (replacing its contents).
    pub(crate) fn recv(&self, what: &str, buf: &mut Vec<u8>) -> Result<(), Error> {
        buf.clear();
        buf.reserve(RECV_BUF);
        let io_err = |source| Error::Io {
            what: what.to_string(),
            source,
        };
        // MSG_TRUNC makes the kernel report the datagram's real length.
        let len = self.sock.recv(buf, libc::MSG_TRUNC).map_err(io_err)?;
        if len > buf.len() {
            return Err(io_err(io::Error::other(format!(
                "reply of {len} bytes truncated to {}",
                buf.len()
            ))));
        }
        Ok(())
    }

    /// Makes room to send a `send` byte batch in one datagram (netlink refuses one
    /// larger than the send buffer) and to queue `recv` bytes of acknowledgements
    /// (the kernel drops what does not fit). Forcing the sizes needs CAP_NET_ADMIN,
    /// which changing nftables needs anyway; without it the capped options are tried.
    pub(crate) fn ensure_buffers(&self, send: usize, recv: usize) -> Result<(), Error> {
        let sized = |e: nix::errno::Errno| Error::Io {
            what: "size the socket buffers".into(),
            source: e.into(),
        };
        if send > self.sndbuf.get() {
            setsockopt(&self.sock, sockopt::SndBufForce, &send)
                .or_else(|_| setsockopt(&self.sock, sockopt::SndBuf, &send))
                .map_err(sized)?;
            self.sndbuf.set(send);
        }
        if recv > self.rcvbuf.get() {
            setsockopt(&self.sock, sockopt::RcvBufForce, &recv)
                .or_else(|_| setsockopt(&self.sock, sockopt::RcvBuf, &recv))
                .map_err(sized)?;
            self.rcvbuf.set(recv);
        }
        Ok(())
    }

    /// Builds one request message.
    pub(crate) fn message(
        what: &str,
        header: Header,
        fill: impl FnOnce(&mut AttrWriter<'_>),
    ) -> Result<Vec<u8>, Error> {
        let mut m = MessageBuilder::new(header);
        fill(&mut m.attrs());
        m.finish().ok_or_else(|| Error::Invalid {
            what: what.to_string(),
            reason: "message too large for netlink".into(),
        })
    }

    /// Runs an nf_tables dump (`NLM_F_DUMP`) and returns the (family, attributes) of
    /// every `reply_msg` message. A dump the kernel flags as interrupted by a
    /// concurrent change (NLM_F_DUMP_INTR) is run again.
    pub(crate) fn dump(
        &self,
        what: &str,
        request_msg: u16,
        reply_msg: u16,
        family: u8,
        fill: impl Fn(&mut AttrWriter<'_>),
    ) -> Result<Vec<Dumped>, Error> {
        for _ in 0..DUMP_ATTEMPTS {
            let seq = self.next_seq();
            let header = Header {
                ty: nft_type(request_msg),
                flags: NLM_F_REQUEST | NLM_F_DUMP,
                seq,
                family,
                res_id: 0,
            };
            let request = Self::message(what, header, &fill)?;
            self.send(what, &request)?;
            if let Some(items) = self.collect_dump(what, seq, nft_type(reply_msg))? {
                return Ok(items);
            }
        }
        Err(Error::Unstable {
            what: what.to_string(),
            attempts: DUMP_ATTEMPTS,
        })
    }

    /// Reads a dump to its end; `None` when it was interrupted.
    fn collect_dump(
        &self,
        what: &str,
        seq: u32,
        reply_type: u16,
    ) -> Result<Option<Vec<Dumped>>, Error> {
        let mut buf = Vec::with_capacity(RECV_BUF);
        let mut items = Vec::new();
        let mut interrupted = false;
        loop {
            self.recv(what, &mut buf)?;
            let replies = parse_replies(&buf).map_err(|e| Error::Malformed {
                what: what.to_string(),
                reason: e.0,
            })?;
            for reply in replies {
                // Replies to an earlier request that timed out are not ours.
                if reply.seq != seq {
                    continue;
                }
                interrupted |= reply.flags & NLM_F_DUMP_INTR != 0;
                match reply.body {
                    ReplyBody::Data { family, attrs } if reply.ty == reply_type => {
                        items.push((family, attrs.to_vec()));
                    }
                    ReplyBody::Data { .. } => {}
                    ReplyBody::Ack { errno } | ReplyBody::Done { errno } if errno != 0 => {
                        return Err(Error::Kernel {
                            what: what.to_string(),
                            errno,
                        });
                    }
                    ReplyBody::Done { .. } => return Ok((!interrupted).then_some(items)),
                    ReplyBody::Ack { .. } => {}
                }
            }
        }
    }

    /// A request with a single reply message (not a dump); returns its attributes.
    pub(crate) fn query(
        &self,
        what: &str,
        request_msg: u16,
        reply_msg: u16,
    ) -> Result<Vec<u8>, Error> {
        let seq = self.next_seq();
        let header = Header {
            ty: nft_type(request_msg),
            flags: NLM_F_REQUEST,
            seq,
            family: 0,
            res_id: 0,
        };
        let request = Self::message(what, header, |_| {})?;
        self.send(what, &request)?;
        let mut buf = Vec::with_capacity(RECV_BUF);
        loop {
            self.recv(what, &mut buf)?;
            let replies = parse_replies(&buf).map_err(|e| Error::Malformed {
                what: what.to_string(),
                reason: e.0,
            })?;
            for reply in replies.into_iter().filter(|r| r.seq == seq) {
                match reply.body {
                    ReplyBody::Data { attrs, .. } if reply.ty == nft_type(reply_msg) => {
                        return Ok(attrs.to_vec());
                    }
                    ReplyBody::Data { .. } => {}
                    ReplyBody::Ack { errno } | ReplyBody::Done { errno } if errno != 0 => {
                        return Err(Error::Kernel {
                            what: what.to_string(),
                            errno,
                        });
                    }
                    ReplyBody::Ack { .. } | ReplyBody::Done { .. } => {
                        return Err(Error::Malformed {
                            what: what.to_string(),
                            reason: "acknowledged without an answer".into(),
                        });
                    }
                }
            }
        }
    }
}

impl std::os::fd::AsFd for NftSocket {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.sock.as_fd()
    }
}
