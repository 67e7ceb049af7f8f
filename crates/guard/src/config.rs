//! The plugin's own netconf fields (documented in docs/guard.md), validated with errors
//! that name the field.
//!
//! ```json
//! { "type": "weft-guard",
//!   "kubeconfig": "/etc/cni/net.d/weft-guard.kubeconfig",
//!   "namespaces": ["sandboxes"],
//!   "allowRootProxy": false,
//!   "apiConnectTimeoutMs": 2000, "apiTimeoutMs": 5000,
//!   "stateDir": "/var/lib/weft/guard",
//!   "podSecurityGuarantee": "admission-policy",
//!   "capabilities": {"io.kubernetes.cri.pod-annotations": true} }
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use weft_cni::NetConf;

use crate::error::GuardError;

/// Where state files go when the netconf names no `stateDir`.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/weft/guard";
/// Default connect timeout for the API server.
pub const DEFAULT_API_CONNECT_TIMEOUT_MS: u64 = 2000;
/// Default total timeout for one API request (connect, TLS, request, response).
pub const DEFAULT_API_TIMEOUT_MS: u64 = 5000;
/// Upper bound for both timeouts: a CNI ADD must not hang a pod's creation for minutes.
pub const MAX_API_TIMEOUT_MS: u64 = 60_000;
/// Longest Kubernetes namespace name (a DNS-1123 label).
const MAX_NAMESPACE_LEN: usize = 63;

/// The one value of `podSecurityGuarantee`: an admission policy (deploy/guard's
/// ValidatingAdmissionPolicy, or one at least as strict) rejects every opted-in pod the
/// guard would refuse, so pods whose spec the plugin cannot see may be fenced.
pub const GUARANTEE_ADMISSION_POLICY: &str = "admission-policy";

/// Which pod namespaces may be looked up in the API server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allowlist {
    /// `["*"]`: every namespace.
    All,
    /// These namespaces only; empty means none (only runtimeConfig annotations count).
    Only(Vec<String>),
}

impl Allowlist {
    pub fn contains(&self, namespace: &str) -> bool {
        match self {
            Allowlist::All => true,
            Allowlist::Only(list) => list.iter().any(|n| n == namespace),
        }
    }

    /// Whether any pod could need an API lookup.
    pub fn allows_lookups(&self) -> bool {
        match self {
            Allowlist::All => true,
            Allowlist::Only(list) => !list.is_empty(),
        }
    }
}

/// The validated plugin configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardConfig {
    /// The network name (state files are kept per network).
    pub network: String,
    /// Kubeconfig for pod lookups; required when the allowlist is not empty.
    pub kubeconfig: Option<PathBuf>,
    pub namespaces: Allowlist,
    /// Whether a pod may name UID 0 as its proxy (root usually holds CAP_NET_ADMIN and
    /// could take the fence down, so it is refused unless the operator says otherwise).
    pub allow_root_proxy: bool,
    pub api_connect_timeout: Duration,
    pub api_timeout: Duration,
    pub state_dir: PathBuf,
    /// Whether the operator states that admission guarantees what a pod's containers hold
    /// (`podSecurityGuarantee`); without it, a pod whose spec the plugin cannot read (its
    /// annotations came through runtimeConfig) is refused.
    pub admission_guarantee: bool,
}

impl GuardConfig {
    /// Reads and validates every field (ADD, CHECK, STATUS).
    pub fn from_netconf(conf: &NetConf) -> Result<GuardConfig, GuardError> {
        let namespaces = allowlist(conf.get("namespaces"))?;
        let kubeconfig = opt_abs_path(conf.get("kubeconfig"), "kubeconfig")?;
        if namespaces.allows_lookups() && kubeconfig.is_none() {
            return Err(GuardError::config(
                "kubeconfig",
                "missing: it is required when \"namespaces\" is not empty (pods in those namespaces are looked up in the API server)",
            ));
        }
        let api_connect_timeout = timeout_ms(
            conf.get("apiConnectTimeoutMs"),
            "apiConnectTimeoutMs",
            DEFAULT_API_CONNECT_TIMEOUT_MS,
        )?;
        let api_timeout = timeout_ms(
            conf.get("apiTimeoutMs"),
            "apiTimeoutMs",
            DEFAULT_API_TIMEOUT_MS,
        )?;
        if api_connect_timeout > api_timeout {
            return Err(GuardError::config(
                "apiConnectTimeoutMs",
                format!(
                    "{} ms is longer than apiTimeoutMs ({} ms), which bounds the whole request",
                    api_connect_timeout.as_millis(),
                    api_timeout.as_millis()
                ),
            ));
        }
        let allow_root_proxy = match conf.get("allowRootProxy") {
            None => false,
            Some(Value::Bool(flag)) => *flag,
            Some(other) => {
                return Err(GuardError::config(
                    "allowRootProxy",
                    format!("{other} is not a boolean"),
                ))
            }
        };
        let admission_guarantee = match conf.get("podSecurityGuarantee") {
            None | Some(Value::Null) => false,
            Some(Value::String(s)) if s == GUARANTEE_ADMISSION_POLICY => true,
            Some(other) => {
                return Err(GuardError::config(
                    "podSecurityGuarantee",
                    format!("{other} is not \"{GUARANTEE_ADMISSION_POLICY}\" (the only way this plugin knows to guarantee a pod's capabilities and UIDs)"),
                ))
            }
        };
        Ok(GuardConfig {
            network: conf.name.clone(),
            kubeconfig,
            namespaces,
            allow_root_proxy,
            api_connect_timeout,
            api_timeout,
            state_dir: state_dir(conf)?,
            admission_guarantee,
        })
    }

