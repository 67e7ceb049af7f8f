//! The `weft` CNI plugin: pod interfaces, addresses from node-local IPAM, routes, and the
//! per-pod datapath entries.

use weft_cni::{CniError, Env, NetConf};

/// Handles one ADD, DEL, CHECK, STATUS or GC for plugin type `weft`.
pub fn handle(env: &Env, conf: &NetConf) -> Result<Option<String>, CniError> {
    let _ = (env, conf);
    Err(CniError::internal("not implemented yet"))
}
