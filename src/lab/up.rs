//! `weft lab up`: build the simulated cluster, start one agent per node, add the pods
//! through the real weft CNI plugin.

use std::net::IpAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use weft_cni::NetConfList;
use weft_netlink::{AddrFlags, Handle, Netns, RouteSpec, Scope, VethSpec};

use super::netns::{self, in_netns};
use super::state::{LabState, NodeState, PodState};
use super::topology::{self as topo, host, Topology};
use crate::chain::{Attachment, Chain};

/// Port of each agent's health and metrics endpoint, inside its node's namespace.
pub const AGENT_LISTEN: &str = "127.0.0.1:9962";
const READY_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
pub struct UpOptions {
    pub name: String,
    pub dir: PathBuf,
    pub nodes: u32,
    pub pods_per_node: u32,
    /// The weft binary: run as each node's agent and as the CNI plugin.
    pub weft_bin: PathBuf,
    /// How the agents (and, through their conflists, the plugin) attach programs.
    pub attach_mode: weft_datapath::AttachMode,
}

pub fn validate_name(name: &str) -> anyhow::Result<()> {
    let ok = name.len() <= 24
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    anyhow::ensure!(
        ok,
        "--name {name:?}: use up to 24 lowercase letters, digits and '-', starting with a letter"
    );
    Ok(())
}

pub fn up(opts: &UpOptions) -> anyhow::Result<LabState> {
    validate_name(&opts.name)?;
    anyhow::ensure!(
        (1..=topo::MAX_NODES).contains(&opts.nodes),
        "--nodes: {} is not in 1..={}",
        opts.nodes,
        topo::MAX_NODES
    );
    let topology = Topology::new(&opts.name);
    if LabState::path(&opts.dir).exists() {
        bail!(
            "a lab already exists at {} (run `weft lab down` first)",
            opts.dir.display()
        );
    }
    let leftovers = netns::list_with_prefix(&format!("{}-", opts.name));
    if !leftovers.is_empty() {
        bail!("namespaces of a lab named {:?} already exist ({}); run `weft lab down --name {}` first", opts.name, leftovers.join(", "), opts.name);
    }
    std::fs::create_dir_all(&opts.dir).with_context(|| format!("create {}", opts.dir.display()))?;
    let mut state = LabState {
        name: opts.name.clone(),
        dir: opts.dir.clone(),
        attach_mode: opts.attach_mode.name().to_string(),
        nodes: Vec::new(),
        pods: Vec::new(),
    };
    state.save()?;
    match build(opts, &topology, &mut state) {
        Ok(()) => Ok(state),
        Err(e) => {
            let _ = super::down::down_state(&state);
            Err(e)
        }
    }
}

fn build(opts: &UpOptions, topology: &Topology, state: &mut LabState) -> anyhow::Result<()> {
    let router = netns::create(&topology.router_ns())?;
    let world = netns::create(&topology.world_ns())?;
    in_netns(&router, || {
        weft_netlink::write_sysctl("net/ipv4/ip_forward", "1")?;
        weft_netlink::write_sysctl("net/ipv6/conf/all/forwarding", "1")?;
        Ok(())
    })?;
    link_world(&router, &world)?;

    let bin_dir = opts.dir.join("cni-bin");
    std::fs::create_dir_all(&bin_dir)?;
    for plugin in [crate::plugin::PLUGIN_TYPE, crate::plugin::GUARD_TYPE] {
        let link = bin_dir.join(plugin);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&opts.weft_bin, &link)?;
    }
    let nodes_dir = opts.dir.join("nodes");
    std::fs::create_dir_all(&nodes_dir)?;

    for i in 1..=opts.nodes {
        let ns = netns::create(&topology.node_ns(i))?;
        link_node(topology, i, &router, &ns)?;
        let node_dir = opts.dir.join(topology.node_name(i));
        std::fs::create_dir_all(&node_dir)?;
        state.nodes.push(NodeState {
            index: i,
            name: topology.node_name(i),
            netns: topology.node_ns(i),
            addresses: vec![
                IpAddr::V4(topology.node_v4(i)),
                IpAddr::V6(topology.node_v6(i)),
            ],
            pin_root: topology.pin_root(i),
            agent_pid: None,
            agent_listen: AGENT_LISTEN.into(),
            conflist: node_dir.join("cni").join("10-weft.conflist"),
        });
        state.save()?;
    }
    // All Node objects exist before any agent starts, so every agent's first pass already
    // programs every peer.
    for i in 1..=opts.nodes {
        std::fs::write(
            nodes_dir.join(format!("{}.yaml", topology.node_name(i))),
            topology.node_yaml(i),
        )?;
    }
    for i in 1..=opts.nodes {
        let pid = spawn_agent(&opts.weft_bin, state, i)?;
        if let Some(node) = state.nodes.iter_mut().find(|n| n.index == i) {
            node.agent_pid = Some(pid);
        }
        state.save()?;
    }
    for node in &state.nodes {
        wait_ready(node, &opts.dir)?;
    }
    for i in 1..=opts.nodes {
        for p in 1..=opts.pods_per_node {
            let pod = add_pod(state, topology, i, p)?;
            state.pods.push(pod);
            state.save()?;
        }
    }
    Ok(())
}

