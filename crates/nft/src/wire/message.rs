//! Netlink message framing for nfnetlink: `nlmsghdr` + `nfgenmsg` + attributes, and
//! the parsing of replies (data, errors/acks, end of dump).

use super::attr::{align4, AttrWriter, DecodeError};
use super::consts::*;

/// One request being built. `attrs` writes the body; `finish` fixes up the length.
pub(crate) struct MessageBuilder {
    buf: Vec<u8>,
    overflowed: bool,
}

/// The fixed part of an outgoing nfnetlink message.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Header {
    pub ty: u16,
    pub flags: u16,
    pub seq: u32,
    pub family: u8,
    /// `res_id` of the nfgenmsg: the subsystem for batch delimiters, 0 otherwise.
    pub res_id: u16,
}

/// The nfnetlink message type of an nf_tables operation.
pub(crate) fn nft_type(msg: u16) -> u16 {
    (NFNL_SUBSYS_NFTABLES << 8) | msg
}

impl MessageBuilder {
    pub(crate) fn new(header: Header) -> Self {
        let mut buf = Vec::with_capacity(256);
        buf.extend_from_slice(&0u32.to_ne_bytes()); // length, set by finish
        buf.extend_from_slice(&header.ty.to_ne_bytes());
        buf.extend_from_slice(&header.flags.to_ne_bytes());
        buf.extend_from_slice(&header.seq.to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it in
        buf.push(header.family);
        buf.push(NFNETLINK_V0);
        buf.extend_from_slice(&header.res_id.to_be_bytes());
        MessageBuilder {
            buf,
            overflowed: false,
        }
    }

    pub(crate) fn attrs(&mut self) -> AttrWriter<'_> {
        AttrWriter::new(&mut self.buf, &mut self.overflowed)
    }

    /// The finished message, or `None` when it does not fit a netlink length field.
    pub(crate) fn finish(mut self) -> Option<Vec<u8>> {
        let len = u32::try_from(self.buf.len()).ok()?;
        if self.overflowed {
            return None;
        }
        self.buf[0..4].copy_from_slice(&len.to_ne_bytes());
        Some(self.buf)
    }
}

/// One message of a reply datagram.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reply<'a> {
    pub ty: u16,
    pub flags: u16,
    pub seq: u32,
    pub body: ReplyBody<'a>,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum ReplyBody<'a> {
    /// NLMSG_ERROR: `errno` 0 is an acknowledgement.
    Ack { errno: i32 },
    /// NLMSG_DONE: the end of a dump, with the dump's own status (0 or an errno).
    Done { errno: i32 },
    /// An nfnetlink message: the family from its nfgenmsg and its attributes.
    Data { family: u8, attrs: &'a [u8] },
}

/// Splits a datagram into its messages.
pub(crate) fn parse_replies(datagram: &[u8]) -> Result<Vec<Reply<'_>>, DecodeError> {
    let mut out = Vec::new();
    let mut rest = datagram;
    while !rest.is_empty() {
        let Some(&[l0, l1, l2, l3, t0, t1, f0, f1, s0, s1, s2, s3, _, _, _, _]) =
            rest.get(..NLMSG_HDRLEN)
        else {
            return Err(DecodeError::new("truncated netlink header"));
        };
        let len = u32::from_ne_bytes([l0, l1, l2, l3]) as usize;
        let ty = u16::from_ne_bytes([t0, t1]);
        let flags = u16::from_ne_bytes([f0, f1]);
        let seq = u32::from_ne_bytes([s0, s1, s2, s3]);
        let payload = rest
            .get(NLMSG_HDRLEN..len)
            .ok_or_else(|| DecodeError::new("netlink message longer than its datagram"))?;
        let body = match ty {
            NLMSG_ERROR => {
                let Some(&[e0, e1, e2, e3]) = payload.get(..4) else {
                    return Err(DecodeError::new("truncated netlink error"));
                };
                // The kernel sends -errno; keep the positive errno.
                let errno = i32::from_ne_bytes([e0, e1, e2, e3]).saturating_abs();
                ReplyBody::Ack { errno }
            }
            NLMSG_DONE => {
                let errno = match payload.get(..4) {
                    Some(&[e0, e1, e2, e3]) => {
                        i32::from_ne_bytes([e0, e1, e2, e3]).saturating_abs()
                    }
                    _ => 0,
                };
                ReplyBody::Done { errno }
            }
            _ => {
                let Some(&[family, _version, _, _]) = payload.get(..NFGENMSG_LEN) else {
                    return Err(DecodeError::new("truncated nfgenmsg"));
                };
                let attrs = payload.get(NFGENMSG_LEN..).unwrap_or_default();
                ReplyBody::Data { family, attrs }
            }
        };
        out.push(Reply {
            ty,
            flags,
            seq,
            body,
        });
        let advance = align4(len).min(rest.len());
        rest = rest.get(advance..).unwrap_or_default();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_message_parses_back() {
        let mut m = MessageBuilder::new(Header {
            ty: nft_type(NFT_MSG_NEWTABLE),
            flags: NLM_F_REQUEST | NLM_F_ACK,
            seq: 42,
            family: 1,
            res_id: 0,
        });
        m.attrs().string(NFTA_TABLE_NAME, "t");
        let bytes = m.finish().unwrap();
        let replies = parse_replies(&bytes).unwrap();
        assert_eq!(replies.len(), 1);
        assert_eq!(replies[0].seq, 42);
        assert_eq!(replies[0].ty, 0x0a00);
        match replies[0].body {
            ReplyBody::Data { family, attrs } => {
                assert_eq!(family, 1);
                assert_eq!(attrs, &[6, 0, 1, 0, b't', 0, 0, 0]);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn truncated_datagrams_are_errors() {
        assert!(parse_replies(&[0; 10]).is_err());
        let mut lying = vec![0u8; 16];
        lying[0] = 200; // claims 200 bytes
        assert!(parse_replies(&lying).is_err());
    }

    #[test]
    fn error_message_yields_positive_errno() {
        let mut msg = Vec::new();
        msg.extend_from_slice(&36u32.to_ne_bytes());
        msg.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
        msg.extend_from_slice(&0u16.to_ne_bytes());
        msg.extend_from_slice(&7u32.to_ne_bytes());
        msg.extend_from_slice(&0u32.to_ne_bytes());
        msg.extend_from_slice(&(-2i32).to_ne_bytes());
        msg.extend_from_slice(&[0; 16]);
        let replies = parse_replies(&msg).unwrap();
        assert!(matches!(replies[0].body, ReplyBody::Ack { errno: 2 }));
    }
}
