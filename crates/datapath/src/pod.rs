//! The CNI plugin's side, on the ADD/DEL hot path: a handful of `bpf()` calls on
//! pinned objects and, for the ingress hook, one or two rtnetlink tc requests; no ELF
//! parsing and no program loading.
//!
//! All functions act in the calling thread's network namespace (the node's) and on
//! the host bpffs; the plugin must not enter a mount namespace.

use crate::clsact;
use crate::error::{Error, Result};
use crate::hook::{self, Hook};
use crate::layout::{EndpointValue, MAPS, MAP_ENDPOINTS};
use crate::migrate::PREDECESSORS;
use crate::mode::AttachMode;
use crate::model::{ip_key, EndpointInfo};
use crate::pinned;
use crate::pins::PinLayout;
use crate::programs::Program;
use crate::sys;
use crate::tcx::{LinkChange, ProgRef};
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
    .map_err(|e| Error::bpf("BPF_MAP_UPDATE_ELEM", pins.map_pin(&MAP_ENDPOINTS), e))
}

/// Forgets a pod address. Idempotent: an absent entry, or no datapath pinned at
/// all, is success.
///
/// The address also leaves the endpoint map of an earlier layout if one is still
/// pinned (an agent migrating from it would otherwise copy the pod back).
pub fn remove_endpoint(pin_root: &Path, ip: IpAddr) -> Result<()> {
    let pins = PinLayout::new(pin_root);
    let key = ip_key(ip);
    for pred in PREDECESSORS
        .iter()
        .filter(|p| p.into.name == MAP_ENDPOINTS.name)
    {
        let path = pins.map(pred.pin_name);
        if let Some(old) = sys::obj_get_opt(&path)? {
            let info = sys::map_info(old.as_fd())
                .map_err(|e| Error::bpf("BPF_OBJ_GET_INFO_BY_FD", &path, e))?;
            if info.shape == pred.shape {
                sys::map_delete(old.as_fd(), &key)
                    .map_err(|e| Error::bpf("BPF_MAP_DELETE_ELEM", &path, e))?;
            }
        }
    }
    let map = match pinned::open_map(&pins, &MAP_ENDPOINTS) {
        Ok(map) => map,
        Err(Error::NotPinned { .. }) => return Ok(()),
        Err(e) => return Err(e),
    };
    sys::map_delete(map.as_fd(), &key)
        .map(|_| ())
        .map_err(|e| Error::bpf("BPF_MAP_DELETE_ELEM", pins.map_pin(&MAP_ENDPOINTS), e))
}

/// Attaches the pinned `from_pod` program at ingress of the host-side veth, in the
/// [`AttachMode`] that [`AttachMode::ENV`] names (TCX when the kernel has it, by
/// default). Idempotent for a retried ADD. See [`attach_pod_with_mode`].
pub fn attach_pod(pin_root: &Path, host_ifindex: u32, host_ifname: &str) -> Result<LinkChange> {
    attach_pod_with_mode(pin_root, host_ifindex, host_ifname, AttachMode::from_env()?)
}

/// Attaches the pinned `from_pod` program at ingress of the host-side veth: through
/// a TCX link pinned at `links/pods/<host_ifname>`, or through weft's cls_bpf filter
/// (clsact ingress, pref 1, handle 1). An attachment already on the veth is reused
/// whatever `mode` says, so one interface never carries both; `mode` only chooses
/// for a veth with neither. Idempotent for a retried ADD.
pub fn attach_pod_with_mode(
    pin_root: &Path,
    host_ifindex: u32,
    host_ifname: &str,
    mode: AttachMode,
) -> Result<LinkChange> {
    let pins = PinLayout::new(pin_root);
    let hook = Hook::pod(&pins, host_ifname)?;
    let (prog, info) = pinned::open_program(&pins, Program::FromPod)?;
    let attached = ProgRef {
        fd: prog.as_fd(),
        id: info.id,
    };
    let (change, backend) = hook::ensure(&hook, host_ifindex, attached, mode)?;

    // The agent may have replaced the program between our read of the pin and our
    // attach, and its sweep may have missed our attachment. Re-read the pin; if it
    // moved, move the attachment too, but only if it still runs what we attached,
    // so this can never undo a newer update.
    let (current, current_info) = pinned::open_program(&pins, Program::FromPod)?;
    if current_info.id != info.id {
        let current = ProgRef {
            fd: current.as_fd(),
            id: current_info.id,
        };
        hook::follow_replacement(&hook, host_ifindex, backend, attached, current)?;
    }
    Ok(change)
}

/// Detaches the pod program from the veth, whichever way it is attached: unpins
/// (and detaches) its TCX link and deletes weft's cls_bpf filter. Idempotent:
/// nothing attached is success, a defunct link (veth already deleted) is just
/// unpinned, and a deleted veth took its filter with it.
pub fn detach_pod(pin_root: &Path, host_ifname: &str) -> Result<()> {
    let pins = PinLayout::new(pin_root);
    hook::detach(&Hook::pod(&pins, host_ifname)?)
}

/// CNI CHECK: verifies that each pod address is an endpoint on `host_ifindex` and that
/// the pinned `from_pod` program runs at ingress of that interface, through exactly
/// one of a TCX link pinned for it or weft's cls_bpf filter (direct-action). Returns
/// the first problem found, in words, or `None` when the pod is fully wired.
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
            .map_err(|e| Error::bpf("BPF_MAP_LOOKUP_ELEM", pins.map_pin(&MAP_ENDPOINTS), e))?;
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
    let (_, program) = pinned::open_program(&pins, Program::FromPod)?;
    let hook = Hook::pod(&pins, host_ifname)?;
    let observed = hook::observe(&hook, host_ifindex)?;
    let pin = hook.link_pin.display();
    if let Some((_, info)) = &observed.link {
        if info.ifindex != host_ifindex {
            return Ok(Some(format!(
                "the pod program link at {pin} is attached to ifindex {}, not {host_ifname} ({host_ifindex})",
                info.ifindex
            )));
        }
    }
    let problem = match (
        observed.live_link(host_ifindex, hook.tcx_attach_type()),
        observed.filter(),
    ) {
        (Some(_), Some(_)) => Some(format!(
            "{host_ifname} runs the pod program twice: through the TCX link pinned at {pin} \
             and through cls_bpf filter {:?}",
            hook.filter_name
        )),
        (Some(link), None) if link.prog_id != program.id => Some(format!(
            "the pod program link at {pin} runs program {}, not the pinned from_pod ({})",
            link.prog_id, program.id
        )),
        (None, Some(filter)) if filter.prog_id != Some(program.id) => Some(format!(
            "cls_bpf filter {:?} on {host_ifname} runs program {}, not the pinned from_pod ({})",
            hook.filter_name,
            filter
                .prog_id
                .map_or_else(|| "(none)".to_string(), |id| id.to_string()),
            program.id
        )),
        (None, Some(filter)) if !filter.direct_action => Some(format!(
            "cls_bpf filter {:?} on {host_ifname} is not in direct-action mode",
            hook.filter_name
        )),
        (None, None) => Some(format!(
            "no pod program is attached to {host_ifname}: no link is pinned at {pin} and \
             ingress pref {} holds no cls_bpf filter {:?}",
            clsact::FILTER_PREF,
            hook.filter_name
        )),
        _ => None,
    };
    Ok(problem)
}

/// The host interface names that have a pinned pod link (for GC of leftovers). cls_bpf
/// filters need no GC: they are deleted with their veth.
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
