//! Reproducible layers: a tar of the entries in path order, every entry owned by root with
//! mtime 0, gzip with a zero timestamp. The same entries give the same bytes, hence the same
//! digest, on any machine with the same `Cargo.lock` (the compressor is the pure-Rust one
//! pinned there, not the system's zlib).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use flate2::{Compression, GzBuilder};

use crate::digest::{Digest, HashingWriter};
use crate::layout::{LayoutError, LayoutWriter};
use crate::oci::{self, Descriptor};

#[derive(Debug, Clone)]
enum Content {
    Dir,
    Bytes(Vec<u8>),
    File(PathBuf),
    Symlink(String),
    Hardlink(String),
}

#[derive(Debug, Clone)]
struct Entry {
    content: Content,
    mode: u32,
}

/// The entries of one layer, keyed by their path inside the image (relative, no leading `/`).
#[derive(Debug, Default, Clone)]
pub struct LayerBuilder {
    entries: BTreeMap<String, Entry>,
    /// Leave out the parent directories nobody asked for, as a layer that records only what
    /// changed does (so an entry can reach through a lower layer's symlinked directory).
    no_implicit_dirs: bool,
}

/// A layer written to a layout.
#[derive(Debug, Clone)]
pub struct Layer {
    pub descriptor: Descriptor,
    /// The digest of the uncompressed tar, for the config's `rootfs.diff_ids`.
    pub diff_id: Digest,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerFormat {
    Tar,
    Gzip,
}

#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    #[error("{path}: {source}")]
    Source { path: PathBuf, source: io::Error },
    #[error("writing a layer: {0}")]
    Write(#[from] io::Error),
    #[error(transparent)]
    Layout(#[from] LayoutError),
}

fn clean(path: &str) -> String {
    path.trim_start_matches('/')
        .trim_end_matches('/')
        .to_string()
}

impl LayerBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// A layer without implicit parent directories.
    pub fn without_implicit_dirs() -> Self {
        LayerBuilder {
            no_implicit_dirs: true,
            ..Self::default()
        }
    }

    /// A directory; parents of every entry are added as `0755` directories unless given.
    pub fn dir(mut self, path: &str, mode: u32) -> Self {
        self.insert(path, Content::Dir, mode);
        self
    }

    pub fn file_bytes(mut self, path: &str, bytes: impl Into<Vec<u8>>, mode: u32) -> Self {
        self.insert(path, Content::Bytes(bytes.into()), mode);
        self
    }

    /// A file whose content is read from `source` when the layer is written (symlinks in
    /// `source` are followed: the image gets the file itself).
    pub fn file_from(mut self, path: &str, source: &Path, mode: u32) -> Self {
        self.insert(path, Content::File(source.to_path_buf()), mode);
        self
    }

    pub fn symlink(mut self, path: &str, target: &str) -> Self {
        self.insert(path, Content::Symlink(target.to_string()), 0o777);
        self
    }

    pub fn hardlink(mut self, path: &str, target: &str) -> Self {
        self.insert(path, Content::Hardlink(clean(target)), 0o644);
        self
    }

    /// An OCI whiteout: hides `path` of the layers below.
    pub fn whiteout(self, path: &str) -> Self {
        let path = clean(path);
        let (parent, name) = match path.rsplit_once('/') {
            Some((p, n)) => (format!("{p}/"), n),
            None => (String::new(), path.as_str()),
        };
        let marker = format!("{parent}.wh.{name}");
        self.file_bytes(&marker, Vec::new(), 0o644)
    }

    /// An opaque whiteout: hides everything the layers below have under `dir`.
    pub fn opaque(self, dir: &str) -> Self {
        let marker = format!("{}/.wh..wh..opq", clean(dir));
        self.file_bytes(&marker, Vec::new(), 0o644)
    }

    fn insert(&mut self, path: &str, content: Content, mode: u32) {
        let path = clean(path);
        let mut parent = path.as_str();
        while let Some((p, _)) = parent.rsplit_once('/').filter(|_| !self.no_implicit_dirs) {
            self.entries.entry(p.to_string()).or_insert(Entry {
                content: Content::Dir,
                mode: 0o755,
            });
            parent = p;
        }
        self.entries.insert(path, Entry { content, mode });
    }

    /// Writes the layer into the layout as a blob.
    pub fn write(&self, layout: &LayoutWriter, format: LayerFormat) -> Result<Layer, LayerError> {
        let mut blob = layout.blob_writer()?;
        let diff_id = match format {
            LayerFormat::Tar => self.write_tar(&mut blob)?,
            LayerFormat::Gzip => {
                let mut gz = GzBuilder::new()
                    .mtime(0)
                    .write(&mut blob, Compression::default());
                let diff_id = self.write_tar(&mut gz)?;
                gz.finish()?;
                diff_id
            }
        };
        let media_type = match format {
            LayerFormat::Tar => oci::OCI_LAYER_TAR,
            LayerFormat::Gzip => oci::OCI_LAYER_GZIP,
        };
        Ok(Layer {
            descriptor: blob.commit(media_type)?,
            diff_id,
        })
    }

    /// Writes the tar stream and returns its digest.
    fn write_tar<W: Write>(&self, out: W) -> Result<Digest, LayerError> {
        let mut tar = tar::Builder::new(HashingWriter::new(out));
        for (path, entry) in &self.entries {
            let mut h = tar::Header::new_gnu();
            h.set_uid(0);
            h.set_gid(0);
            h.set_mtime(0);
            h.set_mode(entry.mode);
            h.set_size(0);
            match &entry.content {
                Content::Dir => {
                    h.set_entry_type(tar::EntryType::Directory);
                    tar.append_data(&mut h, format!("{path}/"), io::empty())?;
                }
                Content::Bytes(bytes) => {
                    h.set_entry_type(tar::EntryType::Regular);
                    h.set_size(bytes.len() as u64);
                    tar.append_data(&mut h, path, bytes.as_slice())?;
                }
                Content::File(source) => {
                    let err = |e| LayerError::Source {
                        path: source.clone(),
                        source: e,
                    };
                    let file = File::open(source).map_err(err)?;
                    let len = file.metadata().map_err(err)?.len();
                    h.set_entry_type(tar::EntryType::Regular);
                    h.set_size(len);
                    tar.append_data(&mut h, path, file)?;
                }
                Content::Symlink(target) => {
                    h.set_entry_type(tar::EntryType::Symlink);
                    tar.append_link(&mut h, path, target)?;
                }
                Content::Hardlink(target) => {
                    h.set_entry_type(tar::EntryType::Link);
                    tar.append_link(&mut h, path, target)?;
                }
            }
        }
        let hashing = tar.into_inner()?;
        let (_, diff_id, _) = hashing.finish()?;
        Ok(diff_id)
    }
}
