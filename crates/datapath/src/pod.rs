//! The CNI plugin's side, on the ADD/DEL hot path: a handful of `bpf()` calls on
//! pinned objects, no ELF parsing and no program loading.
//!
//! All functions act in the calling thread's network namespace (the node's) and on
//! the host bpffs; the plugin must not enter a mount namespace.

use crate::error::{Error, Result};
use crate::layout::{EndpointValue, MAPS, MAP_ENDPOINTS};
use crate::model::{ip_key, EndpointInfo};
use crate::pinned;
use crate::pins::PinLayout;
use crate::programs::Program;
use crate::sys;
use crate::tcx::{self, LinkChange, ProgRef};
use std::net::IpAddr;
use std::os::fd::AsFd;
use std::path::Path;

/// Succeeds when every map and program of the datapath is pinned under `pin_root`
/// with the layout this build expects (the plugin's STATUS).
pub fn ensure_ready(pin_root: &Path) -> Result<()> {
    let pins = PinLayout::new(pin_root);
    for spec in &MAPS {
        pinned::open_map(&pins, spec)?;
    }
    for program in Program::ALL {
        pinned::open_program(&pins, program)?;
    }
    Ok(())
}

/// Records a pod address, so the programs deliver to it and accept it as a source
/// on its veth only. Replaces an existing entry for the same address.
pub fn add_endpoint(pin_root: &Path, ip: IpAddr, info: EndpointInfo) -> Result<()> {
    let pins = PinLayout::new(pin_root);
    let map = pinned::open_map(&pins, &MAP_ENDPOINTS)?;
    sys::map_update(
        map.as_fd(),
        &ip_key(ip),
        &EndpointValue::from(info),
        sys::BPF_ANY,
    )
    .map_err(|e| Error::bpf("BPF_MAP_UPDATE_ELEM", pins.map(MAP_ENDPOINTS.name), e))
}

/// Forgets a pod address. Idempotent: an absent entry, or no datapath pinned at
/// all, is success.
pub fn remove_endpoint(pin_root: &Path, ip: IpAddr) -> Result<()> {
    let pins = PinLayout::new(pin_root);
    let map = match pinned::open_map(&pins, &MAP_ENDPOINTS) {
        Ok(map) => map,
        Err(Error::NotPinned { .. }) => return Ok(()),
        Err(e) => return Err(e),
    };
    sys::map_delete(map.as_fd(), &ip_key(ip))
        .map(|_| ())
        .map_err(|e| Error::bpf("BPF_MAP_DELETE_ELEM", pins.map(MAP_ENDPOINTS.name), e))
}

/// Attaches the pinned `from_pod` program at TCX ingress of the host-side veth
/// through a link pinned at `links/pods/<host_ifname>`. Idempotent for a retried ADD.
pub fn attach_pod(pin_root: &Path, host_ifindex: u32, host_ifname: &str) -> Result<LinkChange> {
    let pins = PinLayout::new(pin_root);
    let pin = pins.pod_link(host_ifname)?;
    let (prog, info) = pinned::open_program(&pins, Program::FromPod)?;
    let change = tcx::ensure_ingress_link(
        &pin,
        host_ifindex,
        ProgRef {
            fd: prog.as_fd(),
            id: info.id,
        },
    )?;

    // The agent may have replaced the program between our read of the pin and the
    // pinning of our link, and its sweep may have missed the link. Re-read the pin;
    // if it moved, move the link too, but only if it still runs what we attached
    // (BPF_F_REPLACE), so this can never undo a newer update.
    let (current, current_info) = pinned::open_program(&pins, Program::FromPod)?;
    if current_info.id != info.id {
        let (link, _) =
            tcx::open_link(&pin)?.ok_or_else(|| Error::NotPinned { path: pin.clone() })?;
        match sys::link_update(link.as_fd(), current.as_fd(), Some(prog.as_fd())) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {} // already moved on
            Err(e) => return Err(Error::bpf("BPF_LINK_UPDATE", &pin, e)),
        }
    }
    Ok(change)
}

/// Detaches the pod's link and removes its pin. Idempotent: nothing pinned is
/// success, and a defunct link (veth already deleted) is just unpinned.
pub fn detach_pod(pin_root: &Path, host_ifname: &str) -> Result<()> {
    let pins = PinLayout::new(pin_root);
    tcx::detach_link(&pins.pod_link(host_ifname)?)
}

/// CNI CHECK: verifies that each pod address is an endpoint on `host_ifindex` and that
/// the pod's pinned link is attached to that interface. Returns the first problem found,
/// in words, or `None` when the pod is fully wired.
pub fn verify_pod(
    pin_root: &Path,
    host_ifname: &str,
    host_ifindex: u32,
    addresses: &[IpAddr],
) -> Result<Option<String>> {
    let pins = PinLayout::new(pin_root);
    let map = pinned::open_map(&pins, &MAP_ENDPOINTS)?;
    for &ip in addresses {
        let value: Option<EndpointValue> = sys::map_lookup(map.as_fd(), &ip_key(ip))
            .map_err(|e| Error::bpf("BPF_MAP_LOOKUP_ELEM", pins.map(MAP_ENDPOINTS.name), e))?;
        match value {
            None => return Ok(Some(format!("endpoint {ip} is missing from the datapath"))),
            Some(v) if v.ifindex != host_ifindex => {
                return Ok(Some(format!(
                    "endpoint {ip} points at ifindex {}, not {host_ifname} ({host_ifindex})",
                    v.ifindex
                )))
            }
            Some(_) => {}
        }
    }
    let pin = pins.pod_link(host_ifname)?;
    match tcx::open_link(&pin)? {
        None => Ok(Some(format!("no pod program link is pinned at {}", pin.display()))),
        Some((_, info)) if info.ifindex != host_ifindex => Ok(Some(format!(
            "the pod program link at {} is attached to ifindex {}, not {host_ifname} ({host_ifindex})",
            pin.display(),
            info.ifindex
        ))),
        Some(_) => Ok(None),
    }
}

/// The host interface names that have a pinned pod link (for GC of leftovers).
pub fn pinned_pod_links(pin_root: &Path) -> Result<Vec<String>> {
    let dir = PinLayout::new(pin_root).pod_links_dir();
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::bpf("read_dir", &dir, e)),
    };
    Ok(entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .map(|name| crate::pins::ifname_of_link_pin(&name))
        .collect())
}
