//! DEL: remove the pod's datapath entries and veth, then release its addresses.
//! Idempotent and best effort: an empty or vanished netns, a missing veth, a repeated call
//! or a missing prevResult all succeed (containerd sends DEL twice, the second time without
//! a netns).

use weft_cni::{Attachment, CniError};
use weft_ipam::{Owner, Store};
use weft_netlink::Handle;

use super::config::PluginConfig;
use super::datapath;
use super::errors::{ipam, netlink};
use super::naming::host_veth_name;

pub fn del(cfg: &PluginConfig, att: Attachment<'_>) -> Result<Option<String>, CniError> {
    let owner = Owner::new(att.container_id, att.ifname);
    let store = Store::open(&cfg.ipam.data_dir, &cfg.network).map_err(ipam)?;
    let addresses = store.reserved_by(&owner).map_err(ipam)?;
    let host_name = host_veth_name(att.container_id, att.ifname);

    if let Some(pin_root) = &cfg.pin_root {
        datapath::remove_pod(pin_root, &host_name, &addresses)?;
    }
    // The host end is in the node's namespace whatever happened to the pod's; deleting it
    // removes the pod end too. Only a real failure here keeps the addresses: releasing them
    // while the interface lives would let another pod get an address still in use.
    let mut host = Handle::new().map_err(|e| netlink("open netlink", e))?;
    super::unlink::delete_link(&mut host, &host_name)?;
    store.release(&owner).map_err(ipam)?;
    Ok(None)
}
