//! The CNI side of a test node: a private plugin directory, a private conf directory,
//! an IPAM data directory, and the network configs the tests hand to the runtimes.

use crate::error::{io_context, HarnessError, Result};
use crate::fs::{workspace_dir, ScratchDir};
use serde_json::{json, Value};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// Where Debian's containernetworking-plugins live.
pub const REFERENCE_PLUGIN_DIR: &str = "/usr/lib/cni";
/// The CNI version the conflists given to the runtimes declare. Not 1.1.0: containerd
/// 1.6.20 and podman 4.3.1 (Debian 12) embed libcni 1.1, which fails every ADD whose
/// result says 1.1.0 (`plugin type="weft" failed (add): unsupported CNI result version
/// "1.1.0"`, seen with both), so a kubelet node running them must use 1.0.0 configs.
/// The reference plugins (1.1.1) also stop at 1.0.0.
pub const RUNTIME_CNI_VERSION: &str = "1.0.0";

/// The weft binary to test: `$WEFT_BIN`, else the newest of
/// `<workspace>/target/{debug,release}/weft`.
pub fn weft_plugin_bin() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("WEFT_BIN").map(PathBuf::from) {
        return if path.is_file() {
            Ok(path)
        } else {
            Err(HarnessError::PluginNotFound {
                looked_at: vec![path],
            })
        };
    }
    let candidates: Vec<PathBuf> = ["debug", "release"]
        .iter()
        .map(|profile| workspace_dir().join("target").join(profile).join("weft"))
        .collect();
    candidates
        .iter()
        .filter_map(|path| {
            let modified = std::fs::metadata(path).ok()?.modified().ok()?;
            Some((modified, path.clone()))
        })
        .max()
        .map(|(_, path)| path)
        .ok_or(HarnessError::PluginNotFound {
            looked_at: candidates,
        })
}

/// Private `bin/`, `net.d/` and `ipam/` directories for one test. The bin dir holds
/// symlinks to every reference plugin (the runtimes need `loopback`) and, for weft, a
/// copy of the weft binary plus the `weft-guard` name for the chained guard.
#[derive(Debug)]
pub struct CniDirs {
    dir: ScratchDir,
}

impl CniDirs {
    /// Only the reference plugins.
    pub fn reference() -> Result<CniDirs> {
        let dirs = CniDirs {
            dir: ScratchDir::new("cn")?,
        };
        for sub in ["bin", "net.d", "ipam"] {
            std::fs::create_dir_all(dirs.dir.join(sub))
                .map_err(io_context(format!("create {sub}")))?;
        }
        let plugins = std::fs::read_dir(REFERENCE_PLUGIN_DIR).map_err(io_context(
            "list /usr/lib/cni (apt-get install containernetworking-plugins)",
        ))?;
        for plugin in plugins {
            let plugin = plugin.map_err(io_context("list /usr/lib/cni"))?;
            let link = dirs.bin_dir().join(plugin.file_name());
            std::os::unix::fs::symlink(plugin.path(), &link)
                .map_err(io_context(format!("symlink {}", link.display())))?;
        }
        Ok(dirs)
    }

    /// The reference plugins plus weft from `weft_bin` (copied, so a rebuild during the
    /// run cannot swap the binary under a running test).
    pub fn with_weft(weft_bin: &Path) -> Result<CniDirs> {
        let dirs = CniDirs::reference()?;
        let installed = dirs.bin_dir().join("weft");
        std::fs::copy(weft_bin, &installed)
            .map_err(io_context(format!("copy {}", weft_bin.display())))?;
        let guard = dirs.bin_dir().join("weft-guard");
        std::os::unix::fs::symlink("weft", &guard)
            .map_err(io_context(format!("symlink {}", guard.display())))?;
        Ok(dirs)
    }

    pub fn bin_dir(&self) -> PathBuf {
        self.dir.join("bin")
    }

    pub fn conf_dir(&self) -> PathBuf {
        self.dir.join("net.d")
    }

    /// Root for IPAM `dataDir`s; each network gets `<ipam_dir>/<network>/`.
    pub fn ipam_dir(&self) -> PathBuf {
        self.dir.join("ipam")
    }

    /// Scratch space for anything else the test needs to keep until the end.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `<conf_dir>/10-<name>.conflist` and returns its path. containerd's CRI
    /// only loads the first file (by name) of the directory.
    pub fn write_conflist(&self, conflist: &Value) -> Result<PathBuf> {
        let name = conflist
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("unnamed");
        let path = self.conf_dir().join(format!("10-{name}.conflist"));
        write_json(&path, conflist)?;
        Ok(path)
    }
}

pub(crate) fn write_json(path: &Path, value: &Value) -> Result<()> {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    // Written whole then renamed: the runtimes watch these directories.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).map_err(io_context(format!("write {}", tmp.display())))?;
    std::fs::rename(&tmp, path).map_err(io_context(format!("rename to {}", path.display())))
}

/// A pod subnet pair unique to this process and call, so tests running at the same time
/// (in this or another test binary) never hand out the same addresses, even if the
/// plugin keeps node-wide state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestSubnets {
    /// e.g. `10.213.7.0/24`
    pub v4: String,
    /// e.g. `fd00:10:244:d507::/64`
    pub v6: String,
}

static SUBNET_COUNTER: AtomicU32 = AtomicU32::new(0);

impl TestSubnets {
    pub fn unique() -> TestSubnets {
        let n = SUBNET_COUNTER.fetch_add(1, Ordering::Relaxed) % 16;
        let seed = (std::process::id() % 1024) * 16 + n; // 14 bits
        TestSubnets {
            v4: format!("10.{}.{}.0/24", 192 + (seed >> 8), seed & 0xff),
            v6: format!("fd00:10:244:{seed:x}::/64"),
        }
    }

