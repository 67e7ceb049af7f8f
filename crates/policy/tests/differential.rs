//! Randomised: generate namespaces, pods (labels, named ports, nodes, host network, finished
//! pods, pods without addresses) and policies (every peer and port form, policyTypes
//! defaults, empty versus missing lists, except, endPort, named ports that resolve
//! differently per pod), then compare the reference evaluator with the compiled tables
//! through the simulated datapath for every (source, destination, protocol, port) of a
//! probe matrix, before and after a random change with the same compilers (so stale ids and
//! incremental recompilation are covered too). proptest shrinks a failure to a minimal
//! cluster and prints it with both explanations.
//!
//! `PROPTEST_CASES` sets the number of clusters (default 160).

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

mod support;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use support::{both_explanations, compile};
use weft_policy::explain::explain;
use weft_policy::owned::{OwnedCluster, OwnedNamespace, OwnedNode, OwnedPod};
use weft_policy::simulate::path;
use weft_policy::{wire, Compiler, ContainerPort, NetworkPolicy, Protocol, NAMESPACE_NAME_LABEL};

const NAMESPACES: [&str; 4] = ["ns0", "ns1", "ns2", "ns3"]; // ns3 has no Namespace object
const NODES: [&str; 2] = ["n0", "n1"];
const POD_PAIRS: [(&str, &str); 4] = [("app", "a"), ("app", "b"), ("tier", "web"), ("tier", "db")];
const POD_KEYS: [&str; 3] = ["app", "tier", "other"];
const POD_VALUES: [&str; 3] = ["a", "b", "web"];
const NS_PAIRS: [(&str, &str); 5] = [
    ("team", "t0"),
    ("team", "t1"),
    ("env", "e0"),
    (NAMESPACE_NAME_LABEL, "ns0"),
    (NAMESPACE_NAME_LABEL, "ns3"),
];
const NS_KEYS: [&str; 3] = ["team", "env", NAMESPACE_NAME_LABEL];
const NS_VALUES: [&str; 4] = ["t0", "e0", "ns1", "ns3"];
const CIDRS: [&str; 12] = [
    "10.0.0.0/8",
    "10.0.0.0/16",
    "10.0.1.0/24",
    "10.0.0.10/32",
    "10.0.1.11/31",
    "0.0.0.0/0",
    "192.168.0.0/24",
    "203.0.113.0/24",
    "fd00::/16",
    "fd00:0:0:1::/64",
    "::/0",
    "2001:db8::/32",
];
const PORT_NUMBERS: [u16; 5] = [53, 80, 81, 8080, 8081];
const PORT_NAMES: [&str; 4] = ["http", "dns", "stream", "nope"];
/// Named container ports a pod may have (several names resolve differently per pod).
const CONTAINER_PORTS: [(&str, Protocol, u16); 6] = [
    ("http", Protocol::Tcp, 8080),
    ("http", Protocol::Tcp, 8081),
    ("dns", Protocol::Udp, 53),
    ("dns", Protocol::Tcp, 53),
    ("stream", Protocol::Sctp, 80),
    ("stream", Protocol::Sctp, 81),
];
const PROBE_PORTS: [u16; 7] = [53, 80, 81, 82, 8080, 8081, 9000];
const EXTERNALS: [&str; 4] = ["203.0.113.5", "10.0.9.9", "2001:db8::5", "fd00::9:9"];

#[derive(Debug, Clone)]
struct SelSpec {
    labels: Vec<usize>,
    exprs: Vec<(usize, usize, Vec<usize>)>,
}

#[derive(Debug, Clone)]
enum PeerSpec {
    Pods(SelSpec),
    Namespaces(SelSpec),
    Both(SelSpec, SelSpec),
    Block(usize, Vec<usize>),
}

#[derive(Debug, Clone)]
enum PortValue {
    None,
    Number(usize),
    Name(usize),
}

#[derive(Debug, Clone)]
struct PortSpec {
    protocol: Option<usize>,
    port: PortValue,
    end: Option<u16>,
}

#[derive(Debug, Clone)]
struct RuleSpec {
    peers: Option<Vec<PeerSpec>>,
    ports: Option<Vec<PortSpec>>,
}

#[derive(Debug, Clone)]
struct PolicySpec {
    namespace: usize,
    selector: SelSpec,
    types: usize,
    ingress: Option<Vec<RuleSpec>>,
    egress: Option<Vec<RuleSpec>>,
}

