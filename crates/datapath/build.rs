//! Compiles the C datapath under `<workspace>/bpf/` into BPF objects.
//!
//! - Every program of `src/program_table.rs` (the one list of programs, shared with the
//!   crate): `bpf/<name>.c` becomes `$OUT_DIR/<name>.bpf.o`, which the crate embeds.
//!   `bpf/include/` holds the shared headers.
//! - Test fixtures, which only the crate's tests load (the library never embeds them):
//!   every `bpf/tests/*.c` (built against `bpf/include/`) becomes
//!   `$OUT_DIR/tests/<name>.bpf.o`, and every `bpf/tests/<dir>/*.c` (built against its own
//!   `bpf/tests/<dir>/include/`, e.g. the datapath of an earlier release) becomes
//!   `$OUT_DIR/tests/<dir>/<name>.bpf.o`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

// build.rs only needs the names; the crate reads the attach kinds of the same rows.
macro_rules! programs {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal {
        attach: $attach:expr,
        links: $links:literal $(,)?
    } ),* $(,)?) => {
        const PROGRAMS: &[&str] = &[$($name),*];
    };
}
// ... and the objects other parts of weft load.
macro_rules! foreign_objects {
    ($( $(#[$doc:meta])* $constant:ident = $name:literal ),* $(,)?) => {
        const FOREIGN_OBJECTS: &[&str] = &[$($name),*];
    };
}
include!("src/program_table.rs");

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let bpf_dir = manifest_dir.join("../../bpf");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    let clang = env::var("WEFT_CLANG").unwrap_or_else(|_| "clang".to_string());
    let include = bpf_dir.join("include");

    println!("cargo:rerun-if-env-changed=WEFT_CLANG");
    println!("cargo:rerun-if-changed=src/program_table.rs");
    watch_tree(&include);
    watch_tree(&bpf_dir.join("tests"));

    check_toolchain(&clang);
    let cc = Compiler {
        clang,
        multiarch: multiarch_include(),
    };
    for program in PROGRAMS.iter().chain(FOREIGN_OBJECTS) {
        let source = bpf_dir.join(format!("{program}.c"));
        println!("cargo:rerun-if-changed={}", source.display());
        cc.compile(&source, &include, &out_dir.join(format!("{program}.bpf.o")));
    }
    compile_fixtures(
        &cc,
        &bpf_dir.join("tests"),
        &include,
        &out_dir.join("tests"),
    );
}

/// `bpf/tests/*.c` against the shared headers, `bpf/tests/<dir>/*.c` against their own.
fn compile_fixtures(cc: &Compiler, dir: &Path, include: &Path, out: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.map(|e| e.expect("readable").path()).collect();
    entries.sort();
    std::fs::create_dir_all(out).expect("create fixture output dir");
    for path in entries {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if path.is_dir() {
            if name == "include" {
                continue;
            }
            compile_fixtures(cc, &path, &path.join("include"), &out.join(name));
        } else if let Some(stem) = name.strip_suffix(".c") {
            cc.compile(&path, include, &out.join(format!("{stem}.bpf.o")));
        }
    }
}

fn watch_tree(dir: &Path) {
    println!("cargo:rerun-if-changed={}", dir.display());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.expect("readable bpf dir").path();
        if path.is_dir() {
            watch_tree(&path);
        } else {
            println!("cargo:rerun-if-changed={}", path.display());
        }
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
fn multiarch_include() -> Option<PathBuf> {
    let clang = env::var("WEFT_CLANG").unwrap_or_else(|_| "clang".to_string());
    let out = Command::new(clang).arg("-print-multiarch").output().ok()?;
    let triple = String::from_utf8(out.stdout).ok()?.trim().to_string();
    let dir = Path::new("/usr/include").join(triple);
    dir.is_dir().then_some(dir)
}

struct Compiler {
    clang: String,
    multiarch: Option<PathBuf>,
}

impl Compiler {
    fn compile(&self, source: &Path, include: &Path, output: &Path) {
        let mut cmd = Command::new(&self.clang);
        cmd.args(["-O2", "-g", "-target", "bpf", "-mcpu=v3"])
            .args(["-Wall", "-Wextra", "-Werror"])
            .arg("-I")
            .arg(include);
        if let Some(dir) = &self.multiarch {
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
}
