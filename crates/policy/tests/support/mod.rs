//! Small clusters written inline, for the targeted tests.
#![allow(dead_code)]

use std::net::IpAddr;

use weft_policy::explain::{explain, explain_allow, explain_drop};
use weft_policy::owned::{OwnedCluster, OwnedNamespace, OwnedNode, OwnedPod};
use weft_policy::simulate::{path, Allowed, Decision, Simulator};
use weft_policy::Cluster;
use weft_policy::{wire, Compiler, ContainerPort, NetworkPolicy, Protocol};

pub const TCP: u8 = 6;
pub const UDP: u8 = 17;

pub fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Two nodes: n0 at 192.168.0.1, n1 at 192.168.0.2; namespaces x and y.
pub fn cluster() -> OwnedCluster {
    OwnedCluster {
        namespaces: ["x", "y"]
            .iter()
            .map(|n| OwnedNamespace {
                name: n.to_string(),
                labels: [("team".to_string(), format!("team-{n}"))].into(),
            })
            .collect(),
        nodes: (0..2)
            .map(|i| OwnedNode {
                name: format!("n{i}"),
                addresses: vec![ip(&format!("192.168.0.{}", i + 1))],
            })
            .collect(),
        ..OwnedCluster::default()
    }
}

pub fn pod(key: &str, labels: &[(&str, &str)], node: &str, ips: &[&str]) -> OwnedPod {
    let (namespace, name) = key.split_once('/').unwrap();
    OwnedPod {
        namespace: namespace.into(),
        name: name.into(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ips: ips.iter().map(|s| ip(s)).collect(),
        host_network: false,
        terminal: false,
        node: node.into(),
        ports: vec![],
    }
}

pub fn with_port(mut p: OwnedPod, name: &str, protocol: Protocol, port: u16) -> OwnedPod {
    p.ports.push(ContainerPort {
        name: name.into(),
        protocol,
        port,
    });
    p
}

/// A policy from YAML (`metadata` included), which must be valid.
pub fn policy(yaml: &str) -> NetworkPolicy {
    let w: wire::NetworkPolicy = serde_yaml::from_str(yaml).unwrap();
    NetworkPolicy::from_wire(&w).unwrap()
}

pub fn compile(c: &OwnedCluster, compilers: &mut Vec<Compiler>) -> Vec<Simulator> {
    while compilers.len() < c.nodes.len() {
        compilers.push(Compiler::new());
    }
    let cluster = c.cluster();
    c.nodes
        .iter()
        .zip(compilers.iter_mut())
        .map(|(n, compiler)| Simulator::new(compiler.compile(&cluster, &n.name).tables))
        .collect()
}

/// Both evaluators' words for one attempt: the reference's explanation, then what each
/// node's tables decided.
pub fn both_explanations(
    cluster: &Cluster,
    sims: &[Simulator],
    src: IpAddr,
    dst: IpAddr,
    protocol: u8,
    port: u16,
) -> String {
    let mut report = format!("{}\n", explain(cluster, src, dst, protocol, port));
    let p = path(sims, src, dst, protocol, port);
    for (decision, endpoint) in [(p.egress, src), (p.ingress, dst)] {
        let Some(decision) = decision else { continue };
        let node = sims.iter().find(|s| s.is_local(endpoint)).unwrap();
        let why = match decision {
            Decision::Drop(e) => explain_drop(node.tables(), &e),
            Decision::Allow(Allowed::Rule(v)) => explain_allow(node.tables(), &v),
            Decision::Allow(other) => format!("{endpoint}: {other:?}"),
        };
        report.push_str(&format!("  datapath: {why}\n"));
    }
    report
}

/// Both evaluators' verdicts; the test fails when they disagree.
pub fn allowed(c: &OwnedCluster, src: &str, dst: &str, protocol: u8, port: u16) -> bool {
    let sims = compile(c, &mut Vec::new());
    let cluster = c.cluster();
    let (src, dst) = (ip(src), ip(dst));
    let reference = explain(&cluster, src, dst, protocol, port).allowed();
    assert_eq!(
        reference,
        path(&sims, src, dst, protocol, port).allowed(),
        "evaluators disagree:\n{}",
        both_explanations(&cluster, &sims, src, dst, protocol, port)
    );
    reference
}
