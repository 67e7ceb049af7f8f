//! `weft lab`: a simulated cluster on one machine. Each node is a network namespace on a
//! shared routed underlay with its own agent process and pin root; pods are added through
//! the real weft CNI plugin; a "world" namespace stands for everything outside the cluster.

pub mod check;
pub mod down;
pub mod netns;
pub mod state;
pub mod topology;
pub mod up;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use state::LabState;
pub use up::UpOptions;

pub const DEFAULT_NAME: &str = "weftlab";

fn default_dir(name: &str) -> PathBuf {
    PathBuf::from(format!("/run/weft/{name}"))
}

#[derive(Debug, clap::Args)]
pub struct LabArgs {
    /// The lab's name: prefix of its namespaces and pin roots.
    #[arg(long, global = true, default_value = DEFAULT_NAME)]
    pub name: String,
    /// The lab's state directory (default /run/weft/<name>).
    #[arg(long, global = true)]
    pub dir: Option<PathBuf>,
    #[command(subcommand)]
    pub command: LabCmd,
}

#[derive(Debug, clap::Subcommand)]
pub enum LabCmd {
    /// Build the lab: nodes with agents, pods added through the weft CNI plugin.
    Up {
        #[arg(long, default_value_t = 2)]
        nodes: u32,
        #[arg(long, default_value_t = 2)]
        pods_per_node: u32,
        /// How programs attach: auto (TCX where available), tcx, or clsact (the fallback).
        #[arg(long, default_value = "auto")]
        attach_mode: weft_datapath::AttachMode,
    },
    /// List nodes, agents, pods and addresses.
    Status,
    /// Run the all-pairs connectivity matrix; exits non-zero on any failure.
    Check,
    /// Print a node agent's Prometheus metrics.
    Metrics {
        #[arg(long, default_value_t = 1)]
        node: u32,
    },
    /// Remove everything the lab made.
    Down,
}

pub fn main(args: LabArgs) -> anyhow::Result<()> {
    up::validate_name(&args.name)?;
    let dir = args.dir.clone().unwrap_or_else(|| default_dir(&args.name));
    match args.command {
        LabCmd::Up {
            nodes,
            pods_per_node,
            attach_mode,
        } => {
            let weft_bin = std::env::current_exe()?;
            let state = up::up(&UpOptions {
                name: args.name.clone(),
                dir,
                nodes,
                pods_per_node,
                weft_bin,
                attach_mode,
            })?;
            print!("{}", status_text(&state));
            Ok(())
        }
        LabCmd::Status => {
            print!("{}", status_text(&LabState::load(&dir)?));
            Ok(())
        }
        LabCmd::Check => {
            let state = LabState::load(&dir)?;
            let probes = check::check(&state)?;
            print!("{}", check::render(&probes));
            let failed = probes.iter().filter(|p| !p.ok()).count();
            anyhow::ensure!(failed == 0, "{failed} of {} probes failed", probes.len());
            Ok(())
        }
        LabCmd::Metrics { node } => {
            let state = LabState::load(&dir)?;
            let node = state
                .node(node)
                .ok_or_else(|| anyhow::anyhow!("--node {node}: the lab has no such node"))?;
            let listen = node.agent_listen.clone();
            let (code, body) = netns::in_netns(&netns::path_of(&node.netns), move || {
                http_get(&listen, "/metrics")
            })?;
            anyhow::ensure!(code == 200, "the agent of {} answered {code}", node.name);
            print!("{body}");
            Ok(())
        }
        LabCmd::Down => down::down(&args.name, &dir),
    }
}

pub fn status_text(state: &LabState) -> String {
    let mut out = format!(
        "lab {} ({})\n\nNODE      AGENT                  ADDRESSES\n",
        state.name,
        state.dir.display()
    );
    for node in &state.nodes {
        let agent = match node.agent_pid {
            Some(pid) if process_alive(pid) => {
                let listen = node.agent_listen.clone();
                let ready = netns::in_netns(&netns::path_of(&node.netns), move || {
                    Ok(http_get(&listen, "/readyz"))
                })
                .ok()
                .and_then(Result::ok)
                .map(|(code, _)| if code == 200 { "ready" } else { "not ready" })
                .unwrap_or("unreachable");
                format!("pid {pid} {ready}")
            }
            Some(pid) => format!("pid {pid} exited"),
            None => "not started".into(),
        };
        let addrs: Vec<String> = node.addresses.iter().map(ToString::to_string).collect();
        out.push_str(&format!(
            "{:<9} {:<22} {}\n",
            node.name,
            agent,
            addrs.join(" ")
        ));
    }
    out.push_str("\nPOD       NODE      ADDRESSES\n");
    for pod in &state.pods {
        let addrs: Vec<String> = pod.addresses.iter().map(ToString::to_string).collect();
        out.push_str(&format!(
            "{:<9} node{:<5} {}\n",
            pod.name,
            pod.node,
            addrs.join(" ")
        ));
    }
    out
}

/// A minimal HTTP GET to a local agent: (status code, body).
pub fn http_get(addr: &str, path: &str) -> anyhow::Result<(u16, String)> {
    let addr: std::net::SocketAddr = addr.parse()?;
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((code, body))
}

/// True while `pid` exists and is not a zombie.
pub fn process_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

pub fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}
