//! Where the datapath lives in bpffs.
//!
//! ```text
//! <root>/maps/<map>_v<layout>         every map, its layout version in its name
//! <root>/progs/<program>              the programs new links attach
//! <root>/links/<dir>/<target>         one pinned link per attachment; `<dir>` is the
//!                                     program's row of the program table (`pods` for
//!                                     `from_pod` on each host veth, `overlay` for
//!                                     `from_overlay` on the VXLAN device)
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
use crate::layout::MapSpec;
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

    /// `maps/<file name>`.
    pub fn map(&self, name: &str) -> PathBuf {
        self.maps_dir().join(name)
    }

    /// Where the map `spec` is pinned: `maps/<name>_v<layout version>`.
    pub fn map_pin(&self, spec: &MapSpec) -> PathBuf {
        self.map(&spec.pin_name())
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
        self.links_dir_of(Program::FromOverlay)
    }

    pub fn pod_links_dir(&self) -> PathBuf {
        self.links_dir_of(Program::FromPod)
    }

    /// The directory holding the links that run `program` (its row of the program
    /// table names it).
    pub fn links_dir_of(&self, program: Program) -> PathBuf {
        self.links_dir().join(program.spec().links)
    }

    /// The pin of `program`'s link on the device `ifname` (see the module docs for how
    /// `.` is spelled).
    pub fn device_link(&self, program: Program, ifname: &str) -> Result<PathBuf, Error> {
        Ok(self.links_dir_of(program).join(link_pin_name(ifname)?))
    }

    pub fn overlay_link(&self, ifname: &str) -> Result<PathBuf, Error> {
        self.device_link(Program::FromOverlay, ifname)
    }

    pub fn pod_link(&self, host_ifname: &str) -> Result<PathBuf, Error> {
        self.device_link(Program::FromPod, host_ifname)
    }

    /// Creates the directory tree (idempotent) and checks that it is on a bpffs, so
    /// that pins really outlive this process.
    pub fn create(&self) -> Result<(), Error> {
        let links = Program::ALL.iter().map(|p| self.links_dir_of(*p));
        for dir in [self.maps_dir(), self.progs_dir()].into_iter().chain(links) {
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
