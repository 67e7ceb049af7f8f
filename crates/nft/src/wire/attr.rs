//! Netlink attributes (type-length-value, 4-byte aligned): a writer that nests and a
//! strict reader that never reads past its buffer.

use super::consts::{NLA_F_NESTED, NLA_F_NET_BYTEORDER};

const NLA_HDRLEN: usize = 4;

pub(crate) fn align4(len: usize) -> usize {
    (len + 3) & !3
}

/// Appends attributes to a message buffer. An attribute longer than a netlink length
/// field can hold marks the writer as overflowed instead of panicking; the message
/// builder turns that into an error before anything is sent.
pub(crate) struct AttrWriter<'a> {
    buf: &'a mut Vec<u8>,
    overflowed: &'a mut bool,
}

impl<'a> AttrWriter<'a> {
    pub(crate) fn new(buf: &'a mut Vec<u8>, overflowed: &'a mut bool) -> Self {
        AttrWriter { buf, overflowed }
    }

    pub(crate) fn bytes(&mut self, ty: u16, payload: &[u8]) {
        let start = self.header(ty);
        self.buf.extend_from_slice(payload);
        self.finish(start);
    }

    /// Attributes encoded earlier, appended as they are (they are already aligned).
    pub(crate) fn raw(&mut self, encoded: &[u8]) {
        self.buf.extend_from_slice(encoded);
    }

    /// A NUL-terminated string, as the kernel's NLA_STRING policy expects.
    pub(crate) fn string(&mut self, ty: u16, value: &str) {
        let start = self.header(ty);
        self.buf.extend_from_slice(value.as_bytes());
        self.buf.push(0);
        self.finish(start);
    }

    pub(crate) fn be32(&mut self, ty: u16, value: u32) {
        self.bytes(ty, &value.to_be_bytes());
    }

    pub(crate) fn be64(&mut self, ty: u16, value: u64) {
        self.bytes(ty, &value.to_be_bytes());
    }

    pub(crate) fn u8(&mut self, ty: u16, value: u8) {
        self.bytes(ty, &[value]);
    }

    /// A nested attribute whose contents `fill` writes.
    pub(crate) fn nested(&mut self, ty: u16, fill: impl FnOnce(&mut AttrWriter<'_>)) {
        let start = self.header(ty | NLA_F_NESTED);
        fill(&mut AttrWriter {
            buf: self.buf,
            overflowed: self.overflowed,
        });
        self.finish(start);
    }

    fn header(&mut self, ty: u16) -> usize {
        let start = self.buf.len();
        self.buf.extend_from_slice(&[0, 0]);
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        start
    }

    fn finish(&mut self, start: usize) {
        let len = self.buf.len() - start;
        match u16::try_from(len) {
            Ok(len) => self.buf[start..start + 2].copy_from_slice(&len.to_ne_bytes()),
            Err(_) => *self.overflowed = true,
        }
        self.buf.resize(start + align4(len), 0);
    }
}

/// Why a reply could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DecodeError(pub(crate) String);

impl DecodeError {
    pub(crate) fn new(reason: impl Into<String>) -> Self {
        DecodeError(reason.into())
    }
}

/// Iterates over the attributes in a buffer, yielding (type without flag bits, payload).
pub(crate) struct Attrs<'a> {
    rest: &'a [u8],
}

pub(crate) fn attrs(data: &[u8]) -> Attrs<'_> {
    Attrs { rest: data }
}

impl<'a> Iterator for Attrs<'a> {
    type Item = Result<(u16, &'a [u8]), DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let parsed = (|| {
            let Some(&[l0, l1, t0, t1]) = self.rest.get(..NLA_HDRLEN) else {
                return Err("truncated attribute header");
            };
            let len = usize::from(u16::from_ne_bytes([l0, l1]));
            let ty = u16::from_ne_bytes([t0, t1]);
            if len < NLA_HDRLEN {
                return Err("attribute shorter than its header");
            }
            let payload = self
                .rest
                .get(NLA_HDRLEN..len)
                .ok_or("attribute longer than its message")?;
            Ok((ty & !(NLA_F_NESTED | NLA_F_NET_BYTEORDER), payload, len))
        })();
        match parsed {
            Ok((ty, payload, len)) => {
                let advance = align4(len).min(self.rest.len());
                self.rest = &self.rest[advance..];
                Some(Ok((ty, payload)))
            }
            Err(reason) => {
                self.rest = &[];
                Some(Err(DecodeError::new(reason)))
            }
        }
    }
}

