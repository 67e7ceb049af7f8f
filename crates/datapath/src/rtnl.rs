//! A minimal synchronous rtnetlink socket for the tc requests of the clsact fallback.
//!
//! The CNI plugin runs one short ADD/DEL at a time, so one request is in flight at a
//! time, with no tokio. Requests are built with `netlink-packet-route`'s tc types;
//! replies to dumps are handed back as raw message payloads and decoded by the caller
//! for the few attributes it needs, so an attribute of some other filter that the
//! crate cannot decode never fails a dump of ours. Kernel bytes are bounds-checked.

use netlink_packet_core::{
    NetlinkBuffer, NetlinkHeader, NetlinkMessage, NetlinkPayload, NLA_TYPE_MASK, NLMSG_DONE,
    NLMSG_ERROR, NLMSG_NOOP, NLMSG_OVERRUN, NLM_F_ACK, NLM_F_ACK_TLVS, NLM_F_CAPPED, NLM_F_DUMP,
    NLM_F_DUMP_INTR, NLM_F_REQUEST,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use std::fmt;
use std::io;

/// Dumps the kernel flags as interrupted by a concurrent change are restarted this
/// many times before giving up.
const DUMP_ATTEMPTS: u32 = 5;
/// The kernel's dump datagrams are at most 32 KiB; larger single messages grow the
/// buffer on demand (the size is peeked first, so nothing is ever truncated).
const RECV_BUFFER: usize = 32 * 1024;
/// `NLMSGERR_ATTR_MSG`: the kernel's text explaining a refusal.
const NLMSGERR_ATTR_MSG: u16 = 1;
/// `sizeof(struct nlmsghdr)`, echoed at the start of an `NLMSG_ERROR` payload.
const NLMSG_HEADER_LEN: usize = 16;

/// Why a request failed.
#[derive(Debug)]
pub(crate) enum NlError {
    /// The kernel refused, with a positive errno and often an explanation.
    Kernel { errno: i32, message: Option<String> },
    /// The socket itself failed.
    Io(io::Error),
    /// A reply did not decode.
    Decode(String),
    /// Every attempt at a dump was interrupted by concurrent changes.
    DumpInterrupted,
}

impl NlError {
    pub fn errno(&self) -> Option<i32> {
        match self {
            NlError::Kernel { errno, .. } => Some(*errno),
            NlError::Io(e) => e.raw_os_error(),
            _ => None,
        }
    }

    /// The kernel's explanation, if it gave one.
    pub fn message(&self) -> Option<String> {
        match self {
            NlError::Kernel { message, .. } => message.clone(),
            NlError::Decode(detail) => Some(detail.clone()),
            NlError::DumpInterrupted => Some(format!(
                "dump interrupted by concurrent changes {DUMP_ATTEMPTS} times"
            )),
            NlError::Io(_) => None,
        }
    }

    pub fn into_io(self) -> io::Error {
        match self {
            NlError::Kernel { errno, .. } => io::Error::from_raw_os_error(errno),
            NlError::Io(e) => e,
            NlError::Decode(_) => io::Error::from(io::ErrorKind::InvalidData),
            NlError::DumpInterrupted => io::Error::from(io::ErrorKind::Interrupted),
        }
    }
}

impl fmt::Display for NlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NlError::Kernel { errno, message } => {
                write!(f, "{}", io::Error::from_raw_os_error(*errno))?;
                match message {
                    Some(m) => write!(f, " ({m})"),
                    None => Ok(()),
                }
            }
            NlError::Io(e) => write!(f, "{e}"),
            NlError::Decode(d) => write!(f, "undecodable reply: {d}"),
            NlError::DumpInterrupted => write!(f, "dump kept being interrupted"),
        }
    }
}

/// An rtnetlink socket in the network namespace of the thread that opened it.
pub(crate) struct Rtnl {
    socket: Socket,
    seq: u32,
    send_buf: Vec<u8>,
    recv_buf: Vec<u8>,
}

impl Rtnl {
    pub fn new() -> Result<Rtnl, NlError> {
        let mut socket = Socket::new(NETLINK_ROUTE).map_err(NlError::Io)?;
        socket.bind(&SocketAddr::new(0, 0)).map_err(NlError::Io)?;
        socket
            .connect(&SocketAddr::new(0, 0))
            .map_err(NlError::Io)?;
        // Refusals come back with the kernel's explanation and without our request.
        socket.set_ext_ack(true).map_err(NlError::Io)?;
        socket.set_cap_ack(true).map_err(NlError::Io)?;
        // Lets the kernel dump only the device and parent we name.
        socket
            .set_netlink_get_strict_chk(true)
            .map_err(NlError::Io)?;
        Ok(Rtnl {
            socket,
            seq: 0,
            send_buf: Vec::with_capacity(256),
            recv_buf: vec![0; RECV_BUFFER],
        })
    }

