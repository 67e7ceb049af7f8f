//! The standalone source's reading: a directory of Kubernetes-format YAML (or JSON) files.
//!
//! Every `*.yaml`, `*.yml` and `*.json` file directly in the directory is read; a file may
//! hold several documents, and a `List` (or `NodeList`, `PodList`, ...) holds items. Each
//! document is decoded by the same code as the API server's JSON ([`crate::decode`]), so
//! both sources accept and refuse exactly the same objects. A file that cannot be read or
//! parsed is reported as an issue and the rest still count.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::decode::decode_value;
use crate::issue::Issue;
use crate::kind::{ObjectKey, Watched};

/// One object document and where it came from.
#[derive(Debug, Clone)]
pub struct Document {
    pub kind: String,
    /// `file (document n)`, for messages.
    pub origin: String,
    pub value: Value,
}

/// What the directory held.
#[derive(Debug, Default)]
pub struct Documents {
    pub documents: Vec<Document>,
    /// Files or documents that could not be read at all.
    pub issues: Vec<Issue>,
}

/// The objects of one kind in the directory.
#[derive(Debug)]
pub struct Objects<T> {
    /// Each named object once (the first definition wins), valid or with its issues.
    pub items: Vec<(ObjectKey, Result<T, Vec<Issue>>)>,
    /// Objects that cannot be stored at all: unnamed, or defined twice.
    pub issues: Vec<Issue>,
}

/// Reads every document in `dir`.
pub fn read_dir(dir: &Path) -> Documents {
    let mut out = Documents::default();
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
    for file in files {
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

/// The YAML and JSON files directly in `dir`, sorted.
pub fn source_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| is_source_file(p))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    Ok(files)
}

/// Whether a file of this name is read (`.yaml`, `.yml`, `.json`; not hidden).
pub fn is_source_file(path: &Path) -> bool {
    let hidden = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with('.'));
    !hidden
        && matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml" | "json")
        )
}

/// Decodes the documents of `T`'s kind.
pub fn objects<T: Watched>(documents: &Documents) -> Objects<T> {
    let mut items = Vec::new();
    let mut issues = Vec::new();
    let mut origins: BTreeMap<ObjectKey, &str> = BTreeMap::new();
    for doc in documents
        .documents
        .iter()
        .filter(|d| d.kind == T::KIND.kind)
    {
        let decoded = decode_value::<T>(doc.value.clone());
        let Some(key) = decoded.key else {
            for mut issue in decoded.value.err().unwrap_or_default() {
                issue.object = format!("{} in {}", issue.object, doc.origin);
                issues.push(issue);
            }
            continue;
        };
        if let Some(first) = origins.get(&key) {
            issues.push(Issue::new(
                T::KIND.object_name(&key),
                "metadata.name",
                format!(
                    "defined more than once ({} and {}); the first is used",
                    first, doc.origin
                ),
            ));
            continue;
        }
        origins.insert(key.clone(), &doc.origin);
        items.push((key, decoded.value));
    }
    Objects { items, issues }
}

fn parse_documents(file: &Path, text: &str, out: &mut Documents) {
    for (index, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let origin = format!("{} (document {})", file.display(), index + 1);
        let value = match Value::deserialize(document) {
            Ok(Value::Null) => continue,
            Ok(v) => v,
            Err(e) => {
                out.issues
                    .push(Issue::new(origin, "", format!("not valid YAML: {e}")));
                // The YAML stream cannot be resumed after a syntax error.
                return;
            }
        };
        let kind = value
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if kind.is_empty() {
            out.issues.push(Issue::new(origin, "kind", "missing"));
        } else if kind == "List" || kind.ends_with("List") {
            let item_kind = kind.strip_suffix("List").unwrap_or_default().to_string();
            let items = match value.get("items") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(items)) => items.clone(),
                Some(_) => {
                    out.issues
                        .push(Issue::new(origin, "items", "not a list of objects"));
                    continue;
                }
            };
            for (i, item) in items.into_iter().enumerate() {
                let kind = item
                    .get("kind")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| item_kind.clone());
                let origin = format!("{origin} items[{i}]");
                if kind.is_empty() {
                    out.issues.push(Issue::new(origin, "kind", "missing"));
                    continue;
                }
                out.documents.push(Document {
                    kind,
                    origin,
                    value: item,
                });
            }
        } else {
            out.documents.push(Document {
                kind,
                origin,
                value,
            });
        }
    }
}
