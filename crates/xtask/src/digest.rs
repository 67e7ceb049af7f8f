//! Content digests (`sha256:<hex>`), and readers and writers that compute one while data
//! passes through them.

use std::fmt;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

/// A validated `sha256:` digest. Only sha256 is accepted: it is what every OCI tool writes,
/// and a digest is turned into a path, so anything not exactly 64 hex digits is refused.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest {
    hex: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a sha256 digest (sha256: and 64 lowercase hex digits)")]
pub struct BadDigest(pub String);

impl Digest {
    pub fn parse(s: &str) -> Result<Self, BadDigest> {
        let hex = s
            .strip_prefix("sha256:")
            .filter(|h| {
                h.len() == 64
                    && h.bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            })
            .ok_or_else(|| BadDigest(s.to_string()))?;
        Ok(Digest {
            hex: hex.to_string(),
        })
    }

    pub fn of(bytes: &[u8]) -> Self {
        Digest::from_hasher(Sha256::new_with_prefix(bytes))
    }

    fn from_hasher(h: Sha256) -> Self {
        let hex = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        Digest { hex }
    }

    pub fn hex(&self) -> &str {
        &self.hex
    }

    /// Where an OCI layout keeps the blob.
    pub fn blob_path(&self, layout: &Path) -> PathBuf {
        layout.join("blobs").join("sha256").join(&self.hex)
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex)
    }
}

/// Hashes and counts what is read through it.
pub struct HashingReader<R> {
    inner: R,
    hasher: Sha256,
    count: u64,
}

impl<R: Read> HashingReader<R> {
    pub fn new(inner: R) -> Self {
        HashingReader {
            inner,
            hasher: Sha256::new(),
            count: 0,
        }
    }

    /// Reads the rest of the stream, then returns its digest, its total length and the
    /// reader underneath.
    pub fn finish(mut self) -> io::Result<(Digest, u64, R)> {
        io::copy(&mut self, &mut io::sink())?;
        Ok((Digest::from_hasher(self.hasher), self.count, self.inner))
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }
}

/// Hashes and counts what is written through it.
pub struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
    count: u64,
}

impl<W: Write> HashingWriter<W> {
    pub fn new(inner: W) -> Self {
        HashingWriter {
            inner,
            hasher: Sha256::new(),
            count: 0,
        }
    }

    pub fn finish(mut self) -> io::Result<(W, Digest, u64)> {
        self.inner.flush()?;
        Ok((self.inner, Digest::from_hasher(self.hasher), self.count))
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_of_known_input() {
        assert_eq!(
            Digest::of(b"").to_string(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        let mut r = HashingReader::new(&b"abc"[..]);
        let mut first = [0u8; 1];
        r.read_exact(&mut first).unwrap();
        let (d, n, _) = r.finish().unwrap();
        assert_eq!(n, 3);
        assert_eq!(d, Digest::of(b"abc"));
    }

    #[test]
    fn only_well_formed_sha256_digests_parse() {
        let ok = format!("sha256:{}", "a".repeat(64));
        assert!(Digest::parse(&ok).is_ok());
        for bad in [
            format!("sha512:{}", "a".repeat(64)),
            format!("sha256:{}", "A".repeat(64)),
            format!("sha256:{}", "a".repeat(63)),
            "sha256:../../../../etc/passwd".to_string(),
            String::new(),
        ] {
            assert!(Digest::parse(&bad).is_err(), "{bad}");
        }
    }
}
