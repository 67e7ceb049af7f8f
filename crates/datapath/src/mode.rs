//! How tc programs are attached: TCX links (Linux 6.6+) or, on older kernels, the
//! clsact/cls_bpf fallback, and the once-per-process probe that decides.
//!
//! The mode only chooses how a *new* attachment is made. An interface that already
//! carries one of weft's attachments keeps it, whatever the mode, so a node never
//! runs both on one interface (see [`crate::hook`]).

use crate::error::{Error, Result};
use crate::sys;
use std::fmt;
use std::os::fd::BorrowedFd;
use std::str::FromStr;
use std::sync::atomic::{AtomicU8, Ordering};

/// The attachment mechanism to use for new tc attachments.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AttachMode {
    /// TCX where the kernel has it, otherwise clsact. Only "not supported" from the
    /// kernel selects the fallback; any other failure is an error.
    #[default]
    Auto,
    /// TCX links only; fails on kernels without TCX.
    Tcx,
    /// The clsact qdisc and a cls_bpf filter, even where TCX exists (tests use it to
    /// exercise the fallback on a new kernel).
    Clsact,
}

impl AttachMode {
    /// The environment variable both the CNI plugin and the agent read
    /// (`auto`, `tcx` or `clsact`; unset or empty means `auto`).
    pub const ENV: &'static str = "WEFT_ATTACH_MODE";

    /// The mode [`AttachMode::ENV`] asks for. A value that is not a mode is an
    /// error rather than `auto`, so a typo cannot silently pick another mechanism.
    pub fn from_env() -> Result<AttachMode> {
        match std::env::var(Self::ENV) {
            Ok(value) if value.trim().is_empty() => Ok(AttachMode::Auto),
            Ok(value) => value.parse(),
            Err(std::env::VarError::NotPresent) => Ok(AttachMode::Auto),
            Err(std::env::VarError::NotUnicode(value)) => Err(Error::InvalidAttachMode {
                var: Self::ENV,
                value: value.to_string_lossy().into_owned(),
            }),
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            AttachMode::Auto => "auto",
            AttachMode::Tcx => "tcx",
            AttachMode::Clsact => "clsact",
        }
    }
}

impl FromStr for AttachMode {
    type Err = Error;

    fn from_str(s: &str) -> Result<AttachMode> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(AttachMode::Auto),
            "tcx" => Ok(AttachMode::Tcx),
            "clsact" => Ok(AttachMode::Clsact),
            _ => Err(Error::InvalidAttachMode {
                var: Self::ENV,
                value: s.to_string(),
            }),
        }
    }
}

impl fmt::Display for AttachMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The mechanism an attachment actually uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backend {
    Tcx,
    Clsact,
}

const UNKNOWN: u8 = 0;
const SUPPORTED: u8 = 1;
const UNSUPPORTED: u8 = 2;

/// What the probe found, for the life of the process (the kernel does not change
/// under it).
static TCX_SUPPORT: AtomicU8 = AtomicU8::new(UNKNOWN);

/// The backend for a new attachment in `mode`. `prog` is any tc classifier; `Auto`
/// uses it for the probe the first time.
pub(crate) fn backend_for(mode: AttachMode, prog: BorrowedFd<'_>) -> Result<Backend> {
    match mode {
        AttachMode::Tcx => Ok(Backend::Tcx),
        AttachMode::Clsact => Ok(Backend::Clsact),
        AttachMode::Auto => match tcx_supported(prog)? {
            true => Ok(Backend::Tcx),
            false => Ok(Backend::Clsact),
        },
    }
}

fn tcx_supported(prog: BorrowedFd<'_>) -> Result<bool> {
    match TCX_SUPPORT.load(Ordering::Relaxed) {
        SUPPORTED => return Ok(true),
        UNSUPPORTED => return Ok(false),
        _ => {}
    }
    let outcome = sys::tcx_link_create(prog, 0, sys::BPF_TCX_INGRESS).map(drop);
    let supported = classify_probe(&outcome).ok_or_else(|| {
        let source = outcome
            .err()
            .unwrap_or_else(|| std::io::Error::other("unexpected success"));
        Error::bpf("BPF_LINK_CREATE (TCX probe)", "ifindex 0", source)
    })?;
    TCX_SUPPORT.store(
        if supported { SUPPORTED } else { UNSUPPORTED },
        Ordering::Relaxed,
    );
    Ok(supported)
}

/// Reads the answer to a TCX ingress link request for ifindex 0, which no device
/// has: a kernel with TCX looks the device up and says `ENODEV`; one without TCX
/// rejects the attach type with `EINVAL` (or `EOPNOTSUPP`). Anything else is not an
/// answer (`None`). The probe never attaches anything.
fn classify_probe(outcome: &std::io::Result<()>) -> Option<bool> {
    match outcome {
        Err(e) => match e.raw_os_error() {
            Some(libc::ENODEV) => Some(true),
            Some(libc::EINVAL) | Some(libc::EOPNOTSUPP) => Some(false),
            _ => None,
        },
        // A link on "device 0" cannot exist; dropping it detached it anyway.
        Ok(()) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    #[test]
    fn modes_parse_and_print() {
        for mode in [AttachMode::Auto, AttachMode::Tcx, AttachMode::Clsact] {
            assert_eq!(mode.name().parse::<AttachMode>().unwrap(), mode);
            assert_eq!(mode.to_string(), mode.name());
        }
        assert_eq!(
            " ClsAct ".parse::<AttachMode>().unwrap(),
            AttachMode::Clsact
        );
        assert!(matches!(
            "netlink".parse::<AttachMode>(),
            Err(Error::InvalidAttachMode { .. })
        ));
        assert_eq!(AttachMode::default(), AttachMode::Auto);
    }

    #[test]
    fn only_not_supported_selects_the_fallback() {
        let errno = |n| Err(io::Error::from_raw_os_error(n));
        assert_eq!(classify_probe(&errno(libc::ENODEV)), Some(true));
        assert_eq!(classify_probe(&errno(libc::EINVAL)), Some(false));
        assert_eq!(classify_probe(&errno(libc::EOPNOTSUPP)), Some(false));
        assert_eq!(classify_probe(&errno(libc::EPERM)), None);
        assert_eq!(classify_probe(&Ok(())), None);
    }
}
