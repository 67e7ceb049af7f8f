//! TestLoadBalancer (loadBalancerSourceRanges) and TestLoadBalancerIngressRouteTypeProxy.

use weft_services::wire::LoadBalancerIngressWire;

use crate::fixture::*;

fn lb(ranges: &[&str]) -> weft_services::wire::ServiceWire {
    service("ns1", "svc1", |s| {
        set_type(s, "LoadBalancer");
        set_cluster_ips(s, &["172.30.0.41"]);
        s.spec.ports = vec![port("p80", "TCP", 80, 3001)];
        set_ingress(s, &["1.2.3.4", "5.6.7.8"]);
        s.spec.load_balancer_source_ranges = strings(ranges);
    })
}

fn one_remote_endpoint() -> weft_services::wire::EndpointSliceWire {
    slice(
        "ns1",
        "svc1-abc",
        "svc1",
        vec![slice_port("p80", "TCP", 80)],
        // No nodeName: remote.
        vec![ready("10.180.0.1", None)],
    )
}

#[test]
fn source_ranges_guard_the_load_balancer_frontend_only() {
    // The leading space is what API validation lets through; it must not break the range.
    let world = World::new(
        vec![lb(&["192.168.0.0/24", " 203.0.113.0/25"])],
        vec![one_remote_endpoint()],
    );
    let ep = "10.180.0.1:80";
    run_flows(
        "source ranges",
        &world.plan(),
        &[
            tcp(
                "pod to cluster IP: no ranges there",
                pod(POD),
                "172.30.0.41:80",
                ep,
                false,
            ),
            tcp(
                "external to node port: no ranges there",
                external(EXTERNAL),
                "192.168.0.2:3001",
                ep,
                true,
            ),
            tcp(
                "blocked source to node port: still no ranges",
                external(EXTERNAL_BLOCKED),
                "192.168.0.2:3001",
                ep,
                true,
            ),
            tcp(
                "allowed external to LB1",
                external(EXTERNAL),
                "1.2.3.4:80",
                ep,
                true,
            ),
            tcp(
                "allowed external to LB2",
                external(EXTERNAL),
                "5.6.7.8:80",
                ep,
                true,
            ),
            tcp(
                "blocked external to LB1 is dropped",
                external(EXTERNAL_BLOCKED),
                "1.2.3.4:80",
                "DROP",
                false,
            ),
            tcp(
                "blocked external to LB2 is dropped",
                external(EXTERNAL_BLOCKED),
                "5.6.7.8:80",
                "DROP",
                false,
            ),
            tcp(
                "a pod outside the ranges is dropped too",
                pod(POD),
                "1.2.3.4:80",
                "DROP",
                false,
            ),
            tcp(
                "the node is inside the ranges",
                node(NODE_IP),
                "1.2.3.4:80",
                ep,
                true,
            ),
            // The node is in the ranges, so its connections to a VIP configured on it
            // (which leave with the VIP as source) are let in.
            tcp(
                "node to LB from the VIP itself",
                node("1.2.3.4"),
                "1.2.3.4:80",
                ep,
                true,
            ),
            tcp(
                "the VIP exception is per VIP",
                node("1.2.3.4"),
                "5.6.7.8:80",
                "DROP",
                false,
            ),
            tcp(
                "LB IP on another port is not a frontend",
                external(EXTERNAL),
                "1.2.3.4:81",
                "",
                false,
            ),
        ],
    );
}

#[test]
fn the_vip_exception_needs_the_node_inside_the_ranges() {
    let world = World::new(vec![lb(&["203.0.113.0/25"])], vec![one_remote_endpoint()]);
    run_flows(
        "node outside ranges",
        &world.plan(),
        &[
            tcp("node to LB", node(NODE_IP), "1.2.3.4:80", "DROP", false),
            tcp(
                "node to LB from the VIP",
                node("1.2.3.4"),
                "1.2.3.4:80",
                "DROP",
                false,
            ),
        ],
    );
}

#[test]
fn ranges_that_include_the_pods_let_pods_in_masqueraded() {
    let world = World::new(
        vec![lb(&["10.0.0.0/8", "203.0.113.0/25"])],
        vec![one_remote_endpoint()],
    );
    run_flows(
        "pod ranges",
        &world.plan(),
        &[tcp(
            "pod to LB",
            pod(POD),
            "1.2.3.4:80",
            "10.180.0.1:80",
            true,
        )],
    );
}

#[test]
fn a_zero_prefix_range_lets_everyone_in() {
    let world = World::new(vec![lb(&["0.0.0.0/0"])], vec![one_remote_endpoint()]);
    run_flows(
        "0.0.0.0/0",
        &world.plan(),
        &[tcp(
            "anyone to LB",
            external(EXTERNAL_BLOCKED),
            "1.2.3.4:80",
            "10.180.0.1:80",
            true,
        )],
    );
}

#[test]
fn ranges_are_checked_before_the_empty_set_refusal() {
    let world = World::new(vec![lb(&["203.0.113.0/25"])], vec![]);
    run_flows(
        "no endpoints",
        &world.plan(),
        &[
            tcp(
                "allowed, no endpoints: refused",
                external(EXTERNAL),
                "1.2.3.4:80",
                "REJECT",
                false,
            ),
            tcp(
                "blocked, no endpoints: dropped",
                external(EXTERNAL_BLOCKED),
                "1.2.3.4:80",
                "DROP",
                false,
            ),
        ],
    );
}

#[test]
fn proxy_mode_ingress_addresses_get_no_frontend() {
    let svc = service("ns1", "svc1", |s| {
        set_type(s, "LoadBalancer");
        set_cluster_ips(s, &["172.30.0.41"]);
        s.spec.ports = vec![port("p80", "TCP", 80, 3001)];
        s.status.load_balancer.ingress = vec![
            LoadBalancerIngressWire {
                ip: Some("1.2.3.4".into()),
                ip_mode: Some("Proxy".into()),
            },
            LoadBalancerIngressWire {
                ip: Some("1.2.3.5".into()),
                ip_mode: Some("VIP".into()),
            },
            LoadBalancerIngressWire {
                ip: Some("1.2.3.6".into()),
                ip_mode: None,
            },
            // A hostname-only ingress has no address to serve.
            LoadBalancerIngressWire {
                ip: None,
                ip_mode: None,
            },
        ];
    });
    let world = World::new(vec![svc], vec![one_remote_endpoint()]);
    let ep = "10.180.0.1:80";
    run_flows(
        "ipMode",
        &world.plan(),
        &[
            tcp(
                "Proxy: the LB connects to the node, nothing to capture",
                external(EXTERNAL),
                "1.2.3.4:80",
                "",
                false,
            ),
            tcp("VIP", external(EXTERNAL), "1.2.3.5:80", ep, true),
            tcp(
                "unset means VIP",
                external(EXTERNAL),
                "1.2.3.6:80",
                ep,
                true,
            ),
        ],
    );
}
