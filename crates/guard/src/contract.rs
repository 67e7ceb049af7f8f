//! The pod side of the contract: the annotations a pod sets to ask for a fence, read
//! strictly. Anything ambiguous about an opted-in pod refuses the pod (fail closed); a pod
//! that does not mention the guard at all passes through.

use std::collections::BTreeMap;

use ipnet::IpNet;

use crate::config::GuardConfig;
use crate::error::GuardError;

/// The contract version this plugin implements. A pod asking for a newer one is refused:
/// it may expect enforcement this plugin does not know how to give.
pub const CONTRACT_VERSION: u32 = 1;

/// Prefix shared by every annotation of the contract.
pub const ANNOTATION_PREFIX: &str = "guard.weft.dev/";
/// `"true"` opts the pod in; `"false"` or absent leaves it alone.
pub const ENABLED: &str = "guard.weft.dev/enabled";
/// The only UID allowed to open new flows to non-allowed destinations.
pub const PROXY_UID: &str = "guard.weft.dev/proxy-uid";
/// The contract version the pod was written against.
pub const CONTRACT_VERSION_KEY: &str = "guard.weft.dev/contract-version";
/// Comma-separated CIDRs every UID may reach (cluster DNS, for example).
pub const ALLOW_CIDRS: &str = "guard.weft.dev/allow-cidrs";

const KNOWN: [&str; 4] = [ENABLED, PROXY_UID, CONTRACT_VERSION_KEY, ALLOW_CIDRS];

/// More CIDRs than this is a mistake, and would make every ADD slower.
pub const MAX_ALLOW_CIDRS: usize = 64;

/// What one pod asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The pod does not opt in: pass through, install nothing.
    PassThrough,
    /// The pod opts in with a valid contract.
    Enforce(Contract),
}

/// A validated request for a fence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contract {
    pub proxy_uid: u32,
    /// In the order given, duplicates removed; each in canonical form (no host bits).
    pub allow_cidrs: Vec<IpNet>,
    pub contract_version: u32,
}

impl Decision {
    /// Reads the contract from a pod's annotations.
    pub fn from_annotations(
        annotations: &BTreeMap<String, String>,
        config: &GuardConfig,
    ) -> Result<Decision, GuardError> {
        let enabled = annotations.get(ENABLED).map(String::as_str);
        match enabled {
            Some("true") => {}
            None | Some("false") => {
                // Contract annotations without the switch are a half-applied opt-in:
                // refuse rather than guess which half is wrong.
                if enabled.is_none() {
                    if let Some(stray) = KNOWN[1..]
                        .iter()
                        .find(|key| annotations.contains_key(**key))
                    {
                        return Err(GuardError::contract(
                            stray,
                            format!("is set but {ENABLED} is not; set {ENABLED}: \"true\" to opt in, or remove it"),
                        ));
                    }
                }
                return Ok(Decision::PassThrough);
            }
            Some(other) => {
                return Err(GuardError::contract(
                    ENABLED,
                    format!("{other:?} is neither \"true\" nor \"false\""),
                ))
            }
        }
        if let Some(unknown) = annotations
            .keys()
            .find(|k| k.starts_with(ANNOTATION_PREFIX) && !KNOWN.contains(&k.as_str()))
        {
            return Err(GuardError::contract(
                unknown,
                format!("is not part of contract version {CONTRACT_VERSION}; this plugin cannot tell what it asks for"),
            ));
        }
        let contract_version = contract_version(annotations.get(CONTRACT_VERSION_KEY))?;
        let proxy_uid = proxy_uid(annotations.get(PROXY_UID), config.allow_root_proxy)?;
        let allow_cidrs = match annotations.get(ALLOW_CIDRS) {
            None => Vec::new(),
            Some(text) => parse_cidrs(text)?,
        };
        Ok(Decision::Enforce(Contract {
            proxy_uid,
            allow_cidrs,
            contract_version,
        }))
    }
}

