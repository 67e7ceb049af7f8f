//! Shared pieces of the image tests: tiny real binaries for two architectures, fixed labels,
//! and layouts assembled piece by piece so that a test can plant exactly one defect.

#![allow(dead_code)] // each test file uses its own subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub use weft_testkit::{require_tool, run_ok};

use xtask::build::{self, Labels, PlatformInput};
use xtask::layer::{Layer, LayerBuilder, LayerFormat};
use xtask::layout::LayoutWriter;
use xtask::linkage;
use xtask::oci::{Descriptor, Platform};
use xtask::platform::{self, Arch};

/// The Debian cross toolchain's sysroot for arm64 (`libc6-dev-arm64-cross`).
pub const ARM64_SYSROOT: &str = "/usr/aarch64-linux-gnu";

pub fn amd64() -> &'static Arch {
    platform::lookup("amd64", None).unwrap()
}

pub fn arm64() -> &'static Arch {
    platform::lookup("arm64", None).unwrap()
}

/// A directory removed when the test ends, pass or fail.
pub fn scratch(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("weft-xtask-{tag}-"))
        .tempdir()
        .expect("a temporary directory")
}

fn compiler(arch: &Arch) -> String {
    if arch.oci == "amd64" {
        "gcc".to_string()
    } else {
        format!("{}-gcc", arch.triplet)
    }
}

pub fn strip_tool(arch: &Arch) -> String {
    if arch.oci == "amd64" {
        "strip".to_string()
    } else {
        format!("{}-strip", arch.triplet)
    }
}

pub fn sysroot(arch: &Arch) -> PathBuf {
    if arch.oci == "amd64" {
        PathBuf::from("/")
    } else {
        PathBuf::from(ARM64_SYSROOT)
    }
}

/// A real, dynamically linked C program for `arch` that prints `message`, compiled into `dir`
/// with Debian's compiler for it; `extra` goes to the compiler (libraries, for instance).
pub fn tiny_binary(dir: &Path, arch: &Arch, message: &str, extra: &[&str]) -> PathBuf {
    let cc = compiler(arch);
    require_tool(&cc);
    let source = dir.join(format!("tiny-{}.c", arch.oci));
    std::fs::write(
        &source,
        format!("#include <stdio.h>\nint main(void) {{ puts(\"{message}\"); return 0; }}\n"),
    )
    .unwrap();
    let out = dir.join(format!("tiny-{}", arch.oci));
    run_ok(
        Command::new(&cc)
            .arg("-O1")
            .arg("-o")
            .arg(&out)
            .arg(&source)
            .args(extra),
    );
    out
}

/// A BPF object compiled by clang for one byte order (`bpfel` or `bpfeb`).
pub fn bpf_object(dir: &Path, target: &str) -> PathBuf {
    require_tool("clang");
    let source = dir.join("prog.c");
    std::fs::write(&source, "int prog(void *ctx) { return 0; }\n").unwrap();
    let out = dir.join(format!("prog-{target}.o"));
    run_ok(
        Command::new("clang")
            .args(["-O2", "-target", target, "-c", "-o"])
            .arg(&out)
            .arg(&source),
    );
    out
}

pub fn labels() -> Labels {
    Labels {
        version: "0.0.0-test".to_string(),
        revision: "0123456789abcdef0123456789abcdef01234567".to_string(),
        source: "https://example.invalid/weft".to_string(),
    }
}

pub fn input(arch: &'static Arch, binary: &Path) -> PlatformInput {
    PlatformInput {
        arch,
        binary: binary.to_path_buf(),
        sysroot: sysroot(arch),
        strip: strip_tool(arch),
    }
}

/// The base layer (loader and libraries) a real build of `binary` for `arch` would have.
pub fn base_layer(binary: &Path, arch: &'static Arch) -> LayerBuilder {
    build::base_layer(&linkage::resolve(binary, arch, &sysroot(arch)).unwrap())
}

pub fn platform(arch: &str, variant: Option<&str>) -> Platform {
    Platform {
        architecture: arch.to_string(),
        os: "linux".to_string(),
        variant: variant.map(str::to_string),
        os_version: None,
    }
}

/// Writes `layers` as one image whose config says `config_platform`; returns its manifest.
pub fn image(
    layout: &LayoutWriter,
    config_platform: &Platform,
    layers: &[LayerBuilder],
) -> Descriptor {
    let written: Vec<Layer> = layers
        .iter()
        .map(|l| l.write(layout, LayerFormat::Gzip).unwrap())
        .collect();
    build::write_image(layout, config_platform, &written, &labels()).unwrap()
}

/// The manifest descriptor as an index lists it, claiming `platform`.
pub fn listed(manifest: &Descriptor, platform: &Platform) -> Descriptor {
    Descriptor {
        platform: Some(platform.clone()),
        ..manifest.clone()
    }
}

/// Finishes a layout whose `index.json` tags one image index of `entries`.
pub fn finish(layout: &LayoutWriter, entries: Vec<Descriptor>) -> Descriptor {
    build::write_index(layout, entries, &labels()).unwrap()
}

pub fn xtask(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .output()
        .expect("running the xtask binary")
}

/// Where a layout keeps the blob `digest`.
pub fn blob(root: &Path, digest: &str) -> PathBuf {
    xtask::digest::Digest::parse(digest)
        .unwrap()
        .blob_path(root)
}

/// A JSON blob of a layout (a manifest, an index), read without the check's reader.
pub fn read_blob<T: serde::de::DeserializeOwned>(root: &Path, digest: &str) -> T {
    serde_json::from_slice(&std::fs::read(blob(root, digest)).unwrap()).unwrap()
}
