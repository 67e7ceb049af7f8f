//! The rtnetlink socket and its request/reply loop.
//!
//! One request is in flight at a time. Each request gets a fresh sequence number and
//! replies carrying another one (the rest of a dump abandoned after an error) are
//! skipped, so the handle stays usable after any failure. Replies are read with a
//! size peek first, so no datagram is ever truncated whatever its size.

use crate::bytes::align4;
use crate::error::{Error, Result};
use crate::netns::Netns;
use crate::reply;
use netlink_packet_core::{
    NetlinkBuffer, NetlinkHeader, NetlinkMessage, NetlinkPayload, NLMSG_DONE, NLMSG_ERROR,
    NLMSG_NOOP, NLMSG_OVERRUN, NLM_F_ACK, NLM_F_DUMP, NLM_F_DUMP_INTR, NLM_F_REQUEST,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use std::io;

/// How often a dump is restarted when the kernel flags it as interrupted by a
/// concurrent change before giving up.
const DUMP_ATTEMPTS: u32 = 5;
/// Large enough for the kernel's biggest dump datagrams (32 KiB), so dumps need few
/// reads; bigger single messages grow it on demand.
const RECV_BUFFER: usize = 32 * 1024;

/// A synchronous rtnetlink socket bound to one network namespace.
///
/// Every single-object operation is exactly one request and one reply: no operation
/// dumps behind the caller's back. Reuse one handle per namespace.
#[derive(Debug)]
pub struct Handle {
    socket: Socket,
    seq: u32,
    send_buf: Vec<u8>,
    recv_buf: Vec<u8>,
    requests: u64,
}

/// What ends the reply to a request.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// An `NLMSG_ERROR` with code 0 (messages before it, such as an echo, go to the sink).
    Ack,
    /// The first message (a non-dump GET), or an error.
    Single,
    /// `NLMSG_DONE`.
    Dump,
}

/// A failure before the operation's context is attached.
enum Failure {
    Kernel {
        errno: i32,
        message: Option<String>,
    },
    Io {
        what: &'static str,
        source: io::Error,
    },
    Decode(String),
}

impl Failure {
    fn into_error(self, context: String) -> Error {
        match self {
            Failure::Kernel { errno, message } => Error::from_kernel(errno, message, context),
            Failure::Io { what, source } => Error::Io {
                context: format!("{context}: {what}"),
                source,
            },
            Failure::Decode(detail) => Error::Decode { context, detail },
        }
    }
}

impl Handle {
    /// A socket in the calling thread's current network namespace.
    pub fn new() -> Result<Handle> {
        let io_error = |source| Error::Io {
            context: "open rtnetlink socket".into(),
            source,
        };
        let mut socket = Socket::new(NETLINK_ROUTE).map_err(io_error)?;
        socket.bind(&SocketAddr::new(0, 0)).map_err(io_error)?;
        socket.connect(&SocketAddr::new(0, 0)).map_err(io_error)?;
        // Errors come back with the kernel's explanation, without the echoed request.
        socket.set_ext_ack(true).map_err(io_error)?;
        socket.set_cap_ack(true).map_err(io_error)?;
        // Lets the kernel filter dumps by interface/table instead of sending everything.
        socket.set_netlink_get_strict_chk(true).map_err(io_error)?;
        Ok(Handle {
            socket,
            seq: 0,
            send_buf: Vec::with_capacity(512),
            recv_buf: vec![0; RECV_BUFFER],
            requests: 0,
        })
    }

    /// A socket in `netns`. The thread enters the namespace only while the socket is
    /// created; the socket stays bound to that namespace for its whole life.
    pub fn new_in(netns: &Netns) -> Result<Handle> {
        let guard = netns.enter()?;
        let handle = Handle::new();
        guard.restore()?;
        handle
    }

    /// How many requests this handle has sent (each one a round trip to the kernel).
    pub fn requests_sent(&self) -> u64 {
        self.requests
    }

    /// Sends a request that changes state and waits for the kernel's ack. `context`
    /// names the operation in an error; it runs only on failure and may query the
    /// kernel (to name an interface), so success costs nothing for it.
    pub(crate) fn ack(
        &mut self,
        message: RouteNetlinkMessage,
        flags: u16,
        context: impl FnOnce(&mut Handle) -> String,
    ) -> Result<()> {
        self.encode(message, NLM_F_ACK | flags);
        match self.exchange(Expect::Ack, &mut |_| Ok(())) {
            Ok(_) => Ok(()),
            Err(failure) => Err(failure.into_error(context(self))),
        }
    }