fn contract_version(value: Option<&String>) -> Result<u32, GuardError> {
    let text = value.ok_or_else(|| {
        GuardError::contract(
            CONTRACT_VERSION_KEY,
            format!("missing; an opted-in pod must name the contract version it was written for ({CONTRACT_VERSION})"),
        )
    })?;
    let version = parse_decimal_u32(text).ok_or_else(|| {
        GuardError::contract(
            CONTRACT_VERSION_KEY,
            format!("{text:?} is not a version number"),
        )
    })?;
    if version == 0 {
        return Err(GuardError::contract(
            CONTRACT_VERSION_KEY,
            "0 is not a contract version (they start at 1)",
        ));
    }
    if version > CONTRACT_VERSION {
        return Err(GuardError::contract(
            CONTRACT_VERSION_KEY,
            format!("the pod asks for contract version {version}, this plugin implements {CONTRACT_VERSION}: upgrade weft-guard on this node"),
        ));
    }
    Ok(version)
}

fn proxy_uid(value: Option<&String>, allow_root: bool) -> Result<u32, GuardError> {
    let text = value.ok_or_else(|| GuardError::contract(PROXY_UID, "missing"))?;
    let uid = parse_decimal_u32(text)
        .ok_or_else(|| GuardError::contract(PROXY_UID, format!("{text:?} is not a UID")))?;
    if uid == u32::MAX {
        // (uid_t)-1 means "no change" to the set*id calls: it never owns a socket.
        return Err(GuardError::contract(
            PROXY_UID,
            "4294967295 is not a usable UID",
        ));
    }
    if uid == 0 && !allow_root {
        return Err(GuardError::contract(
            PROXY_UID,
            "0 (root) is refused: root can usually remove the fence itself; the netconf must set allowRootProxy to allow it",
        ));
    }
    Ok(uid)
}

/// Plain decimal digits only: no sign, no spaces, no leading `+`, at most u32.
fn parse_decimal_u32(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

fn parse_cidrs(text: &str) -> Result<Vec<IpNet>, GuardError> {
    let mut cidrs: Vec<IpNet> = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let net = parse_cidr(item)?;
        if !cidrs.contains(&net) {
            cidrs.push(net);
        }
    }
    if cidrs.len() > MAX_ALLOW_CIDRS {
        return Err(GuardError::contract(
            ALLOW_CIDRS,
            format!(
                "{} CIDRs; at most {MAX_ALLOW_CIDRS} are accepted",
                cidrs.len()
            ),
        ));
    }
    Ok(cidrs)
}

