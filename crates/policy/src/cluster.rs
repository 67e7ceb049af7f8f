//! Everything policy decisions depend on, borrowed from the agent's stores.

use crate::policy::NetworkPolicy;
use crate::view::{NamespaceView, NodeView, PodView};

/// The cluster as one node's agent sees it: every namespace, pod, node and (validated)
/// policy. Pods of namespaces missing from `namespaces` are still policy subjects; their
/// namespace just has no labels but its name label.
#[derive(Clone, Default)]
pub struct Cluster<'a> {
    pub namespaces: Vec<NamespaceView<'a>>,
    pub pods: Vec<PodView<'a>>,
    pub nodes: Vec<NodeView<'a>>,
    pub policies: Vec<&'a NetworkPolicy>,
}

impl std::fmt::Debug for Cluster<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("namespaces", &self.namespaces)
            .field("pods", &self.pods)
            .field("nodes", &self.nodes)
            .field("policies", &self.policies)
            .finish()
    }
}
