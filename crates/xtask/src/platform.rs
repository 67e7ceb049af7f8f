//! OCI platforms and the ELF machine each one runs: the one table both the image build and
//! the check read. An architecture that is not here is refused, never guessed.

use crate::elf::{self, Class, Endian, Ident};

/// Whether a file with identification `file` belongs on a platform whose binaries are
/// `target`.
///
/// eBPF objects (`EM_BPF`) are bytecode for the kernel's verifier, not for the CPU: one object
/// serves every architecture of its byte order, so for them only the byte order is compared.
pub fn runs_on(file: &Ident, target: &Ident) -> bool {
    if file.machine == elf::EM_BPF {
        return file.endian == target.endian;
    }
    file == target
}

/// One architecture as OCI, Debian, Rust and ELF name it.
#[derive(Debug, PartialEq, Eq)]
pub struct Arch {
    /// `architecture` in OCI platforms and image configs (GOARCH spelling).
    pub oci: &'static str,
    /// The `variant` the build writes, if the architecture has one by convention.
    pub default_variant: Option<&'static str>,
    /// Variants the check accepts ("" is "none given").
    pub variants: &'static [&'static str],
    /// `std::env::consts::ARCH` of a host of this architecture.
    pub rust_arch: &'static str,
    /// Rust target triple of the release build.
    pub rust_target: &'static str,
    /// Debian multiarch triplet: library directory and cross-tool prefix.
    pub triplet: &'static str,
    /// The identification of the platform's own binaries.
    pub elf: Ident,
}

pub static ARCHES: &[Arch] = &[
    Arch {
        oci: "amd64",
        default_variant: None,
        variants: &["", "v1", "v2", "v3", "v4"],
        rust_arch: "x86_64",
        rust_target: "x86_64-unknown-linux-gnu",
        triplet: "x86_64-linux-gnu",
        elf: Ident {
            machine: elf::EM_X86_64,
            class: Class::Elf64,
            endian: Endian::Little,
        },
    },
    Arch {
        oci: "arm64",
        default_variant: Some("v8"),
        variants: &["", "v8", "v9"],
        rust_arch: "aarch64",
        rust_target: "aarch64-unknown-linux-gnu",
        triplet: "aarch64-linux-gnu",
        elf: Ident {
            machine: elf::EM_AARCH64,
            class: Class::Elf64,
            endian: Endian::Little,
        },
    },
    Arch {
        oci: "arm",
        default_variant: Some("v7"),
        variants: &["v6", "v7"],
        rust_arch: "arm",
        rust_target: "armv7-unknown-linux-gnueabihf",
        triplet: "arm-linux-gnueabihf",
        elf: Ident {
            machine: elf::EM_ARM,
            class: Class::Elf32,
            endian: Endian::Little,
        },
    },
    Arch {
        oci: "386",
        default_variant: None,
        variants: &[""],
        rust_arch: "x86",
        rust_target: "i686-unknown-linux-gnu",
        triplet: "i386-linux-gnu",
        elf: Ident {
            machine: elf::EM_386,
            class: Class::Elf32,
            endian: Endian::Little,
        },
    },
    Arch {
        oci: "ppc64le",
        default_variant: None,
        variants: &[""],
        rust_arch: "powerpc64",
        rust_target: "powerpc64le-unknown-linux-gnu",
        triplet: "powerpc64le-linux-gnu",
        elf: Ident {
            machine: elf::EM_PPC64,
            class: Class::Elf64,
            endian: Endian::Little,
        },
    },
    Arch {
        oci: "s390x",
        default_variant: None,
        variants: &[""],
        rust_arch: "s390x",
        rust_target: "s390x-unknown-linux-gnu",
        triplet: "s390x-linux-gnu",
        elf: Ident {
            machine: elf::EM_S390,
            class: Class::Elf64,
            endian: Endian::Big,
        },
    },
    Arch {
        oci: "riscv64",
        default_variant: None,
        variants: &[""],
        rust_arch: "riscv64",
        rust_target: "riscv64gc-unknown-linux-gnu",
        triplet: "riscv64-linux-gnu",
        elf: Ident {
            machine: elf::EM_RISCV,
            class: Class::Elf64,
            endian: Endian::Little,
        },
    },
];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlatformError {
    #[error("unknown architecture {arch:?}: the check knows {known}, and refuses to guess which ELF machine runs on it")]
    UnknownArchitecture { arch: String, known: String },
    #[error("unknown variant {variant:?} of {arch}: known variants are {known}")]
    UnknownVariant {
        arch: String,
        variant: String,
        known: String,
    },
    #[error("operating system {os:?} is not linux: the check only knows ELF platforms")]
    UnsupportedOs { os: String },
}

/// The architecture named by an OCI `architecture` and `variant`.
pub fn lookup(architecture: &str, variant: Option<&str>) -> Result<&'static Arch, PlatformError> {
    let arch = ARCHES
        .iter()
        .find(|a| a.oci == architecture)
        .ok_or_else(|| PlatformError::UnknownArchitecture {
            arch: architecture.to_string(),
            known: ARCHES.iter().map(|a| a.oci).collect::<Vec<_>>().join(", "),
        })?;
    let variant = variant.unwrap_or("");
    if !arch.variants.contains(&variant) {
        return Err(PlatformError::UnknownVariant {
            arch: architecture.to_string(),
            variant: variant.to_string(),
            known: arch
                .variants
                .iter()
                .map(|v| if v.is_empty() { "(none)" } else { v })
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    Ok(arch)
}

/// The architecture of the machine running this process.
pub fn host() -> Option<&'static Arch> {
    ARCHES
        .iter()
        .find(|a| a.rust_arch == std::env::consts::ARCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_oci_architecture_is_listed_once() {
        for a in ARCHES {
            assert_eq!(
                ARCHES.iter().filter(|b| b.oci == a.oci).count(),
                1,
                "{}",
                a.oci
            );
            if let Some(v) = a.default_variant {
                assert!(
                    a.variants.contains(&v),
                    "{}: default variant not accepted",
                    a.oci
                );
            }
        }
    }

    #[test]
    fn lookup_refuses_what_it_does_not_know() {
        assert_eq!(
            lookup("arm64", Some("v8")).unwrap().elf.machine,
            elf::EM_AARCH64
        );
        assert_eq!(lookup("arm64", None).unwrap().elf.machine, elf::EM_AARCH64);
        assert!(matches!(
            lookup("mips64le", None),
            Err(PlatformError::UnknownArchitecture { .. })
        ));
        assert!(matches!(
            lookup("arm64", Some("v7")),
            Err(PlatformError::UnknownVariant { .. })
        ));
    }

    #[test]
    fn bpf_objects_are_accepted_by_byte_order_only() {
        let bpf = |endian| Ident {
            class: Class::Elf64,
            endian,
            machine: elf::EM_BPF,
        };
        let arm64 = lookup("arm64", None).unwrap().elf;
        let s390x = lookup("s390x", None).unwrap().elf;
        assert!(runs_on(&bpf(Endian::Little), &arm64));
        assert!(!runs_on(&bpf(Endian::Big), &arm64));
        assert!(runs_on(&bpf(Endian::Big), &s390x));
        let x86_64 = lookup("amd64", None).unwrap().elf;
        assert!(!runs_on(&x86_64, &arm64));
        assert!(runs_on(&arm64, &arm64));
    }
}
