//! DEL: remove exactly what ADD installed, and its record. Idempotent.
//!
//! The table is only deleted when ADD recorded a fence for this attachment and `CNI_NETNS`
//! still refers to the same namespace (inode and cookie): a reused `/proc/<pid>/ns/net`
//! path never un-fences another pod. Without a record nothing of ours is in the namespace,
//! so it is left alone. DEL with an empty `CNI_NETNS` (containerd's second DEL) only
//! removes the record.

use std::path::Path;

use weft_cni::{Env, NetConf};

use crate::config::GuardConfig;
use crate::error::GuardError;
use crate::fence;
use crate::netns::PodNetns;
use crate::state::Store;

pub fn run(env: &Env, conf: &NetConf) -> Result<Option<String>, GuardError> {
    let config = GuardConfig::for_cleanup(conf)?;
    let (container_id, ifname) = super::attachment(env)?;
    let store = Store::new(config.network_state_dir());
    let record = store.read(&container_id, &ifname);
    if let (Some(netns), Ok(Some(record))) = (env.netns.as_deref(), &record) {
        match PodNetns::open_if_exists(Path::new(netns)) {
            Ok(Some(pod)) => {
                let inside = pod.enter()?;
                let sock = inside.nft_socket()?;
                if inside.identity(&sock)? == record.netns_id {
                    fence::remove(&sock)?;
                }
            }
            // Gone, or no longer a network namespace: nothing of ours is there.
            Ok(None) | Err(GuardError::Netns { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    // An unreadable record cannot name a namespace to clean; dropping it loses nothing.
    store.remove(&container_id, &ifname)?;
    Ok(None)
}
