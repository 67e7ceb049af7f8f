//! The OCI image-spec documents the release tasks read and write, with only the fields they
//! use. Unknown fields are ignored when reading; maps are ordered so that what is written is
//! byte-for-byte reproducible.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const OCI_LAYER_TAR: &str = "application/vnd.oci.image.layer.v1.tar";
pub const OCI_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
pub const OCI_LAYER_ZSTD: &str = "application/vnd.oci.image.layer.v1.tar+zstd";
pub const OCI_LAYER_NONDIST_TAR: &str = "application/vnd.oci.image.layer.nondistributable.v1.tar";
pub const OCI_LAYER_NONDIST_GZIP: &str =
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip";
pub const DOCKER_MANIFEST_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";
pub const DOCKER_LAYER_GZIP: &str = "application/vnd.docker.image.rootfs.diff.tar.gzip";
pub const DOCKER_LAYER_FOREIGN_GZIP: &str =
    "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip";

pub const ANNOTATION_REF_NAME: &str = "org.opencontainers.image.ref.name";
pub const ANNOTATION_VERSION: &str = "org.opencontainers.image.version";
pub const ANNOTATION_REVISION: &str = "org.opencontainers.image.revision";
pub const ANNOTATION_SOURCE: &str = "org.opencontainers.image.source";
pub const ANNOTATION_TITLE: &str = "org.opencontainers.image.title";
pub const ANNOTATION_LICENSES: &str = "org.opencontainers.image.licenses";
/// BuildKit's marker on the provenance/SBOM manifests it adds to an index as `unknown/unknown`.
pub const DOCKER_REFERENCE_TYPE: &str = "vnd.docker.reference.type";
pub const DOCKER_ATTESTATION: &str = "attestation-manifest";

pub type Annotations = BTreeMap<String, String>;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    #[serde(default)]
    pub media_type: String,
    pub digest: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
}

impl Descriptor {
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.as_ref()?.get(key).map(String::as_str)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Platform {
    pub architecture: String,
    pub os: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    #[serde(
        rename = "os.version",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub os_version: Option<String>,
}

impl Platform {
    /// The variant, empty when none is given.
    fn variant(&self) -> &str {
        self.variant.as_deref().unwrap_or("")
    }

    /// Whether two platforms name the same thing, treating a missing variant as the
    /// architecture's default one (`arm64` is `arm64/v8`).
    pub fn same_as(&self, other: &Platform) -> bool {
        let norm = |p: &Platform| {
            let v = p.variant();
            let default = crate::platform::lookup(&p.architecture, None)
                .ok()
                .and_then(|a| a.default_variant)
                .unwrap_or("");
            let v = if v.is_empty() { default } else { v };
            (
                p.os.clone(),
                p.architecture.clone(),
                v.to_string(),
                p.os_version.clone().unwrap_or_default(),
            )
        };
        norm(self) == norm(other)
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if !self.variant().is_empty() {
            write!(f, "/{}", self.variant())?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Index {
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    pub manifests: Vec<Descriptor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    pub config: Descriptor,
    pub layers: Vec<Descriptor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
}

/// The image configuration (the `config` blob).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageConfig {
    pub architecture: String,
    pub os: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<RunConfig>,
    pub rootfs: RootFs,
}

impl ImageConfig {
    pub fn platform(&self) -> Platform {
        Platform {
            architecture: self.architecture.clone(),
            os: self.os.clone(),
            variant: self.variant.clone(),
            os_version: None,
        }
    }
}

/// How a container of the image runs (field names as the spec spells them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RunConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entrypoint: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootFs {
    #[serde(rename = "type")]
    pub kind: String,
    pub diff_ids: Vec<String>,
}

/// The `oci-layout` file at the root of a layout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LayoutMarker {
    pub image_layout_version: String,
}

pub const LAYOUT_VERSION: &str = "1.0.0";

pub fn is_index(media_type: &str) -> bool {
    media_type == OCI_INDEX || media_type == DOCKER_MANIFEST_LIST
}

pub fn is_manifest(media_type: &str) -> bool {
    media_type == OCI_MANIFEST || media_type == DOCKER_MANIFEST
}

pub fn is_config(media_type: &str) -> bool {
    media_type == OCI_CONFIG || media_type == DOCKER_CONFIG
}

/// How a layer blob is compressed, from its media type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerCompression {
    None,
    Gzip,
    /// Known but not readable by these tasks: refused rather than skipped.
    Zstd,
}

pub fn layer_compression(media_type: &str) -> Option<LayerCompression> {
    match media_type {
        OCI_LAYER_TAR | OCI_LAYER_NONDIST_TAR => Some(LayerCompression::None),
        OCI_LAYER_GZIP | OCI_LAYER_NONDIST_GZIP | DOCKER_LAYER_GZIP | DOCKER_LAYER_FOREIGN_GZIP => {
            Some(LayerCompression::Gzip)
        }
        OCI_LAYER_ZSTD => Some(LayerCompression::Zstd),
        _ => None,
    }
}

/// JSON as the layout stores it: compact, fields in declaration order, maps sorted.
pub fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("the OCI types serialize without failure")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(arch: &str, variant: Option<&str>) -> Platform {
        Platform {
            architecture: arch.into(),
            os: "linux".into(),
            variant: variant.map(Into::into),
            os_version: None,
        }
    }

    #[test]
    fn missing_variant_means_the_default_one() {
        assert!(p("arm64", None).same_as(&p("arm64", Some("v8"))));
        assert!(!p("arm64", Some("v9")).same_as(&p("arm64", Some("v8"))));
        assert!(p("amd64", None).same_as(&p("amd64", Some(""))));
        assert!(!p("amd64", None).same_as(&p("arm64", None)));
        assert_eq!(p("arm64", Some("v8")).to_string(), "linux/arm64/v8");
    }

    #[test]
    fn run_config_uses_the_specs_field_names() {
        let rc = RunConfig {
            entrypoint: vec!["/usr/bin/weft".into()],
            ..Default::default()
        };
        assert_eq!(
            String::from_utf8(to_json(&rc)).unwrap(),
            r#"{"Entrypoint":["/usr/bin/weft"]}"#
        );
    }
}
