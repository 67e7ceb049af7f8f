//! The few filesystem moves the store is built from. Each one leaves the disk in a state
//! that is either "before" or "after" as seen by readers of the final name, whatever
//! instruction the process dies at; see the crate docs for how they compose.
//!
//! Records are symbolic links whose target text is the record: `symlink()` creates the
//! name and its whole content in one system call, fails if the name exists, and needs no
//! scratch file, which makes it both the atomic "create if absent" and the cheapest way to
//! publish a small record (creating inodes dominates the cost of an allocation).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use crate::fault;

/// An exclusive or shared `flock` on the store's lock file, released on drop or, when the
/// holder dies, by the kernel.
pub(crate) struct StoreLock {
    _flock: Flock<File>,
}

pub(crate) fn lock(path: &Path, exclusive: bool) -> io::Result<StoreLock> {
    // A fresh open file description per lock: flock is per description, so two threads
    // sharing one descriptor would not exclude each other.
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .open(path)?;
    let arg = if exclusive {
        FlockArg::LockExclusive
    } else {
        FlockArg::LockShared
    };
    loop {
        match Flock::lock(file, arg) {
            Ok(flock) => return Ok(StoreLock { _flock: flock }),
            Err((f, Errno::EINTR)) => file = f,
            Err((_, errno)) => return Err(io::Error::from(errno)),
        }
    }
}

/// Creates `path` as a record holding `text`, atomically and only if the name is free.
/// Returns false when it already existed.
pub(crate) fn create_record(path: &Path, text: &str) -> io::Result<bool> {
    match std::os::unix::fs::symlink(text, path) {
        Ok(()) => {
            fault::point("record created");
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// Replaces (or creates) the record `path` with `text`, atomically: the new record is made
/// under the scratch name `tmp` and renamed over the old one.
pub(crate) fn replace_record(tmp: &Path, path: &Path, text: &str) -> io::Result<()> {
    std::os::unix::fs::symlink(text, tmp)?;
    fault::point("scratch record created");
    if let Err(e) = fs::rename(tmp, path) {
        let _ = fs::remove_file(tmp);
        return Err(e);
    }
    fault::point("scratch record renamed over its final name");
    Ok(())
}

/// What a record name holds.
pub(crate) enum RecordText {
    Absent,
    Text(String),
    /// Not a record this crate wrote (a regular file, or a target that is not UTF-8).
    Foreign,
}

pub(crate) fn read_record(path: &Path) -> io::Result<RecordText> {
    match fs::read_link(path) {
        Ok(target) => Ok(match target.into_os_string().into_string() {
            Ok(text) => RecordText::Text(text),
            Err(_) => RecordText::Foreign,
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(RecordText::Absent),
        // EINVAL: the name exists but is not a symbolic link.
        Err(e) if e.raw_os_error() == Some(libc_einval()) => Ok(RecordText::Foreign),
        Err(e) => Err(e),
    }
}

fn libc_einval() -> i32 {
    Errno::EINVAL as i32
}

/// Overwrites the start of the regular file `path` (creating it) with `bytes`, in place:
/// no new inode. Only for hints, whose torn or stale content is harmless.
pub(crate) fn overwrite_hint(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .open(path)?;
    f.write_all_at(bytes, 0)?;
    fault::point("hint overwritten");
    Ok(())
}

/// Creates the regular file `target` with exactly `bytes` if it does not exist, atomically
/// (written under the scratch name `tmp`, then hard-linked). Returns false when it existed.
pub(crate) fn create_file(tmp: &Path, target: &Path, bytes: &[u8]) -> io::Result<bool> {
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(tmp)?;
    let written = f.write_all(bytes);
    drop(f);
    let linked = written.and_then(|()| match fs::hard_link(tmp, target) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    });
    let _ = fs::remove_file(tmp);
    linked
}

/// Removes `path`; true when it existed.
pub(crate) fn remove_if_exists(path: &Path) -> io::Result<bool> {
    match fs::remove_file(path) {
        Ok(()) => {
            fault::point("name removed");
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// The content of the regular file `path`, or `None` when it does not exist.
pub(crate) fn read_if_exists(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// True when `path` exists (as anything; links are not followed).
pub(crate) fn exists(path: &Path) -> io::Result<bool> {
    match fs::symlink_metadata(path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Creates directory `path` unless it exists.
pub(crate) fn ensure_dir(path: &Path) -> io::Result<()> {
    match fs::create_dir(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Removes every entry of the scratch directory. Only called under the exclusive lock:
/// scratch names are only made under that lock, so any found then belong to a process
/// that died mid-operation.
pub(crate) fn empty_dir(dir: &Path) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        match fs::remove_file(&path) {
            Ok(()) => fault::point("leftover scratch name removed"),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
