//! The CNI error object and the spec's well-known error codes.

use std::fmt;

use serde_json::{json, Map, Value};

/// Incompatible CNI version.
pub const INCOMPATIBLE_VERSION: u32 = 1;
/// Unsupported field in the network configuration (the message names key and value).
pub const UNSUPPORTED_FIELD: u32 = 2;
/// Container unknown or does not exist; the runtime need not clean up.
pub const UNKNOWN_CONTAINER: u32 = 3;
/// Invalid or missing environment variables (the message names them).
pub const INVALID_ENVIRONMENT: u32 = 4;
/// I/O failure, e.g. reading stdin.
pub const IO_FAILURE: u32 = 5;
/// Failed to decode content (bytes that are not the expected JSON).
pub const DECODING_FAILURE: u32 = 6;
/// Invalid network configuration.
pub const INVALID_CONFIG: u32 = 7;
/// A transient condition: the runtime should retry later.
pub const TRY_AGAIN_LATER: u32 = 11;
/// STATUS: the plugin cannot service ADD requests.
pub const NOT_AVAILABLE: u32 = 50;
/// STATUS: not available, and existing containers may have limited connectivity.
pub const LIMITED_CONNECTIVITY: u32 = 51;
/// weft: CHECK found the attachment missing or in a wrong state.
pub const PLUGIN_CHECK_FAILED: u32 = 100;
/// weft: an internal failure that fits no other code.
pub const PLUGIN_INTERNAL: u32 = 101;

/// A CNI error: what the plugin prints on stdout before exiting non-zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CniError {
    /// Spec code (0-99 reserved, 100+ plugin specific; see the constants in this module).
    pub code: u32,
    /// Short message.
    pub msg: String,
    /// Longer explanation; omitted from the JSON when empty.
    pub details: String,
}

impl CniError {
    /// An error with any code.
    pub fn new(code: u32, msg: impl Into<String>) -> Self {
        Self {
            code,
            msg: msg.into(),
            details: String::new(),
        }
    }

    /// Adds the longer explanation.
    #[must_use]
    pub fn with_details(mut self, details: impl Into<String>) -> Self {
        self.details = details.into();
        self
    }

    /// Code 1.
    pub fn incompatible_version(msg: impl Into<String>) -> Self {
        Self::new(INCOMPATIBLE_VERSION, msg)
    }

    /// Code 2; the spec requires the message to carry the key and the value.
    pub fn unsupported_field(key: &str, value: &Value) -> Self {
        Self::new(
            UNSUPPORTED_FIELD,
            format!("unsupported field {key:?} with value {value}"),
        )
    }

    /// Code 3.
    pub fn unknown_container(msg: impl Into<String>) -> Self {
        Self::new(UNKNOWN_CONTAINER, msg)
    }

    /// Code 4; callers put the variable names in `msg`.
    pub fn invalid_environment(msg: impl Into<String>) -> Self {
        Self::new(INVALID_ENVIRONMENT, msg)
    }

    /// Code 5.
    pub fn io(msg: impl Into<String>) -> Self {
        Self::new(IO_FAILURE, msg)
    }

    /// Code 6.
    pub fn decoding(msg: impl Into<String>) -> Self {
        Self::new(DECODING_FAILURE, msg)
    }

    /// Code 7; callers name the field in `msg`.
    pub fn invalid_config(msg: impl Into<String>) -> Self {
        Self::new(INVALID_CONFIG, msg)
    }

    /// Code 11.
    pub fn try_again_later(msg: impl Into<String>) -> Self {
        Self::new(TRY_AGAIN_LATER, msg)
    }

    /// Code 50 (STATUS).
    pub fn not_available(msg: impl Into<String>) -> Self {
        Self::new(NOT_AVAILABLE, msg)
    }

    /// Code 51 (STATUS).
    pub fn limited_connectivity(msg: impl Into<String>) -> Self {
        Self::new(LIMITED_CONNECTIVITY, msg)
    }

    /// Code 100: CHECK found something missing or wrong.
    pub fn check_failed(msg: impl Into<String>) -> Self {
        Self::new(PLUGIN_CHECK_FAILED, msg)
    }

    /// Code 101: an internal failure.
    pub fn internal(msg: impl Into<String>) -> Self {
        Self::new(PLUGIN_INTERNAL, msg)
    }

    /// The error object as JSON: `{"cniVersion","code","msg","details"}`, details omitted when
    /// empty. Pass the version declared by the request, or [`crate::Version::LATEST`] when the
    /// request could not be read.
    pub fn to_value(&self, cni_version: &str) -> Value {
        let mut object = Map::new();
        object.insert("cniVersion".into(), json!(cni_version));
        object.insert("code".into(), json!(self.code));
        object.insert("msg".into(), json!(self.msg));
        if !self.details.is_empty() {
            object.insert("details".into(), json!(self.details));
        }
        Value::Object(object)
    }

    /// [`CniError::to_value`] as a string, ready for stdout.
    pub fn to_json(&self, cni_version: &str) -> String {
        self.to_value(cni_version).to_string()
    }

    /// The process exit status to use with this error. Runtimes only look for "non-zero" and read
    /// the code from stdout, so this is always 1 (as libcni's skeleton does).
    pub fn exit_code(&self) -> i32 {
        1
    }
}

impl fmt::Display for CniError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CNI error {}: {}", self.code, self.msg)?;
        if !self.details.is_empty() {
            write!(f, "; {}", self.details)?;
        }
        Ok(())
    }
}

impl std::error::Error for CniError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_omits_empty_details() {
        let error = CniError::invalid_config("field \"name\" is missing");
        let value: Value = serde_json::from_str(&error.to_json("1.1.0")).unwrap();
        assert_eq!(
            value,
            json!({"cniVersion": "1.1.0", "code": 7, "msg": "field \"name\" is missing"})
        );
    }

    #[test]
    fn json_keeps_details() {
        let error = CniError::not_available("agent down").with_details("socket refused");
        assert_eq!(
            error.to_value("1.1.0"),
            json!({"cniVersion": "1.1.0", "code": 50, "msg": "agent down", "details": "socket refused"})
        );
    }

    #[test]
    fn constructors_use_spec_codes() {
        let codes = [
            (CniError::incompatible_version("x").code, 1),
            (CniError::unsupported_field("k", &json!(1)).code, 2),
            (CniError::unknown_container("x").code, 3),
            (CniError::invalid_environment("x").code, 4),
            (CniError::io("x").code, 5),
            (CniError::decoding("x").code, 6),
            (CniError::invalid_config("x").code, 7),
            (CniError::try_again_later("x").code, 11),
            (CniError::not_available("x").code, 50),
            (CniError::limited_connectivity("x").code, 51),
            (CniError::check_failed("x").code, 100),
            (CniError::internal("x").code, 101),
        ];
        for (got, want) in codes {
            assert_eq!(got, want);
        }
    }

    #[test]
    fn unsupported_field_names_key_and_value() {
        let error = CniError::unsupported_field("mode", &json!("l3s"));
        assert!(error.msg.contains("\"mode\""), "{}", error.msg);
        assert!(error.msg.contains("\"l3s\""), "{}", error.msg);
    }

    #[test]
    fn exit_code_is_non_zero_and_display_has_details() {
        let error = CniError::internal("boom").with_details("why");
        assert_ne!(error.exit_code(), 0);
        assert_eq!(error.to_string(), "CNI error 101: boom; why");
    }
}
