//! TestExternalTrafficPolicyLocal, TestExternalTrafficPolicyCluster (and the older
//! TestNonLocalExternalIPs), TestInternalTrafficPolicy.

use weft_services::wire::{EndpointSliceWire, ServiceWire};

use crate::fixture::*;

fn lb(policy: &str) -> ServiceWire {
    service("ns1", "svc1", |s| {
        set_type(s, "LoadBalancer");
        set_cluster_ips(s, &["172.30.0.41"]);
        s.spec.ports = vec![port("", "TCP", 80, 3001)];
        s.spec.external_ips = strings(&["192.168.99.11"]);
        set_ingress(s, &["1.2.3.4"]);
        s.spec.external_traffic_policy = Some(policy.into());
        s.spec.health_check_node_port = Some(30000);
    })
}

fn endpoints(list: Vec<weft_services::wire::EndpointWire>) -> EndpointSliceWire {
    slice(
        "ns1",
        "svc1-abc",
        "svc1",
        vec![slice_port("", "TCP", 80)],
        list,
    )
}

/// 10.180.0.1 has no nodeName (remote); 10.180.2.1 runs here.
fn remote_and_local() -> EndpointSliceWire {
    endpoints(vec![
        ready("10.180.0.1", None),
        ready("10.180.2.1", Some(NODE_NAME)),
    ])
}

const BOTH: &str = "10.180.0.1:80, 10.180.2.1:80";
const LOCAL: &str = "10.180.2.1:80";

#[test]
fn external_policy_local() {
    let world = World::new(vec![lb("Local")], vec![remote_and_local()]);
    run_flows(
        "eTP Local",
        &world.plan(),
        &[
            tcp(
                "pod to cluster IP: eTP does not apply",
                pod(POD),
                "172.30.0.41:80",
                BOTH,
                false,
            ),
            tcp(
                "external to cluster IP: eTP does not apply",
                external(EXTERNAL),
                "172.30.0.41:80",
                BOTH,
                true,
            ),
            tcp(
                "external to external IP: local only, client kept",
                external(EXTERNAL),
                "192.168.99.11:80",
                LOCAL,
                false,
            ),
            tcp(
                "external to LB: local only, client kept",
                external(EXTERNAL),
                "1.2.3.4:80",
                LOCAL,
                false,
            ),
            tcp(
                "external to node port: local only, client kept",
                external(EXTERNAL),
                "192.168.0.2:3001",
                LOCAL,
                false,
            ),
            tcp(
                "pod to external IP: short-circuited",
                pod(POD),
                "192.168.99.11:80",
                BOTH,
                false,
            ),
            tcp(
                "pod to LB: short-circuited",
                pod(POD),
                "1.2.3.4:80",
                BOTH,
                false,
            ),
            tcp(
                "pod to node port: short-circuited",
                pod(POD),
                "192.168.0.2:3001",
                BOTH,
                false,
            ),
            tcp(
                "node to external IP: everywhere, masqueraded",
                node(NODE_IP),
                "192.168.99.11:80",
                BOTH,
                true,
            ),
            tcp(
                "node to LB: everywhere, masqueraded",
                node(NODE_IP),
                "1.2.3.4:80",
                BOTH,
                true,
            ),
            tcp(
                "node to node port: everywhere, masqueraded",
                node(NODE_IP),
                "192.168.0.2:3001",
                BOTH,
                true,
            ),
            tcp(
                "health check with a local endpoint",
                external(EXTERNAL),
                "192.168.0.2:30000",
                "HEALTHCHECK 200",
                false,
            ),
            udp(
                "health check is TCP only",
                external(EXTERNAL),
                "192.168.0.2:30000",
                "",
                false,
            ),
        ],
    );
}

#[test]
fn external_policy_local_without_local_endpoints() {
    let world = World::new(
        vec![lb("Local")],
        vec![endpoints(vec![ready("10.180.0.1", None)])],
    );
    let remote = "10.180.0.1:80";
    run_flows(
        "eTP Local, none local",
        &world.plan(),
        &[
            tcp(
                "external to LB: dropped",
                external(EXTERNAL),
                "1.2.3.4:80",
                "DROP",
                false,
            ),
            tcp(
                "external to external IP: dropped",
                external(EXTERNAL),
                "192.168.99.11:80",
                "DROP",
                false,
            ),
            tcp(
                "external to node port: dropped",
                external(EXTERNAL),
                "192.168.0.2:3001",
                "DROP",
                false,
            ),
            tcp(
                "pod to LB: still short-circuited",
                pod(POD),
                "1.2.3.4:80",
                remote,
                false,
            ),
            tcp(
                "node to LB: still everywhere",
                node(NODE_IP),
                "1.2.3.4:80",
                remote,
                true,
            ),
            tcp(
                "cluster IP unaffected",
                pod(POD),
                "172.30.0.41:80",
                remote,
                false,
            ),
            tcp(
                "health check fails",
                external(EXTERNAL),
                "192.168.0.2:30000",
                "HEALTHCHECK 503",
                false,
            ),
        ],
    );
}

