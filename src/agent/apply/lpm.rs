//! The datapath's node-wide state: its config (overlay device, own VTEP MAC) and its route
//! table (own pod CIDRs, own VTEP addresses, every peer's pod CIDRs).
//!
//! Like the peers' kernel entries, the table is compared with the map's contents on a run
//! that must consider everything, and otherwise with what the last successful run wrote.

use std::collections::BTreeMap;

use ipnet::IpNet;
use weft_datapath::{NodeConfig, RouteKind, Tables};
use weft_model::{KindId, NodeSpec};

use super::Changes;
use crate::agent::node::NodeEnv;
use crate::agent::plan::NodePlan;
use crate::agent::reconcile::{Input, Reconciler};

/// The datapath's config and route table.
#[derive(Default)]
pub struct DatapathRoutes {
    written: Option<(NodeConfig, BTreeMap<IpNet, RouteKind>)>,
}

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
        let plan = env.plan(input.stores)?;
        let config = NodeConfig {
            vxlan_ifindex: device.vxlan_index,
            vtep_mac: plan.vtep_mac,
        };
        let previous = self.written.take();
        let changes = match previous {
            Some((was, before)) if !input.everything() => {
                apply_delta(env.datapath.tables_mut(), &was, &before, config, &plan.lpm)?
            }
            _ => ensure(env.datapath.tables_mut(), &plan, device.vxlan_index)?,
        };
        self.written = Some((config, plan.lpm.clone()));
        Ok(changes)
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
    changes.merge(write_difference(tables, &present, &plan.lpm)?);
    Ok(changes)
}

/// What changed since the last write, without reading the maps.
fn apply_delta(
    tables: &mut Tables,
    was: &NodeConfig,
    before: &BTreeMap<IpNet, RouteKind>,
    config: NodeConfig,
    after: &BTreeMap<IpNet, RouteKind>,
) -> anyhow::Result<Changes> {
    let mut changes = Changes::default();
    if *was != config {
        tables.set_config(config)?;
        changes.updated += 1;
    }
    changes.merge(write_difference(tables, before, after)?);
    Ok(changes)
}

fn write_difference(
    tables: &mut Tables,
    present: &BTreeMap<IpNet, RouteKind>,
    wanted: &BTreeMap<IpNet, RouteKind>,
) -> anyhow::Result<Changes> {
    let mut changes = Changes::default();
    for (net, kind) in wanted {
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
        if !wanted.contains_key(net) {
            tables.remove_route(*net)?;
            changes.removed += 1;
        }
    }
    Ok(changes)
}
