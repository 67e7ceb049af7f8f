//! Errors: [`Error`] for the library's own failures (binding, configuration), and
//! [`ApiError`], a Kubernetes `Status` failure that a request handler returns to the client.

use serde_json::{json, Value};

/// What can go wrong when starting or controlling the server (not a client request).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("bind {addr}: {source}")]
    Bind {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("listener: {0}")]
    Listener(std::io::Error),
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("{0}")]
    Api(#[from] ApiError),
}

/// Kubernetes' `metav1.StatusReason` values this server produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    BadRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    AlreadyExists,
    Conflict,
    Gone,
    Expired,
    Invalid,
    MethodNotAllowed,
    NotAcceptable,
    UnsupportedMediaType,
    RequestEntityTooLarge,
    TooManyRequests,
    InternalError,
    ServiceUnavailable,
    Timeout,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::BadRequest => "BadRequest",
            Reason::Unauthorized => "Unauthorized",
            Reason::Forbidden => "Forbidden",
            Reason::NotFound => "NotFound",
            Reason::AlreadyExists => "AlreadyExists",
            Reason::Conflict => "Conflict",
            Reason::Gone => "Gone",
            Reason::Expired => "Expired",
            Reason::Invalid => "Invalid",
            Reason::MethodNotAllowed => "MethodNotAllowed",
            Reason::NotAcceptable => "NotAcceptable",
            Reason::UnsupportedMediaType => "UnsupportedMediaType",
            Reason::RequestEntityTooLarge => "RequestEntityTooLarge",
            Reason::TooManyRequests => "TooManyRequests",
            Reason::InternalError => "InternalError",
            Reason::ServiceUnavailable => "ServiceUnavailable",
            Reason::Timeout => "Timeout",
        }
    }

    /// The HTTP code the real API server pairs with the reason.
    pub fn code(self) -> u16 {
        match self {
            Reason::BadRequest => 400,
            Reason::Unauthorized => 401,
            Reason::Forbidden => 403,
            Reason::NotFound => 404,
            Reason::AlreadyExists | Reason::Conflict => 409,
            Reason::Gone | Reason::Expired => 410,
            Reason::Invalid => 422,
            Reason::MethodNotAllowed => 405,
            Reason::NotAcceptable => 406,
            Reason::UnsupportedMediaType => 415,
            Reason::RequestEntityTooLarge => 413,
            Reason::TooManyRequests => 429,
            Reason::InternalError => 500,
            Reason::ServiceUnavailable => 503,
            Reason::Timeout => 504,
        }
    }
}

/// One `causes[]` entry of a Status (`field` names the offending field for 422 Invalid).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    pub reason: String,
    pub message: String,
    pub field: String,
}

/// A failure answered as a `Status` object with the real server's `reason` and `code`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code} {}: {message}", reason.as_str())]
pub struct ApiError {
    pub reason: Reason,
    pub code: u16,
    pub message: String,
    /// `details.group`, `details.kind`, `details.name`.
    pub group: Option<String>,
    pub kind: Option<String>,
    pub name: Option<String>,
    pub causes: Vec<Cause>,
    pub retry_after_seconds: Option<u32>,
    /// `metadata.continue` of the Status (an inconsistent continuation after a 410).
    pub continue_token: Option<String>,
}

impl ApiError {
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        ApiError {
            reason,
            code: reason.code(),
            message: message.into(),
            group: None,
            kind: None,
            name: None,
            causes: Vec::new(),
            retry_after_seconds: None,
            continue_token: None,
        }
    }

    pub fn with_code(mut self, code: u16) -> Self {
        self.code = code;
        self
    }

    pub fn details(mut self, group: &str, kind: &str, name: &str) -> Self {
        self.group = Some(group.to_string());
        self.kind = Some(kind.to_string());
        self.name = Some(name.to_string());
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(Reason::BadRequest, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(Reason::InternalError, message)
    }

    /// `pods "x" not found`, as the real server words it.
    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            Reason::NotFound,
            format!("{} \"{name}\" not found", qualified(group, plural)),
        )
        .details(group, plural, name)
    }

    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            Reason::AlreadyExists,
            format!("{} \"{name}\" already exists", qualified(group, plural)),
        )
        .details(group, plural, name)
    }

    pub fn conflict(group: &str, plural: &str, name: &str, why: &str) -> Self {
        Self::new(
            Reason::Conflict,
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(group, plural)
            ),
        )
        .details(group, plural, name)
    }

    /// 422: `Kind.group "name" is invalid: field: message`.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let list = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect::<Vec<_>>();
        let detail = if list.len() == 1 {
            list[0].clone()
        } else {
            format!("[{}]", list.join(", "))
        };
        let mut err = Self::new(
            Reason::Invalid,
            format!("{} \"{name}\" is invalid: {detail}", qualified(group, kind)),
        )
        .details(group, kind, name);
        err.causes = causes;
        err
    }

    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(Reason::Expired, message)
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(Reason::MethodNotAllowed, message)
    }

    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            Reason::UnsupportedMediaType,
            format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got {content_type:?})"),
        )
    }

    /// The `Status` object sent to the client.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason.as_str(),
            "code": self.code,
        });
        let mut details = serde_json::Map::new();
        if let Some(name) = &self.name {
            details.insert("name".into(), json!(name));
        }
        if let Some(group) = &self.group {
            if !group.is_empty() {
                details.insert("group".into(), json!(group));
            }
        }
        if let Some(kind) = &self.kind {
            details.insert("kind".into(), json!(kind));
        }
        if !self.causes.is_empty() {
            let causes: Vec<Value> = self
                .causes
                .iter()
                .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                .collect();
            details.insert("causes".into(), Value::Array(causes));
        }
        if let Some(retry) = self.retry_after_seconds {
            details.insert("retryAfterSeconds".into(), json!(retry));
        }
        if !details.is_empty() {
            status["details"] = Value::Object(details);
        }
        if let Some(token) = &self.continue_token {
            status["metadata"] = json!({"continue": token});
        }
        status
    }
}

/// `pods` for the core group, `leases.coordination.k8s.io` otherwise.
pub fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

/// A field error for [`ApiError::invalid`] (`FieldValueRequired`, `FieldValueInvalid`, ...).
pub fn cause(reason: &str, field: &str, message: impl Into<String>) -> Cause {
    Cause {
        reason: reason.to_string(),
        field: field.to_string(),
        message: message.into(),
    }
}
