//! Scratch directories that runtimes mount things into, and their safe removal.

use crate::error::{io_context, Result};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The workspace root (two levels above this crate), where `target/` lives.
pub fn workspace_dir() -> PathBuf {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    crate_dir
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| crate_dir.to_path_buf())
}

/// A uniquely named `weft…` directory under the system temp dir. On drop, every mount
/// below it is detached and it is removed without ever crossing into another filesystem,
/// so a leftover bind or overlay mount can never make us delete someone else's files.
#[derive(Debug)]
pub struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    pub fn new(tag: &str) -> Result<ScratchDir> {
        let path = std::env::temp_dir().join(weft_testkit::unique_name(tag));
        std::fs::create_dir_all(&path).map_err(io_context(format!("create {}", path.display())))?;
        // Resolve once so the prefix matches what /proc/self/mountinfo reports.
        let path = path
            .canonicalize()
            .map_err(io_context(format!("resolve {}", path.display())))?;
        Ok(ScratchDir { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.path.join(rel)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        unmount_under(&self.path);
        if let Err(e) = remove_tree(&self.path) {
            eprintln!("warning: could not remove {}: {e}", self.path.display());
        }
    }
}

/// Mount points at or below `root`, deepest first, read from /proc/self/mountinfo.
pub fn mounts_under(root: &Path) -> Vec<PathBuf> {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = info
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| PathBuf::from(unescape_mountinfo(field)))
        .filter(|mount_point| mount_point.starts_with(root))
        .collect();
    found.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    found.dedup();
    found
}

/// Lazily detaches every mount at or below `root`. Several passes, because mounts can be
/// stacked on the same point. Best effort: this runs from Drop.
pub fn unmount_under(root: &Path) {
    for _ in 0..4 {
        let mounts = mounts_under(root);
        if mounts.is_empty() {
            return;
        }
        for mount_point in mounts {
            if let Err(e) = nix::mount::umount2(&mount_point, nix::mount::MntFlags::MNT_DETACH) {
                eprintln!("warning: umount {}: {e}", mount_point.display());
            }
        }
    }
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo` octal.
fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|digits| {
            let text = std::str::from_utf8(digits).ok()?;
            u8::from_str_radix(text, 8).ok()
        });
        match (bytes.get(i), octal) {
            (Some(b'\\'), Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (Some(&b), _) => {
                out.push(b);
                i += 1;
            }
            (None, _) => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Removes a directory tree, refusing to descend into anything on another device
/// (a mount we failed to detach). Such a subtree is reported as an error and left alone.
pub fn remove_tree(root: &Path) -> Result<()> {
    let meta = match std::fs::symlink_metadata(root) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_context(format!("stat {}", root.display()))(e)),
    };
    remove_on_device(root, meta.dev())
}

fn remove_on_device(dir: &Path, device: u64) -> Result<()> {
    let meta =
        std::fs::symlink_metadata(dir).map_err(io_context(format!("stat {}", dir.display())))?;
    if !meta.is_dir() {
        return std::fs::remove_file(dir).map_err(io_context(format!("remove {}", dir.display())));
    }
    if meta.dev() != device {
        return Err(crate::error::unexpected(
            "mount left behind",
            format!(
                "{} is on another filesystem; not removing it",
                dir.display()
            ),
        ));
    }
    let entries = std::fs::read_dir(dir).map_err(io_context(format!("list {}", dir.display())))?;
    for entry in entries {
        let entry = entry.map_err(io_context(format!("list {}", dir.display())))?;
        remove_on_device(&entry.path(), device)?;
    }
    std::fs::remove_dir(dir).map_err(io_context(format!("remove {}", dir.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_decoded() {
        assert_eq!(unescape_mountinfo(r"/tmp/a\040b"), "/tmp/a b");
        assert_eq!(
            unescape_mountinfo(r"/tmp/back\134slash"),
            r"/tmp/back\slash"
        );
        assert_eq!(unescape_mountinfo("/plain/path"), "/plain/path");
        assert_eq!(unescape_mountinfo(r"/trailing\04"), r"/trailing\04");
    }

    #[test]
    fn scratch_dir_is_removed_on_drop() {
        let path = {
            let dir = ScratchDir::new("fs").expect("scratch dir");
            std::fs::create_dir_all(dir.join("a/b")).expect("mkdir");
            std::fs::write(dir.join("a/b/f"), "x").expect("write");
            std::os::unix::fs::symlink("/etc", dir.join("a/link")).expect("symlink");
            dir.path().to_path_buf()
        };
        assert!(!path.exists(), "{} still exists", path.display());
        assert!(Path::new("/etc").is_dir(), "removal followed a symlink");
    }
}
