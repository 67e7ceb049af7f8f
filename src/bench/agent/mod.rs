//! `weft bench agent`: the agent against the in-memory API server loaded with a synthetic
//! cluster (1,000 Nodes, 50,000 Pods, 10,000 Services and their EndpointSlices by default,
//! shaped as the API server returns them). It measures, with a baseline from the same run:
//!
//! - the initial sync (agent start to every store listed), against a bare paged list of the
//!   same objects that decodes nothing;
//! - the agent's resident memory with the cluster loaded, against the same agent idle on a
//!   one-node cluster (and Cilium's published 438 MiB average at 50,000 pods);
//! - pod event to store: a label change every 10 ms until the Pod store has it, against a
//!   stock kube-rs watch decoding full objects;
//! - node change to routes programmed: a peer Node added (and deleted) until its route is in
//!   (and out of) the node's routing table, against the same stock watch of Nodes.
//!
//! Run it from a release build; it needs root (a network namespace and the datapath).

mod node;
mod server;
pub mod synthetic;

use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::core::v1::{Node as K8sNode, Pod as K8sPod};
use weft_netlink::{Handle as Netlink, IpFamily};

use super::stats::Summary;
use crate::lab::netns;
use node::{store_line, BenchNode};
use server::{api, wait_until, Server};
use synthetic::Shape;

/// Cilium's agent at 50,000 pods (its scalability report): average and per-pod growth.
const CILIUM_MIB_AT_50K: f64 = 438.0;
const CILIUM_KIB_PER_POD: f64 = 10.5;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(long, default_value_t = 1000)]
    pub nodes: u32,
    #[arg(long, default_value_t = 50_000)]
    pub pods: u32,
    #[arg(long, default_value_t = 10_000)]
    pub services: u32,
    /// Pod label changes, sent at `--pod-rate` per second.
    #[arg(long, default_value_t = 1000)]
    pub pod_changes: u32,
    #[arg(long, default_value_t = 100)]
    pub pod_rate: u32,
    /// Peer nodes added and deleted again, one after the other.
    #[arg(long, default_value_t = 25)]
    pub node_changes: u32,
}

const KINDS: [&str; 6] = [
    "Node",
    "Namespace",
    "Pod",
    "Service",
    "EndpointSlice",
    "NetworkPolicy",
];

pub fn run(args: &Args) -> anyhow::Result<()> {
    anyhow::ensure!(
        nix::unistd::geteuid().is_root(),
        "weft bench agent needs root (a network namespace and the datapath)"
    );
    anyhow::ensure!(
        (2..=synthetic::MAX_NODES - 24).contains(&args.nodes),
        "--nodes: 2..={}",
        synthetic::MAX_NODES - 24
    );
    anyhow::ensure!(
        args.services * synthetic::REPLICAS <= args.pods.max(synthetic::REPLICAS),
        "--services: each Service selects {} pods; there are not enough pods",
        synthetic::REPLICAS
    );
    let shape = Shape {
        nodes: args.nodes,
        pods: args.pods,
        services: args.services,
    };
    let bench = BenchNode::create()?;
    let server = Server::start(&bench.netns)?;
    let kubeconfig = server.kubeconfig(&bench.dir)?;
    let h = server.handle();

    // Idle: the agent on a one-node cluster.
    api(h.apply(synthetic::node(0)))?;
    let agent = bench.start_agent(&kubeconfig)?;
    wait_ready(&bench)?;
    std::thread::sleep(Duration::from_secs(2));
    let (idle_rss, _) = agent.rss_mib()?;
    agent.stop();

    // The cluster, and the bare list of it.
    let seeding = Instant::now();
    server.seed(shape)?;
    eprintln!(
        "seeded {} nodes, {} pods, {} services and slices in {:.1} s",
        shape.nodes,
        shape.pods,
        shape.services,
        seeding.elapsed().as_secs_f64()
    );
    let (bare, bytes) = server.bare_list()?;

    // Initial sync.
    let mut agent = bench.start_agent(&kubeconfig)?;
    wait_until(
        "the initial sync",
        Duration::from_secs(300),
        Duration::from_millis(10),
        || {
            agent.ensure_alive()?;
            let Ok((200, status)) = bench.get("/status") else {
                return Ok(false);
            };
            Ok(KINDS.iter().all(|k| {
                store_line(&status, k).is_some_and(|(n, _, synced)| {
                    synced && (*k != "Pod" || n == u64::from(shape.pods))
                })
            }))
        },
    )?;
    let sync = agent.started.elapsed();
    wait_ready(&bench)?;
    std::thread::sleep(Duration::from_secs(3));
    let (rss, peak) = agent.rss_mib()?;

    let pods = pod_events(&bench, &server, &mut agent, shape, args)?;
    let nodes = node_changes(&bench, &server, shape, args)?;
    agent.ensure_alive()?;

    println!(
        "synthetic cluster: {} nodes, {} pods, {} services + endpoint slices ({:.1} KB of JSON a pod, {:.0} MB listed)",
        shape.nodes,
        shape.pods,
        shape.services,
        synthetic::pod(0, shape.nodes, 0).to_string().len() as f64 / 1e3,
        bytes as f64 / 1e6
    );
    println!(
        "initial sync s at {} pods: {:.2}   (bare paged list, nothing decoded: {:.2} s; ratio {:.2})",
        shape.pods,
        sync.as_secs_f64(),
        bare.as_secs_f64(),
        sync.as_secs_f64() / bare.as_secs_f64()
    );
    println!(
        "agent rss MiB at {} pods: {:.1}   (peak {:.1}; Cilium's agent averages {CILIUM_MIB_AT_50K} MiB at 50,000 pods: ratio {:.2})",
        shape.pods,
        rss,
        peak,
        rss / CILIUM_MIB_AT_50K
    );
    println!(
        "agent rss MiB idle (1 node): {:.1}   (so {:.2} KiB a pod at {} pods; Cilium: +{CILIUM_KIB_PER_POD} KiB a pod)",
        idle_rss,
        (rss - idle_rss) * 1024.0 / f64::from(shape.pods.max(1)),
        shape.pods
    );
    println!(
        "pod event to store p99 ms: {:.2}   ({}; stock kube-rs watch p99 {:.2} ms, ratio {:.2})",
        pods.agent.p99,
        pods.agent.summary,
        pods.stock.p99,
        pods.agent.p99 / pods.stock.p99.max(1e-3)
    );
    println!(
        "node change to routes programmed p99 ms: {:.2}   ({}; stock kube-rs watch p99 {:.2} ms, ratio {:.2})",
        nodes.agent.p99,
        nodes.agent.summary,
        nodes.stock.p99,
        nodes.agent.p99 / nodes.stock.p99.max(1e-3)
    );
    if let Ok((200, metrics)) = bench.get("/metrics") {
        println!(
            "reconciler mean ms over the run: {}",
            reconciler_means(&metrics)
        );
    }
    agent.stop();
    Ok(())
}

