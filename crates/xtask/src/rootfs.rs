//! The file tree a container of an image sees: the layers applied in order, as a runtime
//! applies them. Whiteouts (`.wh.<name>`, `.wh..wh..opq`) hide what lower layers had; an
//! entry whose parent path goes through a symbolic link lands where the link points (Debian's
//! `lib -> usr/lib`); an entry replaces whatever was at its own path unless both are
//! directories.
//!
//! Only what the check needs is kept per path: its kind, the layer it came from, and for a
//! regular file the identification read from its first bytes. File contents are never held.

use std::collections::BTreeMap;
use std::io::Read;

use crate::elf::{self, Sniff};

/// Symbolic links followed while resolving one path, as Linux's `MAXSYMLINKS`.
const MAX_SYMLINK_HOPS: usize = 40;
/// Paths in one image's tree; far above any real image, low enough to bound memory.
const MAX_NODES: usize = 2_000_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File(Sniff),
    Symlink(String),
    /// Devices, FIFOs: nothing to execute.
    Special,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub kind: Kind,
    /// Index of the layer that put it there.
    pub layer: usize,
    /// The path as the layer's tar wrote it, when that differs from where it landed.
    pub written_as: Option<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RootfsError {
    #[error("reading the layer's tar stream: {0}")]
    Tar(String),
    #[error("{path}: too many levels of symbolic links")]
    SymlinkLoop { path: String },
    #[error("{path} is a hard link to {target}, which is not a regular file in the image")]
    DanglingHardlink { path: String, target: String },
    #[error("more than {MAX_NODES} paths in one image")]
    TooManyPaths,
}

#[derive(Debug, Default)]
pub struct Rootfs {
    nodes: BTreeMap<String, Node>,
}

/// Splits a tar path into components, dropping `.`, empty components and leading `/`.
fn components(path: &str) -> Vec<&str> {
    path.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect()
}

impl Rootfs {
    pub fn new() -> Self {
        Self::default()
    }

    /// Regular files, by the path a process in the container opens them at.
    pub fn files(&self) -> impl Iterator<Item = (&str, &Node)> {
        self.nodes
            .iter()
            .filter(|(_, n)| matches!(n.kind, Kind::File(_)))
            .map(|(p, n)| (p.as_str(), n))
    }

    pub fn get(&self, path: &str) -> Option<&Node> {
        self.nodes.get(&self.resolve(&components(path), true).ok()?)
    }

    /// Applies one layer's tar stream on top of the tree.
    pub fn apply<R: Read>(&mut self, layer: usize, tar: R) -> Result<(), RootfsError> {
        let tar_err = |e: std::io::Error| RootfsError::Tar(e.to_string());
        let mut archive = tar::Archive::new(tar);
        for entry in archive.entries().map_err(tar_err)? {
            let mut entry = entry.map_err(tar_err)?;
            let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
            let parts = components(&raw);
            let Some((&name, parent)) = parts.split_last() else {
                continue; // the root directory itself
            };
            let parent = self.resolve(parent, true)?;
            let join = |name: &str| {
                if parent.is_empty() {
                    name.to_string()
                } else {
                    format!("{parent}/{name}")
                }
            };
            if name == ".wh..wh..opq" {
                self.remove_lower(&parent, layer, false);
                continue;
            }
            if let Some(hidden) = name.strip_prefix(".wh.") {
                if !hidden.starts_with(".wh.") {
                    self.remove_lower(&join(hidden), layer, true);
                }
                continue;
            }
            let path = join(name);
            let kind = match entry.header().entry_type() {
                tar::EntryType::Regular
                | tar::EntryType::Continuous
                | tar::EntryType::GNUSparse => {
                    let mut head = [0u8; elf::IDENT_LEN];
                    let n = elf::read_up_to(&mut entry, &mut head).map_err(tar_err)?;
                    Kind::File(elf::sniff(&head[..n]))
                }
                tar::EntryType::Directory => Kind::Dir,
                tar::EntryType::Symlink => Kind::Symlink(
                    entry
                        .link_name_bytes()
                        .map(|b| String::from_utf8_lossy(&b).into_owned())
                        .unwrap_or_default(),
                ),
                tar::EntryType::Link => {
                    let target = entry
                        .link_name_bytes()
                        .map(|b| String::from_utf8_lossy(&b).into_owned())
                        .unwrap_or_default();
                    let resolved = self.resolve(&components(&target), false)?;
                    match self.nodes.get(&resolved) {
                        Some(Node {
                            kind: kind @ Kind::File(_),
                            ..
                        }) => kind.clone(),
                        _ => {
                            return Err(RootfsError::DanglingHardlink {
                                path: raw.clone(),
                                target,
                            })
                        }
                    }
                }
                tar::EntryType::Char | tar::EntryType::Block | tar::EntryType::Fifo => {
                    Kind::Special
                }
                // PAX global headers and other metadata-only records.
                _ => continue,
            };
            let keep_existing_dir = kind == Kind::Dir
                && matches!(self.nodes.get(&path), Some(n) if n.kind == Kind::Dir);
            if keep_existing_dir {
                continue;
            }
            self.remove_tree(&path);
            if self.nodes.len() >= MAX_NODES {
                return Err(RootfsError::TooManyPaths);
            }
            let trimmed = raw
                .trim_start_matches("./")
                .trim_start_matches('/')
                .trim_end_matches('/');
            let written_as = (trimmed != path).then(|| trimmed.to_string());
            self.nodes.insert(
                path,
                Node {
                    kind,
                    layer,
                    written_as,
                },
            );
        }
        Ok(())
    }

