//! `xtask image build`: the agent's image, one platform per architecture, as an OCI layout.
//!
//! Per platform there are two layers. The base layer is the binary's run-time closure, taken
//! from a sysroot of that architecture: the dynamic loader at the binary's `PT_INTERP` path
//! and every library it needs, transitively, in `/lib/<triplet>/`. The application layer is
//! the stripped binary at `/usr/bin/weft`. There is no shell and no package manager; every
//! path is owned by root and writable by root only. The container runs `weft agent`.
//!
//! The layout's `index.json` names one image index (tagged with the version) that lists the
//! platforms; `xtask image check` is the gate for what this writes.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::layer::{Layer, LayerBuilder, LayerError, LayerFormat};
use crate::layout::{LayoutError, LayoutWriter};
use crate::linkage::{self, Closure, LinkageError};
use crate::oci::{
    self, Annotations, Descriptor, ImageConfig, Index, Manifest, Platform, RootFs, RunConfig,
};
use crate::platform::Arch;

/// Where the binary lives in the image, and how the container starts it.
pub const BINARY_PATH: &str = "usr/bin/weft";
pub const ENTRYPOINT: [&str; 2] = ["/usr/bin/weft", "agent"];

/// One platform to build.
#[derive(Debug, Clone)]
pub struct PlatformInput {
    pub arch: &'static Arch,
    /// The release binary (unstripped is fine: it is stripped here).
    pub binary: PathBuf,
    /// Root of a filesystem of `arch` that holds its loader and libraries (`/` for the host's
    /// own architecture, `/usr/<triplet>` for a Debian cross toolchain's).
    pub sysroot: PathBuf,
    /// The `strip` that understands `arch`'s binaries.
    pub strip: String,
}

/// `org.opencontainers.image.*` metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labels {
    pub version: String,
    pub revision: String,
    pub source: String,
}

