//! STATUS: succeed exactly when an ADD would: the config is valid (it parsed to get here),
//! the IPAM store is writable with a free address in every range, and, when the eBPF
//! datapath is enabled, the agent has loaded it. Otherwise code 50 with the reason.

use weft_cni::CniError;
use weft_ipam::Store;

use super::config::PluginConfig;

pub fn status(cfg: &PluginConfig) -> Result<Option<String>, CniError> {
    let not_available = |e: weft_ipam::StoreError| CniError::not_available(format!("ipam: {e}"));
    let store = Store::open(&cfg.ipam.data_dir, &cfg.network).map_err(not_available)?;
    store.check_ready(&cfg.ipam.ranges).map_err(not_available)?;
    if let Some(pin_root) = &cfg.pin_root {
        super::datapath::ready(pin_root)?;
    }
    Ok(None)
}
