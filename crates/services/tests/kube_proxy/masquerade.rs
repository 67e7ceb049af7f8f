//! TestInternalExternalMasquerade, all four configurations: with and without a way to tell
//! pod traffic (kube-proxy's LocalTrafficDetector), with and without masqueradeAll.

use crate::fixture::*;

fn world() -> World {
    let lb =
        |name: &str, cluster_ip: &str, node_port: i64, hc: i64, vip: &str, etp: &str, itp: &str| {
            let (cluster_ip, vip, etp, itp) = (
                cluster_ip.to_string(),
                vip.to_string(),
                etp.to_string(),
                itp.to_string(),
            );
            service(&format!("ns{}", &name[3..]), name, move |s| {
                set_type(s, "LoadBalancer");
                set_cluster_ips(s, &[&cluster_ip]);
                s.spec.ports = vec![port("p80", "TCP", 80, node_port)];
                s.spec.health_check_node_port = Some(hc);
                set_ingress(s, &[&vip]);
                s.spec.external_traffic_policy = Some(etp);
                s.spec.internal_traffic_policy = Some(itp);
            })
        };
    let eps = |name: &str, local: &str, remote: &str| {
        slice(
            &format!("ns{}", &name[3..]),
            &format!("{name}-abc"),
            name,
            vec![slice_port("p80", "TCP", 80)],
            vec![ready(local, Some(NODE_NAME)), ready(remote, Some("node2"))],
        )
    };
    World::new(
        vec![
            lb(
                "svc1",
                "172.30.0.41",
                3001,
                30001,
                "1.2.3.4",
                "Cluster",
                "Cluster",
            ),
            lb(
                "svc2",
                "172.30.0.42",
                3002,
                30002,
                "5.6.7.8",
                "Local",
                "Cluster",
            ),
            lb(
                "svc3",
                "172.30.0.43",
                3003,
                30003,
                "9.10.11.12",
                "Cluster",
                "Local",
            ),
        ],
        vec![
            eps("svc1", "10.180.0.1", "10.180.1.1"),
            eps("svc2", "10.180.0.2", "10.180.1.2"),
            eps("svc3", "10.180.0.3", "10.180.1.3"),
        ],
    )
}

const ALL1: &str = "10.180.0.1:80, 10.180.1.1:80";
const ALL2: &str = "10.180.0.2:80, 10.180.1.2:80";
const ALL3: &str = "10.180.0.3:80, 10.180.1.3:80";

/// The table with a detector and without masqueradeAll.
fn base() -> Vec<Flow> {
    vec![
        tcp("pod to ClusterIP", pod(POD), "172.30.0.41:80", ALL1, false),
        tcp(
            "pod to ClusterIP with eTP:Local",
            pod(POD),
            "172.30.0.42:80",
            ALL2,
            false,
        ),
        tcp(
            "pod to ClusterIP with iTP:Local",
            pod(POD),
            "172.30.0.43:80",
            "10.180.0.3:80",
            false,
        ),
        tcp("pod to NodePort", pod(POD), "192.168.0.2:3001", ALL1, true),
        tcp(
            "pod to NodePort with eTP:Local",
            pod(POD),
            "192.168.0.2:3002",
            ALL2,
            false,
        ),
        tcp(
            "pod to NodePort with iTP:Local",
            pod(POD),
            "192.168.0.2:3003",
            ALL3,
            true,
        ),
        tcp("pod to LB", pod(POD), "1.2.3.4:80", ALL1, true),
        tcp(
            "pod to LB with eTP:Local",
            pod(POD),
            "5.6.7.8:80",
            ALL2,
            false,
        ),
        tcp(
            "pod to LB with iTP:Local",
            pod(POD),
            "9.10.11.12:80",
            ALL3,
            true,
        ),
        tcp(
            "node to ClusterIP",
            node(NODE_IP),
            "172.30.0.41:80",
            ALL1,
            true,
        ),
        tcp(
            "node to ClusterIP with eTP:Local",
            node(NODE_IP),
            "172.30.0.42:80",
            ALL2,
            true,
        ),
        tcp(
            "node to ClusterIP with iTP:Local",
            node(NODE_IP),
            "172.30.0.43:80",
            "10.180.0.3:80",
            true,
        ),
        tcp(
            "node to NodePort",
            node(NODE_IP),
            "192.168.0.2:3001",
            ALL1,
            true,
        ),
        tcp(
            "node to NodePort with eTP:Local",
            node(NODE_IP),
            "192.168.0.2:3002",
            ALL2,
            true,
        ),
        tcp(
            "node to NodePort with iTP:Local",
            node(NODE_IP),
            "192.168.0.2:3003",
            ALL3,
            true,
        ),
        tcp("node to LB", node(NODE_IP), "1.2.3.4:80", ALL1, true),
        tcp(
            "node to LB with eTP:Local",
            node(NODE_IP),
            "5.6.7.8:80",
            ALL2,
            true,
        ),
        tcp(
            "node to LB with iTP:Local",
            node(NODE_IP),
            "9.10.11.12:80",
            ALL3,
            true,
        ),
        tcp(
            "localhost to NodePort",
            node("127.0.0.1"),
            "127.0.0.1:3001",
            "",
            false,
        ),
        tcp(
            "localhost to NodePort with eTP:Local",
            node("127.0.0.1"),
            "127.0.0.1:3002",
            "",
            false,
        ),
        tcp(
            "localhost to NodePort with iTP:Local",
            node("127.0.0.1"),
            "127.0.0.1:3003",
            "",
            false,
        ),
        tcp(
            "external to ClusterIP",
            external(EXTERNAL),
            "172.30.0.41:80",
            ALL1,
            true,
        ),
        tcp(
            "external to ClusterIP with eTP:Local",
            external(EXTERNAL),
            "172.30.0.42:80",
            ALL2,
            true,
        ),
        tcp(
            "external to ClusterIP with iTP:Local",
            external(EXTERNAL),
            "172.30.0.43:80",
            "10.180.0.3:80",
            true,
        ),
        tcp(
            "external to NodePort",
            external(EXTERNAL),
            "192.168.0.2:3001",
            ALL1,
            true,
        ),
        tcp(
            "external to NodePort with eTP:Local",
            external(EXTERNAL),
            "192.168.0.2:3002",
            "10.180.0.2:80",
            false,
        ),
        tcp(
            "external to NodePort with iTP:Local",
            external(EXTERNAL),
            "192.168.0.2:3003",
            ALL3,
            true,
        ),
        tcp(
            "external to LB",
            external(EXTERNAL),
            "1.2.3.4:80",
            ALL1,
            true,
        ),
        tcp(
            "external to LB with eTP:Local",
            external(EXTERNAL),
            "5.6.7.8:80",
            "10.180.0.2:80",
            false,
        ),
        tcp(
            "external to LB with iTP:Local",
            external(EXTERNAL),
            "9.10.11.12:80",
            ALL3,
            true,
        ),
    ]
}

