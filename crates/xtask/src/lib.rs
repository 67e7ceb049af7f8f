//! weft's release tasks, run as `cargo xtask ...` (see docs/release.md): building the agent's
//! OCI image, and the check that gates every published image, that each platform entry
//! carries binaries for its own architecture.

pub mod build;
pub mod check;
pub mod digest;
pub mod elf;
pub mod layer;
pub mod layout;
pub mod linkage;
pub mod oci;
pub mod platform;
pub mod rootfs;
