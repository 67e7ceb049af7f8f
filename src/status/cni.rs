//! What the node's CNI configuration and plugin binaries look like, for every plugin weft
//! ships: which file a runtime loads, which files chain a given plugin type, and whether a
//! plugin binary answers VERSION.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// One network configuration file that uses a plugin type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chained {
    pub file: PathBuf,
    pub network: String,
    /// 0-based position of the plugin among the file's plugins, and how many there are.
    pub position: usize,
    pub plugins: usize,
}

/// The configuration files of a CNI configuration directory.
#[derive(Debug, Clone, Default)]
pub struct Scan {
    /// The file a runtime loads: libcni (containerd, CRI-O) takes the first in name order.
    pub active: Option<PathBuf>,
    /// Every readable file with its network name and plugin types, in name order.
    pub files: Vec<(PathBuf, String, Vec<String>)>,
    /// Files that could not be read or parsed, with the reason.
    pub unreadable: Vec<(PathBuf, String)>,
}

impl Scan {
    /// The files that use plugin `kind`, with its position.
    pub fn chaining(&self, kind: &str) -> Vec<Chained> {
        self.files
            .iter()
            .filter_map(|(file, network, types)| {
                types
                    .iter()
                    .position(|t| t == kind)
                    .map(|position| Chained {
                        file: file.clone(),
                        network: network.clone(),
                        position,
                        plugins: types.len(),
                    })
            })
            .collect()
    }

    /// The plugin types of the file a runtime loads.
    pub fn active_types(&self) -> Vec<String> {
        let active = self.active.as_ref();
        self.files
            .iter()
            .find(|(f, _, _)| Some(f) == active)
            .map(|(_, _, t)| t.clone())
            .unwrap_or_default()
    }
}

pub fn scan_configs(dir: &Path) -> Scan {
    let mut paths: Vec<PathBuf> = match std::fs::read_dir(dir) {
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
        Err(e) => {
            return Scan {
                unreadable: vec![(dir.to_path_buf(), e.to_string())],
                ..Scan::default()
            }
        }
    };
    paths.sort();
    let mut scan = Scan {
        active: paths.first().cloned(),
        ..Scan::default()
    };
    for file in paths {
        let parsed = std::fs::read(&file)
            .map_err(|e| e.to_string())
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).map_err(|e| e.to_string()));
        let value = match parsed {
            Ok(value) => value,
            Err(e) => {
                scan.unreadable.push((file, e));
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
        let types = plugins
            .iter()
            .map(|p| {
                p.get("type")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            })
            .collect();
        scan.files.push((file, network, types));
    }
    scan
}

/// Finds plugin `kind` in `dirs` and asks it for VERSION: its path and supported versions.
pub fn check_binary(dirs: &[PathBuf], kind: &str) -> Result<(PathBuf, String), String> {
    let path = dirs
        .iter()
        .map(|d| d.join(kind))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("{kind} not found in {dirs:?}"))?;
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
