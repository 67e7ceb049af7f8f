//! Where everything of one network lives under `<data_dir>/<network>/`.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::addr::Family;
use crate::owner::Owner;

/// First line of the `format` file; bump it when the layout changes incompatibly.
pub(crate) const FORMAT: &str = "weft-ipam 1";

pub(crate) const LOCK: &str = "lock";
pub(crate) const FORMAT_FILE: &str = "format";
pub(crate) const ADDRESSES: &str = "addresses";
pub(crate) const OWNERS: &str = "owners";
pub(crate) const CURSORS: &str = "cursors";
pub(crate) const TMP: &str = "tmp";

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

#[derive(Debug, Clone)]
pub(crate) struct Layout {
    root: PathBuf,
}

impl Layout {
    pub(crate) fn new(root: PathBuf) -> Layout {
        Layout { root }
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    pub(crate) fn lock_file(&self) -> PathBuf {
        self.root.join(LOCK)
    }

    pub(crate) fn format_file(&self) -> PathBuf {
        self.root.join(FORMAT_FILE)
    }

    pub(crate) fn addresses_dir(&self) -> PathBuf {
        self.root.join(ADDRESSES)
    }

    pub(crate) fn owners_dir(&self) -> PathBuf {
        self.root.join(OWNERS)
    }

    pub(crate) fn cursors_dir(&self) -> PathBuf {
        self.root.join(CURSORS)
    }

    pub(crate) fn tmp_dir(&self) -> PathBuf {
        self.root.join(TMP)
    }

    /// `addresses/<address>`, named by the address's canonical text form.
    pub(crate) fn address(&self, a: IpAddr) -> PathBuf {
        self.addresses_dir().join(a.to_string())
    }

    /// `owners/<container id>@<ifname>`; the owner must be validated.
    pub(crate) fn owner_index(&self, owner: &Owner) -> PathBuf {
        self.owners_dir().join(owner.file_key())
    }

    pub(crate) fn cursor(&self, family: Family) -> PathBuf {
        self.cursors_dir().join(match family {
            Family::V4 => "ipv4",
            Family::V6 => "ipv6",
        })
    }

    /// A fresh scratch name in `tmp/`, unique within this process (and, because the
    /// pid is in it, among live processes).
    pub(crate) fn new_tmp(&self) -> PathBuf {
        let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        self.tmp_dir().join(format!("{}.{n}", std::process::id()))
    }
}

/// The address a directory entry of `addresses/` names, if the name is the canonical form
/// of an address (anything else was not written by this crate and reserves nothing).
pub(crate) fn address_from_file_name(name: &std::ffi::OsStr) -> Option<IpAddr> {
    let text = name.to_str()?;
    let a: IpAddr = text.parse().ok()?;
    (a.to_string() == text).then_some(a)
}