#[derive(Debug, Clone)]
struct PodSpec {
    namespace: usize,
    labels: Vec<usize>,
    node: usize,
    host_network: bool,
    terminal: bool,
    has_ips: bool,
    ports: Vec<usize>,
}

#[derive(Debug, Clone)]
enum Change {
    RelabelPod(usize, Vec<usize>),
    RelabelNamespace(usize, Vec<usize>),
    DeletePolicy(usize),
    AddPolicy(PolicySpec),
    MovePod(usize),
}

#[derive(Clone)]
struct Universe {
    namespace_labels: Vec<Vec<usize>>,
    pods: Vec<PodSpec>,
    policies: Vec<PolicySpec>,
    change: Change,
}

fn sel_strategy() -> impl Strategy<Value = SelSpec> {
    (
        prop::collection::vec(0..5usize, 0..=2),
        prop::collection::vec(
            (
                0..3usize,
                0..4usize,
                prop::collection::vec(0..4usize, 1..=2),
            ),
            0..=1,
        ),
    )
        .prop_map(|(labels, exprs)| SelSpec { labels, exprs })
}

fn peer_strategy() -> impl Strategy<Value = PeerSpec> {
    prop_oneof![
        sel_strategy().prop_map(PeerSpec::Pods),
        sel_strategy().prop_map(PeerSpec::Namespaces),
        (sel_strategy(), sel_strategy()).prop_map(|(p, n)| PeerSpec::Both(p, n)),
        (0..CIDRS.len(), prop::collection::vec(0..CIDRS.len(), 0..=2))
            .prop_map(|(c, e)| PeerSpec::Block(c, e)),
    ]
}

fn port_strategy() -> impl Strategy<Value = PortSpec> {
    (
        prop::option::weighted(0.6, 0..3usize),
        prop_oneof![
            1 => Just(PortValue::None),
            2 => (0..PORT_NUMBERS.len()).prop_map(PortValue::Number),
            2 => (0..PORT_NAMES.len()).prop_map(PortValue::Name),
        ],
        prop::option::weighted(0.25, prop_oneof![Just(0u16), Just(1), Just(100)]),
    )
        .prop_map(|(protocol, port, end)| PortSpec {
            protocol,
            port,
            end,
        })
}

fn rule_strategy() -> impl Strategy<Value = RuleSpec> {
    (
        prop_oneof![
            1 => Just(None),
            1 => Just(Some(vec![])),
            4 => prop::collection::vec(peer_strategy(), 1..=3).prop_map(Some),
        ],
        prop_oneof![
            2 => Just(None),
            1 => Just(Some(vec![])),
            4 => prop::collection::vec(port_strategy(), 1..=3).prop_map(Some),
        ],
    )
        .prop_map(|(peers, ports)| RuleSpec { peers, ports })
}

fn rules_strategy() -> impl Strategy<Value = Option<Vec<RuleSpec>>> {
    prop_oneof![
        1 => Just(None),
        1 => Just(Some(vec![])),
        3 => prop::collection::vec(rule_strategy(), 1..=2).prop_map(Some),
    ]
}

fn policy_strategy() -> impl Strategy<Value = PolicySpec> {
    (
        0..NAMESPACES.len(),
        sel_strategy(),
        0..4usize,
        rules_strategy(),
        rules_strategy(),
    )
        .prop_map(|(namespace, selector, types, ingress, egress)| PolicySpec {
            namespace,
            selector,
            types,
            ingress,
            egress,
        })
}

fn pod_strategy() -> impl Strategy<Value = PodSpec> {
    (
        0..NAMESPACES.len(),
        prop::collection::vec(0..POD_PAIRS.len(), 0..=2),
        0..NODES.len(),
        prop::bool::weighted(0.08),
        prop::bool::weighted(0.08),
        prop::bool::weighted(0.92),
        prop::collection::vec(0..CONTAINER_PORTS.len(), 0..=3),
    )
        .prop_map(
            |(namespace, labels, node, host_network, terminal, has_ips, ports)| PodSpec {
                namespace,
                labels,
                node,
                host_network,
                terminal,
                has_ips,
                ports,
            },
        )
}

