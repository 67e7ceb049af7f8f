//! The node's reconcilers: each compares one part of the node with the plan and changes
//! only what differs, so a restarted agent that finds everything in place changes nothing.
//! They run in this order (see [`node_reconcilers`]); the conflist comes last.

pub mod cniconf;
pub mod device;
pub mod guard;
pub mod lpm;
pub mod nat;
pub mod overlay;
pub mod peers;

use weft_model::Stores;

use super::node::NodeEnv;
use super::reconcile::Runner;

/// Adds the node's reconcilers to `runner`, in the order they run.
pub fn node_reconcilers(
    runner: &mut Runner<NodeEnv>,
    stores: &Stores,
    egress_guard: bool,
) -> anyhow::Result<()> {
    runner.add(stores, device::OverlayDevice)?;
    runner.add(stores, overlay::OverlayProgram)?;
    runner.add(stores, lpm::DatapathRoutes::default())?;
    runner.add(stores, peers::OverlayPeers::default())?;
    runner.add(stores, nat::Masquerade)?;
    runner.add(stores, cniconf::CniConfig)?;
    if egress_guard {
        runner.add(stores, guard::GuardSelfTest)?;
    }
    Ok(())
}

use std::fmt;

/// How many objects of each kind a reconcile pass created, updated or removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Changes {
    pub added: u32,
    pub updated: u32,
    pub removed: u32,
}

impl Changes {
    pub fn total(&self) -> u32 {
        self.added + self.updated + self.removed
    }

    pub fn merge(&mut self, other: Changes) {
        self.added += other.added;
        self.updated += other.updated;
        self.removed += other.removed;
    }
}

impl fmt::Display for Changes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "+{} ~{} -{}", self.added, self.updated, self.removed)
    }
}
