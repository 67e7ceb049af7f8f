//! STATUS: whether this node can serve ADD: the netconf is valid, the state directory is
//! writable, nftables answers over netlink, and the kubeconfig (when lookups can happen)
//! is readable. Any failure is code 50 naming the reason.

use weft_cni::{CniError, NetConf};
use weft_nft::NftSocket;

use crate::config::GuardConfig;
use crate::kube::{ApiTarget, Auth};
use crate::state::Store;

pub fn run(conf: &NetConf) -> Result<Option<String>, CniError> {
    let unavailable =
        |reason: String| CniError::not_available(format!("weft-guard cannot serve ADD: {reason}"));
    let config = GuardConfig::from_netconf(conf).map_err(|e| unavailable(e.to_string()))?;
    Store::new(config.network_state_dir())
        .check_writable()
        .map_err(|e| unavailable(e.to_string()))?;
    let sock = NftSocket::open().map_err(|e| unavailable(format!("nftables: {e}")))?;
    sock.generation()
        .map_err(|e| unavailable(format!("nftables does not answer: {e}")))?;
    if config.namespaces.allows_lookups() {
        if let Some(path) = &config.kubeconfig {
            let target =
                ApiTarget::from_kubeconfig(path).map_err(|e| unavailable(e.to_string()))?;
            if let Auth::TokenFile(token) = &target.auth {
                std::fs::metadata(token)
                    .map_err(|e| unavailable(format!("token file {}: {e}", token.display())))?;
            }
        }
    }
    Ok(None)
}