fn universe_strategy() -> impl Strategy<Value = Universe> {
    (
        prop::collection::vec(prop::collection::vec(0..3usize, 0..=2), 3),
        prop::collection::vec(pod_strategy(), 1..=7),
        prop::collection::vec(policy_strategy(), 0..=5),
        prop_oneof![
            (0..7usize, prop::collection::vec(0..POD_PAIRS.len(), 0..=2))
                .prop_map(|(p, l)| Change::RelabelPod(p, l)),
            (0..3usize, prop::collection::vec(0..3usize, 0..=2))
                .prop_map(|(n, l)| Change::RelabelNamespace(n, l)),
            (0..4usize).prop_map(Change::DeletePolicy),
            policy_strategy().prop_map(Change::AddPolicy),
            (0..7usize).prop_map(Change::MovePod),
        ],
    )
        .prop_map(|(namespace_labels, pods, policies, change)| Universe {
            namespace_labels,
            pods,
            policies,
            change,
        })
}

fn selector(
    s: &SelSpec,
    pairs: &[(&str, &str)],
    keys: &[&str],
    values: &[&str],
) -> wire::LabelSelector {
    let ops = ["In", "NotIn", "Exists", "DoesNotExist"];
    wire::LabelSelector {
        match_labels: (!s.labels.is_empty()).then(|| {
            s.labels
                .iter()
                .map(|&i| {
                    let (k, v) = pairs[i % pairs.len()];
                    (k.to_string(), v.to_string())
                })
                .collect()
        }),
        match_expressions: (!s.exprs.is_empty()).then(|| {
            s.exprs
                .iter()
                .map(|(k, op, vals)| {
                    let op = ops[*op];
                    wire::Requirement {
                        key: keys[*k % keys.len()].to_string(),
                        operator: op.to_string(),
                        values: matches!(op, "In" | "NotIn").then(|| {
                            vals.iter()
                                .map(|v| values[*v % values.len()].to_string())
                                .collect()
                        }),
                    }
                })
                .collect()
        }),
    }
}

fn pod_selector(s: &SelSpec) -> wire::LabelSelector {
    selector(s, &POD_PAIRS, &POD_KEYS, &POD_VALUES)
}

fn ns_selector(s: &SelSpec) -> wire::LabelSelector {
    selector(s, &NS_PAIRS, &NS_KEYS, &NS_VALUES)
}

fn wire_peer(p: &PeerSpec) -> wire::Peer {
    match p {
        PeerSpec::Pods(s) => wire::Peer {
            pod_selector: Some(pod_selector(s)),
            ..Default::default()
        },
        PeerSpec::Namespaces(s) => wire::Peer {
            namespace_selector: Some(ns_selector(s)),
            ..Default::default()
        },
        PeerSpec::Both(p, n) => wire::Peer {
            pod_selector: Some(pod_selector(p)),
            namespace_selector: Some(ns_selector(n)),
            ..Default::default()
        },
        PeerSpec::Block(c, excepts) => {
            let cidr: ipnet::IpNet = CIDRS[*c].parse().unwrap();
            // Only strict subsets are valid excepts; others would just get the policy refused.
            let except: Vec<String> = excepts
                .iter()
                .map(|e| CIDRS[*e].parse::<ipnet::IpNet>().unwrap())
                .filter(|e| cidr.contains(e) && e.prefix_len() > cidr.prefix_len())
                .map(|e| e.to_string())
                .collect();
            wire::Peer {
                ip_block: Some(wire::IpBlock {
                    cidr: Some(cidr.to_string()),
                    except: (!except.is_empty()).then_some(except),
                }),
                ..Default::default()
            }
        }
    }
}

fn wire_port(p: &PortSpec) -> wire::Port {
    let protocols = ["TCP", "UDP", "SCTP"];
    let (port, end_port) = match &p.port {
        PortValue::None => (None, None),
        PortValue::Number(i) => {
            let n = PORT_NUMBERS[*i];
            (
                Some(wire::IntOrString::Int(i64::from(n))),
                p.end.map(|d| i64::from(n) + i64::from(d)),
            )
        }
        // endPort with a name is refused by validation: the policy then fails closed,
        // which both evaluators see the same way.
        PortValue::Name(i) => (
            Some(wire::IntOrString::String(PORT_NAMES[*i].to_string())),
            p.end.filter(|d| *d == 100).map(|d| 80 + i64::from(d)),
        ),
    };
    wire::Port {
        protocol: p.protocol.map(|i| protocols[i].to_string()),
        port,
        end_port,
    }
}

