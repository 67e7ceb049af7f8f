//! CNI spec versions: parsing, ordering, negotiation and the VERSION reply.

use std::fmt;
use std::str::FromStr;

use serde_json::{json, Value};

use crate::command::Command;
use crate::error::CniError;

/// A CNI spec version, `MAJOR.MINOR.PATCH`. Any such version parses; only
/// [`SUPPORTED_VERSIONS`] are accepted for requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    /// Major.
    pub major: u32,
    /// Minor.
    pub minor: u32,
    /// Patch.
    pub patch: u32,
}

/// The versions weft speaks, oldest first. 0.4.0 stays because podman writes 0.4.0 configs.
pub const SUPPORTED_VERSIONS: [Version; 3] = [Version::V0_4_0, Version::V1_0_0, Version::V1_1_0];

impl Version {
    /// 0.4.0: CHECK and prevResult on DEL; results carry `version` per IP.
    pub const V0_4_0: Version = Version::new(0, 4, 0);
    /// 1.0.0: results drop the per-IP `version`.
    pub const V1_0_0: Version = Version::new(1, 0, 0);
    /// 1.1.0: STATUS, GC, `cniVersions`, richer interfaces and routes.
    pub const V1_1_0: Version = Version::new(1, 1, 0);
    /// The newest supported version.
    pub const LATEST: Version = Version::V1_1_0;

    /// A version from its parts.
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        Self {
            major,
            minor,
            patch,
        }
    }

    /// Whether weft accepts requests in this version.
    pub fn is_supported(self) -> bool {
        SUPPORTED_VERSIONS.contains(&self)
    }

    /// Whether results in this version use the 0.x shape (per-IP `version`, short interfaces).
    pub(crate) fn uses_legacy_result(self) -> bool {
        self < Version::V1_0_0
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl FromStr for Version {
    type Err = CniError;

    /// Strict semver core: three decimal numbers, no leading zeros, no pre-release or build.
    /// A string that is not a version cannot name a version we speak, hence code 1.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let not_a_version =
            || CniError::incompatible_version(format!("{text:?} is not a CNI version"));
        let mut parts = text.split('.');
        let mut next = || -> Result<u32, CniError> {
            let part = parts.next().ok_or_else(not_a_version)?;
            let digits_only = !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
            let leading_zero = part.len() > 1 && part.starts_with('0');
            if !digits_only || leading_zero {
                return Err(not_a_version());
            }
            part.parse().map_err(|_| not_a_version())
        };
        let version = Version::new(next()?, next()?, next()?);
        if parts.next().is_some() {
            return Err(not_a_version());
        }
        Ok(version)
    }
}

