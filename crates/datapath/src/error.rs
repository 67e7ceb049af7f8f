//! The crate's one error type. Every variant that touches bpffs names the pin path.

use crate::layout::MapShape;
use crate::programs::Program;
use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A bpf() call, or a file operation on a pin, failed.
    #[error("{path}: {op} failed: {source}")]
    Bpf {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error(
        "{path}: not on a bpf filesystem, so pins would not outlive this process \
         (is bpffs mounted at /sys/fs/bpf, and was a mount namespace entered?)"
    )]
    NotBpffs { path: PathBuf },

    #[error("{path}: not pinned; has the weft agent loaded the datapath under this pin root?")]
    NotPinned { path: PathBuf },

    #[error("{path}: pinned object is not {expected}")]
    WrongObject {
        path: PathBuf,
        expected: &'static str,
    },

    #[error(
        "{path}: the pinned map has {found} but this build expects {expected}; it was \
         pinned by an incompatible weft version and must be migrated or removed"
    )]
    MapMismatch {
        path: PathBuf,
        expected: MapShape,
        found: MapShape,
    },

    #[error("invalid interface name {name:?}: {reason}")]
    InvalidIfname { name: String, reason: &'static str },

    #[error("interface {name}: {source}")]
    Interface {
        name: String,
        #[source]
        source: io::Error,
    },

    #[error("embedded object of {program}: {source}")]
    Object {
        program: Program,
        #[source]
        source: Box<aya::EbpfError>,
    },

    #[error("the embedded object of {program} does not contain it (build problem)")]
    MissingProgram { program: Program },

    #[error("program {program}: {source}")]
    Program {
        program: Program,
        #[source]
        source: Box<aya::programs::ProgramError>,
    },

    #[error("{path}: map {op} failed: {source}")]
    Map {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: Box<aya::maps::MapError>,
    },

    #[error("{path}: entry with a value the datapath does not define: {detail}")]
    UnknownEntry { path: PathBuf, detail: String },

    /// An rtnetlink tc request of the clsact fallback failed; `message` is the
    /// kernel's explanation when it gave one.
    #[error("{target}: tc {op} failed: {source}{}", explain(.message))]
    Tc {
        op: &'static str,
        target: String,
        #[source]
        source: io::Error,
        message: Option<String>,
    },

    #[error(
        "{ifname}: ingress pref {pref} is taken by a {detail} that weft does not own; \
         weft's cls_bpf filter needs that place (remove the other filter or move it)"
    )]
    ForeignFilter {
        ifname: String,
        pref: u16,
        detail: String,
    },

    #[error("{var}={value:?}: expected one of auto, tcx, clsact")]
    InvalidAttachMode { var: &'static str, value: String },

    #[error(
        "the embedded object of {program} defines map {name}, which weft-datapath does not \
         know (add it to layout::MAPS; build problem)"
    )]
    UnknownMap { program: Program, name: String },

    #[error("program {program}: not supported: {what}")]
    Unsupported {
        program: Program,
        what: &'static str,
    },

    #[error("map {map}: {entries} entries is not a size (at least 1)")]
    InvalidSize { map: &'static str, entries: u32 },

    #[error("service frontend {frontend}: {field}: {reason}")]
    InvalidService {
        frontend: String,
        field: &'static str,
        reason: String,
    },

    #[error("pin root {path}: {reason}")]
    InvalidPinRoot { path: PathBuf, reason: &'static str },
}

fn explain(message: &Option<String>) -> String {
    message
        .as_deref()
        .map(|m| format!(" ({m})"))
        .unwrap_or_default()
}

impl Error {
    pub(crate) fn bpf(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Error {
        Error::Bpf {
            op,
            path: path.into(),
            source,
        }
    }

    pub(crate) fn map(
        op: &'static str,
        path: impl Into<PathBuf>,
        source: aya::maps::MapError,
    ) -> Error {
        Error::Map {
            op,
            path: path.into(),
            source: Box::new(source),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