    /// The canonical path of `parts`, following symbolic links in every component but the
    /// last, and in the last too when `follow_last`. Links resolve inside the image: an
    /// absolute target starts again at the image's root, and `..` stops at the root.
    fn resolve(&self, parts: &[&str], follow_last: bool) -> Result<String, RootfsError> {
        let mut pending: Vec<String> = parts.iter().rev().map(|s| s.to_string()).collect();
        let mut current: Vec<String> = Vec::new();
        let mut hops = 0;
        while let Some(part) = pending.pop() {
            if part == ".." {
                current.pop();
                continue;
            }
            current.push(part);
            let is_last = pending.is_empty();
            if is_last && !follow_last {
                break;
            }
            let here = current.join("/");
            if let Some(Node {
                kind: Kind::Symlink(target),
                ..
            }) = self.nodes.get(&here)
            {
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return Err(RootfsError::SymlinkLoop {
                        path: parts.join("/"),
                    });
                }
                current.pop();
                if target.starts_with('/') {
                    current.clear();
                }
                for c in components(target).into_iter().rev() {
                    pending.push(c.to_string());
                }
            }
        }
        Ok(current.join("/"))
    }

    /// Removes `path` and everything under it.
    fn remove_tree(&mut self, path: &str) {
        self.nodes.remove(path);
        let prefix = format!("{path}/");
        let under: Vec<String> = self
            .nodes
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(k, _)| k.clone())
            .collect();
        for k in under {
            self.nodes.remove(&k);
        }
    }

    /// A whiteout: removes what layers below `layer` have at `path` (and under it), or only
    /// under it for an opaque directory.
    fn remove_lower(&mut self, path: &str, layer: usize, including_self: bool) {
        let prefix = if path.is_empty() {
            String::new()
        } else {
            format!("{path}/")
        };
        let mut doomed: Vec<String> = self
            .nodes
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .filter(|(_, n)| n.layer < layer)
            .map(|(k, _)| k.clone())
            .collect();
        if including_self && self.nodes.get(path).is_some_and(|n| n.layer < layer) {
            doomed.push(path.to_string());
        }
        for k in doomed {
            self.nodes.remove(&k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elf::{Class, Endian, Ident};

    fn tar(entries: &[(&str, tar::EntryType, &[u8], &str)]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (path, kind, data, link) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*kind);
            h.set_mode(0o755);
            h.set_size(data.len() as u64);
            if link.is_empty() {
                b.append_data(&mut h, path, *data).unwrap();
            } else {
                b.append_link(&mut h, path, link).unwrap();
            }
        }
        b.into_inner().unwrap()
    }

    fn elf64(machine: u16) -> Vec<u8> {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        h[18..20].copy_from_slice(&machine.to_le_bytes());
        h
    }

    use tar::EntryType::{Directory as D, Link as H, Regular as F, Symlink as S};

    #[test]
    fn entries_under_a_symlinked_directory_land_at_the_link_target() {
        let mut fs = Rootfs::new();
        fs.apply(
            0,
            &tar(&[("usr/lib/", D, b"", ""), ("lib", S, b"", "usr/lib")])[..],
        )
        .unwrap();
        fs.apply(
            1,
            &tar(&[("lib/x/libc.so.6", F, &elf64(elf::EM_X86_64), "")])[..],
        )
        .unwrap();
        let node = fs.get("usr/lib/x/libc.so.6").unwrap();
        assert_eq!(node.layer, 1);
        assert_eq!(node.written_as.as_deref(), Some("lib/x/libc.so.6"));
        assert_eq!(
            node.kind,
            Kind::File(Sniff::Elf(Ident {
                class: Class::Elf64,
                endian: Endian::Little,
                machine: elf::EM_X86_64
            }))
        );
        // And a whiteout through the link removes it.
        fs.apply(2, &tar(&[("lib/x/.wh.libc.so.6", F, b"", "")])[..])
            .unwrap();
        assert_eq!(fs.files().count(), 0);
    }

    #[test]
    fn whiteouts_hide_lower_layers_only() {
        let mut fs = Rootfs::new();
        fs.apply(
            0,
            &tar(&[
                ("a/one", F, b"1", ""),
                ("a/two", F, b"2", ""),
                ("b", F, b"", ""),
            ])[..],
        )
        .unwrap();
        fs.apply(
            1,
            &tar(&[
                ("a/three", F, b"3", ""),
                ("a/.wh..wh..opq", F, b"", ""),
                (".wh.b", F, b"", ""),
            ])[..],
        )
        .unwrap();
        let files: Vec<&str> = fs.files().map(|(p, _)| p).collect();
        assert_eq!(files, vec!["a/three"]);
    }

    #[test]
    fn hardlinks_carry_their_targets_identification() {
        let mut fs = Rootfs::new();
        fs.apply(
            0,
            &tar(&[
                ("bin/a", F, &elf64(elf::EM_AARCH64), ""),
                ("bin/b", H, b"", "bin/a"),
            ])[..],
        )
        .unwrap();
        assert_eq!(fs.get("bin/b").unwrap().kind, fs.get("bin/a").unwrap().kind);
        let err = fs
            .apply(1, &tar(&[("bin/c", H, b"", "bin/missing")])[..])
            .unwrap_err();
        assert!(matches!(err, RootfsError::DanglingHardlink { .. }));
    }

    #[test]
    fn symlink_loops_and_escapes_are_contained() {
        let mut fs = Rootfs::new();
        fs.apply(
            0,
            &tar(&[("loop", S, b"", "loop"), ("up", S, b"", "../../..")])[..],
        )
        .unwrap();
        assert!(matches!(
            fs.apply(1, &tar(&[("loop/x", F, b"", "")])[..]),
            Err(RootfsError::SymlinkLoop { .. })
        ));
        fs.apply(2, &tar(&[("up/etc/x", F, b"", "")])[..]).unwrap();
        assert!(fs.get("etc/x").is_some(), "`..` stops at the image root");
    }

    #[test]
    fn a_directory_replaces_a_symlink_and_a_file_replaces_a_tree() {
        let mut fs = Rootfs::new();
        fs.apply(
            0,
            &tar(&[("usr/lib/f", F, b"", ""), ("lib", S, b"", "usr/lib")])[..],
        )
        .unwrap();
        fs.apply(1, &tar(&[("lib/", D, b"", ""), ("lib/g", F, b"", "")])[..])
            .unwrap();
        assert!(
            fs.get("lib/g").unwrap().written_as.is_none(),
            "lib is a real directory now"
        );
        fs.apply(2, &tar(&[("usr", F, b"", "")])[..]).unwrap();
        let files: Vec<&str> = fs.files().map(|(p, _)| p).collect();
        assert_eq!(files, vec!["lib/g", "usr"]);
    }
}
