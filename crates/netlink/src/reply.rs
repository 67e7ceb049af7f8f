//! Decoding of the kernel's status replies (`NLMSG_ERROR`, `NLMSG_DONE`), including the
//! extended-ack text the kernel attaches to many refusals ("Unknown device type",
//! "Nexthop has invalid gateway"). Everything is bounds-checked: the bytes come from
//! the kernel, but a bug there must not become a panic here.

use crate::bytes::{align4, attributes, c_string, read_i32, read_u32};
use netlink_packet_core::{NLM_F_ACK_TLVS, NLM_F_CAPPED};

/// `NLMSGERR_ATTR_MSG` from linux/netlink.h: a NUL-terminated explanation.
const NLMSGERR_ATTR_MSG: u16 = 1;
/// Size of `struct nlmsghdr`, echoed inside an `NLMSG_ERROR`.
const NLMSG_HEADER_LEN: usize = 16;

/// The outcome a status reply carries: `errno` is positive, 0 for success.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Status {
    pub errno: i32,
    pub message: Option<String>,
}

/// Decodes the payload of an `NLMSG_ERROR` (an ack when the code is 0). `flags` are
/// the flags of the error message itself, which say whether the echoed request was
/// capped and whether extended-ack attributes follow it.
pub(crate) fn parse_error(flags: u16, payload: &[u8]) -> Result<Status, String> {
    let code = read_i32(payload, 0).ok_or("NLMSG_ERROR shorter than its error code")?;
    let echoed = payload.get(4..).unwrap_or_default();
    let message = if flags & NLM_F_ACK_TLVS != 0 {
        let skip = if flags & NLM_F_CAPPED != 0 {
            NLMSG_HEADER_LEN
        } else {
            // The whole request is echoed: its own length field says how much.
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

/// Decodes the payload of the `NLMSG_DONE` that ends a dump. The kernel may send it
/// empty; a negative code means the dump failed part-way.
pub(crate) fn parse_done(flags: u16, payload: &[u8]) -> Status {
    let code = read_i32(payload, 0).unwrap_or(0);
    let message = if flags & NLM_F_ACK_TLVS != 0 {
        payload.get(4..).and_then(ext_ack_message)
    } else {
        None
    };
    Status {
        errno: code.saturating_neg(),
        message,
    }
}

/// Finds the human-readable message among extended-ack attributes.
fn ext_ack_message(bytes: &[u8]) -> Option<String> {
    attributes(bytes)
        .find(|(kind, _)| *kind == NLMSGERR_ATTR_MSG)
        .map(|(_, value)| c_string(value))
        .filter(|text| !text.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::nla;

    fn error_payload(code: i32, echoed_header: [u8; 16], tlvs: &[u8]) -> Vec<u8> {
        let mut out = code.to_ne_bytes().to_vec();
        out.extend_from_slice(&echoed_header);
        out.extend_from_slice(tlvs);
        out
    }

    #[test]
    fn ack_is_errno_zero() {
        let status = parse_error(NLM_F_CAPPED, &error_payload(0, [0; 16], &[])).unwrap();
        assert_eq!(
            status,
            Status {
                errno: 0,
                message: None
            }
        );
    }

    #[test]
    fn capped_error_with_message() {
        let mut tlvs = nla(2, &7u32.to_ne_bytes()); // NLMSGERR_ATTR_OFFS, skipped
        tlvs.extend(nla(NLMSGERR_ATTR_MSG, b"Unknown device type\0"));
        let payload = error_payload(-libc::EOPNOTSUPP, [0; 16], &tlvs);
        let status = parse_error(NLM_F_CAPPED | NLM_F_ACK_TLVS, &payload).unwrap();
        assert_eq!(status.errno, libc::EOPNOTSUPP);
        assert_eq!(status.message.as_deref(), Some("Unknown device type"));
    }

    #[test]
    fn uncapped_error_skips_the_echoed_request() {
        // Echoed request: a 20-byte message (header + 4 bytes of body).
        let mut header = [0u8; 16];
        header[..4].copy_from_slice(&20u32.to_ne_bytes());
        let mut payload = (-libc::EINVAL).to_ne_bytes().to_vec();
        payload.extend_from_slice(&header);
        payload.extend_from_slice(&[0xaa; 4]);
        payload.extend(nla(NLMSGERR_ATTR_MSG, b"bad\0"));
        let status = parse_error(NLM_F_ACK_TLVS, &payload).unwrap();
        assert_eq!(status.errno, libc::EINVAL);
        assert_eq!(status.message.as_deref(), Some("bad"));
    }

    #[test]
    fn truncated_or_garbage_replies_do_not_panic() {
        assert!(parse_error(0, &[1, 2]).is_err());
        let mut payload = error_payload(-1, [0xff; 16], &[]);
        payload.extend_from_slice(&[0xff, 0xff, 0x01, 0x00, 0x41]);
        for flags in [0, NLM_F_ACK_TLVS, NLM_F_ACK_TLVS | NLM_F_CAPPED] {
            for cut in 0..payload.len() {
                let _ = parse_error(flags, &payload[..cut]);
                let _ = parse_done(flags, &payload[..cut]);
            }
        }
        // A zero-length attribute must not loop forever.
        let status = parse_done(NLM_F_ACK_TLVS, &[0, 0, 0, 0, 0, 0, 1, 0]);
        assert_eq!(
            status,
            Status {
                errno: 0,
                message: None
            }
        );
    }

    #[test]
    fn done_carries_dump_errors() {
        assert_eq!(parse_done(0, &[]).errno, 0);
        let mut payload = (-libc::ENOENT).to_ne_bytes().to_vec();
        payload.extend(nla(NLMSGERR_ATTR_MSG, b"FIB table does not exist\0"));
        let status = parse_done(NLM_F_ACK_TLVS, &payload);
        assert_eq!(status.errno, libc::ENOENT);
        assert_eq!(status.message.as_deref(), Some("FIB table does not exist"));
    }
}