impl Labels {
    fn annotations(&self) -> Annotations {
        [
            (oci::ANNOTATION_TITLE, "weft"),
            (oci::ANNOTATION_LICENSES, "Apache-2.0"),
            (oci::ANNOTATION_VERSION, self.version.as_str()),
            (oci::ANNOTATION_REVISION, self.revision.as_str()),
            (oci::ANNOTATION_SOURCE, self.source.as_str()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("no platform to build")]
    NoPlatforms,
    #[error("{0} is listed twice")]
    DuplicateArch(&'static str),
    #[error("{binary} is missing: build it first ({hint})")]
    MissingBinary { binary: PathBuf, hint: String },
    #[error("running `{tool}` to strip {binary}: {detail} (a release builder for this architecture has it: see docs/release.md)")]
    Strip {
        tool: String,
        binary: PathBuf,
        detail: String,
    },
    #[error(transparent)]
    Linkage(#[from] LinkageError),
    #[error(transparent)]
    Layer(#[from] LayerError),
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What was built, for the command's report.
#[derive(Debug, Clone)]
pub struct Built {
    pub index: Descriptor,
    pub platforms: Vec<(Platform, Descriptor, Closure)>,
}

/// The platform the build writes for `arch`, in both the index and the config.
pub fn platform_of(arch: &Arch) -> Platform {
    Platform {
        architecture: arch.oci.to_string(),
        os: "linux".to_string(),
        variant: arch.default_variant.map(str::to_string),
        os_version: None,
    }
}

/// Builds the image for every platform into a new layout at `out`.
pub fn build(
    out: &Path,
    platforms: &[PlatformInput],
    labels: &Labels,
) -> Result<Built, BuildError> {
    if platforms.is_empty() {
        return Err(BuildError::NoPlatforms);
    }
    for (i, p) in platforms.iter().enumerate() {
        if platforms[..i].iter().any(|q| q.arch == p.arch) {
            return Err(BuildError::DuplicateArch(p.arch.oci));
        }
        if !p.binary.is_file() {
            return Err(BuildError::MissingBinary {
                binary: p.binary.clone(),
                hint: format!(
                    "cargo build --release --bin weft, or --target {}",
                    p.arch.rust_target
                ),
            });
        }
    }
    let layout = LayoutWriter::create(out)?;
    let scratch = out.join(".scratch");
    fs::create_dir_all(&scratch).map_err(|source| BuildError::Io {
        path: scratch.clone(),
        source,
    })?;

    let mut built = Vec::new();
    for p in platforms {
        // Before strip, which would fail on a foreign binary with a less telling message.
        linkage::require_machine(&p.binary, p.arch)?;
        let stripped = scratch.join(format!("weft-{}", p.arch.oci));
        strip(&p.strip, &p.binary, &stripped)?;
        let closure = linkage::resolve(&stripped, p.arch, &p.sysroot)?;
        let layers = vec![
            base_layer(&closure).write(&layout, LayerFormat::Gzip)?,
            app_layer(&stripped).write(&layout, LayerFormat::Gzip)?,
        ];
        let manifest = write_image(&layout, &platform_of(p.arch), &layers, labels)?;
        built.push((platform_of(p.arch), manifest, closure));
    }
    fs::remove_dir_all(&scratch).map_err(|source| BuildError::Io {
        path: scratch.clone(),
        source,
    })?;

    let manifests = built
        .iter()
        .map(|(platform, desc, _)| Descriptor {
            platform: Some(platform.clone()),
            ..desc.clone()
        })
        .collect();
    let index = write_index(&layout, manifests, labels)?;
    Ok(Built {
        index,
        platforms: built,
    })
}

/// The loader and libraries, all owned by root, none writable but by root.
pub fn base_layer(closure: &Closure) -> LayerBuilder {
    let mut layer = LayerBuilder::new();
    if let Some(loader) = &closure.interpreter {
        layer = layer.file_from(&loader.image_path, &loader.source, 0o755);
    }
    for lib in &closure.libraries {
        layer = layer.file_from(&lib.image_path, &lib.source, 0o644);
    }
    layer
}

pub fn app_layer(binary: &Path) -> LayerBuilder {
    LayerBuilder::new().file_from(BINARY_PATH, binary, 0o755)
}

/// Writes one platform's config and manifest; returns the manifest's descriptor.
pub fn write_image(
    layout: &LayoutWriter,
    platform: &Platform,
    layers: &[Layer],
    labels: &Labels,
) -> Result<Descriptor, LayoutError> {
    let config = ImageConfig {
        architecture: platform.architecture.clone(),
        os: platform.os.clone(),
        variant: platform.variant.clone(),
        config: Some(RunConfig {
            // The agent needs root (BPF, netlink, nftables); saying so beats an implicit
            // default.
            user: Some("0:0".to_string()),
            // So that `kubectl exec <pod> -- weft status` finds the binary.
            env: vec!["PATH=/usr/bin".to_string()],
            entrypoint: ENTRYPOINT.iter().map(|s| s.to_string()).collect(),
            labels: labels.annotations(),
        }),
        rootfs: RootFs {
            kind: "layers".to_string(),
            diff_ids: layers.iter().map(|l| l.diff_id.to_string()).collect(),
        },
    };
    let config = layout.put_json(oci::OCI_CONFIG, &config)?;
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(oci::OCI_MANIFEST.to_string()),
        config,
        layers: layers.iter().map(|l| l.descriptor.clone()).collect(),
        annotations: Some(labels.annotations()),
    };
    layout.put_json(oci::OCI_MANIFEST, &manifest)
}

/// Writes the image index of `manifests` and an `index.json` that tags it with the version.
pub fn write_index(
    layout: &LayoutWriter,
    mut manifests: Vec<Descriptor>,
    labels: &Labels,
) -> Result<Descriptor, LayoutError> {
    manifests.sort_by_key(|d| d.platform.as_ref().map(|p| p.to_string()));
    let index = Index {
        schema_version: 2,
        media_type: Some(oci::OCI_INDEX.to_string()),
        manifests,
        annotations: Some(labels.annotations()),
    };
    let mut desc = layout.put_json(oci::OCI_INDEX, &index)?;
    desc.annotations = Some(
        [(oci::ANNOTATION_REF_NAME.to_string(), labels.version.clone())]
            .into_iter()
            .collect(),
    );
    layout.write_index(&Index {
        schema_version: 2,
        media_type: Some(oci::OCI_INDEX.to_string()),
        manifests: vec![desc.clone()],
        annotations: None,
    })?;
    Ok(desc)
}

fn strip(tool: &str, binary: &Path, out: &Path) -> Result<(), BuildError> {
    let err = |detail: String| BuildError::Strip {
        tool: tool.to_string(),
        binary: binary.to_path_buf(),
        detail,
    };
    let output = Command::new(tool)
        .arg("--strip-all")
        .arg("-o")
        .arg(out)
        .arg(binary)
        .output()
        .map_err(|e| err(e.to_string()))?;
    if !output.status.success() {
        return Err(err(String::from_utf8_lossy(&output.stderr)
            .trim()
            .to_string()));
    }
    Ok(())
}
