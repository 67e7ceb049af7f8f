//! Server configuration (serde, so a parent process such as `weft lab` can hand it over
//! as JSON).

use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::resources::ResourceDef;

/// An authenticated identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct User {
    pub name: String,
    #[serde(default)]
    pub groups: Vec<String>,
}

impl User {
    pub fn named(name: &str) -> Self {
        User {
            name: name.to_string(),
            groups: vec![],
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Config {
    /// Service CIDRs, primary family first (one per family; two make the cluster dual-stack).
    pub service_cidrs: Vec<IpNet>,
    /// Inclusive node-port range.
    pub node_port_range: (u16, u16),
    /// Bearer token → user. A request with an unknown token is refused with 401.
    pub tokens: BTreeMap<String, User>,
    /// The user of requests without a token; `None` refuses them with 401.
    pub anonymous_user: Option<String>,
    /// Events kept per resource for watches and consistent paged lists; older is 410 Gone.
    pub watch_history: usize,
    /// How often an idle watch that asked for bookmarks gets one.
    pub bookmark_interval_ms: u64,
    /// Watch duration when the client sends no `timeoutSeconds`.
    pub default_watch_timeout_secs: u64,
    /// Create `default`, `kube-system`, `kube-public` and `kube-node-lease` at start.
    pub seed_namespaces: bool,
    /// Requests kept in the record (the oldest are dropped past it; the per-user summary
    /// keeps counting).
    pub record_limit: usize,
    /// More kinds (CRDs), one entry each.
    pub extra_resources: Vec<ResourceDef>,
    /// `gitVersion` of `/version`.
    pub version: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            service_cidrs: vec!["10.96.0.0/16".parse().expect("valid CIDR")],
            node_port_range: (30000, 32767),
            tokens: BTreeMap::new(),
            anonymous_user: Some("system:anonymous".into()),
            watch_history: 10_000,
            bookmark_interval_ms: 10_000,
            default_watch_timeout_secs: 1800,
            seed_namespaces: true,
            record_limit: 1_000_000,
            extra_resources: vec![],
            version: "v1.35.0".into(),
        }
    }
}

impl Config {
    pub fn validate(&self) -> Result<(), crate::Error> {
        let bad = |m: String| Err(crate::Error::Config(m));
        if self.service_cidrs.is_empty() || self.service_cidrs.len() > 2 {
            return bad("serviceCidrs needs one CIDR, or two of different families".into());
        }
        if self.service_cidrs.len() == 2
            && self.service_cidrs[0].addr().is_ipv4() == self.service_cidrs[1].addr().is_ipv4()
        {
            return bad(format!(
                "serviceCidrs {} and {} are of the same family",
                self.service_cidrs[0], self.service_cidrs[1]
            ));
        }
        let (lo, hi) = self.node_port_range;
        if lo == 0 || lo > hi {
            return bad(format!("nodePortRange {lo}-{hi} is empty or starts at 0"));
        }
        if self.watch_history == 0 {
            return bad("watchHistory must be at least 1".into());
        }
        Ok(())
    }
}
