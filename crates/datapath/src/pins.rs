//! Where the datapath lives in bpffs.
//!
//! ```text
//! <root>/maps/weft_endpoints          pinned by name by the loader (LIBBPF_PIN_BY_NAME)
//! <root>/maps/weft_routes
//! <root>/maps/weft_config
//! <root>/maps/weft_counters
//! <root>/progs/from_pod               the programs new links attach
//! <root>/progs/from_overlay
//! <root>/links/overlay/<ifname>       TCX ingress link of the VXLAN device
//! <root>/links/pods/<host veth name>  TCX ingress link of each pod's host-side veth
//! ```
//!
//! bpffs refuses `.` in names (reserved by the kernel), while interface names may
//! contain it (`weft.vxlan`, `eth0.100`). Link pins therefore spell `.` as `:`, which
//! no interface name can contain, so the mapping is one-to-one: `weft.vxlan` is
//! pinned as `links/overlay/weft:vxlan`. The pin root must not contain dots either.
//!
//! The root defaults to [`DEFAULT_PIN_ROOT`]; the lab uses one root per simulated node.
//! Everything pinned here outlives the processes that made it, which is what lets
//! the datapath survive agent restarts. Callers must enter only the node's *network*
//! namespace: entering a mount namespace (as `ip netns exec` does) would pin into a
//! private bpffs that vanishes with the process.

use crate::error::Error;
use crate::programs::Program;
use std::path::{Path, PathBuf};

pub const DEFAULT_PIN_ROOT: &str = "/sys/fs/bpf/weft";

/// `BPF_FS_MAGIC` from `<linux/magic.h>`.
const BPF_FS_MAGIC: i64 = 0xcafe_4a11;

/// The pin paths under one root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PinLayout {
    root: PathBuf,
}

impl Default for PinLayout {
    fn default() -> Self {
        PinLayout::new(DEFAULT_PIN_ROOT)
    }
}

impl PinLayout {
    pub fn new(root: impl Into<PathBuf>) -> PinLayout {
        PinLayout { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn maps_dir(&self) -> PathBuf {
        self.root.join("maps")
    }

    pub fn map(&self, name: &str) -> PathBuf {
        self.maps_dir().join(name)
    }

    pub fn progs_dir(&self) -> PathBuf {
        self.root.join("progs")
    }

    pub fn program(&self, program: Program) -> PathBuf {
        self.progs_dir().join(program.name())
    }

    /// Where a replacement program is pinned while links move over to it; renamed
    /// over [`PinLayout::program`] once they have.
    pub fn program_staging(&self, program: Program) -> PathBuf {
        self.progs_dir().join(format!("{}_staging", program.name()))
    }

    pub fn links_dir(&self) -> PathBuf {
        self.root.join("links")
    }

    pub fn overlay_links_dir(&self) -> PathBuf {
        self.links_dir().join("overlay")
    }

    pub fn pod_links_dir(&self) -> PathBuf {
        self.links_dir().join("pods")
    }

    /// The directory holding the links that run `program`.
    pub fn links_dir_of(&self, program: Program) -> PathBuf {
        match program {
            Program::FromPod => self.pod_links_dir(),
            Program::FromOverlay => self.overlay_links_dir(),
        }
    }

    pub fn overlay_link(&self, ifname: &str) -> Result<PathBuf, Error> {
        Ok(self.overlay_links_dir().join(link_pin_name(ifname)?))
    }

    pub fn pod_link(&self, host_ifname: &str) -> Result<PathBuf, Error> {
        Ok(self.pod_links_dir().join(link_pin_name(host_ifname)?))
    }

    /// Creates the directory tree (idempotent) and checks that it is on a bpffs, so
    /// that pins really outlive this process.
    pub fn create(&self) -> Result<(), Error> {
        for dir in [
            self.maps_dir(),
            self.progs_dir(),
            self.overlay_links_dir(),
            self.pod_links_dir(),
        ] {
            std::fs::create_dir_all(&dir).map_err(|source| Error::Bpf {
                op: "mkdir",
                path: dir.clone(),
                source,
            })?;
        }
        check_bpffs(&self.root)
    }
}

/// Fails unless `path` lies on a bpf filesystem.
pub fn check_bpffs(path: &Path) -> Result<(), Error> {
    let c_path = crate::sys::c_path(path)?;
    // SAFETY: statfs writes into the zeroed struct we own; the path is NUL-terminated.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statfs(c_path.as_ptr(), &mut st) };
    if rc != 0 {
        return Err(Error::Bpf {
            op: "statfs",
            path: path.to_path_buf(),
            source: std::io::Error::last_os_error(),
        });
    }
    #[allow(clippy::unnecessary_cast)] // f_type's integer type differs between libcs
    if st.f_type as i64 != BPF_FS_MAGIC {
        return Err(Error::NotBpffs {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

/// The pin file name for a link on `ifname` (see the module docs for the `.` rule).
pub fn link_pin_name(ifname: &str) -> Result<String, Error> {
    validate_ifname(ifname)?;
    Ok(ifname.replace('.', ":"))
}

/// The interface name a link pin file name stands for.
pub fn ifname_of_link_pin(pin_name: &str) -> String {
    pin_name.replace(':', ".")
}

/// Interface names become pin file names, so they must be what the kernel accepts
/// (`dev_valid_name`) and nothing that could escape the links directory.
pub fn validate_ifname(name: &str) -> Result<(), Error> {
    let reason = if name.is_empty() {
        Some("empty")
    } else if name.len() > 15 {
        Some("longer than 15 bytes")
    } else if name == "." || name == ".." {
        Some("`.` and `..` are not interface names")
    } else if name
        .bytes()
        .any(|b| b == b'/' || b == b':' || b == 0 || b.is_ascii_whitespace())
    {
        Some("contains `/`, `:`, NUL or whitespace")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(Error::InvalidIfname {
            name: name.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_under_root() {
        let pins = PinLayout::new("/sys/fs/bpf/weft-n1");
        assert_eq!(
            pins.map("weft_routes"),
            Path::new("/sys/fs/bpf/weft-n1/maps/weft_routes")
        );
        assert_eq!(
            pins.program(Program::FromOverlay),
            Path::new("/sys/fs/bpf/weft-n1/progs/from_overlay")
        );
        assert_eq!(
            pins.pod_link("weft1a2b").unwrap(),
            Path::new("/sys/fs/bpf/weft-n1/links/pods/weft1a2b")
        );
        assert_eq!(
            pins.overlay_link("weft.vxlan").unwrap(),
            Path::new("/sys/fs/bpf/weft-n1/links/overlay/weft:vxlan")
        );
        assert_eq!(ifname_of_link_pin("weft:vxlan"), "weft.vxlan");
        assert_eq!(PinLayout::default().root(), Path::new(DEFAULT_PIN_ROOT));
    }

    #[test]
    fn rejects_names_that_escape_or_the_kernel_refuses() {
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "../x",
            "x y",
            "a:b",
            "sixteen-chars-xx",
            "a\0b",
        ] {
            assert!(
                matches!(validate_ifname(bad), Err(Error::InvalidIfname { .. })),
                "{bad:?} accepted"
            );
        }
        for good in ["eth0", "weft.vxlan", "cali1234567890a", "v-eth_1"] {
            validate_ifname(good).unwrap();
        }
    }
}