    /// Whether `ip` lies in one of the two subnets.
    pub fn contains(&self, ip: IpAddr) -> bool {
        [&self.v4, &self.v6]
            .iter()
            .any(|subnet| cidr_contains(subnet, ip))
    }
}

/// Whether `ip` is inside `cidr` (text form). False for malformed input.
pub fn cidr_contains(cidr: &str, ip: IpAddr) -> bool {
    let Some((base, len)) = cidr.split_once('/') else {
        return false;
    };
    let (Ok(base), Ok(len)) = (base.parse::<IpAddr>(), len.parse::<u32>()) else {
        return false;
    };
    match (base, ip) {
        (IpAddr::V4(b), IpAddr::V4(a)) if len <= 32 => {
            let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
            u32::from(b) & mask == u32::from(a) & mask
        }
        (IpAddr::V6(b), IpAddr::V6(a)) if len <= 128 => {
            let mask = u128::MAX.checked_shl(128 - len).unwrap_or(0);
            u128::from(b) & mask == u128::from(a) & mask
        }
        _ => false,
    }
}

/// The weft network config: one `weft` plugin with dual-stack node-local IPAM, at
/// [`RUNTIME_CNI_VERSION`] (set `conflist["cniVersion"]` to try another).
pub fn weft_conflist(network: &str, subnets: &TestSubnets, data_dir: &Path) -> Value {
    json!({
        "cniVersion": RUNTIME_CNI_VERSION,
        "name": network,
        "plugins": [{
            "type": "weft",
            "mtu": 1500,
            "ipam": {
                "ranges": [[{"subnet": subnets.v4}], [{"subnet": subnets.v6}]],
                "dataDir": data_dir,
            }
        }]
    })
}

/// The reference setup: Debian's `bridge` (host side in whatever namespace the runtime
/// runs in) with `host-local` IPAM, IPv4 only.
pub fn bridge_conflist(network: &str, bridge: &str, subnet_v4: &str, data_dir: &Path) -> Value {
    json!({
        "cniVersion": RUNTIME_CNI_VERSION,
        "name": network,
        "plugins": [{
            "type": "bridge",
            "bridge": bridge,
            "isGateway": true,
            "ipMasq": false,
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": subnet_v4}]],
                "routes": [{"dst": "0.0.0.0/0"}],
                "dataDir": data_dir,
            }
        }]
    })
}

/// The addresses reserved in an IPAM data dir, read straight from disk (the weft tests
/// use `weft_ipam::Store` instead). Understands host-local's `<dataDir>/<network>/<ip>`
/// and weft-ipam's `<dataDir>/<network>/addresses/<ip>`. Lock, cursor and temp files are
/// not named like addresses, so they are never counted.
pub fn reservations_in(data_dir: &Path, network: &str) -> Vec<String> {
    let root = data_dir.join(network);
    let mut found: Vec<String> = [root.clone(), root.join("addresses")]
        .iter()
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flatten()
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let name = entry.file_name().into_string().ok()?;
            let is_file = entry.file_type().ok()?.is_file();
            (is_file && name.parse::<IpAddr>().is_ok()).then_some(name)
        })
        .collect();
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_subnets_differ_and_contain_their_addresses() {
        let a = TestSubnets::unique();
        let b = TestSubnets::unique();
        assert_ne!(a, b);
        let base_v4 = a.v4.trim_end_matches(".0/24");
        let inside: IpAddr = format!("{base_v4}.9").parse().expect("ip");
        assert!(a.contains(inside), "{a:?} should contain {inside}");
        assert!(!b.contains(inside));
        let v6_inside: IpAddr = a.v6.replace("::/64", "::9").parse().expect("ip");
        assert!(a.contains(v6_inside));
    }

    #[test]
    fn cidr_containment() {
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        assert!(cidr_contains("10.1.2.0/24", ip("10.1.2.255")));
        assert!(!cidr_contains("10.1.2.0/24", ip("10.1.3.0")));
        assert!(cidr_contains("0.0.0.0/0", ip("192.0.2.1")));
        assert!(cidr_contains("fd00::/64", ip("fd00::1")));
        assert!(!cidr_contains("fd00::/64", ip("10.0.0.1")));
        assert!(!cidr_contains("garbage", ip("10.0.0.1")));
        assert!(!cidr_contains("10.0.0.0/33", ip("10.0.0.1")));
    }

    #[test]
    fn reservations_are_read_from_both_layouts() {
        let dir = ScratchDir::new("rs").expect("scratch");
        let host_local = dir.join("net-a");
        std::fs::create_dir_all(&host_local).expect("mkdir");
        for name in ["10.0.0.2", "lock", "last_reserved_ip.0"] {
            std::fs::write(host_local.join(name), "x").expect("write");
        }
        let weft = dir.join("net-b");
        std::fs::create_dir_all(weft.join("addresses")).expect("mkdir");
        std::fs::create_dir_all(weft.join("tmp")).expect("mkdir");
        for name in [
            "addresses/fd00::5",
            "addresses/10.0.0.7",
            "lock",
            "format",
            "tmp/10.0.0.8",
        ] {
            std::fs::write(weft.join(name), "x").expect("write");
        }
        assert_eq!(reservations_in(dir.path(), "net-a"), vec!["10.0.0.2"]);
        assert_eq!(
            reservations_in(dir.path(), "net-b"),
            vec!["10.0.0.7", "fd00::5"]
        );
        assert!(reservations_in(dir.path(), "absent").is_empty());
    }
}