    /// Sends a request that changes state and waits for the kernel's ack.
    pub fn request(&mut self, message: RouteNetlinkMessage, flags: u16) -> Result<(), NlError> {
        self.encode(message, NLM_F_ACK | flags);
        self.exchange(&mut |_| {}).map(|_| ())
    }

    /// Dumps objects and returns each reply message's payload (what follows the
    /// netlink header). An interrupted dump is restarted, so the result is one
    /// consistent snapshot.
    pub fn dump(&mut self, message: RouteNetlinkMessage) -> Result<Vec<Vec<u8>>, NlError> {
        self.encode(message, NLM_F_DUMP);
        let mut payloads = Vec::new();
        for _ in 0..DUMP_ATTEMPTS {
            payloads.clear();
            let interrupted = self.exchange(&mut |p| payloads.push(p.to_vec()))?;
            if !interrupted {
                return Ok(payloads);
            }
        }
        Err(NlError::DumpInterrupted)
    }

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

    /// Sends the encoded request under a fresh sequence number and reads until its
    /// ack or the end of its dump; replies to earlier, abandoned requests are
    /// skipped. Returns whether the kernel flagged the dump as interrupted.
    fn exchange(&mut self, sink: &mut dyn FnMut(&[u8])) -> Result<bool, NlError> {
        self.seq = self.seq.wrapping_add(1).max(1);
        NetlinkBuffer::new(&mut self.send_buf[..]).set_sequence_number(self.seq);
        self.send()?;

        let mut interrupted = false;
        loop {
            let received = self.receive()?;
            let mut datagram = self.recv_buf.get(..received).unwrap_or_default();
            while !datagram.is_empty() {
                let buffer = NetlinkBuffer::new_checked(datagram)
                    .map_err(|e| NlError::Decode(e.to_string()))?;
                let length = buffer.length() as usize;
                datagram = datagram.get(align4(length)..).unwrap_or_default();
                if buffer.sequence_number() != self.seq {
                    continue;
                }
                let flags = buffer.flags();
                interrupted |= flags & NLM_F_DUMP_INTR != 0;
                match buffer.message_type() {
                    NLMSG_NOOP => {}
                    NLMSG_OVERRUN => return Err(NlError::Decode("netlink overrun".into())),
                    NLMSG_ERROR => {
                        return status(parse_error(flags, buffer.payload())?).map(|()| interrupted)
                    }
                    NLMSG_DONE => {
                        return status(parse_done(flags, buffer.payload())).map(|()| interrupted)
                    }
                    _ => sink(buffer.payload()),
                }
            }
        }
    }

    fn send(&self) -> Result<(), NlError> {
        loop {
            match self.socket.send(&self.send_buf, 0) {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(NlError::Io(e)),
            }
        }
    }

    /// Reads one datagram whole and returns its length.
    fn receive(&mut self) -> Result<usize, NlError> {
        let size = self.recv_retrying(libc::MSG_PEEK | libc::MSG_TRUNC)?;
        if size > self.recv_buf.len() {
            self.recv_buf.resize(size, 0);
        }
        self.recv_retrying(0)
    }

    fn recv_retrying(&mut self, flags: libc::c_int) -> Result<usize, NlError> {
        loop {
            match self.socket.recv(&mut &mut self.recv_buf[..], flags) {
                Ok(size) => return Ok(size),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(NlError::Io(e)),
            }
        }
    }
}

/// The outcome a status message carries: a positive errno (0 for success) and the
/// kernel's explanation.
#[derive(Debug, PartialEq, Eq)]
struct Status {
    errno: i32,
    message: Option<String>,
}

fn status(s: Status) -> Result<(), NlError> {
    if s.errno == 0 {
        Ok(())
    } else {
        Err(NlError::Kernel {
            errno: s.errno,
            message: s.message,
        })
    }
}

