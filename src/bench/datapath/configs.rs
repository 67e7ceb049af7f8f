//! The configurations the bench compares, and the order they run in.

use std::net::Ipv4Addr;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Config {
    /// A bare veth pair between two namespaces: the most a pod-to-pod path can do.
    RawVeth,
    /// Two weft pods on one node (eBPF `bpf_redirect_peer`).
    WeftSameNode,
    /// Two pods on one node attached by Debian's bridge plugin.
    BridgeSameNode,
    /// Two weft pods on different nodes (eBPF steering into the fixed-VNI VXLAN device).
    WeftCrossNode,
    /// Two bridge-plugin pods on different nodes joined by flannel-style kernel VXLAN.
    ReferenceCrossNode,
    /// The weft same-node pair again, the client connecting to a ClusterIP whose one
    /// backend is the server pod: from_pod's per-packet translation against pod-direct.
    WeftClusterIp,
}

impl Config {
    pub const ALL: [Config; 6] = [
        Config::RawVeth,
        Config::WeftSameNode,
        Config::BridgeSameNode,
        Config::WeftCrossNode,
        Config::ReferenceCrossNode,
        Config::WeftClusterIp,
    ];

    pub const fn label(self) -> &'static str {
        match self {
            Config::RawVeth => "raw veth",
            Config::WeftSameNode => "weft same-node",
            Config::BridgeSameNode => "bridge same-node",
            Config::WeftCrossNode => "weft cross-node",
            Config::ReferenceCrossNode => "reference cross-node",
            Config::WeftClusterIp => "weft ClusterIP",
        }
    }

    /// A file-name-safe name.
    pub const fn slug(self) -> &'static str {
        match self {
            Config::RawVeth => "veth",
            Config::WeftSameNode => "weft-same-node",
            Config::BridgeSameNode => "bridge-same-node",
            Config::WeftCrossNode => "weft-cross-node",
            Config::ReferenceCrossNode => "reference-cross-node",
            Config::WeftClusterIp => "weft-clusterip",
        }
    }

    pub const fn is_weft(self) -> bool {
        matches!(
            self,
            Config::WeftSameNode | Config::WeftCrossNode | Config::WeftClusterIp
        )
    }
}

/// The order of repetition `rep`: every configuration once, starting one further along
/// each time, so no configuration always runs first (after an idle moment) or always
/// right after the same neighbour.
pub fn order(rep: usize) -> [Config; Config::ALL.len()] {
    let n = Config::ALL.len();
    std::array::from_fn(|k| Config::ALL[(rep + k) % n])
}

/// Where a configuration's client and server run.
#[derive(Debug, Clone)]
pub struct Pair {
    pub client_netns: PathBuf,
    pub server_netns: PathBuf,
    /// What the servers bind.
    pub server_ip: Ipv4Addr,
    /// What the client connects to: `server_ip`, or a Service address leading there.
    pub connect_ip: Ipv4Addr,
    /// Whether this pair has its own iperf3 server (a Service pair reuses its backend's).
    pub own_server: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_repetition_runs_every_configuration_once_in_a_rotated_order() {
        for rep in 0..7 {
            let mut seen = order(rep).to_vec();
            seen.sort();
            assert_eq!(seen, Config::ALL.to_vec());
        }
        assert_eq!(order(0)[0], Config::RawVeth);
        assert_eq!(order(1)[0], Config::WeftSameNode);
        assert_eq!(order(Config::ALL.len()), order(0));
    }
}
