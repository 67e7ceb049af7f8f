//! `weft agent` options and their validation.

use std::net::SocketAddr;
use std::path::PathBuf;

use ipnet::IpNet;

/// Where the node agent reads the cluster from and where it programs the node.
#[derive(Debug, Clone, clap::Args)]
pub struct AgentArgs {
    /// This node's name (the Node object to program).
    #[arg(long, env = "WEFT_NODE_NAME")]
    pub node_name: String,
    /// Standalone source: a directory of Kubernetes-format YAML (Node objects).
    #[arg(long)]
    pub source_dir: PathBuf,
    /// The cluster's pod CIDRs (one per family). Pod traffic to anything outside them is
    /// masqueraded to the node's address.
    #[arg(long = "cluster-cidr", required = true)]
    pub cluster_cidrs: Vec<IpNet>,
    /// bpffs directory holding this node's pinned maps, programs and links.
    #[arg(long, default_value = weft_datapath::DEFAULT_PIN_ROOT)]
    pub pin_root: PathBuf,
    /// Directory the node's CNI configuration is written to.
    #[arg(long, default_value = "/etc/cni/net.d")]
    pub cni_conf_dir: PathBuf,
    /// File name of the generated conflist (name order decides which file a runtime uses).
    #[arg(long, default_value = "10-weft.conflist")]
    pub cni_conf_file: String,
    /// CNI network name written into the conflist.
    #[arg(long, default_value = "weft")]
    pub network_name: String,
    /// Where the plugin keeps IPAM reservations.
    #[arg(long, default_value = "/var/lib/weft/ipam")]
    pub ipam_data_dir: PathBuf,
    /// VXLAN network identifier of the overlay (the same on every node).
    #[arg(long, default_value_t = 1)]
    pub vxlan_vni: u32,
    /// UDP port of the overlay (the same on every node).
    #[arg(long, default_value_t = 8472)]
    pub vxlan_port: u16,
    /// Pod MTU; defaults to the underlay interface's MTU minus the VXLAN overhead (50).
    #[arg(long)]
    pub mtu: Option<u32>,
    /// Address of /healthz, /readyz and /metrics.
    #[arg(long, default_value = "127.0.0.1:9962")]
    pub listen: SocketAddr,
    /// How programs attach to interfaces: `auto` (TCX where the kernel has it, else a
    /// clsact cls_bpf filter), `tcx` or `clsact`. Written into the conflist so the plugin
    /// attaches pods the same way.
    #[arg(long, env = "WEFT_ATTACH_MODE", default_value = "auto")]
    pub attach_mode: weft_datapath::AttachMode,
    /// Seconds between full resyncs even when nothing changed (repairs drift).
    #[arg(long, default_value_t = 30)]
    pub resync_seconds: u64,
}

/// The VXLAN header overhead on an IPv4 underlay: outer IPv4 (20) + UDP (8) + VXLAN (8)
/// + inner Ethernet (14).
pub const VXLAN_OVERHEAD: u32 = 50;
/// The overlay device's name.
pub const VXLAN_DEVICE: &str = "weft.vxlan";

impl AgentArgs {
    /// Checks what can be checked before touching the node; errors name the option.
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(!self.node_name.is_empty(), "--node-name: empty");
        anyhow::ensure!(
            self.vxlan_vni > 0 && self.vxlan_vni < (1 << 24),
            "--vxlan-vni: {} is not in 1..16777215",
            self.vxlan_vni
        );
        anyhow::ensure!(self.vxlan_port != 0, "--vxlan-port: 0 is not a port");
        if let Some(mtu) = self.mtu {
            anyhow::ensure!(
                (1280..=65485).contains(&mtu),
                "--mtu: {mtu} is not between 1280 and 65485"
            );
        }
        anyhow::ensure!(
            self.pin_root.is_absolute(),
            "--pin-root: {:?} must be absolute",
            self.pin_root
        );
        anyhow::ensure!(
            self.ipam_data_dir.is_absolute(),
            "--ipam-data-dir: {:?} must be absolute",
            self.ipam_data_dir
        );
        anyhow::ensure!(
            !self.cni_conf_file.contains('/') && self.cni_conf_file.ends_with(".conflist"),
            "--cni-conf-file: {:?} must be a file name ending in .conflist",
            self.cni_conf_file
        );
        Ok(())
    }
}
