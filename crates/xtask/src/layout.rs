//! OCI image layouts on disk: `oci-layout`, `index.json` and content-addressed
//! `blobs/sha256/<hex>`.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::digest::{Digest, HashingWriter};
use crate::oci::{self, Descriptor, LayoutMarker};

/// JSON documents (index, manifest, config) larger than this are refused, to keep a hostile
/// layout from making the check allocate without bound; real ones are a few kilobytes.
pub const MAX_JSON: u64 = 4 << 20;

#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path} exists and is not an OCI layout (no oci-layout file): refusing to replace it")]
    NotALayout { path: PathBuf },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> LayoutError + '_ {
    move |source| LayoutError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes a new layout.
pub struct LayoutWriter {
    root: PathBuf,
}

impl LayoutWriter {
    /// Creates an empty layout at `root`. An existing layout or empty directory there is
    /// replaced; anything else is refused, so a mistyped `--out` cannot delete a directory.
    pub fn create(root: &Path) -> Result<Self, LayoutError> {
        if root.exists() {
            let empty = fs::read_dir(root)
                .map(|mut d| d.next().is_none())
                .unwrap_or(false);
            if !empty && !root.join("oci-layout").is_file() {
                return Err(LayoutError::NotALayout {
                    path: root.to_path_buf(),
                });
            }
            fs::remove_dir_all(root).map_err(io_err(root))?;
        }
        let blobs = root.join("blobs").join("sha256");
        fs::create_dir_all(&blobs).map_err(io_err(&blobs))?;
        let marker = LayoutMarker {
            image_layout_version: oci::LAYOUT_VERSION.to_string(),
        };
        let path = root.join("oci-layout");
        fs::write(&path, oci::to_json(&marker)).map_err(io_err(&path))?;
        Ok(LayoutWriter {
            root: root.to_path_buf(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Stores `bytes` as a blob and describes it.
    pub fn put_blob(&self, media_type: &str, bytes: &[u8]) -> Result<Descriptor, LayoutError> {
        let digest = Digest::of(bytes);
        let path = digest.blob_path(&self.root);
        fs::write(&path, bytes).map_err(io_err(&path))?;
        Ok(descriptor(media_type, &digest, bytes.len() as u64))
    }

    pub fn put_json<T: Serialize>(
        &self,
        media_type: &str,
        value: &T,
    ) -> Result<Descriptor, LayoutError> {
        self.put_blob(media_type, &oci::to_json(value))
    }

    /// A writer for a blob whose digest is known only once it is written.
    pub fn blob_writer(&self) -> Result<BlobWriter, LayoutError> {
        let tmp = self
            .root
            .join("blobs")
            .join(format!(".incoming-{}", std::process::id()));
        let file = File::create(&tmp).map_err(io_err(&tmp))?;
        Ok(BlobWriter {
            root: self.root.clone(),
            tmp,
            inner: HashingWriter::new(io::BufWriter::new(file)),
        })
    }

    /// Writes `index.json`, the layout's entry point.
    pub fn write_index(&self, index: &oci::Index) -> Result<(), LayoutError> {
        let path = self.root.join("index.json");
        fs::write(&path, oci::to_json(index)).map_err(io_err(&path))
    }
}

pub fn descriptor(media_type: &str, digest: &Digest, size: u64) -> Descriptor {
    Descriptor {
        media_type: media_type.to_string(),
        digest: digest.to_string(),
        size,
        platform: None,
        annotations: None,
    }
}

/// A blob being written; [`BlobWriter::commit`] moves it to its content address.
pub struct BlobWriter {
    root: PathBuf,
    tmp: PathBuf,
    inner: HashingWriter<io::BufWriter<File>>,
}

impl Write for BlobWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl BlobWriter {
    pub fn commit(self, media_type: &str) -> Result<Descriptor, LayoutError> {
        let (file, digest, size) = self.inner.finish().map_err(io_err(&self.tmp))?;
        file.into_inner()
            .map_err(|e| e.into_error())
            .and_then(|f| f.sync_all())
            .map_err(io_err(&self.tmp))?;
        let path = digest.blob_path(&self.root);
        fs::rename(&self.tmp, &path).map_err(io_err(&path))?;
        Ok(descriptor(media_type, &digest, size))
    }
}

/// Why a blob could not be read as described.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    #[error(transparent)]
    BadDigest(#[from] crate::digest::BadDigest),
    #[error("blobs/sha256/{} is missing", .0.hex())]
    Missing(Digest),
    #[error("{digest} is {actual} bytes, but its descriptor says {declared}")]
    Size {
        digest: Digest,
        declared: u64,
        actual: u64,
    },
    #[error("the content of blobs/sha256/{} hashes to {actual}", .expected.hex())]
    Content { expected: Digest, actual: Digest },
    #[error("{digest} is larger than the {MAX_JSON}-byte limit for a JSON document")]
    TooLarge { digest: Digest },
    #[error("{digest} is not valid JSON for its media type: {error}")]
    Json { digest: Digest, error: String },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

/// Reads an existing layout.
pub struct LayoutReader {
    root: PathBuf,
}

impl LayoutReader {
    pub fn new(root: &Path) -> Self {
        LayoutReader {
            root: root.to_path_buf(),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Opens the blob a descriptor names, checking only that it exists and has the declared
    /// size; the caller hashes what it reads.
    pub fn open(&self, desc: &Descriptor) -> Result<(Digest, File), BlobError> {
        let digest = Digest::parse(&desc.digest)?;
        let path = digest.blob_path(&self.root);
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(BlobError::Missing(digest))
            }
            Err(source) => return Err(BlobError::Io { path, source }),
        };
        let actual = file
            .metadata()
            .map_err(|source| BlobError::Io {
                path: path.clone(),
                source,
            })?
            .len();
        if actual != desc.size {
            return Err(BlobError::Size {
                digest,
                declared: desc.size,
                actual,
            });
        }
        Ok((digest, file))
    }

    /// Reads and parses a JSON blob, verifying its size and digest.
    pub fn read_json<T: DeserializeOwned>(&self, desc: &Descriptor) -> Result<T, BlobError> {
        let (digest, file) = self.open(desc)?;
        if desc.size > MAX_JSON {
            return Err(BlobError::TooLarge { digest });
        }
        let mut bytes = Vec::new();
        file.take(MAX_JSON)
            .read_to_end(&mut bytes)
            .map_err(|source| BlobError::Io {
                path: digest.blob_path(&self.root),
                source,
            })?;
        let actual = Digest::of(&bytes);
        if actual != digest {
            return Err(BlobError::Content {
                expected: digest,
                actual,
            });
        }
        serde_json::from_slice(&bytes).map_err(|e| BlobError::Json {
            digest,
            error: e.to_string(),
        })
    }
}
