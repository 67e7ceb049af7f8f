//! One error type for every operation. Kernel refusals keep their errno and, when the
//! kernel sent one, its extended-ack text; every message names the operation and the
//! object ("add route 10.244.1.5/32 dev wf1234: File exists").

use std::io;
use std::path::PathBuf;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The object to create already exists (EEXIST).
    #[error("{context}: File exists")]
    Exists { context: String },

    /// The object to read, change or delete does not exist (ENODEV, ENOENT, ESRCH,
    /// EADDRNOTAVAIL).
    #[error("{context}: {}", describe(*errno, kernel_message.as_deref()))]
    NotFound {
        context: String,
        errno: i32,
        kernel_message: Option<String>,
    },

    /// Any other refusal by the kernel.
    #[error("{context}: {}", describe(*errno, kernel_message.as_deref()))]
    Kernel {
        context: String,
        errno: i32,
        kernel_message: Option<String>,
    },

    /// A system call failed outside a netlink reply: the socket itself, a namespace
    /// file, a file under /proc/sys.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },

    /// The network namespace file does not exist (a pod that is already gone, a typo).
    #[error("network namespace {}: does not exist", path.display())]
    NetnsNotFound { path: PathBuf },

    /// The kernel's reply could not be decoded.
    #[error("{context}: malformed netlink reply: {detail}")]
    Decode { context: String, detail: String },

    /// The request is invalid; nothing was sent to the kernel.
    #[error("{context}: {reason}")]
    InvalidInput { context: String, reason: String },

    /// A dump kept being interrupted by concurrent changes, so no consistent
    /// snapshot could be returned.
    #[error("{context}: dump interrupted by concurrent changes {attempts} times in a row")]
    DumpInterrupted { context: String, attempts: u32 },
}

impl Error {
    /// The errno behind this error, when there is one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Exists { .. } => Some(libc::EEXIST),
            Error::NotFound { errno, .. } | Error::Kernel { errno, .. } => Some(*errno),
            Error::Io { source, .. } => source.raw_os_error(),
            Error::NetnsNotFound { .. } => Some(libc::ENOENT),
            _ => None,
        }
    }

    pub fn is_exists(&self) -> bool {
        matches!(self, Error::Exists { .. })
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. } | Error::NetnsNotFound { .. })
    }

    /// Builds the error for a kernel refusal (`errno` positive).
    pub(crate) fn from_kernel(
        errno: i32,
        kernel_message: Option<String>,
        context: String,
    ) -> Error {
        match errno {
            libc::EEXIST => Error::Exists { context },
            libc::ENODEV | libc::ENOENT | libc::ESRCH | libc::EADDRNOTAVAIL => Error::NotFound {
                context,
                errno,
                kernel_message,
            },
            _ => Error::Kernel {
                context,
                errno,
                kernel_message,
            },
        }
    }

    pub(crate) fn invalid(context: impl Into<String>, reason: impl Into<String>) -> Error {
        Error::InvalidInput {
            context: context.into(),
            reason: reason.into(),
        }
    }
}

/// "File exists", or "Invalid argument (kernel: Unknown device type)" when the kernel
/// explained itself through an extended ack.
fn describe(errno: i32, kernel_message: Option<&str>) -> String {
    let text = nix::errno::Errno::from_raw(errno).desc();
    match kernel_message {
        Some(message) => format!("{text} (kernel: {message})"),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_operation_and_the_errno() {
        let err = Error::from_kernel(
            libc::EEXIST,
            None,
            "add route 10.244.1.5/32 dev wf1234".into(),
        );
        assert!(err.is_exists());
        assert_eq!(
            err.to_string(),
            "add route 10.244.1.5/32 dev wf1234: File exists"
        );

        let err = Error::from_kernel(
            libc::EINVAL,
            Some("Unknown device type".into()),
            "create vxlan wfvx".into(),
        );
        assert_eq!(err.errno(), Some(libc::EINVAL));
        assert_eq!(
            err.to_string(),
            "create vxlan wfvx: Invalid argument (kernel: Unknown device type)"
        );
    }

    #[test]
    fn missing_objects_map_to_not_found() {
        for errno in [libc::ENODEV, libc::ENOENT, libc::ESRCH, libc::EADDRNOTAVAIL] {
            let err = Error::from_kernel(errno, None, "delete".into());
            assert!(err.is_not_found(), "errno {errno}");
            assert_eq!(err.errno(), Some(errno));
        }
        assert!(!Error::from_kernel(libc::EPERM, None, "x".into()).is_not_found());
    }
}
