//! Everything the bench measures on, built under one unique lab name and torn down by a
//! Drop guard (also when building or measuring fails):
//!
//! - a weft lab (`weft lab up` machinery): a router namespace, two weft nodes with their
//!   agents, two pods per node added through the agents' conflists and the weft plugin;
//! - two reference nodes on the same router, with bridge-plugin pods and flannel-style
//!   kernel VXLAN between them ([`super::reference`]);
//! - a bare veth pair between two namespaces;
//! - one iperf3 server per configuration.
//!
//! Every namespace is named `<lab>-…`, so `weft lab down --name <lab>` (which is what the
//! guard runs) removes all of it, with the lab's pins under /sys/fs/bpf/<lab>.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};
use weft_netlink::{AddrFlags, Handle, Netns, VethSpec};

use super::configs::{Config, Pair};
use super::iperf::{self, IperfServer};
use super::reference::{self, RefNode};
use crate::lab::netns::{self, in_netns};
use crate::lab::topology::{self as topo, Topology};
use crate::lab::up::{self, UpOptions};
use crate::lab::LabState;
use crate::netns_exec::enter_netns_before_exec;

/// The pod MTU of every configuration, the bare veth included: the weft agent's default on
/// a 1500-byte underlay (1500 - 50 bytes of VXLAN overhead).
pub const POD_MTU: u32 = 1450;
/// Underlay addresses of the reference nodes, beside the weft nodes' 198.51.100.11/.12.
const REF_UNDERLAY_BASE: u8 = 220;
/// The ClusterIP of the per-packet service configuration: in the benchmarking range
/// (RFC 2544), which no namespace of the bench routes.
const CLUSTER_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 10);

#[derive(Debug, Clone)]
pub struct WorldOptions {
    /// Lab name: prefix of every namespace and of the pin directory.
    pub name: String,
    pub dir: PathBuf,
    /// The weft binary, run as agent and as CNI plugin.
    pub weft_bin: PathBuf,
    /// Turn off UDP-tunnel segmentation offload on every node's uplink, so tunnel packets
    /// cross the underlay MTU-sized, as on a NIC without that offload.
    pub segmented_underlay: bool,
    /// Install the weft nodes' netfilter tables in the reference nodes too.
    pub reference_netfilter: bool,
    /// How the weft nodes attach their programs.
    pub attach_mode: weft_datapath::AttachMode,
    /// Nice value of the iperf3 servers.
    pub nice: i32,
    /// Leave everything in place when dropped.
    pub keep: bool,
}

pub struct World {
    pub name: String,
    pub dir: PathBuf,
    keep: bool,
    pub pairs: Vec<(Config, Pair)>,
    /// Pin roots of the weft nodes (their counters).
    pub weft_pin_roots: Vec<PathBuf>,
    servers: Vec<IperfServer>,
}

