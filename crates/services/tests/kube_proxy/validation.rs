//! Refusals: every problem names the object and the field.

use weft_services::wire::{EndpointConditionsWire, EndpointWire, ServiceWire};
use weft_services::{EndpointSlice, NodePlan, Service};

use crate::fixture::*;

fn fields(wire: &ServiceWire) -> Vec<String> {
    Service::from_wire(wire)
        .unwrap_err()
        .into_iter()
        .map(|i| {
            assert_eq!(i.object, "Service/ns1/svc1", "{i}");
            i.field
        })
        .collect()
}

fn good() -> ServiceWire {
    service("ns1", "svc1", |s| {
        set_type(s, "LoadBalancer");
        set_cluster_ips(s, &["172.30.0.41"]);
        s.spec.ports = vec![port("p80", "TCP", 80, 3001)];
    })
}

fn bad(edit: impl FnOnce(&mut ServiceWire)) -> ServiceWire {
    let mut wire = good();
    edit(&mut wire);
    wire
}

#[test]
fn a_good_service_passes() {
    Service::from_wire(&good()).unwrap();
}

#[test]
fn service_refusals_name_the_field() {
    let cases: Vec<(ServiceWire, &[&str])> = vec![
        (bad(|s| s.spec.type_ = Some("Magic".into())), &["spec.type"]),
        (
            bad(|s| set_cluster_ips(s, &["172.30.0.300"])),
            &["spec.clusterIPs[0]"],
        ),
        (
            bad(|s| set_cluster_ips(s, &["172.30.0.41", "172.30.0.42"])),
            &["spec.clusterIPs[1]"],
        ),
        (
            bad(|s| {
                s.spec.cluster_ip = Some("172.30.0.40".into());
            }),
            &["spec.clusterIP"],
        ),
        (
            bad(|s| s.spec.ports[0].port = Some(0)),
            &["spec.ports[0].port"],
        ),
        (
            bad(|s| s.spec.ports[0].port = Some(70000)),
            &["spec.ports[0].port"],
        ),
        (
            bad(|s| s.spec.ports[0].port = None),
            &["spec.ports[0].port"],
        ),
        (
            bad(|s| s.spec.ports[0].protocol = Some("ICMP".into())),
            &["spec.ports[0].protocol"],
        ),
        (
            bad(|s| s.spec.ports[0].node_port = Some(-1)),
            &["spec.ports[0].nodePort"],
        ),
        (
            bad(|s| s.spec.ports.push(port("other", "TCP", 80, 0))),
            &["spec.ports[1]"],
        ),
        (
            bad(|s| s.spec.ports.push(port("p80", "UDP", 80, 0))),
            &["spec.ports[1].name"],
        ),
        (
            bad(|s| s.spec.external_ips = strings(&["1.2.3.4", "nope"])),
            &["spec.externalIPs[1]"],
        ),
        (
            bad(|s| set_ingress(s, &["1.2.3"])),
            &["status.loadBalancer.ingress[0].ip"],
        ),
        (
            bad(|s| s.spec.load_balancer_source_ranges = strings(&["10.0.0.0/8", "10.0.0.1"])),
            &["spec.loadBalancerSourceRanges[1]"],
        ),
        (
            bad(|s| s.spec.external_traffic_policy = Some("Global".into())),
            &["spec.externalTrafficPolicy"],
        ),
        (
            bad(|s| s.spec.internal_traffic_policy = Some("Node".into())),
            &["spec.internalTrafficPolicy"],
        ),
        (
            bad(|s| s.spec.session_affinity = Some("Cookie".into())),
            &["spec.sessionAffinity"],
        ),
        (
            bad(|s| {
                s.spec.session_affinity = Some("ClientIP".into());
                s.spec.session_affinity_config =
                    Some(weft_services::wire::SessionAffinityConfigWire {
                        client_ip: Some(weft_services::wire::ClientIpConfigWire {
                            timeout_seconds: Some(86_401),
                        }),
                    });
            }),
            &["spec.sessionAffinityConfig.clientIP.timeoutSeconds"],
        ),
        (
            bad(|s| {
                s.spec.external_traffic_policy = Some("Local".into());
                s.spec.health_check_node_port = Some(65536);
            }),
            &["spec.healthCheckNodePort"],
        ),
        (
            bad(|s| {
                s.spec.ports[0].port = Some(0);
                s.spec.external_ips = strings(&["x"]);
            }),
            &["spec.ports[0].port", "spec.externalIPs[0]"],
        ),
    ];
    for (wire, expected) in cases {
        assert_eq!(fields(&wire), expected, "{wire:?}");
    }
}

#[test]
fn a_nameless_service_is_refused() {
    let mut wire = good();
    wire.metadata.name = None;
    let issues = Service::from_wire(&wire).unwrap_err();
    assert_eq!(
        issues[0].to_string(),
        "Service/ns1/<unnamed> metadata.name: missing"
    );
}

