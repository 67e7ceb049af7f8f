//! `weft agent` command-line flags. Every setting can also come from `--config FILE`; a
//! flag (or its environment variable) wins over the file, and the file over the default
//! (see [`super::config`]).

use std::net::SocketAddr;
use std::path::PathBuf;

use ipnet::IpNet;

#[derive(Debug, Clone, Default, clap::Args)]
pub struct AgentArgs {
    /// The agent's configuration file (YAML or JSON; unknown keys are refused). Flags given
    /// as well win over it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// This node's name (the Node object to program) [config: nodeName].
    #[arg(long, env = "NODE_NAME")]
    pub node_name: Option<String>,
    /// Where the cluster state comes from: `kubernetes` (the API server) or `dir:PATH` (a
    /// directory of Kubernetes-format YAML, for hosts without Kubernetes) [config: source].
    #[arg(long)]
    pub source: Option<String>,
    /// Kubeconfig for `--source kubernetes`; without it, the in-cluster service account
    /// [config: kubeconfig].
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The cluster's pod CIDRs (one per family). Pod traffic to anything outside them is
    /// masqueraded to the node's address [config: cluster.podCIDRs].
    #[arg(long = "cluster-cidr")]
    pub cluster_cidrs: Vec<IpNet>,
    /// The cluster's Service CIDRs (one per family) [config: cluster.serviceCIDRs].
    #[arg(long = "service-cidr")]
    pub service_cidrs: Vec<IpNet>,
    /// NodePort range, `FIRST-LAST` (default 30000-32767, Kubernetes' own)
    /// [config: cluster.nodePortRange].
    #[arg(long)]
    pub node_port_range: Option<String>,
    /// cgroup v2 hierarchy the socket programs attach to [config: datapath.cgroupRoot].
    #[arg(long)]
    pub cgroup_root: Option<PathBuf>,
    /// bpffs directory holding this node's pinned maps, programs and links
    /// [config: datapath.pinRoot].
    #[arg(long)]
    pub pin_root: Option<PathBuf>,
    /// How programs attach to interfaces: `auto` (TCX where the kernel has it, else a
    /// clsact cls_bpf filter), `tcx` or `clsact`. Written into the conflist so the plugin
    /// attaches pods the same way [config: datapath.attachMode].
    #[arg(long, env = "WEFT_ATTACH_MODE")]
    pub attach_mode: Option<String>,
    /// Directory the node's CNI configuration is written to [config: cni.confDir].
    #[arg(long)]
    pub cni_conf_dir: Option<PathBuf>,
    /// File name of the generated conflist (name order decides which file a runtime uses)
    /// [config: cni.confFile].
    #[arg(long)]
    pub cni_conf_file: Option<String>,
    /// CNI network name written into the conflist [config: cni.networkName].
    #[arg(long)]
    pub network_name: Option<String>,
    /// Where the plugin keeps IPAM reservations [config: cni.ipamDataDir].
    #[arg(long)]
    pub ipam_data_dir: Option<PathBuf>,
    /// VXLAN network identifier of the overlay (the same on every node) [config: overlay.vni].
    #[arg(long)]
    pub vxlan_vni: Option<u32>,
    /// UDP port of the overlay (the same on every node) [config: overlay.port].
    #[arg(long)]
    pub vxlan_port: Option<u16>,
    /// Pod MTU; defaults to the underlay interface's MTU minus the VXLAN overhead (50)
    /// [config: overlay.mtu].
    #[arg(long)]
    pub mtu: Option<u32>,
    /// Address of /healthz, /readyz and /metrics (default 127.0.0.1:9962) [config: listen].
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Seconds between full resyncs even when nothing changed (repairs drift; default 30)
    /// [config: resyncSeconds].
    #[arg(long)]
    pub resync_seconds: Option<u64>,
    /// The egress guard is chained on this node: the node is only ready once the kernel
    /// passes the guard's self-test [config: egressGuard].
    #[arg(long)]
    pub egress_guard: bool,
}
