//! The node's overlay device and forwarding: one fixed-VNI VXLAN device carrying the VTEP
//! MAC and addresses, bound to the underlay interface that holds the node's InternalIP.

use std::net::IpAddr;

use anyhow::{bail, Context};
use weft_netlink::{AddrFlags, Handle, VxlanSpec};

use weft_model::{KindId, NodeSpec};

use super::Changes;
use crate::agent::config::{Settings, VXLAN_DEVICE};
use crate::agent::node::NodeEnv;
use crate::agent::plan::{pod_mtu, NodePlan};
use crate::agent::reconcile::{Input, Reconciler};

/// The overlay device, its addresses and the forwarding sysctls.
pub struct OverlayDevice;

impl Reconciler<NodeEnv> for OverlayDevice {
    fn name(&self) -> &'static str {
        "overlay-device"
    }

    fn reads(&self) -> Vec<KindId> {
        vec![KindId::of::<NodeSpec>()]
    }

    fn reconcile(&mut self, env: &mut NodeEnv, input: &Input<'_>) -> anyhow::Result<Changes> {
        env.device = None;
        let plan = env.plan(input.stores)?;
        let (device, changes) = ensure(&mut env.handle, &plan, &env.settings)?;
        env.device = Some(device);
        Ok(changes)
    }
}

/// The underlay interface and the overlay device as they are after this pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Device {
    pub vxlan_index: u32,
    pub underlay_index: u32,
    pub pod_mtu: u32,
}

/// The interface that carries `ip`, with its MTU.
fn underlay(handle: &mut Handle, ip: IpAddr) -> anyhow::Result<(u32, u32)> {
    for link in handle.links()? {
        if link.name == VXLAN_DEVICE {
            continue;
        }
        if handle.addresses(link.index)?.iter().any(|a| a.addr() == ip) {
            return Ok((link.index, link.mtu));
        }
    }
    bail!(
        "no interface in this network namespace has the node's InternalIP {ip} (status.addresses)"
    )
}

pub fn ensure(
    handle: &mut Handle,
    plan: &NodePlan,
    args: &Settings,
) -> anyhow::Result<(Device, Changes)> {
    let mut changes = Changes::default();
    let local_ip = IpAddr::V4(plan.local.internal_ip);
    let (underlay_index, underlay_mtu) = underlay(handle, local_ip)?;
    let mtu = pod_mtu(args.mtu, underlay_mtu);

    let vxlan_index = match handle.link_by_name(VXLAN_DEVICE)? {
        None => {
            changes.added += 1;
            handle
                .create_vxlan(&VxlanSpec {
                    name: VXLAN_DEVICE,
                    vni: args.vxlan_vni,
                    local: Some(local_ip),
                    underlay_index: Some(underlay_index),
                    port: args.vxlan_port,
                    learning: false,
                    mtu: Some(mtu),
                    mac: Some(plan.vtep_mac),
                    df_set: true,
                    up: true,
                })
                .context("create the overlay device")?
        }
        Some(link) => {
            if link.kind.as_deref() != Some("vxlan") {
                bail!(
                    "{VXLAN_DEVICE} exists but is a {:?} device, not vxlan; remove it",
                    link.kind
                );
            }
            if link.mac != Some(plan.vtep_mac) {
                handle.set_mac(link.index, plan.vtep_mac)?;
                changes.updated += 1;
            }
            if link.mtu != mtu {
                handle.set_mtu(link.index, mtu)?;
                changes.updated += 1;
            }
            if !link.up {
                handle.set_up(link.index)?;
                changes.updated += 1;
            }
            link.index
        }
    };

    let present = handle.addresses(vxlan_index)?;
    for want in &plan.vtep_prefixes {
        if !present.contains(want) {
            handle
                .add_address(vxlan_index, *want, AddrFlags { nodad: true })
                .with_context(|| format!("add {want} to {VXLAN_DEVICE}"))?;
            changes.added += 1;
        }
    }
    for have in present {
        let link_local = match have.addr() {
            IpAddr::V6(a) => a.is_unicast_link_local(),
            IpAddr::V4(_) => false,
        };
        if !link_local && !plan.vtep_prefixes.contains(&have) {
            handle.delete_address(vxlan_index, have)?;
            changes.removed += 1;
        }
    }

    for (key, wanted) in [
        ("net/ipv4/ip_forward", true),
        (
            "net/ipv6/conf/all/forwarding",
            plan.local.pod_cidr_v6().is_some(),
        ),
    ] {
        if wanted && weft_netlink::write_sysctl(key, "1")? {
            changes.updated += 1;
        }
    }
    Ok((
        Device {
            vxlan_index,
            underlay_index,
            pod_mtu: mtu,
        },
        changes,
    ))
}