#[test]
fn affinity_defaults_and_limits() {
    let with = |timeout: Option<i64>| {
        let wire = bad(|s| {
            s.spec.session_affinity = Some("ClientIP".into());
            s.spec.session_affinity_config =
                timeout.map(|t| weft_services::wire::SessionAffinityConfigWire {
                    client_ip: Some(weft_services::wire::ClientIpConfigWire {
                        timeout_seconds: Some(t),
                    }),
                });
        });
        Service::from_wire(&wire).map(|s| s.affinity_timeout)
    };
    assert_eq!(with(None), Ok(Some(10_800)));
    assert_eq!(with(Some(1)), Ok(Some(1)));
    assert_eq!(with(Some(86_400)), Ok(Some(86_400)));
    assert!(with(Some(0)).is_err());
}

#[test]
fn affinity_is_carried_to_every_frontend_of_the_port() {
    let wire = bad(|s| {
        s.spec.session_affinity = Some("ClientIP".into());
        set_ingress(s, &["1.2.3.4"]);
    });
    let plan = World::new(
        vec![wire],
        vec![slice(
            "ns1",
            "svc1-a",
            "svc1",
            vec![slice_port("p80", "TCP", 80)],
            vec![ready("10.0.0.1", None)],
        )],
    )
    .plan();
    for (destination, source) in [
        ("172.30.0.41:80", pod(POD)),
        ("1.2.3.4:80", external(EXTERNAL)),
        ("192.168.0.2:3001", external(EXTERNAL)),
    ] {
        match plan.trace(source, weft_services::Protocol::Tcp, sock(destination)) {
            weft_services::Verdict::Forward {
                affinity_timeout, ..
            } => assert_eq!(affinity_timeout, Some(10_800)),
            other => panic!("{destination}: {other:?}"),
        }
    }
}

fn slice_fields(wire: &weft_services::wire::EndpointSliceWire) -> Vec<String> {
    EndpointSlice::from_wire(wire)
        .unwrap_err()
        .into_iter()
        .map(|i| i.field)
        .collect()
}

#[test]
fn slice_refusals_name_the_field() {
    let good = || {
        slice(
            "ns1",
            "svc1-a",
            "svc1",
            vec![slice_port("p", "TCP", 80)],
            vec![ready("10.0.0.1", None)],
        )
    };
    EndpointSlice::from_wire(&good()).unwrap();
    let edit = |f: &dyn Fn(&mut weft_services::wire::EndpointSliceWire)| {
        let mut w = good();
        f(&mut w);
        slice_fields(&w)
    };
    assert_eq!(
        edit(&|w| {
            w.metadata.labels.clear();
        }),
        ["metadata.labels[kubernetes.io/service-name]"]
    );
    assert_eq!(
        edit(&|w| w.address_type = Some("IPX".into())),
        ["addressType"]
    );
    assert_eq!(
        edit(&|w| w.endpoints[0].addresses = vec!["10.0.0".into()]),
        ["endpoints[0].addresses[0]"]
    );
    assert_eq!(
        edit(&|w| w.endpoints[0].addresses = vec!["fd00::1".into()]),
        ["endpoints[0].addresses[0]"]
    );
    assert_eq!(
        edit(&|w| w.endpoints[0].addresses.clear()),
        ["endpoints[0].addresses"]
    );
    assert_eq!(edit(&|w| w.ports[0].port = Some(65536)), ["ports[0].port"]);
    assert_eq!(
        edit(&|w| w.ports[0].protocol = Some("tcp".into())),
        ["ports[0].protocol"]
    );
    assert_eq!(
        edit(&|w| w.ports.push(slice_port("p", "TCP", 81))),
        ["ports[1].name"]
    );
}

#[test]
fn fqdn_slices_are_accepted_and_carry_nothing() {
    let mut wire = slice(
        "ns1",
        "svc1-a",
        "svc1",
        vec![slice_port("p", "TCP", 80)],
        vec![],
    );
    wire.address_type = Some("FQDN".into());
    wire.endpoints = vec![EndpointWire {
        addresses: vec!["example.com".into()],
        conditions: EndpointConditionsWire::default(),
        node_name: None,
        hints: None,
    }];
    let compact = EndpointSlice::from_wire(&wire).unwrap();
    assert_eq!(compact.family, None);
    assert!(compact.endpoints.is_empty() && compact.ports.is_empty());
}

#[test]
fn a_service_given_twice_is_reported() {
    let one = Service::from_wire(&good()).unwrap();
    let (plan, issues) = NodePlan::build([&one, &one], [], &test_node(), &test_settings());
    assert_eq!(plan.services().len(), 1);
    assert_eq!(issues.len(), 1);
    assert_eq!(issues[0].field, "metadata.name");
}
