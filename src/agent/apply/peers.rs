//! Kernel state for each remote node: a route to its pod CIDRs through its VTEP address on
//! the overlay device, a permanent neighbour entry for that address, and the forwarding entry
//! that sends its VTEP MAC to its underlay address. The eBPF programs steer pod traffic
//! themselves; these entries carry the node's own traffic to remote pods and are the path
//! the kernel uses when a pod's packet is too big for the overlay (so the pod gets ICMP).
//!
//! On a run that must consider everything (first run, resync, after an error) the entries
//! are compared with the kernel's; otherwise with what the last successful run applied, so
//! one node changing costs that node's entries, not a dump of every peer's.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;
use weft_model::{KindId, NodeSpec, VTEP_MAC_PREFIX};
use weft_netlink::{Handle, IpFamily, Mac, NeighbourState, RouteSpec};

use super::Changes;
use crate::agent::node::NodeEnv;
use crate::agent::plan::NodePlan;
use crate::agent::reconcile::{Input, Reconciler};

/// Routes, neighbours and forwarding entries for every other node.
#[derive(Default)]
pub struct OverlayPeers {
    /// What the last successful run left in the kernel, and on which device.
    applied: Option<(u32, Entries)>,
}

impl Reconciler<NodeEnv> for OverlayPeers {
    fn name(&self) -> &'static str {
        "overlay-peers"
    }

    fn reads(&self) -> Vec<KindId> {
        vec![KindId::of::<NodeSpec>()]
    }

    fn after(&self) -> &'static [&'static str] {
        &["overlay-device"]
    }

    fn reconcile(&mut self, env: &mut NodeEnv, input: &Input<'_>) -> anyhow::Result<Changes> {
        let device = env.device()?;
        let wanted = Entries::of(&*env.plan(input.stores)?);
        let previous = self.applied.take();
        let changes = match previous {
            Some((index, before)) if index == device.vxlan_index && !input.everything() => {
                apply_delta(&mut env.handle, &before, &wanted, index)?
            }
            _ => ensure(
                &mut env.handle,
                &wanted,
                &env.settings.cluster.cluster_cidrs,
                device.vxlan_index,
            )?,
        };
        self.applied = Some((device.vxlan_index, wanted));
        Ok(changes)
    }
}

const RTPROT_KERNEL: u8 = 2;

/// Every peer entry the plan calls for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Entries {
    routes: BTreeMap<IpNet, IpAddr>,
    neighbours: BTreeMap<IpAddr, Mac>,
    fdb: BTreeMap<Mac, IpAddr>,
}

impl Entries {
    pub fn of(plan: &NodePlan) -> Entries {
        let mut e = Entries::default();
        for peer in &plan.peers {
            e.fdb.insert(peer.vtep_mac, IpAddr::V4(peer.underlay_ip));
            for (cidr, vtep) in &peer.cidrs {
                e.routes.insert(*cidr, *vtep);
                e.neighbours.insert(*vtep, peer.vtep_mac);
            }
        }
        e
    }
}

fn route_to(dst: IpNet, via: IpAddr, vxlan_index: u32) -> RouteSpec {
    RouteSpec {
        gateway: Some(via),
        oif: Some(vxlan_index),
        onlink: true,
        ..RouteSpec::new(dst)
    }
}

