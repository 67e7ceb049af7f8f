//! The standalone source: a directory of Kubernetes-format YAML (or JSON) files.
//!
//! Every `*.yaml`, `*.yml` and `*.json` file directly in the directory is read; a file may
//! hold several documents. Objects of kinds weft does not use yet are ignored. A file that
//! cannot be read or parsed is reported as an issue and the rest still count.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Node;
use serde::Deserialize;

use crate::issue::Issue;

/// What the directory held.
#[derive(Debug, Default)]
pub struct Objects {
    pub nodes: Vec<Node>,
    pub issues: Vec<Issue>,
    /// Files read, in order, with their contents' length and modification time: a cheap
    /// fingerprint to tell whether anything changed since the last read.
    pub fingerprint: Vec<(PathBuf, u64, std::time::SystemTime)>,
}

/// Reads every object in `dir`.
pub fn read_dir(dir: &Path) -> Objects {
    let mut out = Objects::default();
    let files = match source_files(dir) {
        Ok(files) => files,
        Err(e) => {
            out.issues.push(Issue::new(
                dir.display().to_string(),
                "",
                format!("cannot read directory: {e}"),
            ));
            return out;
        }
    };
    for (file, len, modified) in files {
        out.fingerprint.push((file.clone(), len, modified));
        match std::fs::read_to_string(&file) {
            Ok(text) => parse_documents(&file, &text, &mut out),
            Err(e) => out.issues.push(Issue::new(
                file.display().to_string(),
                "",
                format!("cannot read: {e}"),
            )),
        }
    }
    out
}

/// A cheap change check: the same files with the same sizes and modification times.
pub fn fingerprint(dir: &Path) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
    source_files(dir).unwrap_or_default()
}

/// The YAML and JSON files directly in `dir`, sorted, with their size and modification time.
fn source_files(dir: &Path) -> std::io::Result<Vec<(PathBuf, u64, std::time::SystemTime)>> {
    let mut files: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml" | "json")
            )
        })
        .filter_map(|p| {
            let meta = std::fs::metadata(&p).ok()?;
            Some((
                p,
                meta.len(),
                meta.modified().unwrap_or(std::time::UNIX_EPOCH),
            ))
        })
        .collect();
    files.sort();
    Ok(files)
}

fn parse_documents(file: &Path, text: &str, out: &mut Objects) {
    for (index, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let where_ = format!("{} (document {})", file.display(), index + 1);
        let value = match serde_yaml::Value::deserialize(document) {
            Ok(serde_yaml::Value::Null) => continue,
            Ok(v) => v,
            Err(e) => {
                out.issues
                    .push(Issue::new(where_, "", format!("not valid YAML: {e}")));
                // The YAML stream cannot be resumed after a syntax error.
                return;
            }
        };
        let kind = value
            .get("kind")
            .and_then(|k| k.as_str())
            .unwrap_or_default()
            .to_string();
        match kind.as_str() {
            "Node" => match serde_yaml::from_value::<Node>(value) {
                Ok(node) => out.nodes.push(node),
                Err(e) => out
                    .issues
                    .push(Issue::new(where_, "", format!("not a valid Node: {e}"))),
            },
            "List" | "NodeList" => {
                let items = value
                    .get("items")
                    .and_then(|i| i.as_sequence())
                    .cloned()
                    .unwrap_or_default();
                for item in items {
                    match serde_yaml::from_value::<Node>(item) {
                        Ok(node) if node.metadata.name.is_some() => out.nodes.push(node),
                        Ok(_) => {}
                        Err(e) => out.issues.push(Issue::new(
                            &where_,
                            "items",
                            format!("not a valid Node: {e}"),
                        )),
                    }
                }
            }
            "" => out.issues.push(Issue::new(where_, "kind", "missing")),
            _ => {}
        }
    }
}
