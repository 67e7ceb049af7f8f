//! What the node reconcilers share: the hardware handles (datapath, netlink), the settings,
//! the node model derived from the Node store, and facts one reconciler learns for the
//! next (the overlay device's index and the pod MTU).

use std::sync::Arc;

use weft_datapath::Datapath;
use weft_model::{Generation, Issue, Model, NodeSpec, Stores};
use weft_netlink::Handle;

use super::apply::device::Device;
use super::config::Settings;
use super::plan::{self, NodePlan, PlanError};

pub struct NodeEnv {
    pub settings: Settings,
    pub datapath: Datapath,
    pub handle: Handle,
    pub nodes: NodeView,
    /// Set by the overlay-device reconciler on every successful run.
    pub device: Option<Device>,
}

impl NodeEnv {
    /// The node's plan from the current Node store (rebuilt only when it changed; shared,
    /// so a reconciler holds it while it uses the rest of the environment).
    pub fn plan(&mut self, stores: &Stores) -> anyhow::Result<Arc<NodePlan>> {
        self.nodes.refresh(stores, &self.settings)?;
        self.nodes.plan.clone().map_err(|e| anyhow::anyhow!("{e}"))
    }

    /// The overlay device, as the overlay-device reconciler found it.
    pub fn device(&self) -> anyhow::Result<Device> {
        self.device
            .ok_or_else(|| anyhow::anyhow!("the overlay device is not set up yet"))
    }
}

/// The nodes checked against each other and the cluster, and this node's plan.
pub struct NodeView {
    built_at: Option<Generation>,
    pub model: Model,
    /// Nodes valid on their own but refused against the others (overlaps, outside CIDRs).
    pub issues: Vec<Issue>,
    pub plan: Result<Arc<NodePlan>, PlanError>,
}

impl Default for NodeView {
    fn default() -> NodeView {
        NodeView {
            built_at: None,
            model: Model::default(),
            issues: Vec::new(),
            plan: Err(PlanError::NotBuilt),
        }
    }
}

impl NodeView {
    pub fn refresh(&mut self, stores: &Stores, settings: &Settings) -> anyhow::Result<()> {
        let store = stores.get::<NodeSpec>()?;
        if self.built_at == Some(store.generation()) {
            return Ok(());
        }
        // A pod CIDR overlap keeps the node that held its CIDRs in the previous model.
        let (model, mut issues) =
            Model::build_after(&self.model, &settings.cluster, store.iter().map(|(_, n)| n));
        issues.sort_by(|a, b| (&a.object, &a.field).cmp(&(&b.object, &b.field)));
        self.plan = plan::plan(&model, &settings.cluster, &settings.node_name).map(Arc::new);
        self.model = model;
        self.issues = issues;
        self.built_at = Some(store.generation());
        Ok(())
    }
}
