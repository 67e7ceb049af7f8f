//! Kernel state for each remote node: a route to its pod CIDRs through its VTEP address on
//! the overlay device, a permanent neighbour entry for that address, and the forwarding entry
//! that sends its VTEP MAC to its underlay address. The eBPF programs steer pod traffic
//! themselves; these entries carry the node's own traffic to remote pods and are the path
//! the kernel uses when a pod's packet is too big for the overlay (so the pod gets ICMP).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use ipnet::IpNet;
use weft_model::VTEP_MAC_PREFIX;
use weft_netlink::{Handle, IpFamily, Mac, NeighbourState, RouteSpec};

use weft_model::{KindId, NodeSpec};

use super::Changes;
use crate::agent::node::NodeEnv;
use crate::agent::plan::NodePlan;
use crate::agent::reconcile::{Input, Reconciler};

/// Routes, neighbours and forwarding entries for every other node.
pub struct OverlayPeers;

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
        let plan = env.plan(input.stores)?.clone();
        ensure(&mut env.handle, &plan, device.vxlan_index)
    }
}

const RTPROT_KERNEL: u8 = 2;

pub fn ensure(handle: &mut Handle, plan: &NodePlan, vxlan_index: u32) -> anyhow::Result<Changes> {
    let mut changes = Changes::default();
    let mut routes: BTreeMap<IpNet, IpAddr> = BTreeMap::new();
    let mut neighbours: BTreeMap<IpAddr, Mac> = BTreeMap::new();
    let mut fdb: BTreeMap<Mac, IpAddr> = BTreeMap::new();
    for peer in &plan.peers {
        fdb.insert(peer.vtep_mac, IpAddr::V4(peer.underlay_ip));
        for (cidr, vtep) in &peer.cidrs {
            routes.insert(*cidr, *vtep);
            neighbours.insert(*vtep, peer.vtep_mac);
        }
    }

    // Forwarding entries first: a route or neighbour is useless before the device knows
    // where the MAC lives.
    let present_fdb: BTreeMap<Mac, IpAddr> = handle
        .fdb_entries(vxlan_index)?
        .into_iter()
        .filter(|(mac, _)| mac[..2] == VTEP_MAC_PREFIX)
        .collect();
    for (mac, dst) in &fdb {
        match present_fdb.get(mac) {
            Some(have) if have == dst => {}
            Some(_) => {
                handle.replace_fdb(vxlan_index, *mac, *dst)?;
                changes.updated += 1;
            }
            None => {
                handle.replace_fdb(vxlan_index, *mac, *dst)?;
                changes.added += 1;
            }
        }
    }

    let present_neigh: BTreeMap<IpAddr, Option<Mac>> = handle
        .neighbours(vxlan_index)?
        .into_iter()
        .filter(|n| n.state == NeighbourState::Permanent)
        .map(|n| (n.ip, n.mac))
        .collect();
    for (ip, mac) in &neighbours {
        match present_neigh.get(ip) {
            Some(Some(have)) if have == mac => {}
            found => {
                handle.add_neighbour(vxlan_index, *ip, *mac, true)?;
                if found.is_some() {
                    changes.updated += 1;
                } else {
                    changes.added += 1;
                }
            }
        }
    }

    let mut present_routes: BTreeMap<IpNet, Option<IpAddr>> = BTreeMap::new();
    for family in [IpFamily::V4, IpFamily::V6] {
        for r in handle.routes(family)? {
            if r.oif == Some(vxlan_index)
                && r.protocol != RTPROT_KERNEL
                && plan.cluster_cidrs.iter().any(|c| c.contains(&r.dst))
            {
                present_routes.insert(r.dst, r.gateway);
            }
        }
    }
    for (dst, via) in &routes {
        if present_routes.get(dst) == Some(&Some(*via)) {
            continue;
        }
        handle.replace_route(&RouteSpec {
            gateway: Some(*via),
            oif: Some(vxlan_index),
            onlink: true,
            ..RouteSpec::new(*dst)
        })?;
        if present_routes.contains_key(dst) {
            changes.updated += 1;
        } else {
            changes.added += 1;
        }
    }

    // What no peer needs any more goes, routes first.
    for (dst, via) in &present_routes {
        if !routes.contains_key(dst) {
            handle.delete_route(&RouteSpec {
                gateway: *via,
                oif: Some(vxlan_index),
                ..RouteSpec::new(*dst)
            })?;
            changes.removed += 1;
        }
    }
    let wanted_ips: BTreeSet<&IpAddr> = neighbours.keys().collect();
    for ip in present_neigh.keys() {
        if !wanted_ips.contains(ip) {
            handle.delete_neighbour(vxlan_index, *ip)?;
            changes.removed += 1;
        }
    }
    for (mac, dst) in &present_fdb {
        if !fdb.contains_key(mac) {
            handle.delete_fdb(vxlan_index, *mac, *dst)?;
            changes.removed += 1;
        }
    }
    Ok(changes)
}