fn wire_policy(i: usize, s: &PolicySpec) -> wire::NetworkPolicy {
    let types = match s.types {
        0 => None,
        1 => Some(vec!["Ingress".to_string()]),
        2 => Some(vec!["Egress".to_string()]),
        _ => Some(vec!["Ingress".to_string(), "Egress".to_string()]),
    };
    let peers = |r: &RuleSpec| {
        r.peers
            .as_ref()
            .map(|ps| ps.iter().map(wire_peer).collect())
    };
    let ports = |r: &RuleSpec| {
        r.ports
            .as_ref()
            .map(|ps| ps.iter().map(wire_port).collect())
    };
    wire::NetworkPolicy {
        api_version: None,
        kind: None,
        metadata: wire::ObjectMeta {
            name: Some(format!("p{i}")),
            namespace: Some(NAMESPACES[s.namespace].to_string()),
        },
        spec: Some(wire::Spec {
            pod_selector: Some(pod_selector(&s.selector)),
            policy_types: types,
            ingress: s.ingress.as_ref().map(|rules| {
                rules
                    .iter()
                    .map(|r| wire::IngressRule {
                        from: peers(r),
                        ports: ports(r),
                    })
                    .collect()
            }),
            egress: s.egress.as_ref().map(|rules| {
                rules
                    .iter()
                    .map(|r| wire::EgressRule {
                        to: peers(r),
                        ports: ports(r),
                    })
                    .collect()
            }),
        }),
    }
}

fn compact(i: usize, s: &PolicySpec) -> NetworkPolicy {
    let w = wire_policy(i, s);
    NetworkPolicy::from_wire(&w).unwrap_or_else(|_| NetworkPolicy::fail_closed(&w).unwrap())
}

fn node_addresses(node: usize) -> Vec<IpAddr> {
    vec![
        format!("192.168.0.{}", node + 1).parse().unwrap(),
        format!("fd00:ff::{}", node + 1).parse().unwrap(),
    ]
}

fn pod_labels(labels: &[usize]) -> BTreeMap<String, String> {
    labels
        .iter()
        .map(|&i| (POD_PAIRS[i].0.to_string(), POD_PAIRS[i].1.to_string()))
        .collect()
}

fn ns_labels(labels: &[usize]) -> BTreeMap<String, String> {
    labels
        .iter()
        .map(|&i| (NS_PAIRS[i].0.to_string(), NS_PAIRS[i].1.to_string()))
        .filter(|(k, _)| k != NAMESPACE_NAME_LABEL)
        .collect()
}

impl Universe {
    fn build(&self) -> OwnedCluster {
        let mut c = OwnedCluster {
            namespaces: self
                .namespace_labels
                .iter()
                .enumerate()
                .map(|(i, l)| OwnedNamespace {
                    name: NAMESPACES[i].to_string(),
                    labels: ns_labels(l),
                })
                .collect(),
            nodes: (0..NODES.len())
                .map(|i| OwnedNode {
                    name: NODES[i].to_string(),
                    addresses: node_addresses(i),
                })
                .collect(),
            ..OwnedCluster::default()
        };
        for (i, p) in self.pods.iter().enumerate() {
            let ips = if !p.has_ips {
                vec![]
            } else if p.host_network {
                node_addresses(p.node)
            } else {
                vec![
                    format!("10.0.{}.{}", p.node, 10 + i).parse().unwrap(),
                    format!("fd00:0:0:{}::{}", p.node, 10 + i).parse().unwrap(),
                ]
            };
            let mut ports: Vec<ContainerPort> = Vec::new();
            for &k in &p.ports {
                let (name, protocol, port) = CONTAINER_PORTS[k];
                // Names are unique within a valid pod.
                if !ports.iter().any(|cp| cp.name == name) {
                    ports.push(ContainerPort {
                        name: name.to_string(),
                        protocol,
                        port,
                    });
                }
            }
            c.pods.push(OwnedPod {
                namespace: NAMESPACES[p.namespace].to_string(),
                name: format!("pod{i}"),
                labels: pod_labels(&p.labels),
                ips,
                host_network: p.host_network,
                terminal: p.terminal,
                node: NODES[p.node].to_string(),
                ports,
            });
        }
        c.policies = self
            .policies
            .iter()
            .enumerate()
            .map(|(i, s)| compact(i, s))
            .collect();
        c
    }

