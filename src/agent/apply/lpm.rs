//! The datapath's node-wide state: its config (overlay device, own VTEP MAC) and its route
//! table (own pod CIDRs, own VTEP addresses, every peer's pod CIDRs).

use std::collections::BTreeMap;

use weft_datapath::{NodeConfig, Tables};
use weft_model::{KindId, NodeSpec};

use super::Changes;
use crate::agent::node::NodeEnv;
use crate::agent::plan::NodePlan;
use crate::agent::reconcile::{Input, Reconciler};

/// The datapath's config and route table.
pub struct DatapathRoutes;

impl Reconciler<NodeEnv> for DatapathRoutes {
    fn name(&self) -> &'static str {
        "datapath-routes"
    }

    fn reads(&self) -> Vec<KindId> {
        vec![KindId::of::<NodeSpec>()]
    }

    fn after(&self) -> &'static [&'static str] {
        &["overlay-device"]
    }

    fn reconcile(&mut self, env: &mut NodeEnv, input: &Input<'_>) -> anyhow::Result<Changes> {
        let device = env.device()?;
        let plan = env.plan(input.stores)?.clone();
        ensure(env.datapath.tables_mut(), &plan, device.vxlan_index)
    }
}

pub fn ensure(tables: &mut Tables, plan: &NodePlan, vxlan_index: u32) -> anyhow::Result<Changes> {
    let mut changes = Changes::default();
    let config = NodeConfig {
        vxlan_ifindex: vxlan_index,
        vtep_mac: plan.vtep_mac,
    };
    if tables.config()? != config {
        tables.set_config(config)?;
        changes.updated += 1;
    }
    let present: BTreeMap<_, _> = tables.routes()?.into_iter().collect();
    for (net, kind) in &plan.lpm {
        match present.get(net) {
            Some(have) if have == kind => {}
            found => {
                tables.upsert_route(*net, *kind)?;
                if found.is_some() {
                    changes.updated += 1;
                } else {
                    changes.added += 1;
                }
            }
        }
    }
    for net in present.keys() {
        if !plan.lpm.contains_key(net) {
            tables.remove_route(*net)?;
            changes.removed += 1;
        }
    }
    Ok(changes)
}
