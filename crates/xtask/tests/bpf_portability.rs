//! Every platform of the image carries the same eBPF objects (built once, little-endian, and
//! embedded in the binary). That is right only while no program depends on the CPU it runs
//! on: kprobes and uprobes read `struct pt_regs`, whose layout is per architecture, and
//! syscall tracing names per-architecture wrappers. docs/release.md relies on this test.

use std::fs;
use std::path::Path;

/// Program and map sections whose meaning is the same on every architecture.
const PORTABLE_SECTIONS: &[&str] = &[
    "classifier",
    "tc",
    "tcx/",
    "xdp",
    "cgroup/",
    "cgroup_skb/",
    "sockops",
    "sk_msg",
    "sk_skb",
    "sk_lookup",
    "socket",
    "lsm/",
    "lsm.s/",
    "license",
    ".maps",
    "maps",
];

/// Source text that only per-architecture programs use. Including `bpf_tracing.h` is not
/// on the list: its `BPF_PROG` reads arguments from the u64 context array that BTF-typed
/// hooks (lsm/, tp_btf/) get on every architecture; only its `PT_REGS_*`/`BPF_KPROBE`
/// macros are per-architecture, and those are.
const ARCH_SPECIFIC: &[&str] = &[
    "pt_regs",
    "PT_REGS",
    "__TARGET_ARCH",
    "BPF_KPROBE",
    "BPF_KSYSCALL",
    "__x64_sys",
    "__arm64_sys",
];

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if matches!(path.extension().and_then(|e| e.to_str()), Some("c" | "h")) {
            out.push(path);
        }
    }
}

#[test]
fn bpf_programs_do_not_depend_on_the_cpu_architecture() {
    let bpf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bpf");
    let mut files = Vec::new();
    sources(&bpf, &mut files);
    assert!(!files.is_empty(), "no BPF sources under {}", bpf.display());
    let mut problems = Vec::new();
    let mut sections = 0;
    for file in &files {
        let text = fs::read_to_string(file).unwrap();
        for needle in ARCH_SPECIFIC {
            if text.contains(needle) {
                problems.push(format!("{}: uses {needle}", file.display()));
            }
        }
        for (i, _) in text.match_indices("SEC(\"") {
            let rest = &text[i + 5..];
            let name = &rest[..rest.find('"').unwrap_or(rest.len())];
            sections += 1;
            if !PORTABLE_SECTIONS.iter().any(|p| name.starts_with(p)) {
                problems.push(format!(
                    "{}: section {name:?} is not known to be architecture-independent",
                    file.display()
                ));
            }
        }
    }
    assert!(sections > 0, "no SEC(...) found under {}", bpf.display());
    assert!(
        problems.is_empty(),
        "one BPF object per byte order would no longer serve every platform:\n  {}\n\
         A program that reads pt_regs or per-architecture kernel symbols needs an object per \
         architecture (docs/release.md). A new portable program type belongs in \
         PORTABLE_SECTIONS.",
        problems.join("\n  ")
    );
}
