//! Errors name the object and operation they concern ("add rule inet weft_guard
//! output #3") and carry the kernel's errno where there is one.

use std::fmt;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("open NETLINK_NETFILTER socket: {0}")]
    Open(#[source] std::io::Error),

    #[error("enter network namespace {}: {source}", path.display())]
    EnterNetns {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The socket itself failed (send, receive, buffer sizing).
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },

    /// The kernel refused a request (a dump or a query, not a batch).
    #[error("{what}: {}", errno_text(*errno))]
    Kernel { what: String, errno: i32 },

    /// The kernel rejected a batch; nothing in it was applied. Every failing message is
    /// listed, in batch order; the first is usually the cause of the others.
    #[error("batch rejected, nothing applied: {}", summary(failures))]
    Batch { failures: Vec<Failure> },

    #[error("{what}: malformed reply: {reason}")]
    Malformed { what: String, reason: String },

    /// The caller asked for something that cannot be encoded.
    #[error("{what}: {reason}")]
    Invalid { what: String, reason: String },

    #[error("{what}: the ruleset changed during every one of {attempts} reads")]
    Unstable { what: String, attempts: u32 },
}

/// One message of a batch the kernel refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The message, e.g. "add rule inet weft_guard output #3", or "batch" when the
    /// kernel refused the batch as a whole.
    pub what: String,
    pub errno: i32,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.what, errno_text(self.errno))
    }
}

impl Error {
    /// The kernel errno of a refused request, or of the first failing batch message.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Kernel { errno, .. } => Some(*errno),
            Error::Batch { failures } => failures.first().map(|f| f.errno),
            _ => None,
        }
    }
}

fn errno_text(errno: i32) -> String {
    let e = nix::errno::Errno::from_raw(errno);
    format!("{} ({e:?})", e.desc())
}

fn summary(failures: &[Failure]) -> String {
    match failures {
        [] => "no failing message reported".to_string(),
        [only] => only.to_string(),
        [first, rest @ ..] => format!("{first} (and {} more failing messages)", rest.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_error_names_the_failing_message_and_errno() {
        let e = Error::Batch {
            failures: vec![
                Failure {
                    what: "add rule inet weft_guard output #3".into(),
                    errno: libc::EOPNOTSUPP,
                },
                Failure {
                    what: "add rule inet weft_guard output #4".into(),
                    errno: libc::ENOENT,
                },
            ],
        };
        assert_eq!(
            e.to_string(),
            "batch rejected, nothing applied: add rule inet weft_guard output #3: \
             Operation not supported on transport endpoint (EOPNOTSUPP) (and 1 more failing messages)"
        );
        assert_eq!(e.errno(), Some(libc::EOPNOTSUPP));
    }
}
