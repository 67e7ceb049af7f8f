//! Bounds-checked reading of raw kernel bytes: netlink attributes, integers and
//! C strings. Used where a reply is decoded by hand (status replies, tc dumps): the
//! bytes come from the kernel, but a bug there, or an attribute layout this crate
//! does not know, must never become a panic or a failed operation here.

use netlink_packet_core::NLA_TYPE_MASK;

/// Netlink messages and attributes are padded to 4 bytes.
pub(crate) fn align4(len: usize) -> usize {
    len.saturating_add(3) & !3
}

pub(crate) fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let raw = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_ne_bytes(raw.try_into().ok()?))
}

pub(crate) fn read_i32(bytes: &[u8], at: usize) -> Option<i32> {
    read_u32(bytes, at).map(|v| v as i32)
}

pub(crate) fn read_u16(bytes: &[u8], at: usize) -> Option<u16> {
    let raw = bytes.get(at..at.checked_add(2)?)?;
    Some(u16::from_ne_bytes(raw.try_into().ok()?))
}

/// The `(type, value)` attributes packed in `bytes`, the nested and byte-order flags
/// masked off the type. The walk stops quietly at the first malformed attribute, so
/// whatever precedes it is still read.
pub(crate) fn attributes(mut bytes: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let len = usize::from(read_u16(bytes, 0)?);
        let kind = read_u16(bytes, 2)? & NLA_TYPE_MASK;
        let value = bytes.get(4..len)?;
        // `max(4)`: a zero length must not make the walk stand still.
        bytes = bytes.get(align4(len).max(4)..).unwrap_or_default();
        Some((kind, value))
    })
}

/// A NUL-terminated string attribute as text (lossy, trimmed).
pub(crate) fn c_string(value: &[u8]) -> String {
    let text = value.split(|b| *b == 0).next().unwrap_or_default();
    String::from_utf8_lossy(text).trim().to_string()
}

/// Builds attributes the way the kernel packs them, for decoding tests.
#[cfg(test)]
pub(crate) fn nla(kind: u16, value: &[u8]) -> Vec<u8> {
    let len = 4 + value.len();
    let mut out = Vec::new();
    out.extend_from_slice(&(len as u16).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(value);
    out.resize(align4(len), 0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_walked_with_flags_masked() {
        let mut bytes = nla(1, b"bpf\0");
        bytes.extend(nla(2 | 0x8000, &[1, 2, 3, 4, 5]));
        let found: Vec<(u16, Vec<u8>)> = attributes(&bytes).map(|(k, v)| (k, v.to_vec())).collect();
        assert_eq!(found, [(1, b"bpf\0".to_vec()), (2, vec![1, 2, 3, 4, 5])]);
    }

    #[test]
    fn malformed_attributes_end_the_walk_without_panicking() {
        // A length pointing past the end.
        let mut broken = nla(1, b"ok\0");
        broken.extend_from_slice(&[200, 0, 3, 0, 1]);
        assert_eq!(attributes(&broken).count(), 1);
        // A header cut short, a length shorter than the header.
        assert_eq!(attributes(&[8, 0]).count(), 0);
        assert_eq!(attributes(&[2, 0, 1, 0, 9, 9, 9, 9]).count(), 0);
        // A zero length: no endless loop.
        assert_eq!(attributes(&[0, 0, 0, 0, 0, 0, 0, 0]).count(), 0);
        for cut in 0..broken.len() {
            let _ = attributes(&broken[..cut]).count();
        }
    }

    #[test]
    fn integers_and_strings_are_bounds_checked() {
        assert_eq!(read_u32(&7u32.to_ne_bytes(), 0), Some(7));
        assert_eq!(read_u32(&[1, 2, 3], 0), None);
        assert_eq!(read_u32(&[0; 8], usize::MAX - 1), None);
        assert_eq!(read_i32(&(-2i32).to_ne_bytes(), 0), Some(-2));
        assert_eq!(read_u16(&[1], 0), None);
        assert_eq!(c_string(b"weft:from_pod\0junk"), "weft:from_pod");
        assert_eq!(c_string(b"no terminator"), "no terminator");
        assert_eq!(c_string(&[0xff, 0]), "\u{fffd}");
    }
}
