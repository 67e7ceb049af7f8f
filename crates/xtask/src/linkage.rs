//! What a dynamically linked binary needs at run time: its loader and, transitively, every
//! library its `DT_NEEDED` entries name, found in a sysroot of the target architecture.
//!
//! The image puts the loader at the binary's `PT_INTERP` path and every library in
//! `/lib/<triplet>/`, a directory Debian's loader searches by default, so the image needs no
//! `ld.so.cache`. A library that cannot be found, or is for another machine, is an error here
//! rather than a container that fails to start.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs::File;
use std::path::{Path, PathBuf};

use crate::elf::{self, Ident};
use crate::platform::{self, Arch};

/// A file of the closure: where it goes in the image and where it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    pub image_path: String,
    pub source: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closure {
    pub interpreter: Option<Placed>,
    /// By soname, each once.
    pub libraries: Vec<Placed>,
}

#[derive(Debug, thiserror::Error)]
pub enum LinkageError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        source: elf::ElfError,
    },
    #[error("{path} is ELF {found}, but {arch} needs {expected}")]
    WrongMachine {
        path: PathBuf,
        arch: &'static str,
        found: Ident,
        expected: Ident,
    },
    #[error("{path} sets DT_RPATH/DT_RUNPATH ({paths}); the image only has the loader's default directories")]
    SearchPath { path: PathBuf, paths: String },
    #[error("{path} needs {name:?}, which is not a plain library name")]
    BadName { path: PathBuf, name: String },
    #[error("{library} (needed by {needed_by}) is not in {searched}: the image would not start")]
    Missing {
        library: String,
        needed_by: String,
        searched: String,
    },
    #[error("{path}: the loader path {interpreter:?} is not absolute")]
    RelativeInterpreter { path: PathBuf, interpreter: String },
    #[error("the loader {interpreter} is not in the sysroot {sysroot}")]
    MissingInterpreter {
        interpreter: String,
        sysroot: PathBuf,
    },
}

/// Where the libraries of `arch` may live under `sysroot`: Debian's multiarch directories,
/// then the plain ones (Debian's cross sysroots, `/usr/<triplet>/lib`, use those).
pub fn search_dirs(arch: &Arch, sysroot: &Path) -> Vec<PathBuf> {
    [
        format!("lib/{}", arch.triplet),
        format!("usr/lib/{}", arch.triplet),
        "lib".to_string(),
        "usr/lib".to_string(),
    ]
    .iter()
    .map(|d| sysroot.join(d))
    .collect()
}

fn read(path: &Path) -> Result<elf::Dynamic, LinkageError> {
    let err = |source| LinkageError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut file = File::open(path).map_err(|e| err(e.into()))?;
    elf::read_dynamic(&mut file).map_err(err)
}

fn check_machine(path: &Path, d: &elf::Dynamic, arch: &'static Arch) -> Result<(), LinkageError> {
    if platform::runs_on(&d.ident, &arch.elf) && d.ident.machine != elf::EM_BPF {
        return Ok(());
    }
    Err(LinkageError::WrongMachine {
        path: path.to_path_buf(),
        arch: arch.oci,
        found: d.ident,
        expected: arch.elf,
    })
}

fn check_search_paths(path: &Path, d: &elf::Dynamic) -> Result<(), LinkageError> {
    if d.search_paths.is_empty() {
        return Ok(());
    }
    Err(LinkageError::SearchPath {
        path: path.to_path_buf(),
        paths: d.search_paths.join(":"),
    })
}

/// Refuses `path` unless it is an ELF binary for `arch`.
pub fn require_machine(path: &Path, arch: &'static Arch) -> Result<(), LinkageError> {
    check_machine(path, &read(path)?, arch)
}

/// Resolves the run-time closure of `binary` for `arch` in `sysroot`.
pub fn resolve(
    binary: &Path,
    arch: &'static Arch,
    sysroot: &Path,
) -> Result<Closure, LinkageError> {
    let top = read(binary)?;
    check_machine(binary, &top, arch)?;
    check_search_paths(binary, &top)?;

    let interpreter = match &top.interpreter {
        None => None,
        Some(interp) => {
            let rel =
                interp
                    .strip_prefix('/')
                    .ok_or_else(|| LinkageError::RelativeInterpreter {
                        path: binary.to_path_buf(),
                        interpreter: interp.clone(),
                    })?;
            let source = sysroot.join(rel);
            if !source.is_file() {
                return Err(LinkageError::MissingInterpreter {
                    interpreter: interp.clone(),
                    sysroot: sysroot.to_path_buf(),
                });
            }
            check_machine(&source, &read(&source)?, arch)?;
            Some(Placed {
                image_path: rel.to_string(),
                source,
            })
        }
    };
    // The loader answers to its own soname: a DT_NEEDED on it is already satisfied.
    let loader_name = top
        .interpreter
        .as_deref()
        .and_then(|i| i.rsplit('/').next())
        .map(str::to_string);

    let dirs = search_dirs(arch, sysroot);
    let mut found: BTreeMap<String, Placed> = BTreeMap::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut queue: VecDeque<(String, String)> = top
        .needed
        .iter()
        .map(|n| (n.clone(), binary.display().to_string()))
        .collect();
    while let Some((name, needed_by)) = queue.pop_front() {
        if Some(&name) == loader_name.as_ref() || !seen.insert(name.clone()) {
            continue;
        }
        if name.contains('/') || name.is_empty() || name == "." || name == ".." {
            return Err(LinkageError::BadName {
                path: PathBuf::from(needed_by),
                name,
            });
        }
        let Some(source) = dirs.iter().map(|d| d.join(&name)).find(|p| p.is_file()) else {
            return Err(LinkageError::Missing {
                library: name,
                needed_by,
                searched: dirs
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        let lib = read(&source)?;
        check_machine(&source, &lib, arch)?;
        check_search_paths(&source, &lib)?;
        for next in &lib.needed {
            queue.push_back((next.clone(), name.clone()));
        }
        found.insert(
            name.clone(),
            Placed {
                image_path: format!("lib/{}/{name}", arch.triplet),
                source,
            },
        );
    }
    Ok(Closure {
        interpreter,
        libraries: found.into_values().collect(),
    })
}
