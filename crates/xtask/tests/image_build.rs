//! `xtask image build`: the real agent binary as an image that a container runtime's
//! unpacker (umoci) can unpack and that runs with nothing but its own files; reproducible
//! digests; and the refusals that keep a broken image from being written.

mod common;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use xtask::build::{self, BuildError};
use xtask::check::check_layout;
use xtask::linkage::LinkageError;

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"))
}

/// The weft binary to package: the release build when there is one (smaller), else the debug
/// build that `make test` has just made. Neither is a failure, not a skip.
fn weft_binary() -> PathBuf {
    let target = target_dir();
    for profile in ["release", "debug"] {
        let p = target.join(profile).join("weft");
        if p.is_file() {
            return p;
        }
    }
    panic!(
        "no weft binary under {}: build it first (`cargo build --bin weft`; `make test` does)",
        target.display()
    );
}

/// umoci (a real OCI unpacker, not our reader) unpacks `layout:tag` into `bundle`.
fn umoci_unpack(layout: &Path, tag: &str, bundle: &Path) -> PathBuf {
    require_tool("umoci");
    run_ok(
        Command::new("umoci")
            .arg("unpack")
            .arg("--image")
            .arg(format!("{}:{tag}", layout.display()))
            .arg(bundle),
    );
    bundle.join("rootfs")
}