    /// Reads only what DEL and GC need (the state directory), so that cleaning up never
    /// fails because an unrelated field was edited into something invalid.
    pub fn for_cleanup(conf: &NetConf) -> Result<GuardConfig, GuardError> {
        Ok(GuardConfig {
            network: conf.name.clone(),
            kubeconfig: None,
            namespaces: Allowlist::Only(Vec::new()),
            allow_root_proxy: false,
            api_connect_timeout: Duration::from_millis(DEFAULT_API_CONNECT_TIMEOUT_MS),
            api_timeout: Duration::from_millis(DEFAULT_API_TIMEOUT_MS),
            state_dir: state_dir(conf)?,
            admission_guarantee: false,
        })
    }

    /// The directory holding this network's state files.
    pub fn network_state_dir(&self) -> PathBuf {
        self.state_dir.join(&self.network)
    }
}

fn state_dir(conf: &NetConf) -> Result<PathBuf, GuardError> {
    Ok(opt_abs_path(conf.get("stateDir"), "stateDir")?
        .unwrap_or_else(|| PathBuf::from(DEFAULT_STATE_DIR)))
}

fn opt_abs_path(value: Option<&Value>, field: &str) -> Result<Option<PathBuf>, GuardError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if text.is_empty() => Err(GuardError::config(field, "is empty")),
        Some(Value::String(text)) => {
            let path = Path::new(text);
            if !path.is_absolute() {
                return Err(GuardError::config(
                    field,
                    format!("{text:?} is not an absolute path (a plugin's working directory is not defined)"),
                ));
            }
            if text.contains('\0') {
                return Err(GuardError::config(field, "contains a NUL byte"));
            }
            Ok(Some(path.to_path_buf()))
        }
        Some(other) => Err(GuardError::config(
            field,
            format!("{other} is not a string"),
        )),
    }
}

fn timeout_ms(value: Option<&Value>, field: &str, default: u64) -> Result<Duration, GuardError> {
    let ms = match value {
        None => default,
        Some(v) => v
            .as_u64()
            .filter(|ms| (1..=MAX_API_TIMEOUT_MS).contains(ms))
            .ok_or_else(|| {
                GuardError::config(
                    field,
                    format!("{v} is not a whole number of milliseconds between 1 and {MAX_API_TIMEOUT_MS}"),
                )
            })?,
    };
    Ok(Duration::from_millis(ms))
}

fn allowlist(value: Option<&Value>) -> Result<Allowlist, GuardError> {
    let items = match value {
        None | Some(Value::Null) => return Ok(Allowlist::Only(Vec::new())),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(GuardError::config(
                "namespaces",
                format!("{other} is not a list of namespace names"),
            ))
        }
    };
    let mut names = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let field = format!("namespaces[{index}]");
        let name = item
            .as_str()
            .ok_or_else(|| GuardError::config(&field, format!("{item} is not a string")))?;
        if name == "*" {
            if items.len() != 1 {
                return Err(GuardError::config(
                    &field,
                    "\"*\" (every namespace) must be the only entry",
                ));
            }
            return Ok(Allowlist::All);
        }
        if !is_namespace_name(name) {
            return Err(GuardError::config(
                &field,
                format!("{name:?} is not a namespace name (lower-case letters, digits and '-', at most 63)"),
            ));
        }
        if !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    }
    Ok(Allowlist::Only(names))
}

