//! `xtask image check` on layouts with one planted defect each, and on correct ones. The
//! binaries are tiny real programs compiled for amd64 (gcc) and arm64 (Debian's
//! gcc-aarch64-linux-gnu), with their real loaders and libraries.

mod common;

use std::fs;

use common::*;
use xtask::check::{check_layout, Problem, Report};
use xtask::layer::LayerBuilder;
use xtask::layout::LayoutWriter;
use xtask::oci::{self, Descriptor, ImageConfig, Index, Manifest, RootFs};

fn problems(report: &Report) -> Vec<&Problem> {
    report.findings.iter().map(|f| &f.problem).collect()
}

fn describe(report: &Report) -> String {
    let mut s: Vec<String> = report.findings.iter().map(|f| f.to_string()).collect();
    s.extend(report.checked.iter().map(|c| format!("checked {c:?}")));
    s.join("\n")
}

/// A correct two-platform image built by `xtask image build` itself.
fn good_two_platform(dir: &std::path::Path) -> std::path::PathBuf {
    let x86 = tiny_binary(dir, amd64(), "hello from amd64", &[]);
    let a64 = tiny_binary(dir, arm64(), "hello from arm64", &[]);
    let out = dir.join("layout");
    xtask::build::build(
        &out,
        &[input(amd64(), &x86), input(arm64(), &a64)],
        &labels(),
    )
    .unwrap();
    out
}