/// Decodes an `NLMSG_ERROR` payload: the code, the echoed request (capped to its
/// header when the socket asked for that) and extended-ack attributes.
fn parse_error(flags: u16, payload: &[u8]) -> Result<Status, NlError> {
    let code = read_i32(payload, 0)
        .ok_or_else(|| NlError::Decode("NLMSG_ERROR shorter than its code".into()))?;
    let echoed = payload.get(4..).unwrap_or_default();
    let message = if flags & NLM_F_ACK_TLVS != 0 {
        let skip = if flags & NLM_F_CAPPED != 0 {
            NLMSG_HEADER_LEN
        } else {
            read_u32(echoed, 0).map_or(echoed.len(), |len| align4(len as usize))
        };
        echoed.get(skip..).and_then(ext_ack_message)
    } else {
        None
    };
    Ok(Status {
        errno: code.saturating_neg(),
        message,
    })
}

/// Decodes the `NLMSG_DONE` ending a dump (empty, or a code and attributes).
fn parse_done(flags: u16, payload: &[u8]) -> Status {
    let message = if flags & NLM_F_ACK_TLVS != 0 {
        payload.get(4..).and_then(ext_ack_message)
    } else {
        None
    };
    Status {
        errno: read_i32(payload, 0).unwrap_or(0).saturating_neg(),
        message,
    }
}

fn ext_ack_message(attributes: &[u8]) -> Option<String> {
    attributes_of(attributes)
        .find(|(kind, _)| *kind == NLMSGERR_ATTR_MSG)
        .map(|(_, value)| c_string(value))
        .filter(|m| !m.is_empty())
}

/// Iterates over the `(type, value)` netlink attributes packed in `bytes`, stopping
/// quietly at the first malformed one.
pub(crate) fn attributes_of(mut bytes: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let len = usize::from(u16::from_ne_bytes([*bytes.first()?, *bytes.get(1)?]));
        let kind = u16::from_ne_bytes([*bytes.get(2)?, *bytes.get(3)?]) & NLA_TYPE_MASK;
        let value = bytes.get(4..len)?;
        bytes = bytes.get(align4(len).max(4)..).unwrap_or_default();
        Some((kind, value))
    })
}

/// A NUL-terminated attribute as text.
pub(crate) fn c_string(value: &[u8]) -> String {
    let text = value.split(|b| *b == 0).next().unwrap_or_default();
    String::from_utf8_lossy(text).trim().to_string()
}

pub(crate) fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let raw = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_ne_bytes(raw.try_into().ok()?))
}

fn read_i32(bytes: &[u8], at: usize) -> Option<i32> {
    read_u32(bytes, at).map(|v| v as i32)
}

fn align4(len: usize) -> usize {
    len.saturating_add(3) & !3
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attribute(kind: u16, value: &[u8]) -> Vec<u8> {
        let len = 4 + value.len();
        let mut out = Vec::new();
        out.extend_from_slice(&(len as u16).to_ne_bytes());
        out.extend_from_slice(&kind.to_ne_bytes());
        out.extend_from_slice(value);
        out.resize(align4(len), 0);
        out
    }

    #[test]
    fn attributes_are_walked_and_truncation_stops_the_walk() {
        let mut bytes = attribute(1, b"bpf\0");
        bytes.extend(attribute(2, &[1, 2, 3, 4, 5]));
        let found: Vec<(u16, Vec<u8>)> = attributes_of(&bytes)
            .map(|(k, v)| (k, v.to_vec()))
            .collect();
        assert_eq!(found, [(1, b"bpf\0".to_vec()), (2, vec![1, 2, 3, 4, 5])]);
        // A length pointing past the end, or a header cut short, ends the walk.
        let mut broken = attribute(1, b"ok\0");
        broken.extend_from_slice(&[200, 0, 3, 0, 1]);
        assert_eq!(attributes_of(&broken).count(), 1);
        assert_eq!(attributes_of(&[8, 0]).count(), 0);
    }

    #[test]
    fn error_replies_yield_the_errno_and_the_kernels_explanation() {
        // errno -2, capped echo (a bare header), then NLMSGERR_ATTR_MSG.
        let mut payload = (-2i32).to_ne_bytes().to_vec();
        payload.extend_from_slice(&[0; NLMSG_HEADER_LEN]);
        payload.extend(attribute(
            NLMSGERR_ATTR_MSG,
            b"Filter with specified priority/protocol not found\0",
        ));
        let status = parse_error(NLM_F_CAPPED | NLM_F_ACK_TLVS, &payload).unwrap();
        assert_eq!(status.errno, libc::ENOENT);
        assert_eq!(
            status.message.as_deref(),
            Some("Filter with specified priority/protocol not found")
        );
        assert_eq!(
            parse_error(0, &0i32.to_ne_bytes()).unwrap(),
            Status {
                errno: 0,
                message: None
            }
        );
        assert!(parse_error(0, &[1, 2]).is_err());
        assert_eq!(parse_done(0, &[]).errno, 0);
    }
}
