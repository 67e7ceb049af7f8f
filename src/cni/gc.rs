//! GC: release every reservation of this network whose attachment the runtime no longer
//! lists, and remove every host-side leftover (veth, datapath entries) of such attachments.
//! Carries on past individual errors and reports them all at the end.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use weft_cni::{CniError, NetConf};
use weft_ipam::{Owner, Store};
use weft_netlink::Handle;

use super::config::PluginConfig;
use super::errors::{ipam, netlink};
use super::naming::{host_veth_name, parse_alias};

pub fn gc(conf: &NetConf, cfg: &PluginConfig) -> Result<Option<String>, CniError> {
    // No list at all is not an empty list: a runtime that sent none told us nothing, and
    // removing everything on that basis would cut every pod off.
    let Some(valid) = &conf.valid_attachments else {
        return Ok(None);
    };
    let valid: BTreeSet<(String, String)> = valid
        .iter()
        .map(|a| (a.container_id.clone(), a.ifname.clone()))
        .collect();
    let owners: Vec<Owner> = valid
        .iter()
        .map(|(id, ifname)| Owner::new(id, ifname))
        .collect();
    let mut errors: Vec<String> = Vec::new();

    let store = Store::open(&cfg.ipam.data_dir, &cfg.network).map_err(ipam)?;
    let report = store.release_all_except(&owners).map_err(ipam)?;
    errors.extend(report.errors.iter().map(|e| format!("ipam: {e}")));

    let mut host = Handle::new().map_err(|e| netlink("open netlink", e))?;
    // Veths of released attachments (with the addresses to clear from the datapath), plus
    // any veth of this network whose alias names an attachment that is not valid (a
    // leftover whose reservation is already gone).
    let mut stale: BTreeMap<String, Vec<IpAddr>> = BTreeMap::new();
    for (owner, addr) in &report.released {
        stale
            .entry(host_veth_name(&owner.container_id, &owner.ifname))
            .or_default()
            .push(*addr);
    }
    match host.links() {
        Ok(links) => {
            for link in links {
                let Some(alias) = link.alias.as_deref() else {
                    continue;
                };
                let Some((network, id, ifname)) = parse_alias(alias) else {
                    continue;
                };
                if network == cfg.network && !valid.contains(&(id.to_string(), ifname.to_string()))
                {
                    stale.entry(link.name.clone()).or_default();
                }
            }
        }
        Err(e) => errors.push(format!("list links: {e}")),
    }
    for (name, addresses) in &stale {
        if let Some(pin_root) = &cfg.pin_root {
            if let Err(e) = super::datapath::remove_pod(pin_root, name, addresses) {
                errors.push(e.msg);
            }
        }
        if let Err(e) = host.delete_link_by_name(name) {
            errors.push(format!("delete {name}: {e}"));
        }
    }
    if let Some(pin_root) = &cfg.pin_root {
        if let Err(e) = super::datapath::remove_orphan_links(pin_root, &mut host) {
            errors.push(e.msg);
        }
    }

    if errors.is_empty() {
        Ok(None)
    } else {
        Err(
            CniError::io(format!("GC finished with {} error(s)", errors.len()))
                .with_details(errors.join("; ")),
        )
    }
}