    fn changed(&self, mut c: OwnedCluster) -> OwnedCluster {
        match &self.change {
            Change::RelabelPod(p, l) => {
                if let Some(pod) = c.pods.get_mut(p % self.pods.len()) {
                    pod.labels = pod_labels(l);
                }
            }
            Change::RelabelNamespace(n, l) => c.namespaces[*n].labels = ns_labels(l),
            Change::DeletePolicy(i) => {
                if !c.policies.is_empty() {
                    let i = i % c.policies.len();
                    c.policies.remove(i);
                }
            }
            Change::AddPolicy(s) => c.upsert_policy(compact(99, s)),
            Change::MovePod(p) => {
                let i = p % self.pods.len();
                let pod = &mut c.pods[i];
                if !pod.host_network {
                    let node = if pod.node == "n0" { 1 } else { 0 };
                    pod.node = NODES[node].to_string();
                    if !pod.ips.is_empty() {
                        pod.ips = vec![
                            format!("10.0.{node}.{}", 10 + i).parse().unwrap(),
                            format!("fd00:0:0:{node}::{}", 10 + i).parse().unwrap(),
                        ];
                    }
                }
            }
        }
        c
    }
}

impl fmt::Debug for Universe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = self.build();
        writeln!(f, "namespaces:")?;
        for n in &c.namespaces {
            writeln!(f, "  {} {:?}", n.name, n.labels)?;
        }
        writeln!(f, "pods:")?;
        for p in &c.pods {
            writeln!(
                f,
                "  {}/{} {:?} node={} ips={:?}{}{} ports={:?}",
                p.namespace,
                p.name,
                p.labels,
                p.node,
                p.ips,
                if p.host_network { " hostNetwork" } else { "" },
                if p.terminal { " terminal" } else { "" },
                p.ports
                    .iter()
                    .map(|cp| format!("{}={}/{}", cp.name, cp.protocol, cp.port))
                    .collect::<Vec<_>>()
            )?;
        }
        writeln!(f, "policies:")?;
        for (i, s) in self.policies.iter().enumerate() {
            let yaml = serde_yaml::to_string(&wire_policy(i, s)).unwrap();
            writeln!(f, "---\n{yaml}")?;
        }
        writeln!(f, "then: {:?}", self.change)
    }
}

fn addresses(c: &OwnedCluster) -> Vec<IpAddr> {
    let mut all: Vec<IpAddr> = c.pods.iter().flat_map(|p| p.ips.clone()).collect();
    for n in 0..NODES.len() {
        all.extend(node_addresses(n));
    }
    all.extend(EXTERNALS.iter().map(|e| e.parse::<IpAddr>().unwrap()));
    all.sort();
    all.dedup();
    all
}

/// Compares the evaluators on every probe of the matrix.
fn compare(c: &OwnedCluster, compilers: &mut Vec<Compiler>) -> Result<(), TestCaseError> {
    let cluster = c.cluster();
    let sims = compile(c, compilers);
    let mut probes: Vec<(u8, u16)> = Vec::new();
    for p in Protocol::ALL {
        for port in PROBE_PORTS {
            probes.push((p.number(), port));
        }
    }
    probes.push((1, 0)); // ICMP
    probes.push((58, 0)); // ICMPv6
    let addrs = addresses(c);
    for &src in &addrs {
        for &dst in &addrs {
            if src.is_ipv4() != dst.is_ipv4() || src == dst {
                continue;
            }
            for &(protocol, port) in &probes {
                let reference = explain(&cluster, src, dst, protocol, port).allowed();
                let simulated = path(&sims, src, dst, protocol, port).allowed();
                if reference != simulated {
                    return Err(TestCaseError::fail(format!(
                        "reference and datapath disagree (reference {reference}, datapath {simulated}):\n{}",
                        both_explanations(&cluster, &sims, src, dst, protocol, port)
                    )));
                }
            }
        }
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(160)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        max_shrink_iters: 4096,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_datapath_decides_as_the_reference(u in universe_strategy()) {
        let mut compilers = Vec::new();
        let before = u.build();
        compare(&before, &mut compilers)?;
        let after = u.changed(before);
        compare(&after, &mut compilers)?;
        // A fresh compiler agrees with the incremental one on every verdict.
        compare(&after, &mut Vec::new())?;
    }
}
