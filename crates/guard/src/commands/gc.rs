//! GC: remove the fences and records of attachments the runtime no longer knows.
//!
//! Without a `cni.dev/valid-attachments` list nothing is removed (an absent list is not an
//! empty one). A fence is only deleted when its recorded namespace path still refers to
//! the same namespace; errors are collected and reported after every record was tried.

use std::path::Path;

use weft_cni::NetConf;

use crate::config::GuardConfig;
use crate::error::GuardError;
use crate::fence;
use crate::netns::PodNetns;
use crate::state::{self, Listed, Store};

pub fn run(conf: &NetConf) -> Result<Option<String>, GuardError> {
    let config = GuardConfig::for_cleanup(conf)?;
    if conf.valid_attachments.is_none() {
        return Ok(None);
    }
    let store = Store::new(config.network_state_dir());
    let mut errors = Vec::new();
    for listed in store.list()? {
        if conf.is_valid_attachment(&listed.container_id, &listed.ifname) == Some(true) {
            continue;
        }
        match collect(&listed) {
            Ok(()) => {
                if let Err(e) = state::remove_if_present(&listed.path) {
                    errors.push(e.to_string());
                }
            }
            // The record stays, so the next GC tries again.
            Err(e) => errors.push(format!("{}:{}: {e}", listed.container_id, listed.ifname)),
        }
    }
    if errors.is_empty() {
        Ok(None)
    } else {
        Err(GuardError::Other(format!(
            "GC could not clean {} attachment(s): {}",
            errors.len(),
            errors.join("; ")
        )))
    }
}

/// Removes the fence of one stale attachment when its namespace is still the recorded one.
fn collect(listed: &Listed) -> Result<(), GuardError> {
    let Ok(record) = &listed.record else {
        // Unreadable or a scratch file: it names no namespace we could clean.
        return Ok(());
    };
    let pod = match PodNetns::open_if_exists(Path::new(&record.netns)) {
        Ok(Some(pod)) => pod,
        // Gone, or the path is now something other than a namespace: not ours any more.
        Ok(None) | Err(GuardError::Netns { .. }) => return Ok(()),
        Err(e) => return Err(e),
    };
    let inside = pod.enter()?;
    let sock = inside.nft_socket()?;
    if inside.identity(&sock)? == record.netns_id {
        fence::remove(&sock)?;
    }
    Ok(())
}
