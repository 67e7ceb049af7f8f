//! The on-disk reservation store of one network. See the crate docs for the format and
//! the crash argument.

mod allocate;
mod fsio;
mod gc;
mod holdings;
mod layout;
mod ready;
mod records;
mod release;

use std::fs;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use ipnet::IpNet;

use crate::config::RangeSet;
use crate::error::StoreError;
use crate::fault;
use crate::owner::Owner;
use layout::{Layout, ADDRESSES, CURSORS, FORMAT, FORMAT_FILE, LOCK, OWNERS, TMP};

/// One address handed to an owner, with what the plugin needs to configure it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    /// The address with the subnet's prefix length, e.g. `10.244.1.7/24`.
    pub address: IpNet,
    pub gateway: Option<IpAddr>,
    pub subnet: IpNet,
}

/// One reserved address and who holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    pub address: IpAddr,
    /// `None` when the record cannot be read, which only a power loss can cause; the
    /// address stays taken until garbage collection removes it.
    pub owner: Option<Owner>,
}

/// What garbage collection did. It carries on past individual failures.
#[derive(Debug, Default)]
pub struct GcReport {
    pub released: Vec<(Owner, IpAddr)>,
    /// Addresses whose record could not be read (power loss); released because no valid
    /// attachment can be shown to hold them.
    pub released_unreadable: Vec<IpAddr>,
    pub errors: Vec<StoreError>,
}

/// A handle on `<data_dir>/<network>/`. Holds no open files or locks between calls, so it
/// is cheap, `Send + Sync`, and safe to use from several threads and processes at once.
#[derive(Debug, Clone)]
pub struct Store {
    layout: Layout,
}

impl Store {
    /// Opens (creating if needed) the store of `network_name` under `data_dir`.
    /// The network name must be a CNI network name (letters, digits, `_`, `.`, `-`).
    pub fn open(data_dir: &Path, network_name: &str) -> Result<Store, StoreError> {
        validate_network_name(network_name)?;
        let layout = Layout::new(data_dir.join(network_name));
        let format_file = layout.format_file();
        let expected = format!("{FORMAT}\n");
        // The format file is written last, so its presence means the layout is complete:
        // the common case costs one read.
        let found = match fsio::read_if_exists(&format_file) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => {
                create_layout(&layout, expected.as_bytes())?;
                fs::read(&format_file).map_err(io_err("read", format_file.clone()))?
            }
            Err(e) => return Err(StoreError::io("read", format_file, e)),
        };
        if found != expected.as_bytes() {
            return Err(StoreError::UnsupportedFormat {
                path: format_file,
                found: String::from_utf8_lossy(&found).trim().to_string(),
                expected: FORMAT,
            });
        }
        Ok(Store { layout })
    }

    /// `<data_dir>/<network>/`.
    pub fn dir(&self) -> &Path {
        self.layout.root()
    }

    /// Reserves one address from each range set for `owner` and returns them in set order.
    /// Idempotent: when the owner already holds an address in a set, that address is
    /// returned again. New addresses are picked round-robin after the last one handed out
    /// in the set. Fails with [`StoreError::Exhausted`] (reserving nothing) when a set has
    /// no free address.
    pub fn allocate(
        &self,
        owner: &Owner,
        sets: &[RangeSet],
    ) -> Result<Vec<Allocation>, StoreError> {
        allocate::allocate(&self.layout, owner, sets, &[])
    }

    /// Like [`Store::allocate`], but the sets containing one of `requested` (CNI_ARGS
    /// `IP=`, runtimeConfig `ips`) get exactly that address; the others are allocated
    /// dynamically. Every requested address must be usable in some set, at most one per
    /// set, and not held by another owner.
    pub fn allocate_specific(
        &self,
        owner: &Owner,
        sets: &[RangeSet],
        requested: &[IpAddr],
    ) -> Result<Vec<Allocation>, StoreError> {
        allocate::allocate(&self.layout, owner, sets, requested)
    }

    /// Releases everything `owner` holds and returns the released addresses; `Ok(empty)`
    /// when it holds nothing, so it is safe to repeat.
    pub fn release(&self, owner: &Owner) -> Result<Vec<IpAddr>, StoreError> {
        release::release(&self.layout, owner)
    }

    /// CNI GC: releases every reservation whose owner is not in `valid`, and repairs the
    /// owner index of the valid ones. Fails only when the store cannot be locked or listed;
    /// individual failures are collected in the report.
    pub fn release_all_except(&self, valid: &[Owner]) -> Result<GcReport, StoreError> {
        gc::release_all_except(&self.layout, valid)
    }

    /// Every reserved address, sorted.
    pub fn reservations(&self) -> Result<Vec<Reservation>, StoreError> {
        holdings::reservations(&self.layout)
    }

    /// The addresses `owner` holds, sorted.
    pub fn reserved_by(&self, owner: &Owner) -> Result<Vec<IpAddr>, StoreError> {
        holdings::reserved_by(&self.layout, owner)
    }

    /// CNI STATUS: Ok when the store directory is writable and each range set has at
    /// least one free address.
    pub fn check_ready(&self, sets: &[RangeSet]) -> Result<(), StoreError> {
        ready::check_ready(&self.layout, sets)
    }
}

