//! Timing the compiler on a synthetic cluster (for `weft bench policy`; never asserted).
//!
//! The baseline is the work no compiler can skip: matching every policy's pod selector
//! against every pod once. The figure that matters is the ratio to it.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use crate::compile::Compiler;
use crate::owned::{OwnedCluster, OwnedNamespace, OwnedNode, OwnedPod};
use crate::policy::NetworkPolicy;
use crate::view::{ContainerPort, Protocol};
use crate::wire;

const NAMESPACES: usize = 20;
const APPS: usize = 50;

fn labels(pairs: &[(&str, String)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// `pods` pods over `nodes` nodes and 20 namespaces, and `policies` policies of every kind
/// (selectors, namespace selectors, ipBlocks with excepts, named ports, ranges).
pub fn synthetic(policies: usize, pods: usize, nodes: usize) -> OwnedCluster {
    let nodes = nodes.max(1);
    OwnedCluster {
        namespaces: (0..NAMESPACES)
            .map(|i| OwnedNamespace {
                name: format!("ns{i}"),
                labels: labels(&[
                    ("team", format!("t{}", i % 4)),
                    ("env", format!("e{}", i % 2)),
                ]),
            })
            .collect(),
        pods: (0..pods)
            .map(|i| {
                let node = i % nodes;
                let n = (i / nodes) as u32;
                OwnedPod {
                    namespace: format!("ns{}", i % NAMESPACES),
                    name: format!("pod{i}"),
                    labels: labels(&[
                        ("app", format!("app{}", i % APPS)),
                        ("tier", ["web", "api", "db"][i % 3].to_string()),
                        ("version", format!("v{}", i % 2)),
                    ]),
                    ips: vec![
                        IpAddr::V4(Ipv4Addr::from(
                            0x0af4_0000 | ((node as u32) << 10) | (n + 2),
                        )),
                        IpAddr::V6(Ipv6Addr::new(
                            0xfd00,
                            0x10,
                            0x244,
                            node as u16,
                            0,
                            0,
                            0,
                            n as u16 + 2,
                        )),
                    ],
                    host_network: false,
                    terminal: false,
                    node: format!("node{node}"),
                    ports: vec![
                        ContainerPort {
                            name: "http".into(),
                            protocol: Protocol::Tcp,
                            port: 8080 + (i % 3) as u16,
                        },
                        ContainerPort {
                            name: "metrics".into(),
                            protocol: Protocol::Tcp,
                            port: 9090,
                        },
                    ],
                }
            })
            .collect(),
        nodes: (0..nodes)
            .map(|i| OwnedNode {
                name: format!("node{i}"),
                addresses: vec![IpAddr::V4(Ipv4Addr::new(
                    192,
                    168,
                    (i / 200) as u8,
                    10 + (i % 200) as u8,
                ))],
            })
            .collect(),
        policies: (0..policies)
            .filter_map(|i| NetworkPolicy::from_wire(&synthetic_policy(i)).ok())
            .collect(),
    }
}

fn synthetic_policy(i: usize) -> wire::NetworkPolicy {
    let app = |k: usize| format!("app{}", k % APPS);
    let text = match i % 6 {
        0 => format!(
            "spec: {{podSelector: {{matchLabels: {{app: {}}}}}, ingress: [{{from: [{{podSelector: {{matchLabels: {{app: {}}}}}}}], ports: [{{port: 80}}]}}]}}",
            app(i),
            app(i + 1)
        ),
        1 => format!(
            "spec: {{podSelector: {{matchLabels: {{app: {}}}}}, ingress: [{{from: [{{namespaceSelector: {{matchLabels: {{team: t{}}}}}, podSelector: {{matchLabels: {{tier: web}}}}}}], ports: [{{port: http}}]}}]}}",
            app(i),
            i % 4
        ),
        2 => format!(
            "spec: {{podSelector: {{matchLabels: {{app: {}}}}}, policyTypes: [Egress], egress: [{{to: [{{ipBlock: {{cidr: 10.{}.0.0/16, except: [10.{}.1.0/24]}}}}], ports: [{{port: 443}}, {{protocol: UDP, port: 53}}]}}]}}",
            app(i),
            i % 200,
            i % 200
        ),
        3 => format!(
            "spec: {{podSelector: {{matchExpressions: [{{key: app, operator: In, values: [{}, {}]}}]}}, policyTypes: [Egress], egress: [{{to: [{{podSelector: {{matchLabels: {{tier: db}}}}, namespaceSelector: {{}}}}], ports: [{{port: 8000, endPort: 8999}}, {{port: http}}]}}]}}",
            app(i),
            app(i + 7)
        ),
        4 => "spec: {podSelector: {matchLabels: {tier: api}}, ingress: [{ports: [{protocol: UDP, port: 53, endPort: 54}]}, {from: [{ipBlock: {cidr: 192.168.0.0/16}}]}]}".to_string(),
        _ => "spec: {podSelector: {}, policyTypes: [Ingress, Egress]}".to_string(),
    };
    let mut w: wire::NetworkPolicy = serde_yaml::from_str(&text).expect("a synthetic policy");
    w.metadata.name = Some(format!("policy{i}"));
    w.metadata.namespace = Some(format!("ns{}", i % NAMESPACES));
    w
}

/// Medians and spreads of a measurement.
#[derive(Debug, Clone)]
pub struct Figure {
    pub median: Duration,
    pub min: Duration,
    pub max: Duration,
}

impl Figure {
    fn of(mut samples: Vec<Duration>) -> Figure {
        samples.sort();
        Figure {
            median: samples[samples.len() / 2],
            min: samples[0],
            max: samples[samples.len() - 1],
        }
    }
}

#[derive(Debug, Clone)]
pub struct Report {
    pub policies: usize,
    pub pods: usize,
    pub nodes: usize,
    /// A fresh compiler (no ids yet), on the first node.
    pub cold: Figure,
    /// The same compiler again on an unchanged cluster.
    pub warm: Figure,
    pub baseline: Figure,
    pub allow_entries: usize,
    pub cidr_entries: usize,
    pub identities: usize,
    pub sets: usize,
    /// Table writes after relabelling one pod.
    pub relabel_writes: usize,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ratio = |d: &Figure| d.median.as_secs_f64() / self.baseline.median.as_secs_f64();
        writeln!(
            f,
            "policy compile: {} policies, {} pods, {} node(s), tables of the first node",
            self.policies, self.pods, self.nodes
        )?;
        for (name, fig) in [
            ("cold", &self.cold),
            ("warm", &self.warm),
            ("baseline", &self.baseline),
        ] {
            writeln!(
                f,
                "  {name:<9} median {:>9.3} ms  (min {:.3}, max {:.3})  {:>6.1}x baseline",
                fig.median.as_secs_f64() * 1e3,
                fig.min.as_secs_f64() * 1e3,
                fig.max.as_secs_f64() * 1e3,
                ratio(fig)
            )?;
        }
        writeln!(
            f,
            "  {} allow entries, {} cidr entries, {} identities, {} policy sets; relabelling one pod: {} writes",
            self.allow_entries, self.cidr_entries, self.identities, self.sets, self.relabel_writes
        )
    }
}

/// Compiles the first node's tables `runs` times each way and measures the baseline.
pub fn measure(policies: usize, pods: usize, nodes: usize, runs: usize) -> Report {
    let runs = runs.max(1);
    let synthetic = synthetic(policies, pods, nodes);
    let cluster = synthetic.cluster();
    let node = synthetic.nodes[0].name.clone();
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    let mut baseline = Vec::new();
    let mut last = None;
    for _ in 0..runs {
        let start = Instant::now();
        let matched = cluster
            .policies
            .iter()
            .map(|p| {
                cluster
                    .pods
                    .iter()
                    .filter(|pod| {
                        pod.namespace == p.namespace && p.pod_selector.matches(pod.labels)
                    })
                    .count()
            })
            .sum::<usize>();
        baseline.push(start.elapsed());
        std::hint::black_box(matched);

        let mut compiler = Compiler::new();
        let start = Instant::now();
        let first = compiler.compile(&cluster, &node);
        cold.push(start.elapsed());
        let start = Instant::now();
        let again = compiler.compile(&cluster, &node);
        warm.push(start.elapsed());
        std::hint::black_box(&first);
        last = Some((compiler, again));
    }
    let (mut compiler, compiled) = last.expect("at least one run");
    let mut relabelled = synthetic.clone();
    relabelled.pods[0]
        .labels
        .insert("app".into(), "relabelled".into());
    let after = compiler.compile(&relabelled.cluster(), &node);
    Report {
        policies: synthetic.policies.len(),
        pods,
        nodes,
        cold: Figure::of(cold),
        warm: Figure::of(warm),
        baseline: Figure::of(baseline),
        allow_entries: compiled.tables.allow.len(),
        cidr_entries: compiled.tables.cidrs.len(),
        identities: compiled.tables.meta.identities.len(),
        sets: compiled.tables.meta.sets.len(),
        relabel_writes: compiled.tables.diff(&after.tables).len(),
    }
}
