//! CHECK: verify that what ADD reported in prevResult still holds: the interfaces, the
//! addresses and routes in the pod, the host veth and routes, the reservations and the
//! datapath entries. The error names the first thing missing.

use std::net::IpAddr;

use weft_cni::{Attachment, CniError, NetConf};
use weft_ipam::{Owner, Store};
use weft_netlink::{Handle, IpFamily};

use super::attachment::{host_prefix, open_netns};
use super::config::PluginConfig;
use super::errors::{ipam, netlink};
use super::naming::host_veth_name;

pub fn check(
    conf: &NetConf,
    cfg: &PluginConfig,
    att: Attachment<'_>,
) -> Result<Option<String>, CniError> {
    let prev = conf
        .prev_result
        .as_ref()
        .ok_or_else(|| CniError::invalid_config("prevResult: CHECK needs the result of ADD"))?;
    let netns_path = att
        .netns
        .ok_or_else(|| CniError::invalid_environment("CNI_NETNS is required for CHECK"))?;
    let netns = open_netns(netns_path)?;
    let failed = CniError::check_failed;

    // The pod interface the result names: ours is the one in this sandbox with CNI_IFNAME.
    let pod_index_in_result = prev
        .interfaces
        .iter()
        .position(|i| i.name == att.ifname && i.sandbox.is_some())
        .ok_or_else(|| {
            failed(format!(
                "prevResult lists no interface {} in a sandbox",
                att.ifname
            ))
        })?;
    let mut pod = Handle::new_in(&netns).map_err(|e| netlink("open netlink in pod", e))?;
    let link = pod
        .link_by_name(att.ifname)
        .map_err(|e| netlink("find pod interface", e))?
        .ok_or_else(|| {
            failed(format!(
                "interface {} is missing in {netns_path}",
                att.ifname
            ))
        })?;
    if !link.up {
        return Err(failed(format!(
            "interface {} in {netns_path} is down",
            att.ifname
        )));
    }
    if let Some(mac) = &prev.interfaces[pod_index_in_result].mac {
        let actual = link
            .mac
            .map(|m| weft_netlink::mac_to_string(&m))
            .unwrap_or_default();
        if !actual.eq_ignore_ascii_case(mac) {
            return Err(failed(format!(
                "interface {} has MAC {actual}, prevResult says {mac}",
                att.ifname
            )));
        }
    }
    let configured = pod
        .addresses(link.index)
        .map_err(|e| netlink("list pod addresses", e))?;
    let mut addresses: Vec<IpAddr> = Vec::new();
    for ip in prev
        .ips
        .iter()
        .filter(|ip| ip.interface.is_none_or(|i| i == pod_index_in_result))
    {
        if !configured.contains(&ip.address) {
            return Err(failed(format!(
                "address {} is missing on {} in {netns_path}",
                ip.address, att.ifname
            )));
        }
        addresses.push(ip.address.addr());
    }
    for family in [IpFamily::V4, IpFamily::V6] {
        let wanted: Vec<_> = prev
            .routes
            .iter()
            .filter(|r| (family == IpFamily::V4) == r.dst.addr().is_ipv4())
            .collect();
        if wanted.is_empty() {
            continue;
        }
        let routes = pod
            .routes(family)
            .map_err(|e| netlink("list pod routes", e))?;
        for route in wanted {
            let present = routes
                .iter()
                .any(|r| r.dst == route.dst && (route.gw.is_none() || r.gateway == route.gw));
            if !present {
                let via = route.gw.map(|g| format!(" via {g}")).unwrap_or_default();
                return Err(failed(format!(
                    "route {}{via} is missing in {netns_path}",
                    route.dst
                )));
            }
        }
    }

    let host_name = host_veth_name(att.container_id, att.ifname);
    let mut host = Handle::new().map_err(|e| netlink("open netlink", e))?;
    let host_link = host
        .link_by_name(&host_name)
        .map_err(|e| netlink("find host veth", e))?
        .ok_or_else(|| failed(format!("host veth {host_name} is missing")))?;
    if !host_link.up {
        return Err(failed(format!("host veth {host_name} is down")));
    }
    for family in [IpFamily::V4, IpFamily::V6] {
        let mine: Vec<_> = addresses
            .iter()
            .filter(|a| a.is_ipv4() == (family == IpFamily::V4))
            .collect();
        if mine.is_empty() {
            continue;
        }
        let routes = host
            .routes(family)
            .map_err(|e| netlink("list host routes", e))?;
        for addr in mine {
            let dst = host_prefix(*addr);
            if !routes
                .iter()
                .any(|r| r.dst == dst && r.oif == Some(host_link.index))
            {
                return Err(failed(format!(
                    "host route {dst} dev {host_name} is missing"
                )));
            }
        }
    }

    let store = Store::open(&cfg.ipam.data_dir, &cfg.network).map_err(ipam)?;
    let mut held = store
        .reserved_by(&Owner::new(att.container_id, att.ifname))
        .map_err(ipam)?;
    held.sort();
    addresses.sort();
    if held != addresses {
        return Err(failed(format!(
            "IPAM holds {held:?} for this attachment, prevResult says {addresses:?}"
        )));
    }

    if let Some(pin_root) = &cfg.pin_root {
        super::datapath::check_pod(pin_root, &host_name, host_link.index, &addresses)?;
    }
    Ok(None)
}
