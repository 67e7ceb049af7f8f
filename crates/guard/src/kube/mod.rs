//! A small blocking Kubernetes client: enough to read one pod's annotations. Where it sends
//! the request and how it authenticates comes from `weft-kubeconfig`, shared with the agent.
//!
//! No tokio on the CNI path: one request with [`ureq`] (rustls, ring), bounded by a connect
//! timeout and a total timeout. Every failure is an [`ApiError`]; the caller fails closed.

mod client;
mod kubeconfig;

pub use client::{get_pod, get_pod_annotations, PodInfo, Timeouts};
pub use kubeconfig::{ApiTarget, Auth, ClientIdentity};

/// Why the pod could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The kubeconfig (or a file it names) is missing or invalid.
    #[error("kubeconfig {path}: {reason}")]
    Kubeconfig { path: String, reason: String },
    /// A namespace or pod name that cannot be part of a request path.
    #[error("{0}")]
    BadName(String),
    /// No answer in time.
    #[error("API server {server} did not answer in time ({reason})")]
    Timeout { server: String, reason: String },
    /// The server could not be reached (connection refused, reset, TLS failure, ...).
    #[error("API server {server} unreachable: {reason}")]
    Unreachable { server: String, reason: String },
    /// TLS failed: the server's certificate is not trusted, or ours was refused. Not
    /// transient: the kubeconfig or the server's certificate has to change.
    #[error("API server {server}: TLS: {reason}")]
    Tls { server: String, reason: String },
    /// The server answered with an error status.
    #[error("API server {server} answered HTTP {status} for {url}{}", body_excerpt(.body))]
    Status {
        server: String,
        url: String,
        status: u16,
        body: String,
    },
    /// The answer is not the pod object asked for.
    #[error("API server {server}: unusable answer: {reason}")]
    Response { server: String, reason: String },
}

impl ApiError {
    /// Whether retrying later could succeed (timeouts, connection failures, 429, 5xx).
    pub fn is_transient(&self) -> bool {
        match self {
            ApiError::Timeout { .. } | ApiError::Unreachable { .. } => true,
            ApiError::Status { status, .. } => *status == 429 || *status >= 500,
            _ => false,
        }
    }
}

impl From<weft_kubeconfig::KubeconfigError> for ApiError {
    fn from(e: weft_kubeconfig::KubeconfigError) -> ApiError {
        ApiError::Kubeconfig {
            path: e.path,
            reason: e.reason,
        }
    }
}

fn body_excerpt(body: &str) -> String {
    const MAX: usize = 200;
    let trimmed = body.trim();
    if trimmed.is_empty() {
        return String::new();
    }
    let cut: String = trimmed.chars().take(MAX).collect();
    format!(": {cut}")
}
