//! The egress guard's part of `weft status`: is the guard in the node's CNI configuration
//! (and in the file the runtime actually uses), does the plugin binary answer VERSION, and
//! does the kernel have what the fence needs (checked by installing and reading back a
//! fence in a throw-away network namespace)?

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// The plugin type the guard registers under.
pub const GUARD_TYPE: &str = "weft-guard";

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

/// One network configuration file that chains the guard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chained {
    pub file: PathBuf,
    pub network: String,
    /// 0-based position of the guard among the file's plugins, and how many there are.
    pub position: usize,
    pub plugins: usize,
}

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
    let (active_file, chained, unreadable) = scan_configs(&options.conf_dir);
    GuardStatus {
        active_file,
        chained,
        unreadable,
        binary: check_binary(&options.bin_dirs),
        kernel: weft_guard::selftest::kernel_features().map_err(|e| e.to_string()),
    }
}

type Scan = (Option<PathBuf>, Vec<Chained>, Vec<(PathBuf, String)>);

fn scan_configs(dir: &Path) -> Scan {
    let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                matches!(
                    p.extension().and_then(|e| e.to_str()),
                    Some("conflist" | "conf" | "json")
                )
            })
            .collect(),
        Err(e) => return (None, Vec::new(), vec![(dir.to_path_buf(), e.to_string())]),
    };
    // libcni (and so containerd and CRI-O) use the first file in name order.
    files.sort();
    let mut chained = Vec::new();
    let mut unreadable = Vec::new();
    for file in &files {
        let parsed = std::fs::read(file)
            .map_err(|e| e.to_string())
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).map_err(|e| e.to_string()));
        let value = match parsed {
            Ok(value) => value,
            Err(e) => {
                unreadable.push((file.clone(), e));
                continue;
            }
        };
        let network = value
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        // A .conf holds one plugin; a .conflist a list.
        let plugins: Vec<&Value> = match value.get("plugins").and_then(Value::as_array) {
            Some(list) => list.iter().collect(),
            None => vec![&value],
        };
        if let Some(position) = plugins
            .iter()
            .position(|p| p.get("type").and_then(Value::as_str) == Some(GUARD_TYPE))
        {
            chained.push(Chained {
                file: file.clone(),
                network,
                position,
                plugins: plugins.len(),
            });
        }
    }
    (files.first().cloned(), chained, unreadable)
}

fn check_binary(dirs: &[PathBuf]) -> Result<(PathBuf, String), String> {
    let path = dirs
        .iter()
        .map(|d| d.join(GUARD_TYPE))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("{GUARD_TYPE} not found in {dirs:?}"))?;
    let out = Command::new(&path)
        .env_clear()
        .env("CNI_COMMAND", "VERSION")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let answer: Value = serde_json::from_str(&text)
        .map_err(|_| format!("{} VERSION printed {text:?}", path.display()))?;
    let supported = answer
        .get("supportedVersions")
        .and_then(Value::as_array)
        .filter(|list| !list.is_empty())
        .ok_or_else(|| {
            format!(
                "{} VERSION has no supportedVersions: {text}",
                path.display()
            )
        })?;
    let versions: Vec<&str> = supported.iter().filter_map(Value::as_str).collect();
    Ok((path, versions.join(", ")))
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
            Ok(()) => write!(
                f,
                "  kernel: nf_tables inet, ct state, meta skuid, reject: ok"
            ),
            Err(e) => write!(f, "  kernel: {e}"),
        }
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
        let (active, chained, unreadable) = scan_configs(&dir);
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
        };
        assert!(status.in_active_config());
        assert!(!status.healthy());
        assert!(status.to_string().contains("chained in"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
