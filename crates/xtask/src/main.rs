//! `cargo xtask image build|check` (the alias is in `.cargo/config.toml`).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand};

use xtask::build::{self, Labels, PlatformInput};
use xtask::check;
use xtask::platform::{self, Arch};

#[derive(Debug, Parser)]
#[command(name = "xtask", about = "weft's release tasks")]
struct Cli {
    #[command(subcommand)]
    command: Top,
}

#[derive(Debug, Subcommand)]
enum Top {
    /// The agent's OCI image.
    #[command(subcommand)]
    Image(ImageCmd),
}

#[derive(Debug, Subcommand)]
enum ImageCmd {
    /// Build the image of the release binary, one platform per --arch, as an OCI layout.
    Build(BuildArgs),
    /// Fail unless every platform entry of an OCI layout carries binaries for its architecture.
    Check {
        /// The OCI layout directory (with oci-layout and index.json).
        layout: PathBuf,
    },
}

#[derive(Debug, Args)]
struct BuildArgs {
    /// Where to write the OCI layout (an existing layout there is replaced).
    #[arg(long)]
    out: PathBuf,
    /// OCI architecture of a platform to build (repeat for an index of several); default:
    /// this machine's.
    #[arg(long = "arch")]
    arches: Vec<String>,
    /// ARCH=PATH: the weft binary for ARCH (default target/release/weft for this machine's
    /// architecture, target/<rust target>/release/weft for others).
    #[arg(long = "binary", value_name = "ARCH=PATH")]
    binaries: Vec<String>,
    /// ARCH=DIR: where ARCH's loader and libraries are (default / for this machine's
    /// architecture, Debian's cross sysroot /usr/<triplet> for others).
    #[arg(long = "sysroot", value_name = "ARCH=DIR")]
    sysroots: Vec<String>,
    /// ARCH=TOOL: the strip for ARCH's binaries (default strip, or <triplet>-strip).
    #[arg(long = "strip", value_name = "ARCH=TOOL")]
    strips: Vec<String>,
    /// org.opencontainers.image.version (default: the workspace version).
    #[arg(long, default_value = env!("CARGO_PKG_VERSION"))]
    image_version: String,
    /// org.opencontainers.image.revision (default: the git commit, "-dirty" if the tree has
    /// uncommitted changes).
    #[arg(long)]
    revision: Option<String>,
    /// org.opencontainers.image.source.
    #[arg(long, default_value = env!("CARGO_PKG_REPOSITORY"))]
    source: String,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Top::Image(ImageCmd::Build(args)) => image_build(args),
        Top::Image(ImageCmd::Check { layout }) => image_check(&layout),
    };
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("xtask: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root: this crate lives in `<root>/crates/xtask`.
fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .nth(2)
        .unwrap_or(manifest)
        .to_path_buf()
}

/// The value given as ARCH=VALUE for `arch`, if any; refuses entries for unknown or
/// unrequested architectures so that a typo is not silently ignored.
fn per_arch<'a>(
    flag: &str,
    entries: &'a [String],
    arches: &[&Arch],
    arch: &Arch,
) -> anyhow::Result<Option<&'a str>> {
    let mut found = None;
    for e in entries {
        let Some((a, v)) = e.split_once('=') else {
            bail!("--{flag} {e:?}: expected ARCH=VALUE");
        };
        if !arches.iter().any(|x| x.oci == a) {
            bail!("--{flag} {e:?}: {a} is not one of the --arch values being built");
        }
        if a == arch.oci {
            found = Some(v);
        }
    }
    Ok(found)
}

fn image_build(args: BuildArgs) -> anyhow::Result<ExitCode> {
    let host = platform::host().context("this machine's architecture is not in xtask's table")?;
    let arches: Vec<&'static Arch> = if args.arches.is_empty() {
        vec![host]
    } else {
        args.arches
            .iter()
            .map(|a| platform::lookup(a, None))
            .collect::<Result<_, _>>()?
    };
    let root = workspace_root();
    let mut inputs = Vec::new();
    for &arch in &arches {
        let native = arch == host;
        let binary = match per_arch("binary", &args.binaries, &arches, arch)? {
            Some(p) => PathBuf::from(p),
            None if native => root.join("target/release/weft"),
            None => root
                .join("target")
                .join(arch.rust_target)
                .join("release/weft"),
        };
        let sysroot = match per_arch("sysroot", &args.sysroots, &arches, arch)? {
            Some(p) => PathBuf::from(p),
            None if native => PathBuf::from("/"),
            None => PathBuf::from("/usr").join(arch.triplet),
        };
        let strip = match per_arch("strip", &args.strips, &arches, arch)? {
            Some(t) => t.to_string(),
            None if native => "strip".to_string(),
            None => format!("{}-strip", arch.triplet),
        };
        inputs.push(PlatformInput {
            arch,
            binary,
            sysroot,
            strip,
        });
    }
    let labels = Labels {
        version: args.image_version,
        revision: match args.revision {
            Some(r) => r,
            None => git_revision(&root)?,
        },
        source: args.source,
    };
    let built = build::build(&args.out, &inputs, &labels)?;
    for ((platform, manifest, closure), input) in built.platforms.iter().zip(&inputs) {
        println!("{platform}: manifest {}", manifest.digest);
        println!("  {} from {}", build::BINARY_PATH, input.binary.display());
        if let Some(loader) = &closure.interpreter {
            println!("  {} from {}", loader.image_path, loader.source.display());
        }
        for lib in &closure.libraries {
            println!("  {} from {}", lib.image_path, lib.source.display());
        }
    }
    println!(
        "index {} tagged {} (revision {}) in {}",
        built.index.digest,
        labels.version,
        labels.revision,
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn git_revision(root: &Path) -> anyhow::Result<String> {
    let git = |args: &[&str]| -> anyhow::Result<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .output()
            .context("running git for the revision label (or pass --revision)")?;
        if !out.status.success() {
            bail!(
                "git {}: {} (or pass --revision)",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "HEAD"])?;
    let dirty = !git(&["status", "--porcelain", "--untracked-files=no"])?.is_empty();
    Ok(if dirty {
        format!("{commit}-dirty")
    } else {
        commit
    })
}

fn image_check(layout: &Path) -> anyhow::Result<ExitCode> {
    let report = check::check_layout(layout);
    for c in &report.checked {
        println!(
            "{} (manifest {}): {} files, {} ELF",
            c.platform, c.manifest, c.files, c.elf_files
        );
    }
    for s in &report.skipped {
        println!("not checked: {s}");
    }
    if report.passed() {
        println!(
            "image check passed: {} platform(s), every ELF file matches its platform",
            report.checked.len()
        );
        return Ok(ExitCode::SUCCESS);
    }
    for f in &report.findings {
        eprintln!("{f}");
    }
    if report.more_findings > 0 {
        eprintln!("... and {} more", report.more_findings);
    }
    eprintln!(
        "image check failed: {} problem(s) in {}",
        report.findings.len() + report.more_findings,
        layout.display()
    );
    Ok(ExitCode::FAILURE)
}