fn validate_network_name(name: &str) -> Result<(), StoreError> {
    let ok = name.len() <= 200
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if ok {
        Ok(())
    } else {
        Err(StoreError::InvalidNetworkName { name: name.into() })
    }
}

/// Creates the network directory, its subdirectories and, last, the format file.
fn create_layout(layout: &Layout, format: &[u8]) -> Result<(), StoreError> {
    let root = layout.root();
    fs::create_dir_all(root).map_err(io_err("create directory", root.to_path_buf()))?;
    // Checked before the lock file is created so that nothing is added to a foreign
    // directory; concurrent creators of our own store only ever add known entries.
    refuse_foreign_directory(layout)?;
    let _lock = lock(layout, true)?;
    for dir in [
        layout.addresses_dir(),
        layout.owners_dir(),
        layout.cursors_dir(),
        layout.tmp_dir(),
    ] {
        fsio::ensure_dir(&dir).map_err(io_err("create directory", dir.clone()))?;
    }
    sweep_scratch(layout)?;
    let path = layout.format_file();
    fsio::create_file(&layout.new_tmp(), &path, format).map_err(io_err("create", path))?;
    Ok(())
}

/// A directory without our `format` file that already holds other files is someone
/// else's (host-local keeps one file per address in the same shape of path): using it
/// would ignore their reservations and hand out addresses twice.
fn refuse_foreign_directory(layout: &Layout) -> Result<(), StoreError> {
    let root = layout.root();
    let known = [LOCK, FORMAT_FILE, ADDRESSES, OWNERS, CURSORS, TMP];
    let entries = fs::read_dir(root).map_err(|e| StoreError::io("list", root, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io("list", root, e))?;
        let name = entry.file_name();
        if !known.iter().any(|k| name == *k) {
            return Err(StoreError::UnsupportedFormat {
                path: root.to_path_buf(),
                found: format!("no format file, and a foreign entry {name:?}"),
                expected: FORMAT,
            });
        }
    }
    Ok(())
}

/// Takes the store lock. Exclusive for anything that writes.
pub(crate) fn lock(layout: &Layout, exclusive: bool) -> Result<fsio::StoreLock, StoreError> {
    let path = layout.lock_file();
    let guard = fsio::lock(&path, exclusive).map_err(|e| StoreError::io("lock", &path, e))?;
    fault::point("lock taken");
    Ok(guard)
}

/// Removes scratch names left by processes that died mid-operation. Call with the
/// exclusive lock held.
pub(crate) fn sweep_scratch(layout: &Layout) -> Result<(), StoreError> {
    let tmp = layout.tmp_dir();
    fsio::empty_dir(&tmp).map_err(|e| StoreError::io("clean scratch directory", &tmp, e))
}

pub(crate) fn io_err(op: &'static str, path: PathBuf) -> impl FnOnce(std::io::Error) -> StoreError {
    move |e| StoreError::io(op, path, e)
}
