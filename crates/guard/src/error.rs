//! One error type for the plugin, mapped onto the CNI error codes at the edge.
//!
//! Codes: 7 for a netconf, pod contract or pod spec the plugin refuses (the message names
//! the field, annotation or container), 11 when the API server could not be asked (transient: the runtime may
//! retry), 100 for a CHECK that found the fence differs from what the pod asks for, 101 for
//! everything that went wrong while installing, verifying or removing a fence.

use weft_cni::error::{INVALID_CONFIG, PLUGIN_CHECK_FAILED, PLUGIN_INTERNAL, TRY_AGAIN_LATER};
use weft_cni::CniError;

use crate::kube::ApiError;

/// Why a guard command failed.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    /// A netconf field is missing or invalid.
    #[error("weft-guard netconf: {field}: {reason}")]
    Config { field: String, reason: String },

    /// The pod's annotations ask for something this plugin refuses to enforce.
    #[error("pod contract refused: {annotation}: {reason}")]
    Contract { annotation: String, reason: String },

    /// The pod's containers could leave the fence (capabilities, UIDs): fencing it would
    /// only look enforced. The message says what each container holds and what to change.
    #[error("{0}")]
    PodSecurity(String),

    /// The pod could not be looked up, so whether it must be fenced is unknown.
    #[error("looking up pod {namespace}/{name}: {source}")]
    Api {
        namespace: String,
        name: String,
        #[source]
        source: Box<ApiError>,
    },

    /// Installing, reading or removing the fence failed.
    #[error("{what}: {source}")]
    Nft {
        what: String,
        #[source]
        source: weft_nft::Error,
    },

    /// The pod's network namespace could not be opened or entered.
    #[error("network namespace {path}: {reason}")]
    Netns { path: String, reason: String },

    /// The fence is installed but does not prove itself (ADD's verification).
    #[error("fence not verified: {0}")]
    NotVerified(String),

    /// CHECK found the namespace's state differs from what the pod asks for.
    #[error("{0}")]
    CheckFailed(String),

    /// A state file could not be written, read or removed.
    #[error("state {path}: {reason}")]
    State { path: String, reason: String },

    /// A test hook made this step fail (see [`crate::fault`]).
    #[error("injected fault at step {0}")]
    Fault(&'static str),

    /// Anything else that stops the command.
    #[error("{0}")]
    Other(String),
}

impl GuardError {
    pub fn config(field: &str, reason: impl Into<String>) -> Self {
        GuardError::Config {
            field: field.into(),
            reason: reason.into(),
        }
    }

    pub fn contract(annotation: &str, reason: impl Into<String>) -> Self {
        GuardError::Contract {
            annotation: annotation.into(),
            reason: reason.into(),
        }
    }

    pub fn nft(what: impl Into<String>, source: weft_nft::Error) -> Self {
        GuardError::Nft {
            what: what.into(),
            source,
        }
    }

    pub fn netns(path: impl Into<String>, reason: impl std::fmt::Display) -> Self {
        GuardError::Netns {
            path: path.into(),
            reason: reason.to_string(),
        }
    }

    pub fn state(path: &std::path::Path, reason: impl std::fmt::Display) -> Self {
        GuardError::State {
            path: path.display().to_string(),
            reason: reason.to_string(),
        }
    }

    /// The CNI error code this failure is reported with.
    pub fn code(&self) -> u32 {
        match self {
            GuardError::Config { .. }
            | GuardError::Contract { .. }
            | GuardError::PodSecurity(_) => INVALID_CONFIG,
            GuardError::Api { source, .. } if source.is_transient() => TRY_AGAIN_LATER,
            GuardError::CheckFailed(_) => PLUGIN_CHECK_FAILED,
            _ => PLUGIN_INTERNAL,
        }
    }
}

impl From<GuardError> for CniError {
    fn from(error: GuardError) -> CniError {
        CniError::new(error.code(), error.to_string())
    }
}
