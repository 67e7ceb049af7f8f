//! TestHealthCheckNodePortWhenTerminating (and the older TestHealthCheckNodePort): the
//! health-check node port counts local *ready* endpoints only.

use weft_services::{Family, NodePlan, ServiceName};

use crate::fixture::*;

fn world(eps: Vec<weft_services::wire::EndpointWire>) -> World {
    let svc = service("ns1", "svc1", |s| {
        set_type(s, "LoadBalancer");
        set_cluster_ips(s, &["172.30.1.1"]);
        s.spec.ports = vec![port("", "TCP", 80, 3001)];
        set_ingress(s, &["1.2.3.4"]);
        s.spec.external_traffic_policy = Some("Local".into());
        s.spec.health_check_node_port = Some(30000);
    });
    let slices = if eps.is_empty() {
        vec![]
    } else {
        vec![slice(
            "ns1",
            "svc1-abc",
            "svc1",
            vec![slice_port("", "TCP", 80)],
            eps,
        )]
    };
    World::new(vec![svc], slices)
}

fn health(plan: &NodePlan) -> (u16, u32) {
    let hc = plan.services()[&ServiceName::new("ns1", "svc1")]
        .health_check
        .as_ref()
        .expect("health check");
    (hc.status(Family::V4), hc.local_endpoints(Family::V4))
}

#[test]
fn counts_ready_local_endpoints_never_terminating_ones() {
    let before = world(vec![
        endpoint("10.0.1.1", Some(NODE_NAME), (true, true, false)),
        endpoint("10.0.1.2", Some(NODE_NAME), (true, true, false)),
        endpoint("10.0.1.3", Some(NODE_NAME), (true, true, false)),
        endpoint("10.0.1.4", Some(NODE_NAME), (false, false, false)),
    ])
    .plan();
    let services_with_local_ready = before
        .services()
        .values()
        .filter(|s| {
            s.health_check
                .as_ref()
                .is_some_and(|h| h.local_endpoints(Family::V4) > 0)
        })
        .count();
    assert_eq!(services_with_local_ready, 1);
    assert_eq!(health(&before), (200, 3));

    let after = world(vec![
        endpoint("10.0.1.1", Some(NODE_NAME), (false, true, false)),
        endpoint("10.0.1.2", Some(NODE_NAME), (false, true, true)),
        endpoint("10.0.1.3", Some(NODE_NAME), (false, true, true)),
        endpoint("10.0.1.4", Some(NODE_NAME), (false, false, true)),
    ])
    .plan();
    assert_eq!(health(&after), (503, 0));
    // The node fails its checks but still serves what reaches it, from the local
    // serving-and-terminating endpoints.
    run_flows(
        "all local endpoints terminating",
        &after,
        &[
            tcp(
                "health check",
                external(EXTERNAL),
                "192.168.0.2:30000",
                "HEALTHCHECK 503",
                false,
            ),
            tcp(
                "external to LB",
                external(EXTERNAL),
                "1.2.3.4:80",
                "10.0.1.2:80, 10.0.1.3:80",
                false,
            ),
        ],
    );
}

#[test]
fn no_endpoints_fails_the_check_and_refuses_connections() {
    let plan = world(vec![]).plan();
    assert_eq!(health(&plan), (503, 0));
    run_flows(
        "no endpoints",
        &plan,
        &[
            tcp(
                "health check",
                external(EXTERNAL),
                "192.168.0.2:30000",
                "HEALTHCHECK 503",
                false,
            ),
            tcp("cluster IP", pod(POD), "172.30.1.1:80", "REJECT", false),
            tcp(
                "node port",
                external(EXTERNAL),
                "192.168.0.2:3001",
                "REJECT",
                false,
            ),
        ],
    );
}

#[test]
fn one_pod_on_two_ports_counts_once() {
    let svc = service("ns1", "svc1", |s| {
        set_type(s, "LoadBalancer");
        set_cluster_ips(s, &["172.30.1.1", "fd00:172:30::11"]);
        s.spec.ports = vec![port("a", "TCP", 80, 3001), port("b", "TCP", 443, 3002)];
        s.spec.external_traffic_policy = Some("Local".into());
        s.spec.health_check_node_port = Some(30000);
    });
    let v4 = slice(
        "ns1",
        "svc1-v4",
        "svc1",
        vec![slice_port("a", "TCP", 80), slice_port("b", "TCP", 443)],
        vec![
            ready("10.0.1.1", Some(NODE_NAME)),
            ready("10.0.1.2", Some("node2")),
        ],
    );
    let v6 = slice(
        "ns1",
        "svc1-v6",
        "svc1",
        vec![slice_port("a", "TCP", 80)],
        vec![
            ready("fd00:10::1", Some(NODE_NAME)),
            ready("fd00:10::2", Some(NODE_NAME)),
        ],
    );
    let plan = World::new(vec![svc], vec![v4, v6]).plan();
    let hc = plan.services()[&ServiceName::new("ns1", "svc1")]
        .health_check
        .clone()
        .unwrap();
    assert_eq!(hc.local_endpoints(Family::V4), 1);
    assert_eq!(hc.local_endpoints(Family::V6), 2);
    assert_eq!(hc.addresses, vec![ip(NODE_IP), ip(NODE_IP6)]);
    run_flows(
        "per family",
        &plan,
        &[
            tcp(
                "v4",
                external(EXTERNAL),
                "192.168.0.2:30000",
                "HEALTHCHECK 200",
                false,
            ),
            tcp(
                "v6",
                external("2600:5200::1"),
                "[2001:db8::1]:30000",
                "HEALTHCHECK 200",
                false,
            ),
            tcp(
                "not on other addresses",
                external(EXTERNAL),
                "192.168.1.2:30000",
                "",
                false,
            ),
        ],
    );
}
