//! The egress guard's part of `weft status`: is the guard in the node's CNI configuration
//! (and in the file the runtime actually uses), does the plugin binary answer VERSION, and
//! does the kernel have what the fence needs (checked by installing and reading back a
//! fence in a throw-away network namespace)?

use std::path::PathBuf;

pub use crate::plugin::GUARD_TYPE;

/// Where to look.
#[derive(Debug, Clone)]
pub struct Options {
    /// The runtime's CNI configuration directory.
    pub conf_dir: PathBuf,
    /// The runtime's CNI binary directories, searched in order.
    pub bin_dirs: Vec<PathBuf>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            conf_dir: PathBuf::from("/etc/cni/net.d"),
            bin_dirs: vec![PathBuf::from("/opt/cni/bin"), PathBuf::from("/usr/lib/cni")],
        }
    }
}

pub use super::cni::Chained;

/// What `weft status` reports about the guard.
#[derive(Debug, Clone)]
pub struct GuardStatus {
    /// The configuration file a runtime loads (the first in name order), if any.
    pub active_file: Option<PathBuf>,
    /// Every file that chains the guard.
    pub chained: Vec<Chained>,
    /// Configuration files that could not be read or parsed.
    pub unreadable: Vec<(PathBuf, String)>,
    /// The binary found and its VERSION answer, or why not.
    pub binary: Result<(PathBuf, String), String>,
    /// The kernel self-test.
    pub kernel: Result<(), String>,
    /// How the node confines a fenced pod's processes beyond the fence.
    pub mode: weft_guard::selftest::Mode,
}

impl GuardStatus {
    /// Whether the guard is in the active configuration as a chained (not first) plugin.
    pub fn in_active_config(&self) -> bool {
        self.chained
            .iter()
            .any(|c| Some(&c.file) == self.active_file.as_ref() && c.position > 0)
    }

    /// Everything the guard needs is in place.
    pub fn healthy(&self) -> bool {
        self.in_active_config() && self.binary.is_ok() && self.kernel.is_ok()
    }
}

/// Looks at the node as `options` describe it.
pub fn check(options: &Options) -> GuardStatus {
    let scan = super::cni::scan_configs(&options.conf_dir);
    GuardStatus {
        chained: scan.chaining(GUARD_TYPE),
        active_file: scan.active,
        unreadable: scan.unreadable,
        binary: super::cni::check_binary(&options.bin_dirs, GUARD_TYPE),
        kernel: weft_guard::selftest::kernel_features().map_err(|e| e.to_string()),
        mode: weft_guard::selftest::Mode::of_node(std::path::Path::new(
            weft_guard::selftest::LSM_LIST,
        ))
        .with_program_probe(),
    }
}

impl std::fmt::Display for GuardStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "egress guard ({GUARD_TYPE}):")?;
        match &self.active_file {
            None => writeln!(f, "  CNI configuration: none found")?,
            Some(active) => {
                let state = if self.in_active_config() {
                    "chained"
                } else {
                    "NOT chained"
                };
                writeln!(
                    f,
                    "  CNI configuration: {state} in {} (the file the runtime uses)",
                    active.display()
                )?;
            }
        }
        for c in &self.chained {
            let note = if c.position == 0 {
                " (first: it must follow a primary plugin)"
            } else {
                ""
            };
            writeln!(
                f,
                "    {}: network {:?}, plugin {} of {}{note}",
                c.file.display(),
                c.network,
                c.position + 1,
                c.plugins
            )?;
        }
        for (file, error) in &self.unreadable {
            writeln!(f, "    {}: unreadable: {error}", file.display())?;
        }
        match &self.binary {
            Ok((path, versions)) => writeln!(
                f,
                "  plugin binary: {} answers VERSION ({versions})",
                path.display()
            )?,
            Err(e) => writeln!(f, "  plugin binary: {e}")?,
        }
        match &self.kernel {
            Ok(()) => writeln!(
                f,
                "  kernel: nf_tables inet, ct state, meta skuid, reject, fib, meta set: ok"
            )?,
            Err(e) => writeln!(f, "  kernel: {e}")?,
        }
        write!(f, "  mode: {}", self.mode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_guard_in_the_active_conflist() {
        let dir = std::env::temp_dir().join(format!("weft-status-guard-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("10-weft.conflist"),
            r#"{"cniVersion":"1.0.0","name":"k8s","plugins":[{"type":"bridge"},{"type":"weft-guard"}]}"#,
        )
        .unwrap();
        std::fs::write(
            dir.join("20-other.conf"),
            r#"{"cniVersion":"1.0.0","name":"x","type":"weft-guard"}"#,
        )
        .unwrap();
        std::fs::write(dir.join("30-broken.conflist"), "{").unwrap();
        let scan = super::super::cni::scan_configs(&dir);
        let (active, chained, unreadable) = (
            scan.active.clone(),
            scan.chaining(GUARD_TYPE),
            scan.unreadable.clone(),
        );
        assert_eq!(active, Some(dir.join("10-weft.conflist")));
        assert_eq!(chained.len(), 2);
        assert_eq!((chained[0].position, chained[0].plugins), (1, 2));
        assert_eq!(chained[1].position, 0);
        assert_eq!(unreadable.len(), 1);
        let status = GuardStatus {
            active_file: active,
            chained,
            unreadable,
            binary: Err("not found".into()),
            kernel: Ok(()),
            mode: weft_guard::selftest::Mode::of_node(&dir.join("no-securityfs")),
        };
        assert!(status.in_active_config());
        assert!(!status.healthy());
        let shown = status.to_string();
        assert!(shown.contains("chained in"));
        assert!(shown.contains("mode: fail-closed"), "{shown}");
        assert!(shown.contains("securityfs is not mounted"), "{shown}");
        std::fs::write(dir.join("lsm"), "lockdown,capability,landlock,bpf\n").unwrap();
        let listed = weft_guard::selftest::Mode::of_node(&dir.join("lsm"));
        assert_eq!(listed.bpf_lsm_listed, Ok(true));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
