//! The overlay program's link on the overlay device (pinned, so it outlives the agent).

use anyhow::Context;
use weft_datapath::LinkChange;
use weft_model::KindId;

use super::Changes;
use crate::agent::config::VXLAN_DEVICE;
use crate::agent::node::NodeEnv;
use crate::agent::reconcile::{Input, Reconciler};

pub struct OverlayProgram;

impl Reconciler<NodeEnv> for OverlayProgram {
    fn name(&self) -> &'static str {
        "overlay-program"
    }

    /// Nothing from the stores: it runs when the device changed, on resync and on retry.
    fn reads(&self) -> Vec<KindId> {
        Vec::new()
    }

    fn after(&self) -> &'static [&'static str] {
        &["overlay-device"]
    }

    fn reconcile(&mut self, env: &mut NodeEnv, _: &Input<'_>) -> anyhow::Result<Changes> {
        let mut changes = Changes::default();
        match env
            .datapath
            .attach_overlay(VXLAN_DEVICE)
            .context("attach the overlay program")?
        {
            LinkChange::Unchanged => {}
            LinkChange::Updated => changes.updated += 1,
            LinkChange::Created => changes.added += 1,
        }
        Ok(changes)
    }
}