    /// Like [`Handle::ack`], returning the first message the kernel sends back before
    /// the ack (the object itself, when the request carries `NLM_F_ECHO`).
    pub(crate) fn ack_with_echo(
        &mut self,
        message: RouteNetlinkMessage,
        flags: u16,
        context: impl FnOnce(&mut Handle) -> String,
    ) -> Result<Option<RouteNetlinkMessage>> {
        self.encode(message, NLM_F_ACK | flags);
        let mut echo = None;
        let outcome = self.exchange(Expect::Ack, &mut |m| {
            if echo.is_none() {
                echo = decode(m)?;
            }
            Ok(())
        });
        match outcome {
            Ok(_) => Ok(echo),
            Err(failure) => Err(failure.into_error(context(self))),
        }
    }

    /// Sends a non-dump GET and returns the one object in the reply.
    pub(crate) fn get(
        &mut self,
        message: RouteNetlinkMessage,
        context: impl FnOnce(&mut Handle) -> String,
    ) -> Result<RouteNetlinkMessage> {
        self.encode(message, 0);
        let mut reply = None;
        let outcome = self.exchange(Expect::Single, &mut |m| {
            reply = decode(m)?;
            Ok(())
        });
        match (outcome, reply) {
            (Ok(_), Some(reply)) => Ok(reply),
            (Ok(_), None) => {
                Err(Failure::Decode("no object in the reply".into()).into_error(context(self)))
            }
            (Err(failure), _) => Err(failure.into_error(context(self))),
        }
    }

    /// Dumps objects, keeping those `keep` maps to `Some`. A dump the kernel flags as
    /// interrupted by a concurrent change is restarted, so the result is one
    /// consistent snapshot.
    pub(crate) fn dump<T>(
        &mut self,
        message: RouteNetlinkMessage,
        context: impl FnOnce(&mut Handle) -> String,
        mut keep: impl FnMut(RouteNetlinkMessage) -> Option<T>,
    ) -> Result<Vec<T>> {
        self.dump_messages(message, context, |bytes| {
            Ok(decode(bytes)?.and_then(&mut keep))
        })
    }

    /// Like [`Handle::dump`], but hands `keep` each reply undecoded: its message type
    /// and the bytes after the netlink header. For objects whose attributes this
    /// crate's message types cannot always decode (tc filters of any kind), so one
    /// foreign object never fails the whole dump.
    pub(crate) fn dump_raw<T>(
        &mut self,
        message: RouteNetlinkMessage,
        context: impl FnOnce(&mut Handle) -> String,
        mut keep: impl FnMut(u16, &[u8]) -> Option<T>,
    ) -> Result<Vec<T>> {
        self.dump_messages(message, context, |bytes| {
            let buffer =
                NetlinkBuffer::new_checked(bytes).map_err(|e| Failure::Decode(e.to_string()))?;
            Ok(keep(buffer.message_type(), buffer.payload()))
        })
    }

    /// The dump loop behind both: `keep` maps each object message (netlink header
    /// included) to what the caller keeps of it.
    fn dump_messages<T, K>(
        &mut self,
        message: RouteNetlinkMessage,
        context: impl FnOnce(&mut Handle) -> String,
        mut keep: K,
    ) -> Result<Vec<T>>
    where
        K: FnMut(&[u8]) -> Result<Option<T>, Failure>,
    {
        self.encode(message, NLM_F_DUMP);
        let mut kept = Vec::new();
        for _ in 0..DUMP_ATTEMPTS {
            kept.clear();
            let outcome = self.exchange(Expect::Dump, &mut |m| {
                kept.extend(keep(m)?);
                Ok(())
            });
            match outcome {
                Ok(false) => return Ok(kept),
                Ok(true) => {}
                Err(failure) => return Err(failure.into_error(context(self))),
            }
        }
        Err(Error::DumpInterrupted {
            context: context(self),
            attempts: DUMP_ATTEMPTS,
        })
    }

