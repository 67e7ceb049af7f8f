//! ADD: reserve addresses, create the veth pair with the pod end directly in the pod's
//! namespace, configure both ends, record the pod in the datapath, return the result.
//! Any failure undoes exactly what this invocation created.

use std::net::IpAddr;

use weft_cni::{Attachment, CniError, NetConf};
use weft_ipam::{Owner, Store};
use weft_netlink::{Handle, VethSpec};

use super::attachment::{
    self, configure_host, configure_pod, enable_forwarding, open_netns, Configured,
};
use super::config::{PluginConfig, HOST_VETH_MAC};
use super::errors::{ipam, netlink};
use super::naming::{host_veth_name, veth_alias, MAX_ALIAS_LEN};
use super::{datapath, requested_ips};

pub fn add(
    conf: &NetConf,
    cfg: &PluginConfig,
    att: Attachment<'_>,
    env: &weft_cni::Env,
) -> Result<Option<String>, CniError> {
    let netns_path = att
        .netns
        .ok_or_else(|| CniError::invalid_environment("CNI_NETNS is required for ADD"))?;
    let netns = open_netns(netns_path)?;
    let alias = veth_alias(&cfg.network, att.container_id, att.ifname);
    if alias.len() > MAX_ALIAS_LEN {
        // Refused before anything exists: the alias is how GC recognises the veth.
        return Err(CniError::invalid_config(format!(
            "name: network name, container ID and ifname together are {} bytes, too long for the host veth's alias (at most {MAX_ALIAS_LEN}); use a shorter network name",
            alias.len()
        )));
    }
    let owner = Owner::new(att.container_id, att.ifname);
    let store = Store::open(&cfg.ipam.data_dir, &cfg.network).map_err(ipam)?;

    // A repeated ADD finds the addresses it already holds; if it then fails (the interface
    // exists), those addresses belong to the earlier, working attachment and must stay.
    let held_before = store.reserved_by(&owner).map_err(ipam)?;
    let requested = requested_ips(conf, env)?;
    let allocations = if requested.is_empty() {
        store.allocate(&owner, &cfg.ipam.ranges)
    } else {
        store.allocate_specific(&owner, &cfg.ipam.ranges, &requested)
    }
    .map_err(ipam)?;
    let addresses: Vec<IpAddr> = allocations.iter().map(|a| a.address.addr()).collect();

    let host_name = host_veth_name(att.container_id, att.ifname);
    let mut created_veth = false;
    let outcome = (|| -> Result<Configured, CniError> {
        let mut host = Handle::new().map_err(|e| netlink("open netlink", e))?;
        let host_index = host
            .create_veth(&VethSpec {
                name: &host_name,
                mac: Some(HOST_VETH_MAC),
                mtu: Some(cfg.mtu),
                alias: Some(&alias),
                up: true,
                peer_name: att.ifname,
                peer_mac: None,
                peer_netns: Some(&netns),
            })
            .map_err(|e| match e {
                weft_netlink::Error::Exists { .. } => CniError::internal(format!(
                    "interface already exists: {e} (is container {} already attached as {}?)",
                    att.container_id, att.ifname
                )),
                e => netlink("create veth pair", e),
            })?;
        created_veth = true;
        let mut pod = Handle::new_in(&netns).map_err(|e| netlink("open netlink in pod", e))?;
        let (_, pod_mac) = configure_pod(&mut pod, att.ifname, &addresses, cfg)?;
        configure_host(&mut host, host_index, &addresses, pod_mac)?;
        enable_forwarding(&addresses)?;
        if let Some(pin_root) = &cfg.pin_root {
            datapath::add_pod(
                pin_root,
                cfg.attach_mode,
                host_index,
                &host_name,
                &addresses,
                pod_mac,
            )?;
        }
        Ok(Configured {
            host_name: host_name.clone(),
            pod_mac,
            addresses: addresses.clone(),
        })
    })();

    match outcome {
        Ok(configured) => {
            let result = attachment::result(
                conf.version,
                cfg,
                &conf.dns,
                &configured,
                att.ifname,
                netns_path,
            );
            Ok(Some(result.to_json(conf.version)))
        }
        Err(error) => {
            rollback(
                cfg,
                &store,
                &owner,
                &host_name,
                &addresses,
                created_veth,
                held_before.is_empty(),
            );
            Err(error)
        }
    }
}

/// Best effort: the original error is what the runtime needs to see.
fn rollback(
    cfg: &PluginConfig,
    store: &Store,
    owner: &Owner,
    host_name: &str,
    addresses: &[IpAddr],
    created_veth: bool,
    release: bool,
) {
    if created_veth {
        if let Some(pin_root) = &cfg.pin_root {
            let _ = datapath::remove_pod(pin_root, host_name, addresses);
        }
        if let Ok(mut host) = Handle::new() {
            // Deleting the host end removes the pod end with it.
            let _ = host.delete_link_by_name(host_name);
        }
    }
    if release {
        let _ = store.release(owner);
    }
}