/// `name=mean` per reconciler, from the agent's duration histograms.
fn reconciler_means(metrics: &str) -> String {
    let value = |suffix: &str, name: &str| -> Option<f64> {
        metrics
            .lines()
            .find(|l| {
                l.starts_with(&format!(
                    "weft_agent_reconciler_duration_seconds_{suffix}{{"
                )) && l.contains(&format!("reconciler=\"{name}\""))
            })?
            .split_whitespace()
            .last()?
            .parse()
            .ok()
    };
    let mut names: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("weft_agent_reconciler_duration_seconds_count{"))
        .filter_map(|l| l.split("reconciler=\"").nth(1)?.split('"').next())
        .collect();
    names.dedup();
    names
        .iter()
        .filter_map(|n| {
            let (sum, count) = (value("sum", n)?, value("count", n)?);
            (count > 0.0).then(|| format!("{n}={:.2}", sum / count * 1e3))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn wait_ready(bench: &BenchNode) -> anyhow::Result<()> {
    wait_until(
        "the agent to be ready",
        Duration::from_secs(120),
        Duration::from_millis(50),
        || Ok(matches!(bench.get("/readyz"), Ok((200, _)))),
    )
}

/// A latency sample and its p99, in milliseconds.
struct Latency {
    p99: f64,
    summary: Summary,
}

impl Latency {
    fn of(ms: &[f64]) -> Latency {
        let mut v: Vec<f64> = ms.to_vec();
        v.sort_by(|a, b| a.total_cmp(b));
        let p99 = v
            .get(((v.len() as f64 * 0.99).ceil() as usize).saturating_sub(1))
            .copied()
            .unwrap_or(0.0);
        Latency {
            p99,
            summary: Summary::of(&v),
        }
    }
}

struct Measured {
    agent: Latency,
    stock: Latency,
}

fn ms(from: Instant, to: Instant) -> f64 {
    to.saturating_duration_since(from).as_secs_f64() * 1e3
}

/// Pod label changes at a steady rate; the agent's Pod store generation tells when each
/// landed (every change is one new generation).
fn pod_events(
    bench: &BenchNode,
    server: &Server,
    agent: &mut node::Agent,
    shape: Shape,
    args: &Args,
) -> anyhow::Result<Measured> {
    let stock = server.stock_watch::<K8sPod>()?;
    std::thread::sleep(Duration::from_millis(500));
    let generation = |status: &str| store_line(status, "Pod").map(|(_, g, _)| g);
    let (_, status) = bench.get("/status")?;
    let base = generation(&status).context("no Pod store in /status")?;
    let h = server.handle();
    let changes = args.pod_changes;
    let interval = Duration::from_secs_f64(1.0 / f64::from(args.pod_rate.max(1)));
    let netns = bench.netns.clone();
    let pods = shape.pods;
    let nodes = shape.nodes;
    // Send and watch from inside the node: the agent's endpoint is there.
    let (sent, seen) = netns::in_netns(&netns, move || {
        let mut sent = Vec::with_capacity(changes as usize);
        let mut seen: Vec<Option<Instant>> = vec![None; changes as usize];
        let start = Instant::now();
        let deadline = start + interval * changes + Duration::from_secs(30);
        let mut landed = 0usize;
        while landed < changes as usize && Instant::now() < deadline {
            let due = (start.elapsed().as_secs_f64() / interval.as_secs_f64()) as usize + 1;
            while sent.len() < due.min(changes as usize) {
                let k = sent.len() as u32;
                let pod = (k * 7919) % pods;
                api(h.apply(synthetic::pod(pod, nodes, k + 1)))?;
                sent.push((pod, Instant::now()));
            }
            if let Ok((200, status)) = crate::lab::http_get(node::LISTEN, "/status") {
                let now = Instant::now();
                if let Some(g) = generation(&status) {
                    let done = (g.saturating_sub(base) as usize).min(changes as usize);
                    for slot in seen.iter_mut().take(done).skip(landed) {
                        *slot = Some(now);
                    }
                    landed = landed.max(done);
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok((sent, seen))
    })?;
    agent.ensure_alive()?;
    std::thread::sleep(Duration::from_millis(500));
    let mut agent_ms = Vec::new();
    let mut stock_ms = Vec::new();
    for (k, ((pod, at), landed)) in sent.iter().zip(&seen).enumerate() {
        let landed = landed.with_context(|| format!("pod change {k} never reached the store"))?;
        agent_ms.push(ms(*at, landed));
        let name = synthetic::pod_name(*pod);
        if let Some(arrived) = stock.find(&format!("MODIFIED {name} {}", k + 1)) {
            stock_ms.push(ms(*at, arrived));
        }
    }
    Ok(Measured {
        agent: Latency::of(&agent_ms),
        stock: Latency::of(&stock_ms),
    })
}

/// Peer nodes added, then deleted, one at a time: from the write to the route being in
/// (out of) this node's routing table.
fn node_changes(
    bench: &BenchNode,
    server: &Server,
    shape: Shape,
    args: &Args,
) -> anyhow::Result<Measured> {
    let stock = server.stock_watch::<K8sNode>()?;
    std::thread::sleep(Duration::from_millis(500));
    let h = server.handle();
    let cycles = args.node_changes;
    let first = shape.nodes;
    let timings = netns::in_netns(&bench.netns, move || {
        let mut netlink = Netlink::new()?;
        let mut out = Vec::new();
        for k in 0..cycles {
            let index = first + k % 24;
            let mut peer = synthetic::node(index);
            let name = format!("bench-peer-{k}");
            peer["metadata"]["name"] = serde_json::json!(name);
            let cidr: ipnet::IpNet = synthetic::node_cidr(index).parse()?;
            for present in [true, false] {
                let at = Instant::now();
                if present {
                    api(h.apply(peer.clone()))?;
                } else {
                    api(h.delete("v1", "Node", "", &name))?;
                }
                let deadline = at + Duration::from_secs(30);
                loop {
                    let routed = netlink.routes(IpFamily::V4)?.iter().any(|r| r.dst == cidr);
                    if routed == present {
                        break;
                    }
                    anyhow::ensure!(Instant::now() < deadline, "{name}: route not programmed");
                    std::thread::sleep(Duration::from_micros(500));
                }
                out.push((name.clone(), present, at, Instant::now()));
            }
        }
        Ok(out)
    })?;
    std::thread::sleep(Duration::from_millis(500));
    let mut agent_ms = Vec::new();
    let mut stock_ms = Vec::new();
    for (name, present, at, routed) in timings {
        agent_ms.push(ms(at, routed));
        let kind = if present { "ADDED" } else { "DELETED" };
        if let Some(arrived) = stock.find(&format!("{kind} {name} ")) {
            stock_ms.push(ms(at, arrived));
        }
    }
    Ok(Measured {
        agent: Latency::of(&agent_ms),
        stock: Latency::of(&stock_ms),
    })
}
