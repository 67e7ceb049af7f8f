//! What one CNI plugin invocation printed, as tests of the plugins read it.

use std::process::ExitStatus;

use serde_json::Value;

/// A plugin's exit status and output; the CNI reply (result or error object) is on stdout.
#[derive(Debug, Clone)]
pub struct PluginReply {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl PluginReply {
    pub fn from_output(out: std::process::Output) -> PluginReply {
        PluginReply {
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    pub fn success(&self) -> bool {
        self.status.success()
    }

    /// Stdout as JSON; fails the test with the whole reply when it is not JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:?}"))
    }

    /// The CNI error code printed on stdout, if stdout is an error object.
    pub fn code(&self) -> Option<u64> {
        serde_json::from_str::<Value>(&self.stdout)
            .ok()?
            .get("code")?
            .as_u64()
    }

    /// The error message printed on stdout (empty when there is none).
    pub fn msg(&self) -> String {
        serde_json::from_str::<Value>(&self.stdout)
            .ok()
            .and_then(|v| v.get("msg").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_default()
    }

    /// Asserts success and returns the reply for chaining.
    #[track_caller]
    pub fn ok(self, what: &str) -> PluginReply {
        assert!(self.success(), "{what} failed: {self:#?}");
        self
    }

    /// Asserts a failure with `code` on stdout and returns the message.
    #[track_caller]
    pub fn fails_with(&self, code: u64, what: &str) -> String {
        assert!(
            !self.success(),
            "{what} succeeded, expected code {code}: {self:#?}"
        );
        assert_eq!(self.code(), Some(code), "{what}: wrong code: {self:#?}");
        self.msg()
    }

    /// Asserts a failure with an error object on stdout and returns (code, message).
    #[track_caller]
    pub fn failure(&self, what: &str) -> (u64, String) {
        assert!(!self.success(), "{what} succeeded: {self:#?}");
        let v = self.json();
        (
            v.get("code").and_then(Value::as_u64).unwrap_or_default(),
            v.get("msg")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        )
    }
}