fn parse_cidr(item: &str) -> Result<IpNet, GuardError> {
    let net: IpNet = match item.parse::<IpNet>() {
        Ok(net) => net,
        // A bare address means that one host.
        Err(_) => item
            .parse::<std::net::IpAddr>()
            .map(IpNet::from)
            .map_err(|_| {
                GuardError::contract(
                    ALLOW_CIDRS,
                    format!("{item:?} is not a CIDR or an IP address"),
                )
            })?,
    };
    if net.addr() != net.network() {
        return Err(GuardError::contract(
            ALLOW_CIDRS,
            format!(
                "{item:?} has host bits set; write {} (or the address alone for one host)",
                net.trunc()
            ),
        ));
    }
    if net.prefix_len() == 0 {
        return Err(GuardError::contract(
            ALLOW_CIDRS,
            format!(
                "{item:?} would allow every destination of its family: remove the guard instead"
            ),
        ));
    }
    Ok(net)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Allowlist;
    use std::path::PathBuf;
    use std::time::Duration;

    fn config(allow_root: bool) -> GuardConfig {
        GuardConfig {
            network: "n".into(),
            kubeconfig: None,
            namespaces: Allowlist::Only(vec![]),
            allow_root_proxy: allow_root,
            api_connect_timeout: Duration::from_secs(1),
            api_timeout: Duration::from_secs(1),
            state_dir: PathBuf::from("/tmp"),
            admission_guarantee: false,
        }
    }

    fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn decide(pairs: &[(&str, &str)]) -> Result<Decision, GuardError> {
        Decision::from_annotations(&annotations(pairs), &config(false))
    }

    fn refused_annotation(pairs: &[(&str, &str)]) -> String {
        match decide(pairs) {
            Err(GuardError::Contract { annotation, .. }) => annotation,
            other => panic!("{pairs:?}: {other:?}"),
        }
    }

    const OK: [(&str, &str); 3] = [
        (ENABLED, "true"),
        (PROXY_UID, "1337"),
        (CONTRACT_VERSION_KEY, "1"),
    ];

    #[test]
    fn not_opted_in_passes_through() {
        assert_eq!(decide(&[]).unwrap(), Decision::PassThrough);
        assert_eq!(decide(&[("other/x", "1")]).unwrap(), Decision::PassThrough);
        assert_eq!(
            decide(&[(ENABLED, "false"), (PROXY_UID, "5")]).unwrap(),
            Decision::PassThrough
        );
    }

    #[test]
    fn valid_contract() {
        let mut pairs = OK.to_vec();
        pairs.push((
            ALLOW_CIDRS,
            " 10.96.0.10, 10.96.0.0/12,fd00::/8,,10.96.0.10/32 ",
        ));
        let Decision::Enforce(contract) = decide(&pairs).unwrap() else {
            panic!("not enforced")
        };
        assert_eq!(contract.proxy_uid, 1337);
        assert_eq!(contract.contract_version, 1);
        let cidrs: Vec<String> = contract.allow_cidrs.iter().map(|n| n.to_string()).collect();
        assert_eq!(cidrs, ["10.96.0.10/32", "10.96.0.0/12", "fd00::/8"]);
    }

    #[test]
    fn refusals_name_the_annotation() {
        let with = |key: &'static str, value: &'static str| {
            let mut pairs: Vec<(&str, &str)> =
                OK.iter().filter(|(k, _)| *k != key).copied().collect();
            pairs.push((key, value));
            pairs
        };
        let without = |key: &str| -> Vec<(&str, &str)> {
            OK.iter().filter(|(k, _)| *k != key).copied().collect()
        };
        assert_eq!(refused_annotation(&with(ENABLED, "yes")), ENABLED);
        assert_eq!(
            refused_annotation(&without(CONTRACT_VERSION_KEY)),
            CONTRACT_VERSION_KEY
        );
        assert_eq!(
            refused_annotation(&with(CONTRACT_VERSION_KEY, "2")),
            CONTRACT_VERSION_KEY
        );
        assert_eq!(
            refused_annotation(&with(CONTRACT_VERSION_KEY, "0")),
            CONTRACT_VERSION_KEY
        );
        assert_eq!(
            refused_annotation(&with(CONTRACT_VERSION_KEY, "v1")),
            CONTRACT_VERSION_KEY
        );
        assert_eq!(refused_annotation(&without(PROXY_UID)), PROXY_UID);
        for bad in ["-1", "+5", " 5", "4294967296", "4294967295", "abc", ""] {
            assert_eq!(
                refused_annotation(&with(PROXY_UID, bad)),
                PROXY_UID,
                "{bad}"
            );
        }
        assert_eq!(refused_annotation(&with(PROXY_UID, "0")), PROXY_UID);
        for bad in ["10.0.0.1/33", "nope", "10.0.0.1/8", "0.0.0.0/0", "::/0"] {
            assert_eq!(
                refused_annotation(&with(ALLOW_CIDRS, bad)),
                ALLOW_CIDRS,
                "{bad}"
            );
        }
        let mut unknown = OK.to_vec();
        unknown.push(("guard.weft.dev/mode", "x"));
        assert_eq!(refused_annotation(&unknown), "guard.weft.dev/mode");
        assert_eq!(refused_annotation(&[(PROXY_UID, "5")]), PROXY_UID);
    }

    #[test]
    fn root_proxy_needs_the_netconf_switch() {
        let mut pairs = OK.to_vec();
        pairs.retain(|(k, _)| *k != PROXY_UID);
        pairs.push((PROXY_UID, "0"));
        let decided = Decision::from_annotations(&annotations(&pairs), &config(true)).unwrap();
        assert!(matches!(
            decided,
            Decision::Enforce(Contract { proxy_uid: 0, .. })
        ));
    }

    #[test]
    fn too_many_cidrs() {
        let many: Vec<String> = (0..=MAX_ALLOW_CIDRS)
            .map(|i| format!("10.{i}.0.0/16"))
            .collect();
        let text = many.join(",");
        let mut pairs: Vec<(&str, &str)> = OK.to_vec();
        pairs.push((ALLOW_CIDRS, &text));
        assert_eq!(refused_annotation(&pairs), ALLOW_CIDRS);
    }
}
