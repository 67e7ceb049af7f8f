//! `CNI_ARGS`: `K=V;K=V` pairs from the runtime.

use crate::addr::{IpRequest, MacAddr};
use crate::error::CniError;

/// Kubernetes pod namespace (containerd CRI, CRI-O).
pub const K8S_POD_NAMESPACE: &str = "K8S_POD_NAMESPACE";
/// Kubernetes pod name (also sent by podman, with the container name).
pub const K8S_POD_NAME: &str = "K8S_POD_NAME";
/// The pod's sandbox (infra) container ID.
pub const K8S_POD_INFRA_CONTAINER_ID: &str = "K8S_POD_INFRA_CONTAINER_ID";
/// The pod UID.
pub const K8S_POD_UID: &str = "K8S_POD_UID";
/// Requested IP(s): `<ip>[/<prefix>]`, comma-separated (podman `--ip`).
pub const IP: &str = "IP";
/// Requested MAC (podman `--mac-address`).
pub const MAC: &str = "MAC";
/// `1`/`true` (any case): the plugin must not fail on keys it does not know.
pub const IGNORE_UNKNOWN: &str = "IgnoreUnknown";

/// Parsed `CNI_ARGS`. All pairs are kept in order; typed accessors cover the well-known keys.
/// When a key repeats, the accessors use the last value (as libcni does).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CniArgs {
    pairs: Vec<(String, String)>,
    ignore_unknown: bool,
    ips: Vec<IpRequest>,
    mac: Option<MacAddr>,
}

fn invalid(msg: String) -> CniError {
    CniError::invalid_environment(format!("CNI_ARGS: {msg}"))
}

impl CniArgs {
    /// Parses `K=V;K=V`. Keys may come in any order; empty segments (a trailing `;`, or an
    /// empty string) are skipped. A segment without `=` or with an empty key is code 4, as are
    /// malformed `IP`, `MAC` or `IgnoreUnknown` values. A value may itself contain `=` (split at
    /// the first one), which is more lenient than libcni and loses nothing.
    pub fn parse(text: &str) -> Result<Self, CniError> {
        let mut args = CniArgs::default();
        for segment in text.split(';') {
            if segment.is_empty() {
                continue;
            }
            let Some((key, value)) = segment.split_once('=') else {
                return Err(invalid(format!("{segment:?} is not a KEY=VALUE pair")));
            };
            if key.is_empty() {
                return Err(invalid(format!("{segment:?} has an empty key")));
            }
            args.pairs.push((key.to_owned(), value.to_owned()));
        }
        args.ignore_unknown = match args.get(IGNORE_UNKNOWN) {
            None => false,
            Some(value) if value == "1" || value.eq_ignore_ascii_case("true") => true,
            Some(value) if value == "0" || value.eq_ignore_ascii_case("false") => false,
            Some(value) => {
                return Err(invalid(format!(
                    "IgnoreUnknown={value:?}; expected 1, 0, true or false"
                )))
            }
        };
        if let Some(value) = args.get(IP) {
            args.ips = value
                .split(',')
                .map(|item| item.parse::<IpRequest>())
                .collect::<Result<_, _>>()
                .map_err(|error| invalid(format!("IP: {error}")))?;
        }
        if let Some(value) = args.get(MAC) {
            let mac = value
                .parse()
                .map_err(|error| invalid(format!("MAC: {error}")))?;
            args.mac = Some(mac);
        }
        Ok(args)
    }

