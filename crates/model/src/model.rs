use std::collections::BTreeMap;

use ipnet::IpNet;

use crate::issue::Issue;
use crate::node::NodeSpec;

/// Cluster-wide settings that come from configuration, not from objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// The cluster's pod CIDRs (one per family at most). Every node's pod CIDR lies inside
    /// one; traffic from a pod to anything outside them is masqueraded.
    pub cluster_cidrs: Vec<IpNet>,
}

/// The cluster configuration itself is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("clusterCIDRs: at least one cluster CIDR is required")]
    NoClusterCidr,
    #[error("clusterCIDRs: {0} has host bits set")]
    HostBits(IpNet),
    #[error("clusterCIDRs: {0} and {1} overlap")]
    Overlap(IpNet, IpNet),
    #[error("clusterCIDRs: more than one {0} CIDR")]
    TwoOfFamily(&'static str),
}

impl ClusterConfig {
    pub fn new(cluster_cidrs: Vec<IpNet>) -> Result<ClusterConfig, ConfigError> {
        if cluster_cidrs.is_empty() {
            return Err(ConfigError::NoClusterCidr);
        }
        for c in &cluster_cidrs {
            if c.trunc() != *c {
                return Err(ConfigError::HostBits(*c));
            }
        }
        for (i, a) in cluster_cidrs.iter().enumerate() {
            for b in &cluster_cidrs[i + 1..] {
                if a.contains(b) || b.contains(a) {
                    return Err(ConfigError::Overlap(*a, *b));
                }
            }
        }
        let v4 = cluster_cidrs
            .iter()
            .filter(|c| matches!(c, IpNet::V4(_)))
            .count();
        if v4 > 1 {
            return Err(ConfigError::TwoOfFamily("IPv4"));
        }
        if cluster_cidrs.len() - v4 > 1 {
            return Err(ConfigError::TwoOfFamily("IPv6"));
        }
        Ok(ClusterConfig { cluster_cidrs })
    }

    pub fn contains(&self, net: &IpNet) -> bool {
        self.cluster_cidrs.iter().any(|c| c.contains(net))
    }
}

/// Every valid node, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Model {
    pub nodes: BTreeMap<String, NodeSpec>,
}

impl Model {
    /// Builds the model from nodes that are valid on their own (the Node store's): each is
    /// checked against the cluster configuration and the other nodes.
    pub fn build<'a>(
        config: &ClusterConfig,
        nodes: impl IntoIterator<Item = &'a NodeSpec>,
    ) -> (Model, Vec<Issue>) {
        Self::build_after(&Model::default(), config, nodes)
    }

    /// [`Model::build`] given the model built last time: on a pod CIDR overlap, the node that
    /// already held its CIDRs keeps them.
    pub fn build_after<'a>(
        previous: &Model,
        config: &ClusterConfig,
        nodes: impl IntoIterator<Item = &'a NodeSpec>,
    ) -> (Model, Vec<Issue>) {
        let mut issues = Vec::new();
        let mut candidates: Vec<NodeSpec> = nodes.into_iter().cloned().collect();

        candidates.retain(|spec| {
            let outside: Vec<_> = spec
                .pod_cidrs
                .iter()
                .filter(|c| !config.contains(c))
                .collect();
            for (i, cidr) in spec.pod_cidrs.iter().enumerate() {
                if outside.contains(&cidr) {
                    issues.push(Issue::new(
                        spec.object_name(),
                        format!("spec.podCIDRs[{i}]"),
                        format!(
                            "{cidr} is outside the cluster CIDRs {:?}",
                            config.cluster_cidrs
                        ),
                    ));
                }
            }
            outside.is_empty()
        });

        // When pod CIDRs overlap, one node keeps its CIDRs and the others are left out, so a
        // bad newcomer can never take a working node down: a node already in the previous
        // model with the same CIDRs comes first, then the older object, then the name.
        candidates.sort_by_key(|spec| {
            let established = previous
                .nodes
                .get(&spec.name)
                .is_some_and(|p| p.pod_cidrs == spec.pod_cidrs);
            (
                !established,
                spec.created.is_none(),
                spec.created.clone(),
                spec.name.clone(),
            )
        });
        // The accepted CIDRs as address intervals by start: they never overlap, so a new
        // interval overlaps one of them exactly when it overlaps the last one starting at
        // or before its end (O(log n) a check, not a scan of every node).
        let mut accepted: Vec<NodeSpec> = Vec::new();
        let mut taken: BTreeMap<(bool, u128), (u128, IpNet, usize)> = BTreeMap::new();
        for spec in candidates {
            let clash = spec.pod_cidrs.iter().find_map(|b| {
                let (v6, start, end) = span(b);
                taken
                    .range(..=(v6, end))
                    .next_back()
                    .filter(|((family, _), (last, _, _))| *family == v6 && *last >= start)
                    .map(|(_, (_, a, kept))| (*kept, *a, *b))
            });
            match clash {
                Some((kept, a, b)) => issues.push(Issue::new(
                    spec.object_name(),
                    "spec.podCIDRs",
                    format!(
                        "{b} overlaps {a} of {}, which keeps it; {} is left out",
                        accepted[kept].object_name(),
                        spec.object_name()
                    ),
                )),
                None => {
                    for cidr in &spec.pod_cidrs {
                        let (v6, start, end) = span(cidr);
                        taken.insert((v6, start), (end, *cidr, accepted.len()));
                    }
                    accepted.push(spec);
                }
            }
        }
        let nodes = accepted
            .into_iter()
            .map(|spec| (spec.name.clone(), spec))
            .collect();
        (Model { nodes }, issues)
    }
}

/// A prefix as (is IPv6, first address, last address).
fn span(net: &IpNet) -> (bool, u128, u128) {
    match net {
        IpNet::V4(n) => (
            false,
            u32::from(n.network()).into(),
            u32::from(n.broadcast()).into(),
        ),
        IpNet::V6(n) => (true, n.network().into(), n.broadcast().into()),
    }
}