/// Applies per-row changes: (name, output or None to keep it, masq).
fn with(overrides: &[(&str, Option<&'static str>, bool)]) -> Vec<Flow> {
    let mut flows = base();
    for (name, output, masq) in overrides {
        let flow = flows
            .iter_mut()
            .find(|f| f.name == *name)
            .unwrap_or_else(|| panic!("no row {name:?}"));
        if let Some(output) = output {
            flow.output = output;
        }
        flow.masq = *masq;
    }
    flows
}

/// Without a detector nothing tells pods apart: cluster IPs are not masqueraded on that
/// ground, and pods are not short-circuited.
const NO_DETECTOR: &[(&str, Option<&str>, bool)] = &[
    ("node to ClusterIP", None, false),
    ("node to ClusterIP with eTP:Local", None, false),
    ("node to ClusterIP with iTP:Local", None, false),
    ("external to ClusterIP", None, false),
    ("external to ClusterIP with eTP:Local", None, false),
    ("external to ClusterIP with iTP:Local", None, false),
    (
        "pod to NodePort with eTP:Local",
        Some("10.180.0.2:80"),
        false,
    ),
    ("pod to LB with eTP:Local", Some("10.180.0.2:80"), false),
];

/// masqueradeAll masquerades pods' cluster IP traffic too (and nothing else changes).
const MASQUERADE_ALL: &[(&str, Option<&str>, bool)] = &[
    ("pod to ClusterIP", None, true),
    ("pod to ClusterIP with eTP:Local", None, true),
    ("pod to ClusterIP with iTP:Local", None, true),
];

#[test]
fn with_detector() {
    run_flows("detector", &world().plan(), &base());
}

#[test]
fn without_detector() {
    let mut world = world();
    world.settings.local_traffic_detector = false;
    run_flows("no detector", &world.plan(), &with(NO_DETECTOR));
}

#[test]
fn masquerade_all() {
    let mut world = world();
    world.settings.masquerade_all = true;
    run_flows("masqueradeAll", &world.plan(), &with(MASQUERADE_ALL));
}

#[test]
fn masquerade_all_without_detector() {
    let mut world = world();
    world.settings.masquerade_all = true;
    world.settings.local_traffic_detector = false;
    // masqueradeAll masquerades every cluster IP connection, detector or not.
    let mut overrides: Vec<(&str, Option<&str>, bool)> = NO_DETECTOR
        .iter()
        .map(|(n, o, m)| (*n, *o, if n.contains("ClusterIP") { true } else { *m }))
        .collect();
    overrides.extend_from_slice(MASQUERADE_ALL);
    run_flows(
        "masqueradeAll, no detector",
        &world.plan(),
        &with(&overrides),
    );
}
