//! Every upstream Netpol scenario (scenarios/netpol) against both evaluators: the reference
//! and the compiled tables through the simulated datapath lookups, over IPv4 and IPv6, with
//! the world's pods spread over two nodes and one compiler per node kept across steps.

mod support;

use std::net::IpAddr;

use support::{both_explanations, compile};
use weft_policy::explain::explain;
use weft_policy::owned::{OwnedCluster, OwnedNamespace, OwnedNode, OwnedPod};
use weft_policy::scenario::{pod_names, render, Bindings, Matrix, Probe, Scenario, Step, World};
use weft_policy::simulate::path;
use weft_policy::{wire, NetworkPolicy};

const NODES: [&str; 2] = ["n0", "n1"];

fn address(node: usize, i: usize, v6: bool) -> IpAddr {
    if v6 {
        format!("fd00:10:244:{node}::{}", 10 + i).parse().unwrap()
    } else {
        format!("10.244.{node}.{}", 10 + i).parse().unwrap()
    }
}

/// The world on two dual-stack nodes, and the bindings of one family.
fn world(v6: bool) -> (OwnedCluster, Bindings) {
    let w = World::load().unwrap();
    let mut c = OwnedCluster {
        namespaces: w
            .namespaces
            .iter()
            .map(|(name, labels)| OwnedNamespace {
                name: name.clone(),
                labels: labels.clone(),
            })
            .collect(),
        nodes: NODES
            .iter()
            .enumerate()
            .map(|(i, name)| OwnedNode {
                name: name.to_string(),
                addresses: vec![
                    format!("192.168.0.{}", i + 1).parse().unwrap(),
                    format!("fd00:ffff::{}", i + 1).parse().unwrap(),
                ],
            })
            .collect(),
        ..OwnedCluster::default()
    };
    let mut b = Bindings::with_model_namespaces();
    for (i, p) in w.pods.iter().enumerate() {
        let node = i % NODES.len();
        c.pods.push(OwnedPod {
            namespace: p.namespace.clone(),
            name: p.name.clone(),
            labels: p.labels.clone(),
            ips: vec![address(node, i, false), address(node, i, true)],
            host_network: false,
            terminal: false,
            node: NODES[node].to_string(),
            ports: p.ports.clone(),
        });
        b.addresses
            .insert(format!("{}/{}", p.namespace, p.name), address(node, i, v6));
    }
    (c, b)
}

fn run_step(c: &mut OwnedCluster, b: &Bindings, step: &Step) -> Result<(), String> {
    for object in &step.apply {
        let rendered = render(object, b).map_err(|e| e.to_string())?;
        let w = wire::NetworkPolicy::from_value(rendered).map_err(|e| e.to_string())?;
        let policy = NetworkPolicy::from_wire(&w).map_err(|issues| {
            issues
                .iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        })?;
        c.upsert_policy(policy);
    }
    for d in &step.delete {
        let ns = b.namespace(&d.namespace).map_err(|e| e.to_string())?;
        let before = c.policies.len();
        c.policies
            .retain(|p| !(p.namespace == ns && p.name == d.name));
        if before == c.policies.len() {
            return Err(format!("delete: no policy {ns}/{}", d.name));
        }
    }
    for l in &step.label_pods {
        let pod = c
            .pod_mut(&l.pod)
            .ok_or_else(|| format!("no pod {}", l.pod))?;
        pod.labels.extend(l.set.clone());
    }
    for l in &step.label_namespaces {
        let ns = c
            .namespaces
            .iter_mut()
            .find(|n| n.name == l.namespace)
            .ok_or_else(|| format!("no namespace {}", l.namespace))?;
        ns.labels.extend(l.set.clone());
    }
    Ok(())
}

fn matrix(b: &Bindings, decide: impl Fn(IpAddr, IpAddr) -> bool) -> Matrix {
    let mut m = Matrix::new(pod_names(), true);
    for from in pod_names() {
        for to in pod_names() {
            m.set(&from, &to, decide(b.addresses[&from], b.addresses[&to]));
        }
    }
    m
}

fn check_scenario(s: &Scenario, v6: bool, failures: &mut Vec<String>) {
    let (mut c, b) = world(v6);
    let family = if v6 { "IPv6" } else { "IPv4" };
    let mut compilers = Vec::new();
    for (si, step) in s.steps.iter().enumerate() {
        let at = format!("{} ({family}) step {si} {:?}", s.name, step.name);
        if let Err(e) = run_step(&mut c, &b, step) {
            failures.push(format!("{at}: {e}"));
            return;
        }
        let cluster = c.cluster();
        let sims = compile(&c, &mut compilers);
        for e in &step.expect {
            let expected = e.matrix().unwrap();
            for probe in e.probes().unwrap() {
                let Probe { protocol, port } = probe;
                let proto = protocol.number();
                let reference = matrix(&b, |src, dst| {
                    explain(&cluster, src, dst, proto, port).allowed()
                });
                let compiled = matrix(&b, |src, dst| path(&sims, src, dst, proto, port).allowed());
                for (name, got) in [("reference", &reference), ("compiled", &compiled)] {
                    let diffs = expected.differences(got);
                    if diffs.is_empty() {
                        continue;
                    }
                    let mut report = format!(
                        "{at} {probe}: the {name} evaluator differs from the expectation\nexpected:\n{expected}got:\n{got}"
                    );
                    for (from, to) in diffs.iter().take(3) {
                        let (src, dst) = (b.addresses[from], b.addresses[to]);
                        report.push_str(&both_explanations(&cluster, &sims, src, dst, proto, port));
                    }
                    failures.push(report);
                }
            }
        }
    }
}

#[test]
fn every_netpol_scenario_holds_in_both_evaluators() {
    let scenarios = Scenario::all().unwrap();
    assert_eq!(scenarios.len(), 48);
    let mut failures = Vec::new();
    for s in &scenarios {
        for v6 in [false, true] {
            check_scenario(s, v6, &mut failures);
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn scenario_objects_render_to_valid_policies_with_real_namespace_names() {
    let (_, mut b) = world(false);
    for (model, real) in b.namespaces.iter_mut() {
        *real = format!("netpol-123-{model}");
    }
    for s in Scenario::all().unwrap() {
        for step in &s.steps {
            for object in &step.apply {
                let rendered = render(object, &b).unwrap();
                let text = serde_json::to_string(&rendered).unwrap();
                assert!(!text.contains("{{"), "{}: {text}", s.name);
                let w = wire::NetworkPolicy::from_value(rendered).unwrap();
                assert_eq!(w.kind.as_deref(), Some("NetworkPolicy"));
                assert_eq!(w.api_version.as_deref(), Some("networking.k8s.io/v1"));
                let p = NetworkPolicy::from_wire(&w).unwrap();
                assert!(p.namespace.starts_with("netpol-123-"), "{}", s.name);
            }
        }
    }
}
