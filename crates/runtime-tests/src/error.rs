use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong while driving a runtime. Tests usually `expect` these,
/// but they stay typed so that a test can assert that a call *fails* (a guard plugin that
/// fails closed makes RunPodSandbox fail, and that is the behaviour under test).
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },

    #[error("`{command}` failed ({status}):\nstdout: {stdout}\nstderr: {stderr}")]
    CommandFailed {
        command: String,
        status: String,
        stdout: String,
        stderr: String,
    },

    #[error("could not connect to the CRI socket {socket}: {detail}")]
    CriConnect { socket: PathBuf, detail: String },

    #[error("CRI {call} failed: {code:?}: {message}")]
    Cri {
        call: &'static str,
        code: tonic::Code,
        message: String,
    },

    #[error("timed out after {waited:?} waiting for {what}{}", last_seen.as_deref().map(|s| format!(" (last seen: {s})")).unwrap_or_default())]
    Timeout {
        what: String,
        waited: Duration,
        last_seen: Option<String>,
    },

    #[error("unexpected {what}: {detail}")]
    Unexpected { what: String, detail: String },

    #[error("no weft plugin binary: set WEFT_BIN or build it (cargo build --bin weft); looked at {looked_at:?}")]
    PluginNotFound { looked_at: Vec<PathBuf> },
}

pub type Result<T, E = HarnessError> = std::result::Result<T, E>;

/// Attaches a human-readable context to an `io::Error`.
pub(crate) fn io_context(
    context: impl Into<String>,
) -> impl FnOnce(std::io::Error) -> HarnessError {
    let context = context.into();
    move |source| HarnessError::Io { context, source }
}

pub(crate) fn unexpected(what: impl Into<String>, detail: impl Into<String>) -> HarnessError {
    HarnessError::Unexpected {
        what: what.into(),
        detail: detail.into(),
    }
}
