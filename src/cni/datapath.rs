//! The plugin's part of the eBPF datapath, when the netconf enables it (`datapath.pinRoot`):
//! record the pod in the pinned endpoint map and attach the pod program to its host veth.
//! Pods therefore get their fast path from the plugin alone, with no agent running.

use std::net::IpAddr;
use std::path::Path;

use weft_cni::CniError;
use weft_datapath::pod;
use weft_datapath::EndpointInfo;

fn dp_error(context: &str, e: weft_datapath::Error) -> CniError {
    CniError::internal(format!("datapath: {context}: {e}"))
}

/// Order matters: the endpoint entries exist before the program sees the pod's first packet,
/// or the anti-spoofing check would drop it.
pub fn add_pod(
    pin_root: &Path,
    mode: weft_datapath::AttachMode,
    host_index: u32,
    host_name: &str,
    addresses: &[IpAddr],
    pod_mac: [u8; 6],
) -> Result<(), CniError> {
    for &addr in addresses {
        let info = EndpointInfo {
            ifindex: host_index,
            mac: pod_mac,
        };
        pod::add_endpoint(pin_root, addr, info)
            .map_err(|e| dp_error(&format!("record endpoint {addr}"), e))?;
    }
    pod::attach_pod_with_mode(pin_root, host_index, host_name, mode)
        .map_err(|e| dp_error("attach pod program", e))?;
    Ok(())
}

/// Idempotent: what is already gone is success. Detach first so no packet from the veth is
/// judged against a half-removed endpoint.
pub fn remove_pod(pin_root: &Path, host_name: &str, addresses: &[IpAddr]) -> Result<(), CniError> {
    pod::detach_pod(pin_root, host_name).map_err(|e| dp_error("detach pod program", e))?;
    for &addr in addresses {
        pod::remove_endpoint(pin_root, addr)
            .map_err(|e| dp_error(&format!("remove endpoint {addr}"), e))?;
    }
    Ok(())
}

/// STATUS: every map and program is pinned with the layout this build expects.
pub fn ready(pin_root: &Path) -> Result<(), CniError> {
    pod::ensure_ready(pin_root).map_err(|e| {
        CniError::not_available(format!(
            "the weft datapath is not loaded under {}: {e}",
            pin_root.display()
        ))
    })
}

/// CHECK: the pod's addresses are endpoints on its veth and its program link is attached.
pub fn check_pod(
    pin_root: &Path,
    host_name: &str,
    host_index: u32,
    addresses: &[IpAddr],
) -> Result<(), CniError> {
    match pod::verify_pod(pin_root, host_name, host_index, addresses) {
        Ok(None) => Ok(()),
        Ok(Some(problem)) => Err(CniError::check_failed(format!("datapath: {problem}"))),
        Err(e) => Err(dp_error("verify pod", e)),
    }
}

/// GC: unpin pod links whose host veth no longer exists (a veth deleted behind our back
/// leaves a defunct link pinned).
pub fn remove_orphan_links(
    pin_root: &Path,
    host: &mut weft_netlink::Handle,
) -> Result<(), CniError> {
    let names = pod::pinned_pod_links(pin_root).map_err(|e| dp_error("list pod links", e))?;
    for name in names {
        let exists = host
            .link_by_name(&name)
            .map_err(|e| CniError::internal(format!("datapath: look up {name}: {e}")))?
            .is_some();
        if !exists {
            pod::detach_pod(pin_root, &name)
                .map_err(|e| dp_error(&format!("unpin link of {name}"), e))?;
        }
    }
    Ok(())
}
