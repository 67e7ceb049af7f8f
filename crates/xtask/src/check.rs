//! `xtask image check`: every platform entry of an OCI layout carries binaries for its own
//! architecture.
//!
//! The check walks `index.json` and every image index under it, and for every image manifest:
//! reads its config, compares the config's platform with the one the index claims, applies
//! its layers as a runtime would (see [`crate::rootfs`]), and compares the ELF machine of
//! every regular file the container would see with the platform's. Blobs are verified
//! against their digests and sizes, and layers against the config's `diff_ids`, on the way.
//!
//! Everything wrong is reported, each problem naming the platform, the manifest, the layer
//! and the path; nothing is skipped silently. The only entries not checked are BuildKit's
//! attestation manifests (`unknown/unknown`, marked as such), which hold no files to run,
//! and they are listed in the report.

use std::fmt;

use flate2::read::MultiGzDecoder;

use crate::digest::HashingReader;
use crate::elf::Sniff;
use crate::layout::{BlobError, LayoutReader};
use crate::oci::{self, Descriptor, ImageConfig, Index, LayerCompression, Manifest, Platform};
use crate::platform;
use crate::rootfs::{Kind, Rootfs};

/// Indexes nested deeper than this are refused (real layouts nest one or two).
const MAX_DEPTH: usize = 4;
/// Findings kept in a report; the rest are counted.
const MAX_FINDINGS: usize = 1000;

/// One thing wrong with the image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Which entry: a platform and manifest digest, or the index that lists it.
    pub entry: String,
    pub problem: Problem,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.entry, self.problem)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("layer {layer}: {path}{written_as} is ELF {found}, but the platform runs {expected}")]
    WrongMachine {
        layer: String,
        path: String,
        written_as: String,
        found: String,
        expected: String,
    },
    #[error("layer {layer}: {path}{written_as} starts like an ELF file, but {reason}")]
    MalformedElf {
        layer: String,
        path: String,
        written_as: String,
        reason: String,
    },
    #[error("the index lists {what} {digest}, but blobs/sha256/{hex} is missing")]
    MissingBlob {
        what: String,
        digest: String,
        hex: String,
    },
    #[error("the index lists {platform} twice: {first} and {second}")]
    DuplicatePlatform {
        platform: String,
        first: String,
        second: String,
    },
    #[error("the index says {index}, but the manifest's config says {config}")]
    ConfigMismatch { index: String, config: String },
    #[error("{0}")]
    Platform(String),
    #[error("{0}")]
    Blob(String),
    #[error("layer {layer}: {problem}")]
    Layer { layer: String, problem: String },
    #[error("the config lists {diff_ids} diff_ids for {layers} layers")]
    LayerCount { diff_ids: usize, layers: usize },
    #[error("{what} has media type {media_type:?}, which the check cannot read: refusing rather than skipping it")]
    MediaType { what: String, media_type: String },
    #[error("the index lists no image")]
    EmptyIndex,
    #[error("image indexes nest deeper than {MAX_DEPTH} levels")]
    TooDeep,
    #[error("{0}")]
    Layout(String),
}

/// A platform that was checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    pub platform: String,
    pub manifest: String,
    pub files: usize,
    pub elf_files: usize,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub checked: Vec<Checked>,
    /// Entries deliberately not checked (attestations), with why.
    pub skipped: Vec<String>,
    pub findings: Vec<Finding>,
    /// Findings beyond [`MAX_FINDINGS`], counted only.
    pub more_findings: usize,
}

impl Report {
    /// The image passes: something was checked and nothing is wrong.
    pub fn passed(&self) -> bool {
        self.findings.is_empty() && self.more_findings == 0 && !self.checked.is_empty()
    }

    fn add(&mut self, entry: impl Into<String>, problem: Problem) {
        if self.findings.len() < MAX_FINDINGS {
            self.findings.push(Finding {
                entry: entry.into(),
                problem,
            });
        } else {
            self.more_findings += 1;
        }
    }
}

/// Checks the OCI layout at `root`.
pub fn check_layout(root: &std::path::Path) -> Report {
    let mut c = Checker {
        layout: LayoutReader::new(root),
        report: Report::default(),
    };
    c.run();
    c.report
}

struct Checker {
    layout: LayoutReader,
    report: Report,
}

