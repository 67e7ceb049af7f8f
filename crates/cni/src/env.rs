//! The `CNI_*` environment of one plugin invocation, validated per command.

use crate::args::CniArgs;
use crate::command::Command;
use crate::error::CniError;

/// Longest interface name Linux accepts (IFNAMSIZ - 1).
pub const MAX_IFNAME_LEN: usize = 15;

/// The invocation parameters. Only the variables a command uses are read: for GC, STATUS and
/// VERSION the attachment fields are `None` and `args` is empty, whatever the runtime set
/// (podman sends `CNI_IFNAME=dummy` with VERSION).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Env {
    /// `CNI_COMMAND`.
    pub command: Command,
    /// `CNI_CONTAINERID`: always present for ADD, DEL and CHECK.
    pub container_id: Option<String>,
    /// `CNI_NETNS`: always present for ADD and CHECK; DEL may lack it (containerd's second DEL
    /// sends it empty), in which case it is `None`.
    pub netns: Option<String>,
    /// `CNI_IFNAME`: always present for ADD, DEL and CHECK.
    pub ifname: Option<String>,
    /// Parsed `CNI_ARGS` (ADD, DEL, CHECK).
    pub args: CniArgs,
    /// `CNI_PATH` split on `:`, empty entries dropped.
    pub path: Vec<String>,
}

/// The identity of an attachment, borrowed from an [`Env`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attachment<'a> {
    /// `CNI_CONTAINERID`.
    pub container_id: &'a str,
    /// `CNI_IFNAME`.
    pub ifname: &'a str,
    /// `CNI_NETNS`, when set.
    pub netns: Option<&'a str>,
}