/// A DNS-1123 label, which is what Kubernetes namespace names are.
pub fn is_namespace_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= MAX_NAMESPACE_LEN
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn conf(extra: Value) -> NetConf {
        let mut base = json!({"cniVersion": "1.0.0", "name": "net1", "type": "weft-guard"});
        if let (Some(base), Some(extra)) = (base.as_object_mut(), extra.as_object()) {
            base.extend(extra.clone());
        }
        NetConf::from_value(&base).expect("valid netconf")
    }

    #[test]
    fn defaults_need_no_kubeconfig() {
        let config = GuardConfig::from_netconf(&conf(json!({}))).unwrap();
        assert_eq!(config.namespaces, Allowlist::Only(vec![]));
        assert_eq!(config.kubeconfig, None);
        assert!(!config.allow_root_proxy);
        assert_eq!(config.api_connect_timeout, Duration::from_millis(2000));
        assert_eq!(config.api_timeout, Duration::from_millis(5000));
        assert_eq!(config.state_dir, PathBuf::from(DEFAULT_STATE_DIR));
        assert!(!config.admission_guarantee);
        assert_eq!(
            config.network_state_dir(),
            PathBuf::from("/var/lib/weft/guard/net1")
        );
    }

    #[test]
    fn full_config() {
        let config = GuardConfig::from_netconf(&conf(json!({
            "kubeconfig": "/etc/kc", "namespaces": ["a", "b-2", "a"], "allowRootProxy": true,
            "apiConnectTimeoutMs": 100, "apiTimeoutMs": 300, "stateDir": "/run/g",
            "podSecurityGuarantee": "admission-policy"
        })))
        .unwrap();
        assert!(config.admission_guarantee);
        assert_eq!(config.kubeconfig, Some(PathBuf::from("/etc/kc")));
        assert_eq!(
            config.namespaces,
            Allowlist::Only(vec!["a".into(), "b-2".into()])
        );
        assert!(config.allow_root_proxy);
        assert_eq!(config.api_timeout, Duration::from_millis(300));
        let all =
            GuardConfig::from_netconf(&conf(json!({"kubeconfig": "/etc/kc", "namespaces": ["*"]})))
                .unwrap();
        assert!(all.namespaces.contains("anything"));
    }

    #[test]
    fn invalid_fields_are_named() {
        let cases = [
            (json!({"namespaces": ["a"]}), "kubeconfig"),
            (json!({"namespaces": "a"}), "namespaces"),
            (json!({"namespaces": ["A_b"]}), "namespaces[0]"),
            (
                json!({"kubeconfig": "/k", "namespaces": ["a", "*"]}),
                "namespaces[1]",
            ),
            (json!({"kubeconfig": "rel/k"}), "kubeconfig"),
            (json!({"kubeconfig": 5}), "kubeconfig"),
            (json!({"allowRootProxy": "yes"}), "allowRootProxy"),
            (json!({"apiTimeoutMs": 0}), "apiTimeoutMs"),
            (json!({"apiTimeoutMs": 1.5}), "apiTimeoutMs"),
            (
                json!({"apiConnectTimeoutMs": 999999}),
                "apiConnectTimeoutMs",
            ),
            (
                json!({"apiConnectTimeoutMs": 500, "apiTimeoutMs": 100}),
                "apiConnectTimeoutMs",
            ),
            (json!({"stateDir": ""}), "stateDir"),
            (json!({"stateDir": "var/x"}), "stateDir"),
            (
                json!({"podSecurityGuarantee": "yes"}),
                "podSecurityGuarantee",
            ),
            (
                json!({"podSecurityGuarantee": true}),
                "podSecurityGuarantee",
            ),
        ];
        for (extra, field) in cases {
            let error = GuardConfig::from_netconf(&conf(extra.clone())).unwrap_err();
            match &error {
                GuardError::Config { field: f, .. } => assert_eq!(f, field, "{extra}"),
                other => panic!("{extra}: {other}"),
            }
            assert_eq!(error.code(), 7);
        }
    }

    #[test]
    fn cleanup_reads_only_the_state_dir() {
        let config =
            GuardConfig::for_cleanup(&conf(json!({"namespaces": "broken", "stateDir": "/run/g"})))
                .unwrap();
        assert_eq!(config.state_dir, PathBuf::from("/run/g"));
        assert!(GuardConfig::for_cleanup(&conf(json!({"stateDir": "x"}))).is_err());
    }

    #[test]
    fn namespace_names() {
        for good in ["a", "kube-system", "x1", "a-b-c"] {
            assert!(is_namespace_name(good), "{good}");
        }
        for bad in ["", "-a", "a-", "A", "a.b", "a/b", &"a".repeat(64)] {
            assert!(!is_namespace_name(bad), "{bad}");
        }
    }
}