fn link_world(router: &Path, world: &Path) -> anyhow::Result<()> {
    let world_ns = Netns::open(world)?;
    in_netns(router, move || {
        let mut h = Handle::new()?;
        let index = h.create_veth(&VethSpec {
            name: topo::ROUTER_WORLD_IF,
            up: true,
            peer_name: topo::WORLD_IF,
            peer_netns: Some(&world_ns),
            ..Default::default()
        })?;
        h.add_address(index, "203.0.113.254/24".parse()?, AddrFlags::default())?;
        h.add_address(index, "2001:db8::fe/64".parse()?, AddrFlags { nodad: true })?;
        Ok(())
    })?;
    in_netns(world, || {
        let mut h = Handle::new()?;
        let link = h
            .link_by_name(topo::WORLD_IF)?
            .context("world interface missing")?;
        h.set_up(link.index)?;
        h.add_address(link.index, "203.0.113.1/24".parse()?, AddrFlags::default())?;
        h.add_address(
            link.index,
            "2001:db8::1/64".parse()?,
            AddrFlags { nodad: true },
        )?;
        for gw in [IpAddr::V4(topo::WORLD_GW_V4), IpAddr::V6(topo::WORLD_GW_V6)] {
            let dst = if gw.is_ipv4() { "0.0.0.0/0" } else { "::/0" };
            h.add_route(&RouteSpec {
                gateway: Some(gw),
                oif: Some(link.index),
                ..RouteSpec::new(dst.parse()?)
            })?;
        }
        Ok(())
    })
}

/// Node i's uplink to the router: a /32 and /128 on each end, host routes both ways, and
/// the node's default routes through the router.
fn link_node(topology: &Topology, i: u32, router: &Path, node: &Path) -> anyhow::Result<()> {
    let node_ns = Netns::open(node)?;
    let router_if = topology.router_if(i);
    let (v4, v6) = (topology.node_v4(i), topology.node_v6(i));
    in_netns(router, move || {
        let mut h = Handle::new()?;
        let index = h.create_veth(&VethSpec {
            name: &router_if,
            up: true,
            peer_name: topo::NODE_UPLINK,
            peer_netns: Some(&node_ns),
            ..Default::default()
        })?;
        h.add_address(index, host(topo::ROUTER_V4), AddrFlags::default())?;
        h.add_address(index, host(topo::ROUTER_V6), AddrFlags { nodad: true })?;
        h.add_route(&RouteSpec {
            oif: Some(index),
            scope: Scope::Link,
            ..RouteSpec::new(host(v4))
        })?;
        h.add_route(&RouteSpec {
            oif: Some(index),
            scope: Scope::Link,
            ..RouteSpec::new(host(v6))
        })?;
        Ok(())
    })?;
    in_netns(node, move || {
        let mut h = Handle::new()?;
        let link = h
            .link_by_name(topo::NODE_UPLINK)?
            .context("uplink missing")?;
        h.set_up(link.index)?;
        h.add_address(link.index, host(v4), AddrFlags::default())?;
        h.add_address(link.index, host(v6), AddrFlags { nodad: true })?;
        for gw in [IpAddr::V4(topo::ROUTER_V4), IpAddr::V6(topo::ROUTER_V6)] {
            h.add_route(&RouteSpec {
                oif: Some(link.index),
                scope: Scope::Link,
                ..RouteSpec::new(host(gw))
            })?;
            let dst = if gw.is_ipv4() { "0.0.0.0/0" } else { "::/0" };
            h.add_route(&RouteSpec {
                gateway: Some(gw),
                oif: Some(link.index),
                onlink: true,
                ..RouteSpec::new(dst.parse()?)
            })?;
        }
        Ok(())
    })
}