impl Env {
    /// Reads and validates the environment through `lookup` (e.g. `|name| std::env::var(name).ok()`).
    /// Missing, empty or invalid variables are code 4, naming every missing variable at once.
    pub fn from_lookup<F>(lookup: F) -> Result<Env, CniError>
    where
        F: Fn(&str) -> Option<String>,
    {
        // The runtime may leave a variable set but empty; both mean "not given".
        let read = |name: &str| lookup(name).filter(|value| !value.is_empty());

        let command: Command = read("CNI_COMMAND")
            .ok_or_else(|| {
                CniError::invalid_environment(
                    "required environment variable CNI_COMMAND is missing",
                )
            })?
            .parse()?;
        let path = read("CNI_PATH")
            .map(|value| {
                value
                    .split(':')
                    .filter(|entry| !entry.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let mut env = Env {
            command,
            container_id: None,
            netns: None,
            ifname: None,
            args: CniArgs::default(),
            path,
        };
        if !command.is_attachment_command() {
            return Ok(env);
        }

        env.container_id = read("CNI_CONTAINERID");
        env.ifname = read("CNI_IFNAME");
        env.netns = read("CNI_NETNS");
        let mut missing = Vec::new();
        if env.container_id.is_none() {
            missing.push("CNI_CONTAINERID");
        }
        if command != Command::Del && env.netns.is_none() {
            missing.push("CNI_NETNS");
        }
        if env.ifname.is_none() {
            missing.push("CNI_IFNAME");
        }
        if !missing.is_empty() {
            return Err(CniError::invalid_environment(format!(
                "required environment variables missing for {command}: {}",
                missing.join(", ")
            )));
        }
        if let Some(id) = &env.container_id {
            validate_container_id(id)?;
        }
        if let Some(ifname) = &env.ifname {
            validate_ifname(ifname)?;
        }
        env.args = CniArgs::parse(&lookup("CNI_ARGS").unwrap_or_default())?;
        Ok(env)
    }

    /// Container ID, interface and netns, when this is an attachment command.
    pub fn attachment(&self) -> Option<Attachment<'_>> {
        Some(Attachment {
            container_id: self.container_id.as_deref()?,
            ifname: self.ifname.as_deref()?,
            netns: self.netns.as_deref(),
        })
    }
}

/// The spec's container ID rule: an ASCII alphanumeric, then alphanumerics, `_`, `.` or `-`.
pub fn validate_container_id(id: &str) -> Result<(), CniError> {
    let mut bytes = id.bytes();
    let first_ok = bytes.next().is_some_and(|b| b.is_ascii_alphanumeric());
    let rest_ok = bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if first_ok && rest_ok {
        Ok(())
    } else {
        Err(CniError::invalid_environment(format!(
            "CNI_CONTAINERID {id:?} is invalid: it must start with a letter or digit, followed by letters, digits, '_', '.' or '-'"
        )))
    }
}

/// Linux interface name rules (as libcni checks them): 1 to 15 bytes, not `.` or `..`, and no
/// `/`, `:`, whitespace or NUL.
pub fn validate_ifname(ifname: &str) -> Result<(), CniError> {
    let problem = if ifname.is_empty() {
        Some("it is empty")
    } else if ifname.len() > MAX_IFNAME_LEN {
        Some("it is longer than 15 bytes")
    } else if ifname == "." || ifname == ".." {
        Some("it is '.' or '..'")
    } else if ifname
        .chars()
        .any(|c| c == '/' || c == ':' || c == '\0' || c.is_whitespace())
    {
        Some("it contains '/', ':', NUL or whitespace")
    } else {
        None
    };
    match problem {
        None => Ok(()),
        Some(problem) => Err(CniError::invalid_environment(format!(
            "CNI_IFNAME {ifname:?} is invalid: {problem}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> Result<Env, CniError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Env::from_lookup(|name| map.get(name).cloned())
    }

    const ADD: &[(&str, &str)] = &[
        ("CNI_COMMAND", "ADD"),
        ("CNI_CONTAINERID", "3f2a9c"),
        ("CNI_NETNS", "/var/run/netns/cni-1234"),
        ("CNI_IFNAME", "eth0"),
        ("CNI_PATH", "/opt/cni/bin::/usr/lib/cni"),
        (
            "CNI_ARGS",
            "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=web",
        ),
    ];

    fn with(
        overrides: &[(&'static str, Option<&'static str>)],
    ) -> Vec<(&'static str, &'static str)> {
        let mut pairs: Vec<_> = ADD.to_vec();
        for (name, value) in overrides {
            pairs.retain(|(n, _)| n != name);
            if let Some(value) = value {
                pairs.push((name, value));
            }
        }
        pairs
    }

    #[test]
    fn full_add() {
        let env = env_of(ADD).unwrap();
        assert_eq!(env.command, Command::Add);
        let attachment = env.attachment().unwrap();
        assert_eq!(attachment.container_id, "3f2a9c");
        assert_eq!(attachment.ifname, "eth0");
        assert_eq!(attachment.netns, Some("/var/run/netns/cni-1234"));
        assert_eq!(env.path, vec!["/opt/cni/bin", "/usr/lib/cni"]);
        assert_eq!(env.args.k8s_pod_name(), Some("web"));
    }

    #[test]
    fn del_tolerates_missing_or_empty_netns() {
        for netns in [None, Some("")] {
            let env = env_of(&with(&[("CNI_COMMAND", Some("DEL")), ("CNI_NETNS", netns)])).unwrap();
            assert_eq!(env.command, Command::Del);
            assert_eq!(env.netns, None);
            assert!(env.attachment().is_some());
        }
    }

    #[test]
    fn add_and_check_need_netns() {
        for command in ["ADD", "CHECK"] {
            for netns in [None, Some("")] {
                let error = env_of(&with(&[
                    ("CNI_COMMAND", Some(command)),
                    ("CNI_NETNS", netns),
                ]))
                .unwrap_err();
                assert_eq!(error.code, 4);
                assert!(error.msg.contains("CNI_NETNS"), "{}", error.msg);
            }
        }
    }

    #[test]
    fn missing_variables_are_all_named() {
        let error = env_of(&[("CNI_COMMAND", "ADD")]).unwrap_err();
        assert_eq!(error.code, 4);
        for name in ["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"] {
            assert!(error.msg.contains(name), "{}", error.msg);
        }
        let error = env_of(&[]).unwrap_err();
        assert!(error.msg.contains("CNI_COMMAND"));
    }

    #[test]
    fn gc_status_version_need_only_the_command() {
        for command in ["GC", "STATUS", "VERSION"] {
            let env = env_of(&[("CNI_COMMAND", command)]).unwrap();
            assert!(env.attachment().is_none());
            assert!(env.path.is_empty());
        }
        // podman's VERSION probe, with junk that must not be validated.
        let env = env_of(&[
            ("CNI_COMMAND", "VERSION"),
            ("CNI_IFNAME", "not/valid/at/all"),
            ("CNI_ARGS", "garbage"),
        ])
        .unwrap();
        assert_eq!(env.ifname, None);
    }

    #[test]
    fn container_id_rules() {
        for good in ["a", "0", "default-p2t2", "abc_DEF.1-2"] {
            assert!(validate_container_id(good).is_ok(), "{good:?}");
        }
        for bad in ["", "-abc", "_abc", ".abc", "ab c", "ab/c", "ab:c", "é"] {
            let error = validate_container_id(bad).unwrap_err();
            assert_eq!(error.code, 4);
            assert!(error.msg.contains("CNI_CONTAINERID"));
        }
    }

    #[test]
    fn ifname_rules() {
        for good in ["eth0", "a", "net1.100", "exactly15chars_", "é"] {
            assert!(validate_ifname(good).is_ok(), "{good:?}");
        }
        for bad in [
            "",
            ".",
            "..",
            "eth0:1",
            "a/b",
            "a b",
            "a\tb",
            "sixteen_chars_xx",
            "a\0b",
            "a\u{a0}b",
        ] {
            let error = validate_ifname(bad).unwrap_err();
            assert_eq!(error.code, 4, "{bad:?}");
            assert!(error.msg.contains("CNI_IFNAME"));
        }
    }

    #[test]
    fn invalid_values_in_env_are_code_4() {
        for overrides in [
            vec![("CNI_IFNAME", Some("eth0:1"))],
            vec![("CNI_CONTAINERID", Some("-x"))],
            vec![("CNI_ARGS", Some("BROKEN"))],
            vec![("CNI_COMMAND", Some("ATTACH"))],
        ] {
            assert_eq!(env_of(&with(&overrides)).unwrap_err().code, 4);
        }
    }
}
