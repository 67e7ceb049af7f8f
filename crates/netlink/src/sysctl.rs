//! Kernel parameters under /proc/sys, for the calling thread's network namespace.
//!
//! `/proc/sys/net` shows the namespace of the thread that opens the file, so writing a
//! pod's sysctl means entering its namespace first (see [`crate::NetnsGuard`]). Keys use
//! slashes (`net/ipv6/conf/eth0/accept_dad`): interface names may contain dots.

use crate::error::{Error, Result};
use std::io;
use std::path::PathBuf;

const PROC_SYS: &str = "/proc/sys";

/// Reads a sysctl, without the trailing newline.
pub fn read_sysctl(key: &str) -> Result<String> {
    let path = sysctl_path(key)?;
    std::fs::read_to_string(&path)
        .map(|value| value.trim_end().to_string())
        .map_err(|source| io_error(format!("read sysctl {key}"), source))
}

/// Writes a sysctl when its value differs from `value` (one read, and a write only
/// when needed: this is on the pod-creation path). Returns whether it wrote.
pub fn write_sysctl(key: &str, value: &str) -> Result<bool> {
    let current = read_sysctl(key)?;
    if same_value(&current, value) {
        return Ok(false);
    }
    let path = sysctl_path(key)?;
    std::fs::write(&path, value)
        .map_err(|source| io_error(format!("write sysctl {key}={value}"), source))?;
    Ok(true)
}

/// Multi-value sysctls read back tab-separated; compare the values, not the spacing.
fn same_value(current: &str, wanted: &str) -> bool {
    current.split_whitespace().eq(wanted.split_whitespace())
}

fn sysctl_path(key: &str) -> Result<PathBuf> {
    let bad = key.is_empty()
        || key.starts_with('/')
        || key.contains('\0')
        || key
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..");
    if bad {
        return Err(Error::invalid(
            format!("sysctl {key:?}"),
            "keys are relative slash-separated paths under /proc/sys",
        ));
    }
    Ok(PathBuf::from(PROC_SYS).join(key))
}

fn io_error(context: String, source: io::Error) -> Error {
    match source.kind() {
        io::ErrorKind::NotFound => Error::NotFound {
            context,
            errno: libc::ENOENT,
            kernel_message: None,
        },
        _ => Error::Io { context, source },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_stay_under_proc_sys() {
        assert_eq!(
            sysctl_path("net/ipv6/conf/eth0.100/accept_dad").unwrap(),
            PathBuf::from("/proc/sys/net/ipv6/conf/eth0.100/accept_dad")
        );
        for bad in [
            "",
            "/etc/passwd",
            "net/../../etc/passwd",
            "net//ipv4",
            "net/ipv4/",
            "./net",
        ] {
            assert!(
                matches!(sysctl_path(bad), Err(Error::InvalidInput { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn values_compare_by_content() {
        assert!(same_value("32768\t60999", "32768 60999"));
        assert!(same_value("1", "1"));
        assert!(!same_value("0", "1"));
    }

    #[test]
    fn missing_keys_are_not_found() {
        let err = read_sysctl("net/ipv4/weft_no_such_key").unwrap_err();
        assert!(err.is_not_found(), "{err}");
    }
}
