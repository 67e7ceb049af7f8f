//! Named network namespaces (as `ip netns` makes them: a bind mount of the namespace file
//! under /run/netns) and running code inside one.
//!
//! Only the network namespace is ever entered; the mount namespace stays the host's, so BPF
//! pins made by an agent or plugin started from here land in the host's bpffs.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::Context;
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sched::{setns, unshare, CloneFlags};

pub const NETNS_DIR: &str = "/run/netns";

pub fn path_of(name: &str) -> PathBuf {
    Path::new(NETNS_DIR).join(name)
}

/// Creates the namespace `name` with loopback up; fails if it exists.
pub fn create(name: &str) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(NETNS_DIR)?;
    let path = path_of(name);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .with_context(|| format!("create {}", path.display()))?;
    let target = path.clone();
    let made = std::thread::spawn(move || -> anyhow::Result<()> {
        // A thread of its own: unshare moves only this thread into the new namespace, and
        // the thread ends right after, so no other code ever runs there by accident.
        unshare(CloneFlags::CLONE_NEWNET).context("unshare(CLONE_NEWNET)")?;
        mount(
            Some("/proc/thread-self/ns/net"),
            &target,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .context("bind-mount the namespace")?;
        Ok(())
    })
    .join()
    .map_err(|_| anyhow::anyhow!("namespace thread panicked"))?;
    if let Err(e) = made {
        let _ = std::fs::remove_file(&path);
        return Err(e);
    }
    in_netns(&path, || {
        let mut h = weft_netlink::Handle::new()?;
        let lo = h.link_by_name("lo")?.context("no loopback")?;
        h.set_up(lo.index)?;
        Ok(())
    })?;
    Ok(path)
}

/// Removes the namespace `name` (processes still in it keep it alive until they exit).
pub fn delete(name: &str) -> anyhow::Result<()> {
    let path = path_of(name);
    if !path.exists() {
        return Ok(());
    }
    let _ = umount2(&path, MntFlags::MNT_DETACH);
    std::fs::remove_file(&path).with_context(|| format!("remove {}", path.display()))
}

/// Every namespace under /run/netns whose name starts with `prefix`.
pub fn list_with_prefix(prefix: &str) -> Vec<String> {
    std::fs::read_dir(NETNS_DIR)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// Runs `f` on a fresh thread that has entered the network namespace at `path`. Sockets
/// made there stay in that namespace whatever thread uses them later.
pub fn in_netns<T: Send + 'static>(
    path: &Path,
    f: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    let owned = path.to_path_buf();
    std::thread::spawn(move || -> anyhow::Result<T> {
        let file = File::open(&owned).with_context(|| format!("open {}", owned.display()))?;
        setns(&file, CloneFlags::CLONE_NEWNET)
            .with_context(|| format!("enter {}", owned.display()))?;
        f()
    })
    .join()
    .map_err(|_| anyhow::anyhow!("thread in {} panicked", path.display()))?
}

/// Pids of processes whose network namespace is the one at `path`.
pub fn pids_in(path: &Path) -> Vec<i32> {
    let Ok(target) = std::fs::metadata(path) else {
        return Vec::new();
    };
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if let Ok(meta) = std::fs::metadata(format!("/proc/{pid}/ns/net")) {
            if meta.ino() == target.ino() && meta.dev() == target.dev() {
                out.push(pid);
            }
        }
    }
    out
}
