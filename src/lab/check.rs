//! `weft lab check`: the all-pairs connectivity matrix. Every pod, every node's host
//! namespace and the world run a TCP server that answers with the address it saw the client
//! come from; every pair is tried over IPv4 and IPv6. Pod to pod must arrive with the pod's
//! own address (no NAT inside the cluster); pod to world must arrive from the pod's node
//! address (masquerade).

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use super::netns::{self, in_netns};
use super::state::LabState;
use super::topology as topo;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// One cell of the matrix.
#[derive(Debug, Clone)]
pub struct Probe {
    pub from: String,
    pub to: String,
    pub kind: &'static str,
    pub family: &'static str,
    pub target: IpAddr,
    /// The source the server must report, when it is known in advance.
    pub expect_source: Option<IpAddr>,
    pub outcome: Result<IpAddr, String>,
}

impl Probe {
    pub fn ok(&self) -> bool {
        match (&self.outcome, self.expect_source) {
            (Ok(seen), Some(want)) => *seen == want,
            (Ok(_), None) => true,
            (Err(_), _) => false,
        }
    }
}

struct Endpoint {
    name: String,
    netns: PathBuf,
    addresses: Vec<IpAddr>,
}

/// Listeners that stop when dropped (shutting a listening socket down wakes its accept).
struct Servers(Vec<TcpListener>);

impl Drop for Servers {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        for l in &self.0 {
            // SAFETY: shutdown on a descriptor we own; it only changes socket state.
            unsafe { libc::shutdown(l.as_raw_fd(), libc::SHUT_RDWR) };
        }
    }
}

static NEXT_PORT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);

/// Runs the matrix and returns every probe (see [`Probe::ok`]).
pub fn check(state: &LabState) -> anyhow::Result<Vec<Probe>> {
    let offset = NEXT_PORT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 100;
    let port = 20000 + ((std::process::id() % 200) as u16) * 100 + offset;
    let world = Endpoint {
        name: "world".into(),
        netns: netns::path_of(&topo::Topology::new(&state.name).world_ns()),
        addresses: vec![IpAddr::V4(topo::WORLD_V4), IpAddr::V6(topo::WORLD_V6)],
    };
    let pods: Vec<(u32, Endpoint)> = state
        .pods
        .iter()
        .map(|p| {
            (
                p.node,
                Endpoint {
                    name: p.name.clone(),
                    netns: netns::path_of(&p.netns),
                    addresses: p.addresses.clone(),
                },
            )
        })
        .collect();
    let nodes: Vec<(u32, Endpoint)> = state
        .nodes
        .iter()
        .map(|n| {
            (
                n.index,
                Endpoint {
                    name: n.name.clone(),
                    netns: netns::path_of(&n.netns),
                    addresses: n.addresses.clone(),
                },
            )
        })
        .collect();

    let mut servers = Servers(Vec::new());
    for ep in pods.iter().map(|(_, e)| e).chain(std::iter::once(&world)) {
        servers.0.push(serve(&ep.netns, port)?);
    }

    let mut probes = Vec::new();
    for (src_node, src) in &pods {
        for (dst_node, dst) in &pods {
            if src.name == dst.name {
                continue;
            }
            let kind = if src_node == dst_node {
                "pod-pod same-node"
            } else {
                "pod-pod cross-node"
            };
            for &target in &dst.addresses {
                let own = src
                    .addresses
                    .iter()
                    .copied()
                    .find(|a| a.is_ipv4() == target.is_ipv4());
                probes.push(probe(src, &dst.name, kind, target, port, own));
            }
        }
        for &target in &world.addresses {
            let node_addr = nodes
                .iter()
                .find(|(i, _)| i == src_node)
                .and_then(|(_, n)| {
                    n.addresses
                        .iter()
                        .copied()
                        .find(|a| a.is_ipv4() == target.is_ipv4())
                });
            probes.push(probe(
                src,
                "world",
                "pod-world (masquerade)",
                target,
                port,
                node_addr,
            ));
        }
    }
    for (node_index, node) in &nodes {
        for (pod_node, pod) in &pods {
            let kind = if node_index == pod_node {
                "node-pod local"
            } else {
                "node-pod remote"
            };
            for &target in &pod.addresses {
                probes.push(probe(node, &pod.name, kind, target, port, None));
            }
        }
    }
    drop(servers);
    Ok(probes)
}