/// The seed's failure: an index that lists linux/arm64, whose arm64 entry has a correct
/// arm64 base (loader, libc) but the x86-64 binary copied on top.
#[test]
fn planted_arm64_entry_with_an_x86_64_binary_fails_naming_the_file() {
    let dir = scratch("planted");
    let x86 = tiny_binary(dir.path(), amd64(), "hello", &[]);
    let a64 = tiny_binary(dir.path(), arm64(), "hello", &[]);
    let root = dir.path().join("layout");
    let layout = LayoutWriter::create(&root).unwrap();
    let amd = image(
        &layout,
        &platform("amd64", None),
        &[base_layer(&x86, amd64()), xtask::build::app_layer(&x86)],
    );
    let arm_app = xtask::build::app_layer(&x86);
    let arm = image(
        &layout,
        &platform("arm64", Some("v8")),
        &[base_layer(&a64, arm64()), arm_app],
    );
    finish(
        &layout,
        vec![
            listed(&amd, &platform("amd64", None)),
            listed(&arm, &platform("arm64", Some("v8"))),
        ],
    );

    let report = check_layout(&root);
    assert!(!report.passed());
    assert_eq!(report.findings.len(), 1, "{}", describe(&report));
    let finding = &report.findings[0];
    let arm_manifest: Manifest = read_blob(&root, &arm.digest);
    match &finding.problem {
        Problem::WrongMachine {
            layer, path, found, ..
        } => {
            assert_eq!(path, "usr/bin/weft");
            assert_eq!(layer, &arm_manifest.layers[1].digest, "names the app layer");
            assert!(found.contains("x86-64"), "{found}");
        }
        other => panic!("expected a wrong-machine finding, got {other}"),
    }
    assert!(finding.entry.contains("linux/arm64"), "{}", finding.entry);
    assert!(finding.entry.contains(&arm.digest), "{}", finding.entry);

    // The command fails and says the same.
    let out = xtask(&["image", "check", root.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    for needle in [
        "linux/arm64",
        "usr/bin/weft",
        "x86-64",
        "ARM aarch64",
        arm_manifest.layers[1].digest.as_str(),
    ] {
        assert!(stderr.contains(needle), "{needle:?} not in:\n{stderr}");
    }
}

#[test]
fn correct_two_platform_index_passes() {
    let dir = scratch("good");
    let root = good_two_platform(dir.path());
    let report = check_layout(&root);
    assert!(report.passed(), "{}", describe(&report));
    let platforms: Vec<&str> = report.checked.iter().map(|c| c.platform.as_str()).collect();
    assert_eq!(platforms, vec!["linux/amd64", "linux/arm64/v8"]);
    for c in &report.checked {
        // The program, the loader and libc.
        assert_eq!(c.elf_files, 3, "{c:?}");
    }
    let out = xtask(&["image", "check", root.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("image check passed: 2 platform(s)"));
}

/// Reads the nested index the build wrote and rewrites the layout's entry point to `entries`.
fn nested_index(root: &std::path::Path) -> Index {
    let top: Index = serde_json::from_slice(&fs::read(root.join("index.json")).unwrap()).unwrap();
    read_blob(root, &top.manifests[0].digest)
}

fn flat_index(root: &std::path::Path, manifests: Vec<Descriptor>) {
    let index = Index {
        schema_version: 2,
        media_type: Some(oci::OCI_INDEX.to_string()),
        manifests,
        annotations: None,
    };
    fs::write(root.join("index.json"), oci::to_json(&index)).unwrap();
}

#[test]
fn an_index_entry_whose_blob_is_missing_fails() {
    let dir = scratch("missing");
    let root = good_two_platform(dir.path());
    let arm = nested_index(&root).manifests[1].clone();
    fs::remove_file(blob(&root, &arm.digest)).unwrap();
    let report = check_layout(&root);
    assert!(!report.passed());
    assert!(
        report.findings.iter().any(|f| matches!(&f.problem,
            Problem::MissingBlob { what, digest, .. } if what.contains("linux/arm64") && *digest == arm.digest)),
        "{}",
        describe(&report)
    );
}

#[test]
fn a_missing_layer_blob_fails() {
    let dir = scratch("nolayer");
    let root = good_two_platform(dir.path());
    let amd = nested_index(&root).manifests[0].clone();
    let manifest: Manifest = read_blob(&root, &amd.digest);
    let layer = &manifest.layers[1].digest;
    fs::remove_file(blob(&root, layer)).unwrap();
    let report = check_layout(&root);
    assert!(
        report
            .findings
            .iter()
            .any(|f| f.entry.contains("linux/amd64")
                && matches!(&f.problem, Problem::MissingBlob { digest, .. } if digest == layer)),
        "{}",
        describe(&report)
    );
}

#[test]
fn a_platform_listed_twice_fails() {
    let dir = scratch("twice");
    let root = good_two_platform(dir.path());
    let mut entries = nested_index(&root).manifests;
    // arm64 without a variant is arm64/v8: the same platform as the entry already there.
    let mut again = entries[1].clone();
    again.platform = Some(platform("arm64", None));
    entries.push(again);
    flat_index(&root, entries);
    let report = check_layout(&root);
    assert!(
        problems(&report).iter().any(|p| matches!(p,
            Problem::DuplicatePlatform { platform, .. } if platform.starts_with("linux/arm64"))),
        "{}",
        describe(&report)
    );
}

#[test]
fn tagged_images_in_index_json_may_each_list_a_platform() {
    let dir = scratch("tags");
    let root = good_two_platform(dir.path());
    let entries = nested_index(&root).manifests;
    let tagged = |d: &Descriptor, tag: &str| Descriptor {
        annotations: Some([(oci::ANNOTATION_REF_NAME.to_string(), tag.to_string())].into()),
        ..d.clone()
    };
    flat_index(
        &root,
        vec![tagged(&entries[0], "a"), tagged(&entries[0], "b")],
    );
    let report = check_layout(&root);
    assert!(report.passed(), "{}", describe(&report));
}

#[test]
fn a_config_architecture_that_disagrees_with_the_index_fails() {
    let dir = scratch("disagree");
    let root = good_two_platform(dir.path());
    let mut entries = nested_index(&root).manifests;
    // The amd64 manifest (config: amd64) listed as arm64.
    entries[0].platform = Some(platform("arm64", Some("v8")));
    flat_index(&root, vec![entries[0].clone()]);
    let report = check_layout(&root);
    assert!(
        problems(&report).iter().any(|p| matches!(p,
            Problem::ConfigMismatch { index, config } if index == "linux/arm64/v8" && config == "linux/amd64")),
        "{}",
        describe(&report)
    );
    // And its binaries are judged by what the index promised.
    assert!(problems(&report)
        .iter()
        .any(|p| matches!(p, Problem::WrongMachine { .. })));
}

fn single(root: &std::path::Path, config_platform: &xtask::oci::Platform, layers: &[LayerBuilder]) {
    let layout = LayoutWriter::create(root).unwrap();
    let m = image(&layout, config_platform, layers);
    finish(&layout, vec![listed(&m, config_platform)]);
}

#[test]
fn unknown_architectures_variants_and_systems_are_refused() {
    let dir = scratch("unknown");
    for (p, needle) in [
        (
            platform("mips64le", None),
            "unknown architecture \"mips64le\"",
        ),
        (
            platform("arm64", Some("v7")),
            "unknown variant \"v7\" of arm64",
        ),
        (
            xtask::oci::Platform {
                os: "windows".into(),
                ..platform("amd64", None)
            },
            "is not linux",
        ),
    ] {
        let root = dir.path().join(p.to_string().replace('/', "-"));
        single(
            &root,
            &p,
            &[LayerBuilder::new().file_bytes("etc/motd", "hi", 0o644)],
        );
        let report = check_layout(&root);
        assert!(
            report
                .findings
                .iter()
                .any(|f| f.to_string().contains(needle)),
            "{needle}: {}",
            describe(&report)
        );
    }
}

#[test]
fn an_empty_index_and_a_directory_that_is_no_layout_fail() {
    let dir = scratch("empty");
    let root = dir.path().join("layout");
    let layout = LayoutWriter::create(&root).unwrap();
    layout
        .write_index(&Index {
            schema_version: 2,
            media_type: Some(oci::OCI_INDEX.to_string()),
            manifests: vec![],
            annotations: None,
        })
        .unwrap();
    let report = check_layout(&root);
    assert!(problems(&report).contains(&&Problem::EmptyIndex));
    assert!(!report.passed());

    let report = check_layout(dir.path());
    assert!(!report.passed());
    assert!(
        report.findings.iter().any(|f| f.entry == "oci-layout"),
        "{}",
        describe(&report)
    );
    assert!(report.findings.iter().any(|f| f.entry == "index.json"));
}

#[test]
fn a_corrupted_layer_fails_its_digest() {
    let dir = scratch("corrupt");
    let root = good_two_platform(dir.path());
    let amd = nested_index(&root).manifests[0].clone();
    let manifest: Manifest = read_blob(&root, &amd.digest);
    let path = blob(&root, &manifest.layers[0].digest);
    let mut bytes = fs::read(&path).unwrap();
    // Flip a bit of the gzip trailer's CRC: the tar still reads, the digest does not match.
    let n = bytes.len();
    bytes[n - 6] ^= 1;
    fs::write(&path, bytes).unwrap();
    let report = check_layout(&root);
    assert!(
        report.findings.iter().any(|f| f.entry.contains("linux/amd64")
            && matches!(&f.problem, Problem::Layer { layer, .. } if *layer == manifest.layers[0].digest)),
        "{}",
        describe(&report)
    );
}

/// Writes an image whose config is exactly `config` (so a test can break it).
fn with_config(
    root: &std::path::Path,
    layers: &[LayerBuilder],
    edit: impl Fn(&mut ImageConfig, &mut Manifest),
) {
    let layout = LayoutWriter::create(root).unwrap();
    let written: Vec<_> = layers
        .iter()
        .map(|l| l.write(&layout, xtask::layer::LayerFormat::Gzip).unwrap())
        .collect();
    let mut config = ImageConfig {
        architecture: "amd64".into(),
        os: "linux".into(),
        variant: None,
        config: None,
        rootfs: RootFs {
            kind: "layers".into(),
            diff_ids: written.iter().map(|l| l.diff_id.to_string()).collect(),
        },
    };
    let mut manifest = Manifest {
        schema_version: 2,
        media_type: Some(oci::OCI_MANIFEST.into()),
        config: layout.put_json(oci::OCI_CONFIG, &config).unwrap(),
        layers: written.iter().map(|l| l.descriptor.clone()).collect(),
        annotations: None,
    };
    edit(&mut config, &mut manifest);
    manifest.config = layout.put_json(oci::OCI_CONFIG, &config).unwrap();
    let m = layout.put_json(oci::OCI_MANIFEST, &manifest).unwrap();
    finish(&layout, vec![listed(&m, &platform("amd64", None))]);
}

#[test]
fn a_diff_id_that_does_not_match_its_layer_fails() {
    let dir = scratch("diffid");
    let root = dir.path().join("layout");
    let layer = LayerBuilder::new().file_bytes("etc/motd", "hi", 0o644);
    with_config(&root, &[layer], |c, _| {
        c.rootfs.diff_ids[0] = xtask::digest::Digest::of(b"something else").to_string();
    });
    let report = check_layout(&root);
    assert!(
        report
            .findings
            .iter()
            .any(|f| f.to_string().contains("but the config's diff_id is")),
        "{}",
        describe(&report)
    );
}

#[test]
fn layers_the_check_cannot_read_are_refused_not_skipped() {
    let dir = scratch("zstd");
    let root = dir.path().join("layout");
    let layer = LayerBuilder::new().file_bytes("etc/motd", "hi", 0o644);
    with_config(&root, &[layer], |_, m| {
        m.layers[0].media_type = oci::OCI_LAYER_ZSTD.into();
    });
    let report = check_layout(&root);
    assert!(
        problems(&report).iter().any(|p| matches!(p,
            Problem::MediaType { media_type, .. } if media_type == oci::OCI_LAYER_ZSTD)),
        "{}",
        describe(&report)
    );
}

#[test]
fn a_truncated_elf_header_is_a_finding() {
    let dir = scratch("trunc");
    let root = dir.path().join("layout");
    single(
        &root,
        &platform("amd64", None),
        &[LayerBuilder::new().file_bytes("usr/bin/weft", &b"\x7fELF\x02\x01"[..], 0o755)],
    );
    let report = check_layout(&root);
    assert!(
        problems(&report)
            .iter()
            .any(|p| matches!(p, Problem::MalformedElf { path, .. } if path == "usr/bin/weft")),
        "{}",
        describe(&report)
    );
}

#[test]
fn a_wrong_binary_removed_by_a_whiteout_is_not_in_the_image() {
    let dir = scratch("whiteout");
    let x86 = tiny_binary(dir.path(), amd64(), "hello", &[]);
    let a64 = tiny_binary(dir.path(), arm64(), "hello", &[]);
    let root = dir.path().join("layout");
    single(
        &root,
        &platform("arm64", Some("v8")),
        &[
            base_layer(&a64, arm64()).file_from("usr/local/bin/old", &x86, 0o755),
            LayerBuilder::new().whiteout("usr/local/bin/old").file_from(
                "usr/bin/weft",
                &a64,
                0o755,
            ),
        ],
    );
    let report = check_layout(&root);
    assert!(report.passed(), "{}", describe(&report));
}

#[test]
fn a_wrong_binary_under_a_symlinked_directory_is_named_by_its_real_path() {
    let dir = scratch("usrmerge");
    let x86 = tiny_binary(dir.path(), amd64(), "hello", &[]);
    let root = dir.path().join("layout");
    single(
        &root,
        &platform("arm64", Some("v8")),
        &[
            LayerBuilder::new()
                .dir("usr/lib/aarch64-linux-gnu", 0o755)
                .symlink("lib", "usr/lib"),
            LayerBuilder::without_implicit_dirs().file_from(
                "lib/aarch64-linux-gnu/libweft.so",
                &x86,
                0o644,
            ),
        ],
    );
    let report = check_layout(&root);
    let found: Vec<String> = report.findings.iter().map(|f| f.to_string()).collect();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains(
            "usr/lib/aarch64-linux-gnu/libweft.so (written as lib/aarch64-linux-gnu/libweft.so)"
        ),
        "{}",
        found[0]
    );
}

#[test]
fn a_hard_link_to_a_wrong_binary_is_flagged_too() {
    let dir = scratch("hardlink");
    let x86 = tiny_binary(dir.path(), amd64(), "hello", &[]);
    let root = dir.path().join("layout");
    single(
        &root,
        &platform("arm64", Some("v8")),
        &[
            LayerBuilder::new().file_from("usr/bin/weft", &x86, 0o755),
            LayerBuilder::new().hardlink("opt/weft", "usr/bin/weft"),
        ],
    );
    let report = check_layout(&root);
    let paths: Vec<&str> = problems(&report)
        .iter()
        .filter_map(|p| match p {
            Problem::WrongMachine { path, .. } => Some(path.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        paths,
        vec!["opt/weft", "usr/bin/weft"],
        "{}",
        describe(&report)
    );
}

/// BPF objects are bytecode for the kernel, not the CPU: a little-endian object belongs on
/// every little-endian platform; a big-endian one on none of them.
#[test]
fn bpf_objects_pass_on_every_platform_of_their_byte_order() {
    let dir = scratch("bpf");
    let el = bpf_object(dir.path(), "bpfel");
    let eb = bpf_object(dir.path(), "bpfeb");
    for (arch, variant) in [("amd64", None), ("arm64", Some("v8"))] {
        let root = dir.path().join(format!("ok-{arch}"));
        single(
            &root,
            &platform(arch, variant),
            &[LayerBuilder::new().file_from("usr/lib/weft/prog.o", &el, 0o644)],
        );
        let report = check_layout(&root);
        assert!(report.passed(), "{arch}: {}", describe(&report));
        assert_eq!(report.checked[0].elf_files, 1);
    }
    let root = dir.path().join("big-endian");
    single(
        &root,
        &platform("amd64", None),
        &[LayerBuilder::new().file_from("usr/lib/weft/prog.o", &eb, 0o644)],
    );
    let report = check_layout(&root);
    assert!(
        report
            .findings
            .iter()
            .any(|f| f.to_string().contains("eBPF")),
        "{}",
        describe(&report)
    );
}

#[test]
fn attestation_manifests_are_listed_as_not_checked_and_nothing_else_is() {
    let dir = scratch("attest");
    let root = good_two_platform(dir.path());
    let mut entries = nested_index(&root).manifests;
    let layout_blob = |bytes: &[u8]| {
        let d = xtask::digest::Digest::of(bytes);
        fs::write(d.blob_path(&root), bytes).unwrap();
        (d.to_string(), bytes.len() as u64)
    };
    let (digest, size) = layout_blob(br#"{"schemaVersion":2,"layers":[]}"#);
    let attestation = Descriptor {
        media_type: oci::OCI_MANIFEST.into(),
        digest: digest.clone(),
        size,
        platform: Some(xtask::oci::Platform {
            os: "unknown".into(),
            ..platform("unknown", None)
        }),
        annotations: Some(
            [(
                oci::DOCKER_REFERENCE_TYPE.to_string(),
                oci::DOCKER_ATTESTATION.to_string(),
            )]
            .into(),
        ),
    };
    entries.push(attestation.clone());
    flat_index(&root, entries.clone());
    let report = check_layout(&root);
    assert!(report.passed(), "{}", describe(&report));
    assert_eq!(report.skipped.len(), 1);
    assert!(report.skipped[0].contains(&digest));

    // Without BuildKit's marker, unknown/unknown is an image the check cannot judge.
    entries.last_mut().unwrap().annotations = None;
    flat_index(&root, entries);
    assert!(!check_layout(&root).passed());
}

/// Docker's media types (`docker save`, registries that never converted) are read the same.
#[test]
fn docker_manifest_lists_are_checked_like_oci_indexes() {
    let dir = scratch("docker");
    let x86 = tiny_binary(dir.path(), amd64(), "hello", &[]);
    let root = dir.path().join("layout");
    let layout = LayoutWriter::create(&root).unwrap();
    let good = image(
        &layout,
        &platform("arm64", Some("v8")),
        &[xtask::build::app_layer(&x86)],
    );
    let mut manifest: Manifest = read_blob(&root, &good.digest);
    manifest.media_type = Some(oci::DOCKER_MANIFEST.into());
    manifest.config.media_type = oci::DOCKER_CONFIG.into();
    manifest.layers[0].media_type = oci::DOCKER_LAYER_GZIP.into();
    let mut docker = layout.put_json(oci::DOCKER_MANIFEST, &manifest).unwrap();
    docker.platform = Some(platform("arm64", Some("v8")));
    let list = Index {
        schema_version: 2,
        media_type: Some(oci::DOCKER_MANIFEST_LIST.into()),
        manifests: vec![docker],
        annotations: None,
    };
    let list = layout.put_json(oci::DOCKER_MANIFEST_LIST, &list).unwrap();
    flat_index(&root, vec![list]);
    let report = check_layout(&root);
    assert!(
        problems(&report)
            .iter()
            .any(|p| matches!(p, Problem::WrongMachine { path, .. } if path == "usr/bin/weft")),
        "{}",
        describe(&report)
    );
}