pub(crate) fn be32(payload: &[u8]) -> Result<u32, DecodeError> {
    let bytes: [u8; 4] = payload
        .try_into()
        .map_err(|_| DecodeError::new(format!("expected 4 bytes, got {}", payload.len())))?;
    Ok(u32::from_be_bytes(bytes))
}

pub(crate) fn be64(payload: &[u8]) -> Result<u64, DecodeError> {
    let bytes: [u8; 8] = payload
        .try_into()
        .map_err(|_| DecodeError::new(format!("expected 8 bytes, got {}", payload.len())))?;
    Ok(u64::from_be_bytes(bytes))
}

pub(crate) fn u8(payload: &[u8]) -> Result<u8, DecodeError> {
    match payload {
        [b] => Ok(*b),
        _ => Err(DecodeError::new(format!(
            "expected 1 byte, got {}",
            payload.len()
        ))),
    }
}

/// A string attribute; the kernel NUL-terminates most but not all of them (device
/// names are copied with their stored length), so trailing NULs are dropped.
pub(crate) fn string(payload: &[u8]) -> Result<String, DecodeError> {
    let end = payload
        .iter()
        .rposition(|&b| b != 0)
        .map_or(0, |last| last + 1);
    let text = payload.get(..end).unwrap_or_default();
    if text.contains(&0) {
        return Err(DecodeError::new("string attribute with an embedded NUL"));
    }
    String::from_utf8(text.to_vec()).map_err(|_| DecodeError::new("string attribute is not UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(fill: impl FnOnce(&mut AttrWriter<'_>)) -> (Vec<u8>, bool) {
        let mut buf = Vec::new();
        let mut overflowed = false;
        fill(&mut AttrWriter::new(&mut buf, &mut overflowed));
        (buf, overflowed)
    }

    #[test]
    fn attributes_are_aligned_and_round_trip() {
        let (buf, overflowed) = write(|w| {
            w.string(1, "lo");
            w.u8(2, 7);
            w.nested(3, |w| w.be32(1, 0x0102_0304));
            w.be64(4, 9);
        });
        assert!(!overflowed);
        assert_eq!(buf.len() % 4, 0);
        let all: Vec<_> = attrs(&buf).collect::<Result<_, _>>().unwrap();
        assert_eq!(all.len(), 4);
        assert_eq!(all[0].0, 1);
        assert_eq!(string(all[0].1).unwrap(), "lo");
        assert_eq!(u8(all[1].1).unwrap(), 7);
        assert_eq!(all[2].0, 3, "the nested flag is masked off");
        let inner: Vec<_> = attrs(all[2].1).collect::<Result<_, _>>().unwrap();
        assert_eq!(be32(inner[0].1).unwrap(), 0x0102_0304);
        assert_eq!(be64(all[3].1).unwrap(), 9);
    }

    #[test]
    fn malformed_attributes_are_errors_not_panics() {
        for bad in [
            &[1u8][..],
            &[2, 0, 1, 0],
            &[8, 0, 1, 0, 0],
            &[255, 255, 1, 0],
        ] {
            let items: Vec<_> = attrs(bad).collect();
            assert_eq!(items.len(), 1, "{bad:?}");
            assert!(items[0].is_err(), "{bad:?}");
        }
        assert!(be32(&[1, 2, 3]).is_err());
        assert!(string(&[b'a', 0, b'b']).is_err());
        assert_eq!(string(b"eth0\0\0").unwrap(), "eth0");
    }

    #[test]
    fn oversized_attribute_is_flagged() {
        let (_, overflowed) = write(|w| w.bytes(1, &vec![0; 70_000]));
        assert!(overflowed);
    }
}