#[test]
fn the_weft_image_unpacks_and_runs_with_only_its_own_files() {
    let dir = scratch("weft");
    let out = dir.path().join("layout");
    let binary = weft_binary();
    let built = build::build(&out, &[input(amd64(), &binary)], &labels()).unwrap();

    // The loader and every library the binary needs are in the base.
    let (_, _, closure) = &built.platforms[0];
    assert_eq!(
        closure.interpreter.as_ref().unwrap().image_path,
        "lib64/ld-linux-x86-64.so.2"
    );
    let libs: Vec<&str> = closure
        .libraries
        .iter()
        .map(|l| l.image_path.as_str())
        .collect();
    assert!(libs.contains(&"lib/x86_64-linux-gnu/libc.so.6"), "{libs:?}");

    let report = check_layout(&out);
    assert!(report.passed(), "{:?}", report.findings);

    let bundle = dir.path().join("bundle");
    let rootfs = umoci_unpack(&out, &labels().version, &bundle);

    // No shell, nothing writable but by root, everything owned by root.
    assert!(!rootfs.join("bin/sh").exists());
    let mut seen = 0;
    let mut stack = vec![rootfs.clone()];
    while let Some(p) = stack.pop() {
        let meta = fs::symlink_metadata(&p).unwrap();
        seen += 1;
        assert_eq!((meta.uid(), meta.gid()), (0, 0), "{}", p.display());
        assert_eq!(
            meta.permissions().mode() & 0o022,
            0,
            "{} is writable by group or others",
            p.display()
        );
        if meta.is_dir() {
            stack.extend(fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        }
    }
    assert!(seen >= 5);

    // The binary runs from the image's files alone: chroot leaves the host's libraries out.
    let ran = run_ok(
        Command::new("chroot")
            .arg(&rootfs)
            .args(["/usr/bin/weft", "version"])
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
    );
    assert_eq!(
        ran.stdout.trim(),
        format!("weft {}", env!("CARGO_PKG_VERSION"))
    );

    // The runtime config umoci derived: the entry point and the labels.
    let config: serde_json::Value =
        serde_json::from_slice(&fs::read(bundle.join("config.json")).unwrap()).unwrap();
    assert_eq!(
        config["process"]["args"],
        serde_json::json!(["/usr/bin/weft", "agent"])
    );
    let annotations = &config["annotations"];
    assert_eq!(
        annotations["org.opencontainers.image.version"],
        "0.0.0-test"
    );
    assert_eq!(
        annotations["org.opencontainers.image.revision"],
        labels().revision.as_str()
    );
    assert_eq!(
        annotations["org.opencontainers.image.source"],
        labels().source.as_str()
    );
    assert_eq!(
        annotations["org.opencontainers.image.architecture"],
        "amd64"
    );
}

/// The arm64 entry is a working arm64 filesystem: its loader and libraries run an arm64
/// program under user-mode emulation, with nothing from the host (which has no arm64 libc
/// outside the cross sysroot).
#[test]
fn the_arm64_image_runs_under_emulation() {
    require_tool("qemu-aarch64");
    let dir = scratch("arm64");
    let a64 = tiny_binary(dir.path(), arm64(), "hello from arm64", &[]);
    let out = dir.path().join("layout");
    build::build(&out, &[input(arm64(), &a64)], &labels()).unwrap();
    assert!(check_layout(&out).passed());
    let rootfs = umoci_unpack(&out, &labels().version, &dir.path().join("bundle"));
    let ran = run_ok(
        Command::new("qemu-aarch64")
            .arg("-L")
            .arg(&rootfs)
            .arg(rootfs.join("usr/bin/weft"))
            .arg("agent")
            .env_clear(),
    );
    assert_eq!(ran.stdout.trim(), "hello from arm64");
}

#[test]
fn the_same_inputs_give_the_same_digests() {
    let dir = scratch("repro");
    let x86 = tiny_binary(dir.path(), amd64(), "hello", &[]);
    let a64 = tiny_binary(dir.path(), arm64(), "hello", &[]);
    let inputs = [input(amd64(), &x86), input(arm64(), &a64)];
    let one = build::build(&dir.path().join("one"), &inputs, &labels()).unwrap();
    let two = build::build(&dir.path().join("two"), &inputs, &labels()).unwrap();
    assert_eq!(one.index.digest, two.index.digest);
    let blobs = |d: &str| {
        let mut names: Vec<String> = fs::read_dir(dir.path().join(d).join("blobs/sha256"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(blobs("one"), blobs("two"));
    assert_eq!(
        fs::read(dir.path().join("one/index.json")).unwrap(),
        fs::read(dir.path().join("two/index.json")).unwrap()
    );
    // And a different input is a different image.
    let mut other = labels();
    other.revision = "fedcba9876543210fedcba9876543210fedcba98".into();
    let three = build::build(&dir.path().join("three"), &inputs, &other).unwrap();
    assert_ne!(one.index.digest, three.index.digest);
}

/// `cargo xtask image build` with every per-architecture flag, then the check on its output.
#[test]
fn the_command_builds_a_two_platform_index_from_flags() {
    let dir = scratch("cli");
    let x86 = tiny_binary(dir.path(), amd64(), "hello", &[]);
    let a64 = tiny_binary(dir.path(), arm64(), "hello", &[]);
    let out = dir.path().join("layout");
    let arg = |a: &str, p: &Path| format!("{a}={}", p.display());
    let built = xtask(&[
        "image",
        "build",
        "--out",
        out.to_str().unwrap(),
        "--arch",
        "amd64",
        "--arch",
        "arm64",
        "--binary",
        &arg("amd64", &x86),
        "--binary",
        &arg("arm64", &a64),
        "--sysroot",
        &format!("arm64={ARM64_SYSROOT}"),
        "--strip",
        "arm64=aarch64-linux-gnu-strip",
        "--revision",
        "test",
    ]);
    let stdout = String::from_utf8_lossy(&built.stdout);
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    assert!(
        stdout.contains("linux/arm64/v8: manifest sha256:"),
        "{stdout}"
    );
    assert!(
        stdout
            .contains("lib/aarch64-linux-gnu/libc.so.6 from /usr/aarch64-linux-gnu/lib/libc.so.6"),
        "{stdout}"
    );
    let checked = xtask(&["image", "check", out.to_str().unwrap()]);
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );

    // A per-architecture flag for an architecture not being built is a typo, not a no-op.
    let typo = xtask(&[
        "image",
        "build",
        "--out",
        out.to_str().unwrap(),
        "--arch",
        "amd64",
        "--binary",
        &arg("arm64", &a64),
    ]);
    assert!(!typo.status.success());
    assert!(String::from_utf8_lossy(&typo.stderr).contains("not one of the --arch values"));
}

#[test]
fn a_binary_for_another_architecture_is_refused() {
    let dir = scratch("wrongbin");
    let x86 = tiny_binary(dir.path(), amd64(), "hello", &[]);
    let err = build::build(
        &dir.path().join("layout"),
        &[input(arm64(), &x86)],
        &labels(),
    )
    .unwrap_err();
    match err {
        BuildError::Linkage(LinkageError::WrongMachine { arch, found, .. }) => {
            assert_eq!(arch, "arm64");
            assert!(found.to_string().contains("x86-64"));
        }
        other => panic!("expected a wrong-machine refusal, got {other}"),
    }
}

/// A binary linked against a library its sysroot lacks would not start: refused, naming it.
#[test]
fn a_library_missing_from_the_sysroot_is_refused() {
    let dir = scratch("nolib");
    let bin = tiny_binary(dir.path(), amd64(), "hello", &["-Wl,--no-as-needed", "-lm"]);
    // A sysroot with the loader and libc only.
    let sysroot = dir.path().join("sysroot");
    for (from, to) in [
        ("/lib64/ld-linux-x86-64.so.2", "lib64/ld-linux-x86-64.so.2"),
        (
            "/lib/x86_64-linux-gnu/libc.so.6",
            "lib/x86_64-linux-gnu/libc.so.6",
        ),
    ] {
        let to = sysroot.join(to);
        fs::create_dir_all(to.parent().unwrap()).unwrap();
        fs::copy(from, to).unwrap();
    }
    let mut platform = input(amd64(), &bin);
    platform.sysroot = sysroot;
    let err = build::build(&dir.path().join("layout"), &[platform], &labels()).unwrap_err();
    match err {
        BuildError::Linkage(LinkageError::Missing { library, .. }) => {
            assert_eq!(library, "libm.so.6")
        }
        other => panic!("expected a missing-library refusal, got {other}"),
    }
}

#[test]
fn a_directory_that_is_not_a_layout_is_never_replaced() {
    let dir = scratch("notlayout");
    let x86 = tiny_binary(dir.path(), amd64(), "hello", &[]);
    let out = dir.path().join("precious");
    fs::create_dir(&out).unwrap();
    fs::write(out.join("keep"), "me").unwrap();
    let err = build::build(&out, &[input(amd64(), &x86)], &labels()).unwrap_err();
    assert!(err.to_string().contains("is not an OCI layout"), "{err}");
    assert_eq!(fs::read_to_string(out.join("keep")).unwrap(), "me");
}