#[test]
fn external_policy_cluster() {
    let world = World::new(vec![lb("Cluster")], vec![remote_and_local()]);
    run_flows(
        "eTP Cluster",
        &world.plan(),
        &[
            tcp("pod to cluster IP", pod(POD), "172.30.0.41:80", BOTH, false),
            tcp(
                "pod to external IP",
                pod(POD),
                "192.168.99.11:80",
                BOTH,
                true,
            ),
            tcp("pod to LB", pod(POD), "1.2.3.4:80", BOTH, true),
            tcp("pod to node port", pod(POD), "192.168.0.2:3001", BOTH, true),
            tcp("node to LB", node(NODE_IP), "1.2.3.4:80", BOTH, true),
            tcp(
                "external to external IP",
                external(EXTERNAL),
                "192.168.99.11:80",
                BOTH,
                true,
            ),
            tcp(
                "external to LB",
                external(EXTERNAL),
                "1.2.3.4:80",
                BOTH,
                true,
            ),
            tcp(
                "external to node port",
                external(EXTERNAL),
                "192.168.0.2:3001",
                BOTH,
                true,
            ),
            tcp(
                "no health check without eTP Local",
                external(EXTERNAL),
                "192.168.0.2:30000",
                "",
                false,
            ),
        ],
    );
}

#[test]
fn external_ips_of_a_cluster_ip_service() {
    let svc = service("ns1", "svc1", |s| {
        set_cluster_ips(s, &["172.30.0.41"]);
        s.spec.ports = vec![port("", "TCP", 80, 0)];
        s.spec.external_ips = strings(&["192.168.99.11"]);
    });
    let world = World::new(vec![svc], vec![remote_and_local()]);
    run_flows(
        "ClusterIP with externalIPs",
        &world.plan(),
        &[
            tcp("pod to cluster IP", pod(POD), "172.30.0.41:80", BOTH, false),
            tcp(
                "external to external IP",
                external(EXTERNAL),
                "192.168.99.11:80",
                BOTH,
                true,
            ),
        ],
    );
}

#[test]
fn external_policy_of_a_service_without_external_frontends_means_nothing() {
    let svc = service("ns1", "svc1", |s| {
        set_cluster_ips(s, &["172.30.0.41"]);
        s.spec.ports = vec![port("", "TCP", 80, 0)];
        s.spec.external_traffic_policy = Some("Local".into());
    });
    let world = World::new(vec![svc], vec![remote_and_local()]);
    run_flows(
        "eTP on a ClusterIP Service",
        &world.plan(),
        &[tcp(
            "external to cluster IP",
            external(EXTERNAL),
            "172.30.0.41:80",
            BOTH,
            true,
        )],
    );
}

fn itp_service(policy: &str, kind: &str) -> ServiceWire {
    service("ns1", "svc1", |s| {
        set_type(s, kind);
        set_cluster_ips(s, &["172.30.1.1"]);
        s.spec.ports = vec![port(
            "",
            "TCP",
            80,
            if kind == "NodePort" { 3001 } else { 0 },
        )];
        s.spec.internal_traffic_policy = Some(policy.into());
    })
}

fn itp_endpoints(list: &[(&str, Option<&str>)]) -> Vec<EndpointSliceWire> {
    if list.is_empty() {
        return Vec::new();
    }
    vec![endpoints(list.iter().map(|(a, n)| ready(a, *n)).collect())]
}

#[test]
fn internal_policy() {
    struct Case {
        name: &'static str,
        policy: &'static str,
        endpoints: &'static [(&'static str, Option<&'static str>)],
        output: &'static str,
    }
    let all = &[
        ("10.0.1.1", Some(NODE_NAME)),
        ("10.0.1.2", Some(NODE_NAME)),
        ("10.0.1.3", Some("host1")),
    ];
    let cases = [
        Case {
            name: "iTP Cluster: every endpoint",
            policy: "Cluster",
            endpoints: all,
            output: "10.0.1.1:80, 10.0.1.2:80, 10.0.1.3:80",
        },
        Case {
            name: "iTP Local: local endpoints",
            policy: "Local",
            endpoints: all,
            output: "10.0.1.1:80, 10.0.1.2:80",
        },
        Case {
            name: "iTP Local, endpoints but none local: dropped",
            policy: "Local",
            endpoints: &[("10.0.1.3", Some("host1")), ("10.0.1.4", Some("host1"))],
            output: "DROP",
        },
        Case {
            name: "iTP Local, no endpoints: refused",
            policy: "Local",
            endpoints: &[],
            output: "REJECT",
        },
    ];
    for case in cases {
        let world = World::new(
            vec![itp_service(case.policy, "ClusterIP")],
            itp_endpoints(case.endpoints),
        );
        run_flows(
            case.name,
            &world.plan(),
            &[tcp(
                "pod to cluster IP",
                pod(POD),
                "172.30.1.1:80",
                case.output,
                false,
            )],
        );
    }
}

#[test]
fn internal_policy_local_applies_to_every_source_of_the_cluster_ip_only() {
    let world = World::new(
        vec![itp_service("Local", "NodePort")],
        itp_endpoints(&[("10.0.1.1", Some(NODE_NAME)), ("10.0.1.3", Some("host1"))]),
    );
    run_flows(
        "iTP Local",
        &world.plan(),
        &[
            tcp(
                "node to cluster IP: local, masqueraded",
                node(NODE_IP),
                "172.30.1.1:80",
                "10.0.1.1:80",
                true,
            ),
            tcp(
                "external to cluster IP: local, masqueraded",
                external(EXTERNAL),
                "172.30.1.1:80",
                "10.0.1.1:80",
                true,
            ),
            tcp(
                "pod to node port: iTP does not apply",
                pod(POD),
                "192.168.0.2:3001",
                "10.0.1.1:80, 10.0.1.3:80",
                true,
            ),
            tcp(
                "external to node port: iTP does not apply",
                external(EXTERNAL),
                "192.168.0.2:3001",
                "10.0.1.1:80, 10.0.1.3:80",
                true,
            ),
        ],
    );
}