/// The command line of node i's agent.
pub fn agent_command(weft_bin: &Path, state: &LabState, i: u32) -> Command {
    let topology = Topology::new(&state.name);
    let node_dir = state.dir.join(topology.node_name(i));
    let mut cmd = Command::new(weft_bin);
    cmd.arg("agent")
        .arg("--node-name")
        .arg(topology.node_name(i))
        .arg("--source")
        .arg(format!("dir:{}", state.dir.join("nodes").display()))
        .arg("--pin-root")
        .arg(topology.pin_root(i))
        .arg("--cni-conf-dir")
        .arg(node_dir.join("cni"))
        .arg("--ipam-data-dir")
        .arg(node_dir.join("ipam"))
        .arg("--listen")
        .arg(AGENT_LISTEN)
        .arg("--resync-seconds")
        .arg("10");
    if !state.attach_mode.is_empty() {
        cmd.arg("--attach-mode").arg(&state.attach_mode);
    }
    for cidr in topology.cluster_cidrs() {
        cmd.arg("--cluster-cidr").arg(cidr.to_string());
    }
    cmd
}

/// Starts node i's agent inside the node's network namespace, detached from this process
/// (its own session; output to `<dir>/node<i>/agent.log`).
pub fn spawn_agent(weft_bin: &Path, state: &LabState, i: u32) -> anyhow::Result<i32> {
    let topology = Topology::new(&state.name);
    let node_dir = state.dir.join(topology.node_name(i));
    std::fs::create_dir_all(&node_dir)?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(node_dir.join("agent.log"))?;
    let mut cmd = agent_command(weft_bin, state, i);
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    crate::netns_exec::enter_netns_before_exec(&mut cmd, &netns::path_of(&topology.node_ns(i)));
    // SAFETY: setsid is async-signal-safe; it detaches the agent from our terminal so it
    // outlives `weft lab up`.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            Ok(())
        });
    }
    let child = cmd.spawn().context("start the agent")?;
    Ok(child.id() as i32)
}

/// Waits until the node's agent answers /readyz with 200, failing early (with its log)
/// when it exits.
pub fn wait_ready(node: &NodeState, dir: &Path) -> anyhow::Result<()> {
    let deadline = Instant::now() + READY_TIMEOUT;
    let path = netns::path_of(&node.netns);
    let listen = node.agent_listen.clone();
    loop {
        let listen = listen.clone();
        let answer = in_netns(&path, move || Ok(super::http_get(&listen, "/readyz")))?;
        if let Ok((200, _)) = answer {
            return Ok(());
        }
        if let Some(pid) = node.agent_pid {
            if !super::process_alive(pid) {
                bail!(
                    "the agent of {} exited; its log:\n{}",
                    node.name,
                    super::log_tail(&dir.join(&node.name).join("agent.log"))
                );
            }
        }
        if Instant::now() > deadline {
            let why = match answer {
                Ok((code, body)) => format!("{code} {}", body.trim()),
                Err(e) => e.to_string(),
            };
            bail!(
                "the agent of {} is not ready after {:?}: {why}",
                node.name,
                READY_TIMEOUT
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Adds pod `p` on node `i` through the node's conflist, run inside the node namespace.
pub fn add_pod(state: &LabState, topology: &Topology, i: u32, p: u32) -> anyhow::Result<PodState> {
    let node = state.node(i).context("no such node")?;
    let ns_name = topology.pod_ns(i, p);
    let ns_path = netns::create(&ns_name)?;
    let chain = node_chain(state, node)?;
    let att = Attachment {
        container_id: ns_name.clone(),
        netns: ns_path.display().to_string(),
        ifname: "eth0".into(),
        args: format!(
            "K8S_POD_NAMESPACE=default;K8S_POD_NAME={};IgnoreUnknown=1",
            topology.pod_name(i, p)
        ),
        ..Attachment::default()
    };
    let result = match chain.add(&att) {
        Ok(r) => r,
        Err(e) => {
            let _ = netns::delete(&ns_name);
            return Err(e).with_context(|| format!("CNI ADD of {}", topology.pod_name(i, p)));
        }
    };
    Ok(PodState {
        name: topology.pod_name(i, p),
        node: i,
        netns: ns_name.clone(),
        container_id: ns_name,
        addresses: result.ips.iter().map(|ip| ip.address.addr()).collect(),
        result: result.to_value(chain.list.version),
    })
}

/// The node's CNI chain, from the conflist its agent wrote, run inside the node namespace.
pub fn node_chain(state: &LabState, node: &NodeState) -> anyhow::Result<Chain> {
    let text = std::fs::read(&node.conflist)
        .with_context(|| format!("read {}", node.conflist.display()))?;
    let list = NetConfList::from_slice(&text)
        .map_err(|e| anyhow::anyhow!("{}: {}", node.conflist.display(), e))?;
    Ok(Chain::new(list, vec![state.dir.join("cni-bin")]).in_netns(netns::path_of(&node.netns)))
}
