//! The `weft` CNI plugin: pod interfaces, addresses from node-local IPAM, routes, and the
//! per-pod datapath entries. One file per command; what they share (naming, the pieces of an
//! attachment, config) in its own module. See docs/cni.md for the netconf.

mod add;
mod attachment;
mod check;
pub mod config;
mod datapath;
mod del;
mod errors;
mod gc;
pub mod naming;
mod status;
mod unlink;

use std::net::IpAddr;

use weft_cni::{CniError, Command, Env, NetConf};

use config::PluginConfig;

/// Handles one ADD, DEL, CHECK, STATUS or GC for plugin type `weft`.
pub fn handle(env: &Env, conf: &NetConf) -> Result<Option<String>, CniError> {
    let cfg = PluginConfig::from_netconf(conf)?;
    match env.command {
        Command::Add => add::add(conf, &cfg, attachment_of(env)?, env),
        Command::Del => del::del(&cfg, attachment_of(env)?),
        Command::Check => check::check(conf, &cfg, attachment_of(env)?),
        Command::Status => status::status(&cfg),
        Command::Gc => gc::gc(conf, &cfg),
        Command::Version => unreachable_version(),
    }
}

fn attachment_of(env: &Env) -> Result<weft_cni::Attachment<'_>, CniError> {
    env.attachment()
        .ok_or_else(|| CniError::invalid_environment("CNI_CONTAINERID and CNI_IFNAME are required"))
}

/// VERSION is answered before any config is read; reaching here is a dispatch bug, reported
/// as such rather than panicking.
fn unreachable_version() -> Result<Option<String>, CniError> {
    Err(CniError::internal(
        "VERSION reached the weft plugin handler",
    ))
}

/// Addresses the runtime asks for: `CNI_ARGS` `IP=` (podman `--ip`) and runtimeConfig `ips`.
fn requested_ips(conf: &NetConf, env: &Env) -> Result<Vec<IpAddr>, CniError> {
    let mut out: Vec<IpAddr> = env.args.ips().iter().map(|r| r.addr).collect();
    out.extend(conf.runtime_config.requested_ips()?.iter().map(|r| r.addr));
    out.sort();
    out.dedup();
    Ok(out)
}