impl Checker {
    fn run(&mut self) {
        let root = self.layout.root().to_path_buf();
        match std::fs::read(root.join("oci-layout"))
            .map_err(|e| e.to_string())
            .and_then(|b| {
                serde_json::from_slice::<oci::LayoutMarker>(&b).map_err(|e| e.to_string())
            }) {
            Ok(m) if m.image_layout_version == oci::LAYOUT_VERSION => {}
            Ok(m) => self.report.add(
                "oci-layout",
                Problem::Layout(format!(
                    "imageLayoutVersion {:?} is not {}",
                    m.image_layout_version,
                    oci::LAYOUT_VERSION
                )),
            ),
            Err(e) => self.report.add(
                "oci-layout",
                Problem::Layout(format!("{} is not an OCI layout: {e}", root.display())),
            ),
        }
        let index = std::fs::read(root.join("index.json"))
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<Index>(&b).map_err(|e| e.to_string()));
        match index {
            Ok(index) => self.index(&index, "index.json", 0),
            Err(e) => self.report.add(
                "index.json",
                Problem::Layout(format!("cannot read index.json: {e}")),
            ),
        }
        if self.report.checked.is_empty() && self.report.findings.is_empty() {
            self.report.add("index.json", Problem::EmptyIndex);
        }
    }

    /// Checks every entry of an index, and that no platform appears twice in it. Entries of
    /// `index.json` that carry different tags (`ref.name`) are separate images and may each
    /// list the same platform.
    fn index(&mut self, index: &Index, name: &str, depth: usize) {
        if depth > MAX_DEPTH {
            self.report.add(name, Problem::TooDeep);
            return;
        }
        if index.manifests.is_empty() {
            self.report.add(name, Problem::EmptyIndex);
            return;
        }
        let mut seen: Vec<(Option<String>, Platform, String)> = Vec::new();
        for desc in &index.manifests {
            let Some(platform) = self.descriptor(desc, name, depth) else {
                continue;
            };
            let tag = desc
                .annotation(oci::ANNOTATION_REF_NAME)
                .map(str::to_string);
            if let Some((_, _, first)) = seen
                .iter()
                .find(|(t, p, _)| *t == tag && p.same_as(&platform))
            {
                self.report.add(
                    name,
                    Problem::DuplicatePlatform {
                        platform: platform.to_string(),
                        first: first.clone(),
                        second: desc.digest.clone(),
                    },
                );
            } else {
                seen.push((tag, platform, desc.digest.clone()));
            }
        }
    }

    /// Checks what a descriptor of an index points at; returns the platform of an image.
    fn descriptor(&mut self, desc: &Descriptor, parent: &str, depth: usize) -> Option<Platform> {
        let what = match &desc.platform {
            Some(p) => format!("{p} manifest"),
            None => "entry".to_string(),
        };
        if oci::is_index(&desc.media_type) {
            let index: Index = self.json(desc, parent, &what)?;
            self.index(&index, &format!("index {}", desc.digest), depth + 1);
            return None;
        }
        if !oci::is_manifest(&desc.media_type) {
            self.report.add(
                parent,
                Problem::MediaType {
                    what: format!("{what} {}", desc.digest),
                    media_type: desc.media_type.clone(),
                },
            );
            return None;
        }
        if is_attestation(desc) {
            self.report.skipped.push(format!(
                "{} (attestation manifest: provenance/SBOM, no files to run)",
                desc.digest
            ));
            return None;
        }
        let manifest: Manifest = self.json(desc, parent, &what)?;
        self.manifest(desc, &manifest)
    }

    /// Reads a JSON blob an index or manifest points at; a missing blob is reported as the
    /// entry the index lists without content.
    fn json<T: serde::de::DeserializeOwned>(
        &mut self,
        desc: &Descriptor,
        parent: &str,
        what: &str,
    ) -> Option<T> {
        match self.layout.read_json(desc) {
            Ok(v) => Some(v),
            Err(e) => {
                self.blob_problem(parent, what, desc, e);
                None
            }
        }
    }

    fn blob_problem(&mut self, entry: &str, what: &str, desc: &Descriptor, e: BlobError) {
        let problem = match e {
            BlobError::Missing(d) => Problem::MissingBlob {
                what: what.to_string(),
                digest: desc.digest.clone(),
                hex: d.hex().to_string(),
            },
            other => Problem::Blob(format!("{what}: {other}")),
        };
        self.report.add(entry, problem);
    }

    fn manifest(&mut self, desc: &Descriptor, manifest: &Manifest) -> Option<Platform> {
        let label = |platform: Option<&Platform>| match platform {
            Some(p) => format!("{p} (manifest {})", desc.digest),
            None => format!("manifest {}", desc.digest),
        };
        if !oci::is_config(&manifest.config.media_type) {
            self.report.add(
                label(desc.platform.as_ref()),
                Problem::MediaType {
                    what: format!("config {}", manifest.config.digest),
                    media_type: manifest.config.media_type.clone(),
                },
            );
            return desc.platform.clone();
        }
        let config: ImageConfig = match self.layout.read_json(&manifest.config) {
            Ok(c) => c,
            Err(e) => {
                let entry = label(desc.platform.as_ref());
                self.blob_problem(&entry, "config", &manifest.config, e);
                return desc.platform.clone();
            }
        };
        let from_config = config.platform();
        let platform = desc.platform.clone().unwrap_or_else(|| from_config.clone());
        let entry = label(Some(&platform));
        if !platform.same_as(&from_config) {
            self.report.add(
                &entry,
                Problem::ConfigMismatch {
                    index: platform.to_string(),
                    config: from_config.to_string(),
                },
            );
        }
        if platform.os != "linux" {
            let e = platform::PlatformError::UnsupportedOs {
                os: platform.os.clone(),
            };
            self.report.add(&entry, Problem::Platform(e.to_string()));
            return Some(platform);
        }
        let arch = match platform::lookup(&platform.architecture, platform.variant.as_deref()) {
            Ok(a) => a,
            Err(e) => {
                self.report.add(&entry, Problem::Platform(e.to_string()));
                return Some(platform);
            }
        };
        if config.rootfs.diff_ids.len() != manifest.layers.len() {
            self.report.add(
                &entry,
                Problem::LayerCount {
                    diff_ids: config.rootfs.diff_ids.len(),
                    layers: manifest.layers.len(),
                },
            );
        }

        let mut tree = Rootfs::new();
        for (i, layer) in manifest.layers.iter().enumerate() {
            let diff_id = config.rootfs.diff_ids.get(i).map(String::as_str);
            if let Err(problem) = self.apply_layer(&mut tree, i, layer, diff_id) {
                self.report.add(&entry, problem);
            }
        }

        let (mut files, mut elf_files) = (0, 0);
        for (path, node) in tree.files() {
            files += 1;
            let Kind::File(sniff) = &node.kind else {
                continue;
            };
            let layer = manifest
                .layers
                .get(node.layer)
                .map(|l| l.digest.clone())
                .unwrap_or_default();
            let written_as = node
                .written_as
                .as_ref()
                .map(|w| format!(" (written as {w})"))
                .unwrap_or_default();
            match sniff {
                Sniff::NotElf => {}
                Sniff::Elf(ident) => {
                    elf_files += 1;
                    if !platform::runs_on(ident, &arch.elf) {
                        self.report.add(
                            &entry,
                            Problem::WrongMachine {
                                layer,
                                path: path.to_string(),
                                written_as,
                                found: ident.to_string(),
                                expected: arch.elf.to_string(),
                            },
                        );
                    }
                }
                Sniff::Malformed(reason) => self.report.add(
                    &entry,
                    Problem::MalformedElf {
                        layer,
                        path: path.to_string(),
                        written_as,
                        reason: reason.to_string(),
                    },
                ),
            }
        }
        self.report.checked.push(Checked {
            platform: platform.to_string(),
            manifest: desc.digest.clone(),
            files,
            elf_files,
        });
        Some(platform)
    }

    /// Applies one layer, verifying its blob digest and its diff_id on the way.
    fn apply_layer(
        &mut self,
        tree: &mut Rootfs,
        index: usize,
        layer: &Descriptor,
        diff_id: Option<&str>,
    ) -> Result<(), Problem> {
        let problem = |p: String| Problem::Layer {
            layer: layer.digest.clone(),
            problem: p,
        };
        let compression = match oci::layer_compression(&layer.media_type) {
            Some(LayerCompression::Zstd) | None => {
                return Err(Problem::MediaType {
                    what: format!("layer {}", layer.digest),
                    media_type: layer.media_type.clone(),
                })
            }
            Some(c) => c,
        };
        let (digest, file) = self.layout.open(layer).map_err(|e| match e {
            BlobError::Missing(d) => Problem::MissingBlob {
                what: "layer".to_string(),
                digest: layer.digest.clone(),
                hex: d.hex().to_string(),
            },
            other => problem(other.to_string()),
        })?;
        let read_err = |e: std::io::Error| problem(format!("reading it: {e}"));
        let compressed = HashingReader::new(std::io::BufReader::new(file));
        let (uncompressed, compressed) = match compression {
            LayerCompression::Gzip => {
                // Multi-member: a gzip layer may be several members back to back (eStargz).
                let mut tar = HashingReader::new(MultiGzDecoder::new(compressed));
                tree.apply(index, &mut tar)
                    .map_err(|e| problem(e.to_string()))?;
                let (digest, _, gz) = tar.finish().map_err(read_err)?;
                (Some(digest), gz.into_inner())
            }
            _ => {
                let mut tar = compressed;
                tree.apply(index, &mut tar)
                    .map_err(|e| problem(e.to_string()))?;
                // The blob is the tar itself: its digest is the diff_id.
                (None, tar)
            }
        };
        let (actual, _, _) = compressed.finish().map_err(read_err)?;
        if actual != digest {
            return Err(problem(format!("its content hashes to {actual}")));
        }
        let uncompressed = uncompressed.unwrap_or(actual);
        match diff_id {
            Some(expected) if expected != uncompressed.to_string() => Err(problem(format!(
                "its uncompressed tar hashes to {uncompressed}, but the config's diff_id is {expected}"
            ))),
            _ => Ok(()),
        }
    }
}

fn is_attestation(desc: &Descriptor) -> bool {
    desc.annotation(oci::DOCKER_REFERENCE_TYPE) == Some(oci::DOCKER_ATTESTATION)
        && desc
            .platform
            .as_ref()
            .is_some_and(|p| p.architecture == "unknown" && p.os == "unknown")
}
