//! A cluster that owns its data, for tests, benchmarks and scenario runs (the agent lends
//! its stores through [`Cluster`] instead).

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::cluster::Cluster;
use crate::policy::NetworkPolicy;
use crate::view::{ContainerPort, NamespaceView, NodeView, PodView};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct OwnedCluster {
    pub namespaces: Vec<OwnedNamespace>,
    pub pods: Vec<OwnedPod>,
    pub nodes: Vec<OwnedNode>,
    pub policies: Vec<NetworkPolicy>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct OwnedNamespace {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct OwnedPod {
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub ips: Vec<IpAddr>,
    pub host_network: bool,
    pub terminal: bool,
    pub node: String,
    pub ports: Vec<ContainerPort>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct OwnedNode {
    pub name: String,
    pub addresses: Vec<IpAddr>,
}

impl OwnedCluster {
    pub fn cluster(&self) -> Cluster<'_> {
        Cluster {
            namespaces: self
                .namespaces
                .iter()
                .map(|n| NamespaceView {
                    name: &n.name,
                    labels: &n.labels,
                })
                .collect(),
            pods: self
                .pods
                .iter()
                .map(|p| PodView {
                    namespace: &p.namespace,
                    name: &p.name,
                    labels: &p.labels,
                    ips: &p.ips,
                    host_network: p.host_network,
                    terminal: p.terminal,
                    node: &p.node,
                    ports: &p.ports,
                })
                .collect(),
            nodes: self
                .nodes
                .iter()
                .map(|n| NodeView {
                    name: &n.name,
                    addresses: &n.addresses,
                })
                .collect(),
            policies: self.policies.iter().collect(),
        }
    }

    pub fn pod(&self, key: &str) -> Option<&OwnedPod> {
        self.pods
            .iter()
            .find(|p| format!("{}/{}", p.namespace, p.name) == key)
    }

    pub fn pod_mut(&mut self, key: &str) -> Option<&mut OwnedPod> {
        self.pods
            .iter_mut()
            .find(|p| format!("{}/{}", p.namespace, p.name) == key)
    }

    /// Adds or replaces a policy by `namespace/name`.
    pub fn upsert_policy(&mut self, policy: NetworkPolicy) {
        match self.policies.iter_mut().find(|p| p.key() == policy.key()) {
            Some(existing) => *existing = policy,
            None => self.policies.push(policy),
        }
    }
}
