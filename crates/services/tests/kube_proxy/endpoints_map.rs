//! TestUpdateEndpointsMap: how EndpointSlices merge into per-port endpoints, and what a
//! change means for the datapath (UDP flows to forget).

use weft_services::endpoints::{merge_slices, PortEndpoints};
use weft_services::wire::{EndpointSliceWire, EndpointWire};
use weft_services::{EndpointSlice, Family, NodePlan, Protocol, ServiceName, StaleFlow};

use crate::fixture::*;

fn compact(slices: &[EndpointSliceWire]) -> Vec<EndpointSlice> {
    slices
        .iter()
        .map(|s| EndpointSlice::from_wire(s).unwrap())
        .collect()
}

/// `"name/PROTO" -> ["ip:port local?"]`, for readable assertions.
fn summary(map: &PortEndpoints) -> Vec<(String, Vec<String>)> {
    map.iter()
        .map(|((name, protocol), eps)| {
            (
                format!("{name}/{protocol}"),
                eps.iter()
                    .map(|e| {
                        format!(
                            "{}:{}{}",
                            e.address,
                            e.port,
                            if e.local { " local" } else { "" }
                        )
                    })
                    .collect(),
            )
        })
        .collect()
}

fn merged(slices: &[EndpointSliceWire]) -> Vec<(String, Vec<String>)> {
    let compact = compact(slices);
    summary(&merge_slices(Family::V4, NODE_NAME, &compact))
}

fn s(
    name: &str,
    ports: Vec<weft_services::wire::EndpointPortWire>,
    eps: Vec<EndpointWire>,
) -> EndpointSliceWire {
    slice("ns1", name, "ep1", ports, eps)
}

fn row(key: &str, eps: &[&str]) -> (String, Vec<String>) {
    (key.to_string(), eps.iter().map(|e| e.to_string()).collect())
}

#[test]
fn merge_semantics() {
    assert!(merged(&[]).is_empty());

    let one = s(
        "ep1-1",
        vec![slice_port("p11", "UDP", 11)],
        vec![ready("1.1.1.1", None)],
    );
    assert_eq!(
        merged(std::slice::from_ref(&one)),
        [row("p11/UDP", &["1.1.1.1:11"])]
    );

    let local = s(
        "ep1-1",
        vec![slice_port("p11", "UDP", 11)],
        vec![ready("1.1.1.1", Some(NODE_NAME))],
    );
    assert_eq!(merged(&[local]), [row("p11/UDP", &["1.1.1.1:11 local"])]);

    // Two slices of one Service are unioned.
    let two = s(
        "ep1-2",
        vec![slice_port("p11", "UDP", 11)],
        vec![ready("1.1.1.2", None)],
    );
    assert_eq!(
        merged(&[one.clone(), two]),
        [row("p11/UDP", &["1.1.1.1:11", "1.1.1.2:11"])]
    );

    // Several ports, each keyed by (name, protocol).
    let ports = s(
        "ep1-1",
        vec![
            slice_port("p11", "UDP", 11),
            slice_port("p12", "UDP", 12),
            slice_port("p12", "TCP", 12),
        ],
        vec![ready("1.1.1.1", None)],
    );
    assert_eq!(
        merged(&[ports]),
        [
            row("p11/UDP", &["1.1.1.1:11"]),
            row("p12/TCP", &["1.1.1.1:12"]),
            row("p12/UDP", &["1.1.1.1:12"])
        ]
    );

    // An endpoint in two slices counts once; a local copy wins.
    let remote_copy = s(
        "ep1-a",
        vec![slice_port("p11", "UDP", 11)],
        vec![ready("1.1.1.1", None)],
    );
    let local_copy = s(
        "ep1-b",
        vec![slice_port("p11", "UDP", 11)],
        vec![ready("1.1.1.1", Some(NODE_NAME))],
    );
    assert_eq!(
        merged(&[remote_copy, local_copy]),
        [row("p11/UDP", &["1.1.1.1:11 local"])]
    );

    // Renaming a port makes another entry; renumbering changes the target port.
    let renamed = s(
        "ep1-1",
        vec![slice_port("p11-2", "UDP", 11)],
        vec![ready("1.1.1.1", None)],
    );
    assert_eq!(merged(&[renamed]), [row("p11-2/UDP", &["1.1.1.1:11"])]);
    let renumbered = s(
        "ep1-1",
        vec![slice_port("p11", "UDP", 22)],
        vec![ready("1.1.1.1", None)],
    );
    assert_eq!(merged(&[renumbered]), [row("p11/UDP", &["1.1.1.1:22"])]);

    // A port without a number serves nothing; slices of the other family are not read here.
    let no_number = s(
        "ep1-1",
        vec![weft_services::wire::EndpointPortWire {
            name: Some("p11".into()),
            protocol: Some("UDP".into()),
            port: None,
        }],
        vec![ready("1.1.1.1", None)],
    );
    let v6 = s(
        "ep1-6",
        vec![slice_port("p11", "UDP", 11)],
        vec![ready("fd00::1", None)],
    );
    assert!(merged(&[no_number, v6]).is_empty());
}

