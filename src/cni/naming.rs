//! Names and labels of what the plugin creates on the node, derived from the attachment so
//! DEL, CHECK and GC find them again without any stored state.

/// The host side of a pod's veth: `wf` and 12 hex digits of a hash of the attachment, so a
/// container's interface always gets the same name (DEL and GC derive it again) and the
/// name fits the kernel's 15-byte limit.
pub fn host_veth_name(container_id: &str, ifname: &str) -> String {
    format!("wf{:012x}", fnv1a64(container_id, ifname) >> 16)
}

/// The alias written on the host veth: names the network and the attachment it belongs to,
/// so GC can find leftovers of this network (and an operator can read `ip link`).
pub fn veth_alias(network: &str, container_id: &str, ifname: &str) -> String {
    format!("{ALIAS_PREFIX}{network}:{container_id}:{ifname}")
}

const ALIAS_PREFIX: &str = "weft:";

/// The kernel keeps interface aliases up to 255 bytes (IFALIASZ - 1).
pub const MAX_ALIAS_LEN: usize = 255;

/// The `(network, container id, ifname)` an alias written by [`veth_alias`] names. None of
/// the three may contain ':' (CNI forbids it), so the split is unambiguous.
pub fn parse_alias(alias: &str) -> Option<(&str, &str, &str)> {
    let rest = alias.strip_prefix(ALIAS_PREFIX)?;
    let mut parts = rest.splitn(3, ':');
    let (network, id, ifname) = (parts.next()?, parts.next()?, parts.next()?);
    (!network.is_empty() && !id.is_empty() && !ifname.is_empty() && !ifname.contains(':'))
        .then_some((network, id, ifname))
}

fn fnv1a64(container_id: &str, ifname: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in container_id
        .bytes()
        .chain(std::iter::once(b'/'))
        .chain(ifname.bytes())
    {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn veth_names_are_stable_short_and_distinct() {
        let a = host_veth_name("abc123", "eth0");
        assert_eq!(a, host_veth_name("abc123", "eth0"));
        assert_eq!(a.len(), 14);
        assert!(a.starts_with("wf"));
        assert_ne!(a, host_veth_name("abc123", "eth1"));
        assert_ne!(a, host_veth_name("abc124", "eth0"));
        // The separator keeps ("ab", "c/x") and ("ab/c", "x") apart.
        assert_ne!(host_veth_name("ab", "cx"), host_veth_name("abc", "x"));
    }

    #[test]
    fn alias_round_trips_and_rejects_foreign_aliases() {
        let alias = veth_alias("weftnet", "c0ffee", "eth0");
        assert_eq!(parse_alias(&alias), Some(("weftnet", "c0ffee", "eth0")));
        assert_eq!(parse_alias("something else"), None);
        assert_eq!(parse_alias("weft:net:id"), None);
    }
}
