//! The CNI operations, as named by `CNI_COMMAND`.

use std::fmt;
use std::str::FromStr;

use crate::error::CniError;
use crate::version::Version;

/// A CNI operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Command {
    /// Attach the container to the network.
    Add,
    /// Detach; best effort and idempotent.
    Del,
    /// Verify an attachment (0.4.0+).
    Check,
    /// Report readiness (1.1.0+).
    Status,
    /// Remove stale resources (1.1.0+).
    Gc,
    /// Report supported versions.
    Version,
}

impl Command {
    /// The exact `CNI_COMMAND` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Command::Add => "ADD",
            Command::Del => "DEL",
            Command::Check => "CHECK",
            Command::Status => "STATUS",
            Command::Gc => "GC",
            Command::Version => "VERSION",
        }
    }

    /// The oldest config version that defines this command, if it is not defined by all.
    pub fn min_version(self) -> Option<Version> {
        match self {
            Command::Check => Some(Version::V0_4_0),
            Command::Status | Command::Gc => Some(Version::V1_1_0),
            Command::Add | Command::Del | Command::Version => None,
        }
    }

    /// Whether the command acts on one attachment (container ID + interface).
    pub fn is_attachment_command(self) -> bool {
        matches!(self, Command::Add | Command::Del | Command::Check)
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Command {
    type Err = CniError;

    /// Case-sensitive, like libcni. Unknown values get code 4 naming the value.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(match text {
            "ADD" => Command::Add,
            "DEL" => Command::Del,
            "CHECK" => Command::Check,
            "STATUS" => Command::Status,
            "GC" => Command::Gc,
            "VERSION" => Command::Version,
            _ => {
                return Err(CniError::invalid_environment(format!(
                    "unknown CNI_COMMAND {text:?}; expected ADD, DEL, CHECK, STATUS, GC or VERSION"
                )))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_command() {
        for command in [
            Command::Add,
            Command::Del,
            Command::Check,
            Command::Status,
            Command::Gc,
            Command::Version,
        ] {
            assert_eq!(command.as_str().parse::<Command>().unwrap(), command);
        }
    }

    #[test]
    fn unknown_command_is_code_4_naming_value() {
        for bad in ["add", "", "DELETE", "GC "] {
            let error = bad.parse::<Command>().unwrap_err();
            assert_eq!(error.code, 4);
            assert!(error.msg.contains(&format!("{bad:?}")), "{}", error.msg);
        }
    }
}