fn udp_service() -> weft_services::wire::ServiceWire {
    service("ns1", "ep1", |s| {
        set_cluster_ips(s, &["172.30.0.41"]);
        s.spec.ports = vec![port("p11", "UDP", 11, 0), port("p12", "TCP", 12, 0)];
    })
}

fn plan_with(slices: Vec<EndpointSliceWire>) -> NodePlan {
    World::new(vec![udp_service()], slices).plan()
}

fn both_ports(eps: Vec<EndpointWire>) -> EndpointSliceWire {
    s(
        "ep1-1",
        vec![slice_port("p11", "UDP", 11), slice_port("p12", "TCP", 12)],
        eps,
    )
}

#[test]
fn renaming_a_slice_port_orphans_the_service_port() {
    let plan = plan_with(vec![s(
        "ep1-1",
        vec![slice_port("p11-2", "UDP", 11)],
        vec![ready("1.1.1.1", None)],
    )]);
    run_flows(
        "renamed",
        &plan,
        &[udp(
            "service port p11 has no endpoints now",
            pod(POD),
            "172.30.0.41:11",
            "REJECT",
            false,
        )],
    );
}

#[test]
fn removing_a_udp_endpoint_leaves_flows_to_forget_and_a_tcp_one_does_not() {
    let before = plan_with(vec![both_ports(vec![
        ready("1.1.1.1", None),
        ready("1.1.1.2", None),
    ])]);
    let after = plan_with(vec![both_ports(vec![ready("1.1.1.1", None)])]);
    let diff = before.diff(&after);
    assert_eq!(diff.services.len(), 1);
    assert_eq!(
        diff.services[0].stale_flows(),
        [StaleFlow {
            frontend: weft_services::FrontendKey {
                address: ip("172.30.0.41"),
                protocol: Protocol::Udp,
                port: 11
            },
            backend: sock("1.1.1.2:11"),
        }]
    );
    assert!(diff.services[0].revived_frontends().is_empty());
}

#[test]
fn renumbering_a_udp_port_leaves_the_old_backend_stale() {
    let before = plan_with(vec![both_ports(vec![ready("1.1.1.1", None)])]);
    let after = plan_with(vec![s(
        "ep1-1",
        vec![slice_port("p11", "UDP", 22), slice_port("p12", "TCP", 12)],
        vec![ready("1.1.1.1", None)],
    )]);
    let stale: Vec<String> = before.diff(&after).services[0]
        .stale_flows()
        .iter()
        .map(|f| f.backend.to_string())
        .collect();
    assert_eq!(stale, ["1.1.1.1:11"]);
}

#[test]
fn a_udp_service_getting_its_first_endpoint_is_revived() {
    let before = plan_with(vec![]);
    let after = plan_with(vec![both_ports(vec![ready("1.1.1.1", None)])]);
    let change = &before.diff(&after).services[0];
    let revived: Vec<String> = change
        .revived_frontends()
        .iter()
        .map(|k| format!("{}:{}/{}", k.address, k.port, k.protocol))
        .collect();
    assert_eq!(revived, ["172.30.0.41:11/UDP"]);
    assert!(change.stale_flows().is_empty());
}

#[test]
fn a_deleted_udp_service_leaves_every_flow_stale() {
    let before = plan_with(vec![both_ports(vec![ready("1.1.1.1", None)])]);
    let after = World::new(vec![], vec![]).plan();
    let change = &before.diff(&after).services[0];
    assert_eq!(change.name, ServiceName::new("ns1", "ep1"));
    assert_eq!(change.stale_flows().len(), 1);
    assert_eq!(change.removed_frontends().len(), 2);
}

#[test]
fn named_target_ports_resolve_per_endpoint() {
    // The Service's targetPort is a name; pods number it differently, so the EndpointSlice
    // controller puts them in slices with different port lists.
    let svc = service("ns1", "web", |s| {
        set_cluster_ips(s, &["172.30.0.70"]);
        s.spec.ports = vec![port("http", "TCP", 80, 0)];
    });
    let a = slice(
        "ns1",
        "web-a",
        "web",
        vec![slice_port("http", "TCP", 8080)],
        vec![ready("10.0.5.1", None)],
    );
    let b = slice(
        "ns1",
        "web-b",
        "web",
        vec![slice_port("http", "TCP", 9090)],
        vec![ready("10.0.5.2", None)],
    );
    let other = slice(
        "ns1",
        "other-a",
        "other",
        vec![slice_port("http", "TCP", 7070)],
        vec![ready("10.0.5.3", None)],
    );
    run_flows(
        "named target port",
        &World::new(vec![svc], vec![a, b, other]).plan(),
        &[tcp(
            "pod to cluster IP",
            pod(POD),
            "172.30.0.70:80",
            "10.0.5.1:8080, 10.0.5.2:9090",
            false,
        )],
    );
}
