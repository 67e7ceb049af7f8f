//! The guard's BPF LSM programs (`bpf/guard_lsm.c`, embedded by `weft-datapath`) and the
//! Rust mirror of their map (`bpf/include/weft_guard_maps.h`).
//!
//! The programs refuse, for the network namespaces in `weft_guard_fenced` and every task
//! that is neither the proxy UID nor a node administrator, every socket that could go around
//! the fences (AF_PACKET, AF_XDP, raw IP, and any family but UNIX, NETLINK and ordinary
//! INET/INET6), its use when it exists already, CAP_NET_ADMIN and CAP_NET_RAW, and becoming
//! the proxy UID. This build does not attach them: the kernel it is tested on lists the BPF
//! LSM but refuses every trampoline program (EPERM), so nothing here could be proven. What
//! it does is [`probe_load`]: load (never attach) each program, so `weft status` can say
//! whether a node's kernel would run them, and the layout test keeps C and Rust in step.

use std::mem::{offset_of, size_of};

use aya::programs::Lsm;
use aya::{Btf, EbpfLoader};

/// `WEFT_GUARD_MAX_FENCED`.
pub const MAX_FENCED: u32 = 16384;
/// The map's name.
pub const MAP_FENCED: &str = "weft_guard_fenced";
/// `BPF_MAP_TYPE_HASH`.
pub const MAP_TYPE_HASH: u32 = 1;

/// `struct weft_guard_netns`: the key, a network namespace cookie.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetnsKey {
    pub cookie: u64,
}

/// `struct weft_guard_fence`: the value, what the fence of that namespace exempts.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FenceValue {
    pub proxy_uid: u32,
    pub flags: u32,
}

// SAFETY: plain repr(C) integers without padding, valid for every bit pattern.
unsafe impl aya::Pod for NetnsKey {}
// SAFETY: as above.
unsafe impl aya::Pod for FenceValue {}

/// A mirrored struct: C name, size, and (field, offset, size).
pub type StructLayout = (&'static str, usize, &'static [(&'static str, usize, usize)]);

/// The structs of `weft_guard_maps.h` as the Rust mirrors lay them out.
pub const STRUCTS: &[StructLayout] = &[
    (
        "weft_guard_netns",
        size_of::<NetnsKey>(),
        &[("cookie", offset_of!(NetnsKey, cookie), size_of::<u64>())],
    ),
    (
        "weft_guard_fence",
        size_of::<FenceValue>(),
        &[
            (
                "proxy_uid",
                offset_of!(FenceValue, proxy_uid),
                size_of::<u32>(),
            ),
            ("flags", offset_of!(FenceValue, flags), size_of::<u32>()),
        ],
    ),
];

/// Each program and the LSM hook it attaches to.
pub const PROGRAMS: [(&str, &str); 6] = [
    ("wg_sock_create", "socket_create"),
    ("wg_sock_sendmsg", "socket_sendmsg"),
    ("wg_sock_connect", "socket_connect"),
    ("wg_capable", "capable"),
    ("wg_setuid", "task_fix_setuid"),
    ("wg_exec_setuid", "bprm_creds_from_file"),
];

/// Loads every program against the kernel's BTF without attaching any (and pinning
/// nothing: the map and programs go away with the returned value). `Err` names the first
/// program the kernel (or the loader) refused and why.
pub fn probe_load() -> Result<(), String> {
    let btf = Btf::from_sys_fs().map_err(|e| format!("kernel BTF: {e}"))?;
    let mut ebpf = EbpfLoader::new()
        .btf(Some(&btf))
        .load(weft_datapath::GUARD_LSM)
        .map_err(|e| format!("guard_lsm object: {e}"))?;
    for (name, hook) in PROGRAMS {
        let program: &mut Lsm = ebpf
            .program_mut(name)
            .ok_or_else(|| format!("program {name} is missing from the object"))?
            .try_into()
            .map_err(|e| format!("program {name}: {e}"))?;
        program
            .load(hook, &btf)
            .map_err(|e| format!("loading {name} (lsm/{hook}): {}", error_chain(&e)))?;
    }
    Ok(())
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(&format!(": {inner}"));
        source = inner.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_implicit_padding() {
        for (name, size, fields) in STRUCTS {
            let covered: usize = fields.iter().map(|f| f.2).sum();
            assert_eq!(covered, *size, "{name} has implicit padding");
        }
    }
}