impl World {
    pub fn build(opts: &WorldOptions) -> anyhow::Result<World> {
        // The guard exists before the first namespace does.
        let mut world = World {
            name: opts.name.clone(),
            dir: opts.dir.clone(),
            keep: opts.keep,
            pairs: Vec::new(),
            weft_pin_roots: Vec::new(),
            servers: Vec::new(),
        };
        let topology = Topology::new(&opts.name);
        let lab = up::up(&UpOptions {
            name: opts.name.clone(),
            dir: opts.dir.clone(),
            nodes: 2,
            pods_per_node: 2,
            weft_bin: opts.weft_bin.clone(),
            attach_mode: opts.attach_mode,
        })
        .context("build the weft nodes (weft lab up)")?;
        world.weft_pin_roots = vec![topology.pin_root(1), topology.pin_root(2)];

        let weft_pod = |node: u32, pod: u32| -> anyhow::Result<(PathBuf, Ipv4Addr)> {
            pod_of(&lab, &topology, node, pod)
        };
        let (weft_client_ns, _) = weft_pod(1, 1)?;
        let (same_ns, same_ip) = weft_pod(1, 2)?;
        let (cross_ns, cross_ip) = weft_pod(2, 1)?;

        let (veth_a, veth_b, veth_b_ip) = raw_veth(&opts.name)?;

        let router = netns::path_of(&topology.router_ns());
        let ipam = opts.dir.join("reference-ipam");
        let mut ref_nodes = Vec::new();
        for i in 1..=2u8 {
            let node = RefNode {
                index: i,
                netns: netns::create(&format!("{}-ref{i}", opts.name))?,
                underlay_ip: Ipv4Addr::new(198, 51, 100, REF_UNDERLAY_BASE + i),
            };
            reference::link_to_router(&router, &format!("ref{i}"), topo::ROUTER_V4, &node)
                .with_context(|| format!("link reference node {i} to the router"))?;
            ref_nodes.push(node);
        }
        let mut ref_pods = Vec::new();
        for (node, pod) in [(0usize, 1u8), (0, 2), (1, 1)] {
            let ref_node = ref_nodes.get(node).context("reference node")?;
            let name = format!("{}-ref{}-pod{pod}", opts.name, ref_node.index);
            let ns = netns::create(&name)?;
            let ip = reference::add_pod(ref_node, POD_MTU, &ipam, &ns, &name)?;
            ref_pods.push((ns, ip));
        }
        for node in &ref_nodes {
            reference::add_vtep(node, POD_MTU)?;
            if opts.reference_netfilter {
                reference::add_netfilter(node)?;
            }
        }
        if let [a, b] = ref_nodes.as_slice() {
            reference::add_peer(a, b)?;
            reference::add_peer(b, a)?;
        }
        let [(ref_client_ns, _), (ref_same_ns, ref_same_ip), (ref_cross_ns, ref_cross_ip)] =
            <[(PathBuf, Ipv4Addr); 3]>::try_from(ref_pods)
                .map_err(|_| anyhow::anyhow!("expected three reference pods"))?;

        let pair = |client: &Path, server: &Path, ip: Ipv4Addr| Pair {
            client_netns: client.to_path_buf(),
            server_netns: server.to_path_buf(),
            server_ip: ip,
            connect_ip: ip,
            own_server: true,
        };
        program_cluster_ip(&topology.pin_root(1), same_ip)?;
        world.pairs = vec![
            (Config::RawVeth, pair(&veth_a, &veth_b, veth_b_ip)),
            (
                Config::WeftSameNode,
                pair(&weft_client_ns, &same_ns, same_ip),
            ),
            (
                Config::BridgeSameNode,
                pair(&ref_client_ns, &ref_same_ns, ref_same_ip),
            ),
            (
                Config::WeftCrossNode,
                pair(&weft_client_ns, &cross_ns, cross_ip),
            ),
            (
                Config::ReferenceCrossNode,
                pair(&ref_client_ns, &ref_cross_ns, ref_cross_ip),
            ),
            (
                Config::WeftClusterIp,
                Pair {
                    connect_ip: CLUSTER_IP,
                    own_server: false,
                    ..pair(&weft_client_ns, &same_ns, same_ip)
                },
            ),
        ];

        // Fairness: every pod, both ends of every pair, has the same MTU.
        for (config, p) in &world.pairs {
            for ns in [&p.client_netns, &p.server_netns] {
                let mtu = eth0_mtu(ns)?;
                if mtu != POD_MTU {
                    bail!(
                        "{}: eth0 in {} has MTU {mtu}, not {POD_MTU}",
                        config.label(),
                        ns.display()
                    );
                }
            }
        }

        if opts.segmented_underlay {
            let mut nodes: Vec<PathBuf> = (1..=2)
                .map(|i| netns::path_of(&topology.node_ns(i)))
                .collect();
            nodes.extend(ref_nodes.iter().map(|n| n.netns.clone()));
            for node in &nodes {
                segment_tunnel_packets(node, topo::NODE_UPLINK)?;
            }
        }

        for (config, p) in world.pairs.iter().filter(|(_, p)| p.own_server) {
            let log = iperf::log_path(&opts.dir, config.slug());
            let server = IperfServer::start(&p.server_netns, p.server_ip, opts.nice, &log)
                .with_context(|| format!("iperf3 server for {}", config.label()))?;
            world.servers.push(server);
        }
        Ok(world)
    }

    pub fn pair(&self, config: Config) -> anyhow::Result<&Pair> {
        self.pairs
            .iter()
            .find(|(c, _)| *c == config)
            .map(|(_, p)| p)
            .with_context(|| format!("no pair for {}", config.label()))
    }

