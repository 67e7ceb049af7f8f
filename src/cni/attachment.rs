//! The pieces of one pod attachment on the node and in the pod, shared by ADD (which creates
//! them), CHECK (which verifies them) and DEL/GC (which remove them).

use std::net::IpAddr;

use ipnet::IpNet;
use weft_cni::{CniError, CniResult, Interface, IpConfig, Route, Version};
use weft_netlink::{AddrFlags, Handle, Mac, Netns, RouteSpec, Scope};

use super::config::{PluginConfig, HOST_VETH_MAC};
use super::errors::netlink;

/// What ADD configured, enough to build the result.
pub struct Configured {
    pub host_name: String,
    pub pod_mac: Mac,
    pub addresses: Vec<IpAddr>,
}

/// The address as configured on the pod's interface: a host route of its own (/32, /128).
/// Every packet leaves through the gateway, so the datapath sees all pod traffic.
pub fn host_prefix(addr: IpAddr) -> IpNet {
    match addr {
        IpAddr::V4(a) => IpNet::V4(ipnet::Ipv4Net::new(a, 32).expect("32 is a valid IPv4 prefix")),
        IpAddr::V6(a) => {
            IpNet::V6(ipnet::Ipv6Net::new(a, 128).expect("128 is a valid IPv6 prefix"))
        }
    }
}

pub fn default_route(addr: IpAddr) -> IpNet {
    match addr {
        IpAddr::V4(_) => "0.0.0.0/0".parse().expect("valid"),
        IpAddr::V6(_) => "::/0".parse().expect("valid"),
    }
}

/// Inside the pod: bring the interface up, add the addresses, a static neighbour entry for
/// each family's link-local gateway and a default route through it.
pub fn configure_pod(
    pod: &mut Handle,
    ifname: &str,
    addresses: &[IpAddr],
    cfg: &PluginConfig,
) -> Result<(u32, Mac), CniError> {
    let link = pod
        .link_by_name(ifname)
        .map_err(|e| netlink("find pod interface", e))?
        .ok_or_else(|| {
            CniError::internal(format!(
                "pod interface {ifname} vanished right after creation"
            ))
        })?;
    let mac = link.mac.unwrap_or_default();
    pod.set_up(link.index)
        .map_err(|e| netlink("bring pod interface up", e))?;
    for &addr in addresses {
        // nodad: the address is ours by reservation, so waiting a second for duplicate
        // detection would only delay the pod.
        pod.add_address(link.index, host_prefix(addr), AddrFlags { nodad: true })
            .map_err(|e| netlink("add pod address", e))?;
    }
    for family_addr in first_of_each_family(addresses) {
        let gateway = cfg.gateway_for(family_addr);
        pod.add_neighbour(link.index, gateway, HOST_VETH_MAC, true)
            .map_err(|e| netlink("add gateway neighbour in pod", e))?;
        pod.add_route(&RouteSpec {
            gateway: Some(gateway),
            oif: Some(link.index),
            onlink: true,
            ..RouteSpec::new(default_route(family_addr))
        })
        .map_err(|e| netlink("add pod default route", e))?;
    }
    Ok((link.index, mac))
}

/// On the node: a host route and a static neighbour entry per pod address, so the node
/// reaches the pod without ARP or neighbour discovery on the veth.
pub fn configure_host(
    host: &mut Handle,
    host_index: u32,
    addresses: &[IpAddr],
    pod_mac: Mac,
) -> Result<(), CniError> {
    for &addr in addresses {
        // add, not replace: a route another network already owns is a conflict to report,
        // never something to take over silently.
        host.add_route(&RouteSpec {
            oif: Some(host_index),
            scope: Scope::Link,
            ..RouteSpec::new(host_prefix(addr))
        })
        .map_err(|e| netlink("add host route to pod", e))?;
        host.add_neighbour(host_index, addr, pod_mac, true)
            .map_err(|e| netlink("add pod neighbour on host", e))?;
    }
    Ok(())
}

/// The node must forward between pods (and out of the node) for each family in use.
pub fn enable_forwarding(addresses: &[IpAddr]) -> Result<(), CniError> {
    let sysctl = |key: &str| {
        weft_netlink::write_sysctl(key, "1").map_err(|e| netlink(&format!("enable {key}"), e))
    };
    if addresses.iter().any(IpAddr::is_ipv4) {
        sysctl("net/ipv4/ip_forward")?;
    }
    if addresses.iter().any(IpAddr::is_ipv6) {
        sysctl("net/ipv6/conf/all/forwarding")?;
    }
    Ok(())
}

pub fn first_of_each_family(addresses: &[IpAddr]) -> Vec<IpAddr> {
    let mut out = Vec::new();
    if let Some(v4) = addresses.iter().find(|a| a.is_ipv4()) {
        out.push(*v4);
    }
    if let Some(v6) = addresses.iter().find(|a| a.is_ipv6()) {
        out.push(*v6);
    }
    out
}

/// The ADD result: the host veth, the pod interface, one address per family with the
/// link-local gateway, and the default routes.
pub fn result(
    version: Version,
    cfg: &PluginConfig,
    conf_dns: &weft_cni::Dns,
    configured: &Configured,
    ifname: &str,
    netns: &str,
) -> CniResult {
    let mut result = CniResult::new(version);
    result.interfaces.push(Interface {
        name: configured.host_name.clone(),
        mac: Some(weft_netlink::mac_to_string(&HOST_VETH_MAC)),
        mtu: Some(cfg.mtu),
        ..Interface::default()
    });
    result.interfaces.push(Interface {
        name: ifname.to_string(),
        mac: Some(weft_netlink::mac_to_string(&configured.pod_mac)),
        mtu: Some(cfg.mtu),
        sandbox: Some(netns.to_string()),
        ..Interface::default()
    });
    for &addr in &configured.addresses {
        result.ips.push(IpConfig {
            address: host_prefix(addr),
            gateway: Some(cfg.gateway_for(addr)),
            interface: Some(1),
        });
    }
    for addr in first_of_each_family(&configured.addresses) {
        result.routes.push(Route {
            gw: Some(cfg.gateway_for(addr)),
            ..Route::to(default_route(addr))
        });
    }
    result.dns = conf_dns.clone();
    result
}

/// Opens the pod's network namespace, mapping a bad path to the spec's code for a bad
/// environment (the runtime gave us `CNI_NETNS`).
pub fn open_netns(path: &str) -> Result<Netns, CniError> {
    Netns::open(path).map_err(|e| CniError::invalid_environment(format!("CNI_NETNS {path:?}: {e}")))
}