fn supported_list() -> String {
    SUPPORTED_VERSIONS
        .iter()
        .map(Version::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Picks the version to speak for a config that declares `cni_version` and optionally the 1.1
/// `cniVersions` list: the highest of them that weft supports. Entries that do not parse count
/// as unsupported. None supported -> code 1 naming what was offered and what we support.
pub fn negotiate(cni_version: &str, cni_versions: &[String]) -> Result<Version, CniError> {
    std::iter::once(cni_version)
        .chain(cni_versions.iter().map(String::as_str))
        .filter_map(|text| text.parse::<Version>().ok())
        .filter(|version| version.is_supported())
        .max()
        .ok_or_else(|| {
            let mut offered = format!("cniVersion {cni_version:?}");
            if !cni_versions.is_empty() {
                offered.push_str(&format!(", cniVersions {cni_versions:?}"));
            }
            CniError::incompatible_version(format!(
                "incompatible CNI version: config offers {offered}; weft supports {}",
                supported_list()
            ))
        })
}

/// Picks the version a plugin answers a request in. The runtime parses the reply in the version
/// it put in `cniVersion` (libcni injects the version it negotiated for the list there), so
/// that one wins whenever we speak it; `cniVersions` is only a fallback when the declared
/// version is one we do not support.
pub fn negotiate_request(cni_version: &str, cni_versions: &[String]) -> Result<Version, CniError> {
    match cni_version.parse::<Version>() {
        Ok(declared) if declared.is_supported() => Ok(declared),
        _ => negotiate(cni_version, cni_versions),
    }
}

/// Refuses commands the negotiated version does not define (CHECK < 0.4.0, STATUS and GC
/// < 1.1.0) with code 1, as libcni's skeleton does.
pub fn require_command_support(version: Version, command: Command) -> Result<(), CniError> {
    match command.min_version() {
        Some(min) if version < min => Err(CniError::incompatible_version(format!(
            "config version {version} does not allow {command}; it needs {min} or newer"
        ))),
        _ => Ok(()),
    }
}

/// Reads the `cniVersion` a VERSION request asks about. VERSION must answer whatever it is
/// given, so anything unreadable yields `None` instead of an error.
pub fn requested_version(stdin: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(stdin).ok()?;
    value.get("cniVersion")?.as_str().map(str::to_owned)
}

/// The VERSION reply: `{"cniVersion": <requested>, "supportedVersions": [...]}`. The spec says
/// to echo the input version; when it is empty or not a version at all we answer with
/// [`Version::LATEST`].
pub fn version_response(requested: &str) -> Value {
    let echoed = match requested.parse::<Version>() {
        Ok(_) => requested.to_owned(),
        Err(_) => Version::LATEST.to_string(),
    };
    let supported: Vec<String> = SUPPORTED_VERSIONS.iter().map(Version::to_string).collect();
    json!({"cniVersion": echoed, "supportedVersions": supported})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_orders() {
        let v040: Version = "0.4.0".parse().unwrap();
        let v100: Version = "1.0.0".parse().unwrap();
        let v110: Version = "1.1.0".parse().unwrap();
        assert!(v040 < v100 && v100 < v110);
        assert_eq!(v110, Version::LATEST);
        assert_eq!(v040.to_string(), "0.4.0");
        assert!("0.3.1".parse::<Version>().is_ok());
        assert!(!"0.3.1".parse::<Version>().unwrap().is_supported());
        assert!(Version::new(0, 10, 0) > Version::new(0, 4, 0));
    }

    #[test]
    fn rejects_non_versions_with_code_1() {
        for bad in [
            "",
            "abc",
            "1",
            "1.0",
            "1.0.0.0",
            "1.0.0-rc1",
            "v1.0.0",
            "01.0.0",
            "1..0",
            " 1.0.0",
            "1.0.+0",
            "99999999999.0.0",
        ] {
            let error = bad.parse::<Version>().unwrap_err();
            assert_eq!(error.code, 1, "{bad:?}");
        }
    }

    #[test]
    fn negotiation_picks_highest_supported() {
        assert_eq!(negotiate("1.0.0", &[]).unwrap(), Version::V1_0_0);
        assert_eq!(negotiate("0.4.0", &[]).unwrap(), Version::V0_4_0);
        let offered = vec![
            "0.3.1".to_string(),
            "1.1.0".to_string(),
            "2.0.0".to_string(),
        ];
        assert_eq!(negotiate("1.0.0", &offered).unwrap(), Version::V1_1_0);
        let junk_then_good = vec!["junk".to_string(), "1.0.0".to_string()];
        assert_eq!(
            negotiate("0.3.1", &junk_then_good).unwrap(),
            Version::V1_0_0
        );
    }

    #[test]
    fn request_negotiation_prefers_the_declared_version() {
        let offered = vec!["1.1.0".to_string()];
        assert_eq!(
            negotiate_request("1.0.0", &offered).unwrap(),
            Version::V1_0_0
        );
        assert_eq!(
            negotiate_request("0.3.1", &offered).unwrap(),
            Version::V1_1_0
        );
        assert_eq!(negotiate_request("0.3.1", &[]).unwrap_err().code, 1);
    }

    #[test]
    fn negotiation_failure_names_versions() {
        let error = negotiate("0.3.1", &["0.2.0".to_string()]).unwrap_err();
        assert_eq!(error.code, 1);
        assert!(
            error.msg.contains("0.3.1") && error.msg.contains("0.2.0"),
            "{}",
            error.msg
        );
        assert!(error.msg.contains("1.1.0"), "{}", error.msg);
    }

    #[test]
    fn command_minimums() {
        assert!(require_command_support(Version::V0_4_0, Command::Check).is_ok());
        assert!(require_command_support(Version::V0_4_0, Command::Add).is_ok());
        assert_eq!(
            require_command_support(Version::V1_0_0, Command::Status)
                .unwrap_err()
                .code,
            1
        );
        assert_eq!(
            require_command_support(Version::V1_0_0, Command::Gc)
                .unwrap_err()
                .code,
            1
        );
        assert!(require_command_support(Version::V1_1_0, Command::Gc).is_ok());
        assert!(require_command_support(Version::V1_1_0, Command::Status).is_ok());
        assert_eq!(
            require_command_support(Version::new(0, 3, 1), Command::Check)
                .unwrap_err()
                .code,
            1
        );
    }

    #[test]
    fn version_reply_echoes_input() {
        assert_eq!(
            version_response("1.0.0"),
            json!({"cniVersion": "1.0.0", "supportedVersions": ["0.4.0", "1.0.0", "1.1.0"]})
        );
        assert_eq!(version_response("")["cniVersion"], "1.1.0");
        assert_eq!(version_response("garbage")["cniVersion"], "1.1.0");
        assert_eq!(
            requested_version(br#"{"cniVersion":"1.0.0"}"#).as_deref(),
            Some("1.0.0")
        );
        assert_eq!(requested_version(b""), None);
        assert_eq!(requested_version(br#"{"cniVersion":1}"#), None);
    }
}
