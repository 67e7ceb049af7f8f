//! Compiles the C datapath under `<workspace>/bpf/` into BPF objects that the crate
//! embeds with `include_bytes!`. Each top-level `bpf/*.c` is one attach point and
//! becomes `$OUT_DIR/<name>.bpf.o`; `bpf/include/` holds the shared headers.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The entry files, one per attach point. Listed rather than globbed so that adding a
/// program is a deliberate change to the crate that embeds it.
const PROGRAMS: &[&str] = &["from_pod", "from_overlay"];

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let bpf_dir = manifest_dir.join("../../bpf");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    let clang = env::var("WEFT_CLANG").unwrap_or_else(|_| "clang".to_string());

    println!("cargo:rerun-if-env-changed=WEFT_CLANG");
    println!(
        "cargo:rerun-if-changed={}",
        bpf_dir.join("include").display()
    );
    for entry in std::fs::read_dir(bpf_dir.join("include")).expect("bpf/include exists") {
        let entry = entry.expect("readable bpf/include");
        println!("cargo:rerun-if-changed={}", entry.path().display());
    }

    check_toolchain(&clang);
    let multiarch = multiarch_include(&clang);
    for program in PROGRAMS {
        let source = bpf_dir.join(format!("{program}.c"));
        println!("cargo:rerun-if-changed={}", source.display());
        compile(
            &clang,
            &source,
            &bpf_dir.join("include"),
            multiarch.as_deref(),
            &out_dir.join(format!("{program}.bpf.o")),
        );
    }
}

fn check_toolchain(clang: &str) {
    match Command::new(clang).arg("--version").output() {
        Ok(out) if out.status.success() => {}
        _ => panic!(
            "\n\nweft-datapath compiles its eBPF programs (bpf/*.c) with clang, and `{clang}` \
             could not be run.\nInstall it (Debian: `apt-get install clang llvm libbpf-dev`, \
             or `make deps`), or point WEFT_CLANG at a clang binary.\n\n"
        ),
    }
    if !Path::new("/usr/include/bpf/bpf_helpers.h").exists() {
        println!(
            "cargo:warning=/usr/include/bpf/bpf_helpers.h not found: install libbpf-dev \
             (Debian: `apt-get install libbpf-dev`)"
        );
    }
}

/// The UAPI headers include `<asm/types.h>`, which Debian keeps under a multiarch
/// directory that `-target bpf` does not search by itself.
fn multiarch_include(clang: &str) -> Option<PathBuf> {
    let out = Command::new(clang).arg("-print-multiarch").output().ok()?;
    let triple = String::from_utf8(out.stdout).ok()?.trim().to_string();
    let dir = Path::new("/usr/include").join(triple);
    dir.is_dir().then_some(dir)
}

fn compile(clang: &str, source: &Path, include: &Path, multiarch: Option<&Path>, output: &Path) {
    let mut cmd = Command::new(clang);
    cmd.args(["-O2", "-g", "-target", "bpf", "-mcpu=v3"])
        .args(["-Wall", "-Wextra", "-Werror"])
        .arg("-I")
        .arg(include);
    if let Some(dir) = multiarch {
        cmd.arg("-idirafter").arg(dir);
    }
    cmd.arg("-c").arg(source).arg("-o").arg(output);
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("could not run {cmd:?}: {e}"));
    if !out.status.success() {
        panic!(
            "\n\ncompiling {} failed:\n{}\n{}\n",
            source.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
