//! TestNoEndpointsReject: a Service with no usable endpoint refuses connections on every
//! frontend (refused, not dropped: clients fail fast with ECONNREFUSED).

use crate::fixture::*;

fn lb_service() -> weft_services::wire::ServiceWire {
    service("ns1", "svc1", |s| {
        set_type(s, "LoadBalancer");
        set_cluster_ips(s, &["172.30.0.41"]);
        s.spec.ports = vec![port("p80", "TCP", 80, 3001)];
        s.spec.external_ips = strings(&["192.168.99.11"]);
        set_ingress(s, &["1.2.3.4"]);
    })
}

fn flows() -> Vec<Flow> {
    vec![
        tcp(
            "pod to cluster IP",
            pod(POD),
            "172.30.0.41:80",
            "REJECT",
            false,
        ),
        tcp(
            "node to cluster IP",
            node(NODE_IP),
            "172.30.0.41:80",
            "REJECT",
            false,
        ),
        tcp(
            "external to external IP",
            external(EXTERNAL),
            "192.168.99.11:80",
            "REJECT",
            false,
        ),
        tcp(
            "pod to external IP",
            pod(POD),
            "192.168.99.11:80",
            "REJECT",
            false,
        ),
        tcp(
            "external to node port",
            external(EXTERNAL),
            "192.168.0.2:3001",
            "REJECT",
            false,
        ),
        tcp(
            "node to node port",
            node(NODE_IP),
            "192.168.0.2:3001",
            "REJECT",
            false,
        ),
        tcp(
            "external to LB",
            external(EXTERNAL),
            "1.2.3.4:80",
            "REJECT",
            false,
        ),
        tcp("pod to LB", pod(POD), "1.2.3.4:80", "REJECT", false),
    ]
}

#[test]
fn no_endpoint_slice_at_all_rejects_everywhere() {
    let world = World::new(vec![lb_service()], vec![]);
    run_flows("no slice", &world.plan(), &flows());
}

#[test]
fn empty_slices_reject_like_no_slice() {
    let empty = slice(
        "ns1",
        "svc1-abc",
        "svc1",
        vec![slice_port("p80", "TCP", 80)],
        vec![],
    );
    let world = World::new(vec![lb_service()], vec![empty]);
    run_flows("empty slice", &world.plan(), &flows());
}

#[test]
fn endpoints_that_are_neither_ready_nor_serving_count_as_none() {
    let unusable = slice(
        "ns1",
        "svc1-abc",
        "svc1",
        vec![slice_port("p80", "TCP", 80)],
        vec![
            endpoint("10.180.0.1", Some(NODE_NAME), (false, false, false)),
            endpoint("10.180.0.2", Some("node2"), (false, false, true)),
            // Serving but not terminating is not a fallback candidate either.
            endpoint("10.180.0.3", Some(NODE_NAME), (false, true, false)),
        ],
    );
    let world = World::new(vec![lb_service()], vec![unusable]);
    run_flows("unusable endpoints", &world.plan(), &flows());
}