    /// Every pair, in the order given.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.pairs
    }

    /// The value of `key` (case-sensitive; last one wins).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .rev()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value.as_str())
    }

    /// Whether `IgnoreUnknown` was set to 1/true.
    pub fn ignore_unknown(&self) -> bool {
        self.ignore_unknown
    }

    /// `K8S_POD_NAMESPACE`.
    pub fn k8s_pod_namespace(&self) -> Option<&str> {
        self.get(K8S_POD_NAMESPACE)
    }

    /// `K8S_POD_NAME`.
    pub fn k8s_pod_name(&self) -> Option<&str> {
        self.get(K8S_POD_NAME)
    }

    /// `K8S_POD_INFRA_CONTAINER_ID`.
    pub fn k8s_pod_infra_container_id(&self) -> Option<&str> {
        self.get(K8S_POD_INFRA_CONTAINER_ID)
    }

    /// `K8S_POD_UID`.
    pub fn k8s_pod_uid(&self) -> Option<&str> {
        self.get(K8S_POD_UID)
    }

    /// The IPs requested with `IP=` (empty when absent).
    pub fn ips(&self) -> &[IpRequest] {
        &self.ips
    }

    /// The MAC requested with `MAC=`.
    pub fn mac(&self) -> Option<MacAddr> {
        self.mac
    }

    /// Keys that are neither well-known nor in `also_known`.
    pub fn unknown_keys<'a>(&'a self, also_known: &[&str]) -> Vec<&'a str> {
        const WELL_KNOWN: [&str; 7] = [
            K8S_POD_NAMESPACE,
            K8S_POD_NAME,
            K8S_POD_INFRA_CONTAINER_ID,
            K8S_POD_UID,
            IP,
            MAC,
            IGNORE_UNKNOWN,
        ];
        self.pairs
            .iter()
            .map(|(key, _)| key.as_str())
            .filter(|key| !WELL_KNOWN.contains(key) && !also_known.contains(key))
            .collect()
    }

    /// The libcni rule: unknown keys are an error (code 4, naming them) unless
    /// `IgnoreUnknown` is set.
    pub fn ensure_known(&self, also_known: &[&str]) -> Result<(), CniError> {
        let unknown = self.unknown_keys(also_known);
        if self.ignore_unknown || unknown.is_empty() {
            return Ok(());
        }
        Err(invalid(format!(
            "unknown keys {unknown:?} (set IgnoreUnknown=1 to allow them)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containerd_cri_shape_in_any_order() {
        let one = CniArgs::parse(
            "K8S_POD_NAMESPACE=p2ns;K8S_POD_NAME=web1;K8S_POD_INFRA_CONTAINER_ID=abc123;K8S_POD_UID=u-1;IgnoreUnknown=1",
        )
        .unwrap();
        let two = CniArgs::parse(
            "IgnoreUnknown=1;K8S_POD_UID=u-1;K8S_POD_NAME=web1;K8S_POD_INFRA_CONTAINER_ID=abc123;K8S_POD_NAMESPACE=p2ns",
        )
        .unwrap();
        for args in [&one, &two] {
            assert_eq!(args.k8s_pod_namespace(), Some("p2ns"));
            assert_eq!(args.k8s_pod_name(), Some("web1"));
            assert_eq!(args.k8s_pod_infra_container_id(), Some("abc123"));
            assert_eq!(args.k8s_pod_uid(), Some("u-1"));
            assert!(args.ignore_unknown());
            assert_eq!(args.pairs().len(), 5);
        }
    }

    #[test]
    fn podman_shape_with_ip_and_mac() {
        let args =
            CniArgs::parse("IgnoreUnknown=1;K8S_POD_NAME=p2c;MAC=02:11:22:33:44:55;IP=10.93.0.77")
                .unwrap();
        assert_eq!(args.k8s_pod_name(), Some("p2c"));
        assert_eq!(args.mac().unwrap().to_string(), "02:11:22:33:44:55");
        assert_eq!(args.ips().len(), 1);
        assert_eq!(args.ips()[0].to_string(), "10.93.0.77");
        let dual = CniArgs::parse("IP=10.0.0.4/24,2001:db8::4").unwrap();
        assert_eq!(dual.ips().len(), 2);
    }

    #[test]
    fn empty_and_trailing_segments_are_fine() {
        assert_eq!(CniArgs::parse("").unwrap(), CniArgs::default());
        let args = CniArgs::parse("A=1;;B=;").unwrap();
        assert_eq!(args.get("A"), Some("1"));
        assert_eq!(args.get("B"), Some(""));
        assert_eq!(CniArgs::parse("A=x=y").unwrap().get("A"), Some("x=y"));
    }

    #[test]
    fn last_duplicate_wins_but_all_kept() {
        let args = CniArgs::parse("K8S_POD_NAME=a;K8S_POD_NAME=b").unwrap();
        assert_eq!(args.k8s_pod_name(), Some("b"));
        assert_eq!(args.pairs().len(), 2);
    }

    #[test]
    fn malformed_is_code_4() {
        for bad in [
            "FOO",
            "=x",
            "A=1;B",
            "IgnoreUnknown=yes",
            "IP=10.0.0.300",
            "IP=",
            "MAC=zz",
            "IP=10.0.0.1,",
            "MAC=",
        ] {
            let error = CniArgs::parse(bad).unwrap_err();
            assert_eq!(error.code, 4, "{bad:?}");
            assert!(error.msg.contains("CNI_ARGS"), "{}", error.msg);
        }
    }

    #[test]
    fn unknown_keys_follow_ignore_unknown() {
        let strict = CniArgs::parse("K8S_POD_NAME=a;FOO=1").unwrap();
        assert_eq!(strict.unknown_keys(&[]), vec!["FOO"]);
        let error = strict.ensure_known(&[]).unwrap_err();
        assert_eq!(error.code, 4);
        assert!(error.msg.contains("FOO"));
        assert!(strict.ensure_known(&["FOO"]).is_ok());
        let lenient = CniArgs::parse("FOO=1;IgnoreUnknown=true").unwrap();
        assert!(lenient.ensure_known(&[]).is_ok());
        let off = CniArgs::parse("FOO=1;IgnoreUnknown=0").unwrap();
        assert!(off.ensure_known(&[]).is_err());
    }
}