/// A listener in the namespace answering each connection with the client's address, served
/// by a thread until the returned listener is shut down.
fn serve(netns_path: &std::path::Path, port: u16) -> anyhow::Result<TcpListener> {
    let listener = in_netns(netns_path, move || socket2_listener(port))?;
    let serving = listener.try_clone()?;
    std::thread::spawn(move || {
        for stream in serving.incoming() {
            let Ok(stream) = stream else { break };
            let peer = stream.peer_addr().map(|a| canonical(a.ip()));
            let mut stream = stream;
            if let Ok(peer) = peer {
                let _ = std::io::Write::write_all(&mut stream, format!("{peer}\n").as_bytes());
            }
        }
    });
    Ok(listener)
}

/// A dual-stack listener on [::]:port (IPv4 clients appear as mapped addresses).
fn socket2_listener(port: u16) -> anyhow::Result<TcpListener> {
    use std::os::fd::FromRawFd;
    // SAFETY: plain socket syscalls; the fd is owned by the TcpListener on success.
    unsafe {
        let fd = libc::socket(libc::AF_INET6, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        anyhow::ensure!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let listener = TcpListener::from_raw_fd(fd);
        let zero: libc::c_int = 0;
        let one: libc::c_int = 1;
        let len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        libc::setsockopt(
            fd,
            libc::IPPROTO_IPV6,
            libc::IPV6_V6ONLY,
            &zero as *const _ as *const libc::c_void,
            len,
        );
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            &one as *const _ as *const libc::c_void,
            len,
        );
        let mut addr: libc::sockaddr_in6 = std::mem::zeroed();
        addr.sin6_family = libc::AF_INET6 as libc::sa_family_t;
        addr.sin6_port = port.to_be();
        let rc = libc::bind(
            fd,
            &addr as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
        );
        anyhow::ensure!(
            rc == 0,
            "bind [::]:{port}: {}",
            std::io::Error::last_os_error()
        );
        anyhow::ensure!(
            libc::listen(fd, 128) == 0,
            "listen: {}",
            std::io::Error::last_os_error()
        );
        Ok(listener)
    }
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

fn probe(
    src: &Endpoint,
    to: &str,
    kind: &'static str,
    target: IpAddr,
    port: u16,
    expect_source: Option<IpAddr>,
) -> Probe {
    let outcome = in_netns(&src.netns, move || {
        let mut stream =
            TcpStream::connect_timeout(&SocketAddr::new(target, port), CONNECT_TIMEOUT)?;
        stream.set_read_timeout(Some(CONNECT_TIMEOUT))?;
        let mut line = String::new();
        BufReader::new(&mut stream).read_line(&mut line)?;
        Ok(line.trim().parse::<IpAddr>()?)
    })
    .map_err(|e| format!("{e:#}"));
    Probe {
        from: src.name.clone(),
        to: to.to_string(),
        kind,
        family: if target.is_ipv4() { "IPv4" } else { "IPv6" },
        target,
        expect_source,
        outcome,
    }
}

/// The matrix as a table.
pub fn render(probes: &[Probe]) -> String {
    let mut out = format!(
        "{:<10} {:<10} {:<24} {:<5} {:<24} {}\n",
        "FROM", "TO", "KIND", "FAM", "TARGET", "RESULT"
    );
    for p in probes {
        let result = match (&p.outcome, p.expect_source) {
            (Ok(seen), Some(want)) if *seen == want => format!("ok (seen as {seen})"),
            (Ok(seen), Some(want)) => format!("FAIL: seen as {seen}, expected {want}"),
            (Ok(seen), None) => format!("ok (seen as {seen})"),
            (Err(e), _) => format!("FAIL: {e}"),
        };
        out.push_str(&format!(
            "{:<10} {:<10} {:<24} {:<5} {:<24} {}\n",
            p.from,
            p.to,
            p.kind,
            p.family,
            p.target.to_string(),
            result
        ));
    }
    let failed = probes.iter().filter(|p| !p.ok()).count();
    out.push_str(&format!("{} probes, {} failed\n", probes.len(), failed));
    out
}