    /// The weft nodes' datapath counters, one entry per node.
    pub fn weft_counters(&self) -> anyhow::Result<Vec<weft_datapath::Counters>> {
        self.weft_pin_roots
            .iter()
            .map(|root| {
                weft_datapath::Tables::open(root)
                    .and_then(|t| t.counters())
                    .with_context(|| format!("read the counters under {}", root.display()))
            })
            .collect()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        // Our own servers first, by pid; the lab teardown then sweeps whatever else still
        // runs in the lab's namespaces.
        self.servers.clear();
        if self.keep {
            eprintln!(
                "kept the bench's namespaces; remove them with: weft lab down --name {} --dir {}",
                self.name,
                self.dir.display()
            );
            return;
        }
        if let Err(e) = crate::lab::down::down(&self.name, &self.dir) {
            eprintln!("weft bench datapath: cleanup: {e:#}");
        }
    }
}

/// A ClusterIP on node 1 for the iperf3 and latency ports of `backend` (the same-node
/// server pod), programmed through the datapath's service API as the agent will.
fn program_cluster_ip(pin_root: &Path, backend: Ipv4Addr) -> anyhow::Result<()> {
    use weft_datapath::{Backend, Frontend, FrontendSpec, L4Proto, Services};
    let mut services = Services::open(pin_root).context("open the service maps")?;
    for port in [iperf::PORT, super::RR_PORT] {
        let frontend = Frontend::internal(CLUSTER_IP.into(), port, L4Proto::Tcp);
        let spec = FrontendSpec::cluster_ip(vec![Backend::new((backend, port).into())]);
        services
            .upsert_frontend(frontend, &spec)
            .with_context(|| format!("program the ClusterIP {frontend}"))?;
    }
    Ok(())
}

fn pod_of(
    lab: &LabState,
    topology: &Topology,
    node: u32,
    pod: u32,
) -> anyhow::Result<(PathBuf, Ipv4Addr)> {
    let name = topology.pod_name(node, pod);
    let state = lab
        .pods
        .iter()
        .find(|p| p.name == name)
        .with_context(|| format!("the lab has no pod {name}"))?;
    let ip = state
        .addresses
        .iter()
        .find_map(|a| match a {
            IpAddr::V4(v4) => Some(*v4),
            IpAddr::V6(_) => None,
        })
        .with_context(|| format!("pod {name} has no IPv4 address"))?;
    Ok((netns::path_of(&state.netns), ip))
}

/// `<lab>-veth-a` and `<lab>-veth-b` joined by one veth pair (eth0 on both sides, pod MTU),
/// addressed from 192.0.2.0/24 (documentation space; it exists only between these two).
fn raw_veth(lab: &str) -> anyhow::Result<(PathBuf, PathBuf, Ipv4Addr)> {
    let a = netns::create(&format!("{lab}-veth-a"))?;
    let b = netns::create(&format!("{lab}-veth-b"))?;
    let b_ns = Netns::open(&b)?;
    in_netns(&a, move || {
        let mut h = Handle::new()?;
        let index = h.create_veth(&VethSpec {
            name: "eth0",
            mtu: Some(POD_MTU),
            up: true,
            peer_name: "eth0",
            peer_netns: Some(&b_ns),
            ..Default::default()
        })?;
        h.add_address(index, "192.0.2.1/24".parse()?, AddrFlags::default())?;
        Ok(())
    })?;
    in_netns(&b, || {
        let mut h = Handle::new()?;
        let link = h.link_by_name("eth0")?.context("veth peer missing")?;
        h.set_up(link.index)?;
        h.add_address(link.index, "192.0.2.2/24".parse()?, AddrFlags::default())?;
        Ok(())
    })?;
    Ok((a, b, Ipv4Addr::new(192, 0, 2, 2)))
}

fn eth0_mtu(ns: &Path) -> anyhow::Result<u32> {
    in_netns(ns, || {
        Ok(Handle::new()?.link_by_name("eth0")?.context("no eth0")?.mtu)
    })
    .with_context(|| format!("eth0 in {}", ns.display()))
}

/// Makes `dev` in `ns` segment UDP-tunnel GSO packets itself instead of passing them on
/// whole (what a veth does by default, and what hides per-packet costs of the tunnel).
fn segment_tunnel_packets(ns: &Path, dev: &str) -> anyhow::Result<()> {
    let mut cmd = Command::new("ethtool");
    cmd.args([
        "-K",
        dev,
        "tx-udp_tnl-segmentation",
        "off",
        "tx-udp_tnl-csum-segmentation",
        "off",
    ]);
    enter_netns_before_exec(&mut cmd, ns);
    let out = cmd.output().context("run ethtool (is it installed?)")?;
    if !out.status.success() {
        bail!(
            "ethtool -K {dev} in {}: {}",
            ns.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}