/// Brings the kernel in line with `wanted`, reading what it holds. Routes on the overlay
/// device inside the cluster CIDRs are weft's: any not wanted goes.
pub fn ensure(
    handle: &mut Handle,
    wanted: &Entries,
    cluster_cidrs: &[IpNet],
    vxlan_index: u32,
) -> anyhow::Result<Changes> {
    let mut changes = Changes::default();
    // Forwarding entries first: a route or neighbour is useless before the device knows
    // where the MAC lives.
    let present_fdb: BTreeMap<Mac, IpAddr> = handle
        .fdb_entries(vxlan_index)?
        .into_iter()
        .filter(|(mac, _)| mac[..2] == VTEP_MAC_PREFIX)
        .collect();
    for (mac, dst) in &wanted.fdb {
        if present_fdb.get(mac) != Some(dst) {
            handle.replace_fdb(vxlan_index, *mac, *dst)?;
            count(&mut changes, present_fdb.contains_key(mac));
        }
    }

    let present_neigh: BTreeMap<IpAddr, Option<Mac>> = handle
        .neighbours(vxlan_index)?
        .into_iter()
        .filter(|n| n.state == NeighbourState::Permanent)
        .map(|n| (n.ip, n.mac))
        .collect();
    for (ip, mac) in &wanted.neighbours {
        if present_neigh.get(ip) != Some(&Some(*mac)) {
            handle.add_neighbour(vxlan_index, *ip, *mac, true)?;
            count(&mut changes, present_neigh.contains_key(ip));
        }
    }

    let mut present_routes: BTreeMap<IpNet, Option<IpAddr>> = BTreeMap::new();
    for family in [IpFamily::V4, IpFamily::V6] {
        for r in handle.routes(family)? {
            if r.oif == Some(vxlan_index)
                && r.protocol != RTPROT_KERNEL
                && cluster_cidrs.iter().any(|c| c.contains(&r.dst))
            {
                present_routes.insert(r.dst, r.gateway);
            }
        }
    }
    for (dst, via) in &wanted.routes {
        if present_routes.get(dst) != Some(&Some(*via)) {
            handle.replace_route(&route_to(*dst, *via, vxlan_index))?;
            count(&mut changes, present_routes.contains_key(dst));
        }
    }

    // What no peer needs any more goes, routes first.
    for (dst, via) in &present_routes {
        if !wanted.routes.contains_key(dst) {
            handle.delete_route(&RouteSpec {
                gateway: *via,
                oif: Some(vxlan_index),
                ..RouteSpec::new(*dst)
            })?;
            changes.removed += 1;
        }
    }
    for ip in present_neigh.keys() {
        if !wanted.neighbours.contains_key(ip) {
            handle.delete_neighbour(vxlan_index, *ip)?;
            changes.removed += 1;
        }
    }
    for (mac, dst) in &present_fdb {
        if !wanted.fdb.contains_key(mac) {
            handle.delete_fdb(vxlan_index, *mac, *dst)?;
            changes.removed += 1;
        }
    }
    Ok(changes)
}

/// Applies the difference between two sets of entries without reading the kernel.
fn apply_delta(
    handle: &mut Handle,
    before: &Entries,
    after: &Entries,
    vxlan_index: u32,
) -> anyhow::Result<Changes> {
    let mut changes = Changes::default();
    for (mac, dst) in &after.fdb {
        if before.fdb.get(mac) != Some(dst) {
            handle.replace_fdb(vxlan_index, *mac, *dst)?;
            count(&mut changes, before.fdb.contains_key(mac));
        }
    }
    for (ip, mac) in &after.neighbours {
        if before.neighbours.get(ip) != Some(mac) {
            handle.add_neighbour(vxlan_index, *ip, *mac, true)?;
            count(&mut changes, before.neighbours.contains_key(ip));
        }
    }
    for (dst, via) in &after.routes {
        if before.routes.get(dst) != Some(via) {
            handle.replace_route(&route_to(*dst, *via, vxlan_index))?;
            count(&mut changes, before.routes.contains_key(dst));
        }
    }
    for (dst, via) in &before.routes {
        if !after.routes.contains_key(dst) {
            handle.delete_route(&RouteSpec {
                gateway: Some(*via),
                oif: Some(vxlan_index),
                ..RouteSpec::new(*dst)
            })?;
            changes.removed += 1;
        }
    }
    for ip in before.neighbours.keys() {
        if !after.neighbours.contains_key(ip) {
            handle.delete_neighbour(vxlan_index, *ip)?;
            changes.removed += 1;
        }
    }
    for (mac, dst) in &before.fdb {
        if !after.fdb.contains_key(mac) {
            handle.delete_fdb(vxlan_index, *mac, *dst)?;
            changes.removed += 1;
        }
    }
    Ok(changes)
}

fn count(changes: &mut Changes, existed: bool) {
    if existed {
        changes.updated += 1;
    } else {
        changes.added += 1;
    }
}