    /// Serializes the request into the send buffer (the sequence number is set when
    /// it is sent, so a dump can be resent as is).
    fn encode(&mut self, message: RouteNetlinkMessage, flags: u16) {
        let mut packet = NetlinkMessage::new(
            NetlinkHeader::default(),
            NetlinkPayload::InnerMessage(message),
        );
        packet.header.flags = NLM_F_REQUEST | flags;
        packet.finalize();
        self.send_buf.clear();
        self.send_buf.resize(packet.buffer_len(), 0);
        packet.serialize(&mut self.send_buf);
    }

    /// Sends the encoded request under a new sequence number and reads replies until
    /// `expect` is met, handing each object message (netlink header included) to
    /// `sink`. Returns whether a dump was flagged as interrupted.
    fn exchange(
        &mut self,
        expect: Expect,
        sink: &mut dyn FnMut(&[u8]) -> Result<(), Failure>,
    ) -> Result<bool, Failure> {
        self.seq = self.seq.wrapping_add(1).max(1);
        NetlinkBuffer::new(&mut self.send_buf[..]).set_sequence_number(self.seq);
        self.send()?;
        self.requests += 1;

        let mut interrupted = false;
        loop {
            let received = self.receive()?;
            let mut datagram = self.recv_buf.get(..received).unwrap_or_default();
            while !datagram.is_empty() {
                let buffer = NetlinkBuffer::new_checked(datagram)
                    .map_err(|e| Failure::Decode(e.to_string()))?;
                let length = buffer.length() as usize;
                let (message, rest) = datagram.split_at(length);
                datagram = rest.get(align4(length) - length..).unwrap_or_default();

                if buffer.sequence_number() != self.seq {
                    continue; // left over from an earlier, abandoned request
                }
                let flags = buffer.flags();
                interrupted |= flags & NLM_F_DUMP_INTR != 0;
                match buffer.message_type() {
                    NLMSG_NOOP => {}
                    NLMSG_OVERRUN => return Err(Failure::Decode("netlink overrun".into())),
                    NLMSG_ERROR => {
                        let status =
                            reply::parse_error(flags, buffer.payload()).map_err(Failure::Decode)?;
                        if status.errno != 0 {
                            return Err(Failure::Kernel {
                                errno: status.errno,
                                message: status.message,
                            });
                        }
                        return Ok(interrupted);
                    }
                    NLMSG_DONE => {
                        let status = reply::parse_done(flags, buffer.payload());
                        if status.errno != 0 {
                            return Err(Failure::Kernel {
                                errno: status.errno,
                                message: status.message,
                            });
                        }
                        return Ok(interrupted);
                    }
                    _ => {
                        sink(message)?;
                        if expect == Expect::Single {
                            return Ok(false);
                        }
                    }
                }
            }
        }
    }

    fn send(&self) -> Result<(), Failure> {
        loop {
            match self.socket.send(&self.send_buf, 0) {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(source) => {
                    return Err(Failure::Io {
                        what: "send",
                        source,
                    })
                }
            }
        }
    }

    /// Reads one datagram whole into the receive buffer and returns its length.
    fn receive(&mut self) -> Result<usize, Failure> {
        // Peek with MSG_TRUNC reports the datagram's real size without consuming it.
        let size = self.recv_retrying(libc::MSG_PEEK | libc::MSG_TRUNC)?;
        if size > self.recv_buf.len() {
            self.recv_buf.resize(size, 0);
        }
        self.recv_retrying(0)
    }

    fn recv_retrying(&mut self, flags: libc::c_int) -> Result<usize, Failure> {
        loop {
            match self.socket.recv(&mut &mut self.recv_buf[..], flags) {
                Ok(size) => return Ok(size),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(source) => {
                    return Err(Failure::Io {
                        what: "receive",
                        source,
                    })
                }
            }
        }
    }
}

/// Decodes one object message of a reply; `None` for a message that carries no
/// rtnetlink object.
fn decode(message: &[u8]) -> Result<Option<RouteNetlinkMessage>, Failure> {
    let parsed = NetlinkMessage::<RouteNetlinkMessage>::deserialize(message)
        .map_err(|e| Failure::Decode(e.to_string()))?;
    Ok(match parsed.payload {
        NetlinkPayload::InnerMessage(inner) => Some(inner),
        _ => None,
    })
}
