//! CNI entry for plugin type `weft-guard`.

use weft_cni::{CniError, Env, NetConf};

/// Handles one ADD, DEL, CHECK, STATUS or GC; returns what to print on stdout.
pub fn handle(env: &Env, conf: &NetConf) -> Result<Option<String>, CniError> {
    let _ = (env, conf);
    Err(CniError::internal("weft-guard is not implemented yet"))
}
