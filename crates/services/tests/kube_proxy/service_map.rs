//! TestBuildServiceMap*: which Services (and which of their fields) make frontends.

use weft_services::{NodePlan, Scope, Service, Skip};

use crate::fixture::*;

fn compact(wire: &weft_services::wire::ServiceWire) -> Service {
    Service::from_wire(wire).unwrap()
}

fn port_count(plan: &NodePlan) -> usize {
    plan.services().values().map(|s| s.ports.len()).sum()
}

fn health_ports(plan: &NodePlan) -> Vec<(String, u16)> {
    plan.services()
        .values()
        .filter_map(|s| {
            s.health_check
                .as_ref()
                .map(|h| (s.name.to_string(), h.node_port))
        })
        .collect()
}

#[test]
fn headless_and_external_name_services_are_ignored() {
    let headless = service("ns2", "headless", |s| {
        s.spec.cluster_ip = Some("None".into());
        s.spec.ports = vec![port("rpc", "UDP", 1234, 0)];
    });
    let headless_without_port = service("ns2", "headless-without-port", |s| {
        s.spec.cluster_ip = Some("None".into());
    });
    let external_name = service("ns2", "external-name", |s| {
        set_type(s, "ExternalName");
        // Ignored, whatever it says.
        s.spec.cluster_ip = Some("172.30.55.4".into());
        s.spec.ports = vec![port("blah", "UDP", 1235, 0)];
    });
    let unallocated = service("ns2", "unallocated", |s| {
        s.spec.ports = vec![port("p", "TCP", 80, 0)];
    });
    assert_eq!(compact(&headless).skip(), Some(Skip::Headless));
    assert_eq!(compact(&headless_without_port).skip(), Some(Skip::Headless));
    assert_eq!(compact(&external_name).skip(), Some(Skip::ExternalName));
    assert_eq!(compact(&unallocated).skip(), Some(Skip::NoClusterIp));
    let world = World::new(
        vec![headless, headless_without_port, external_name, unallocated],
        vec![],
    );
    let plan = world.plan();
    assert!(plan.services().is_empty());
    run_flows(
        "ignored",
        &plan,
        &[udp(
            "to the ExternalName's stale cluster IP",
            pod(POD),
            "172.30.55.4:1235",
            "DROP",
            false,
        )],
    );
}

#[test]
fn node_port_fields_of_a_cluster_ip_service_are_ignored() {
    let svc = service("ns1", "svc1", |s| {
        set_cluster_ips(s, &["172.30.0.41"]);
        s.spec.ports = vec![port("p80", "TCP", 80, 3001)];
        s.spec.health_check_node_port = Some(30000);
        s.spec.external_traffic_policy = Some("Local".into());
    });
    let compact = compact(&svc);
    assert_eq!(compact.ports[0].node_port, None);
    assert_eq!(compact.health_check_node_port, None);
    let plan = World::new(vec![svc], vec![]).plan();
    run_flows(
        "ClusterIP with nodePort",
        &plan,
        &[
            tcp(
                "no node port",
                external(EXTERNAL),
                "192.168.0.2:3001",
                "",
                false,
            ),
            tcp(
                "no health check",
                external(EXTERNAL),
                "192.168.0.2:30000",
                "",
                false,
            ),
        ],
    );
}

fn add_remove_services() -> Vec<weft_services::wire::ServiceWire> {
    vec![
        service("ns2", "cluster-ip", |s| {
            set_cluster_ips(s, &["172.30.55.4"]);
            s.spec.ports = vec![port("port1", "UDP", 1234, 0), port("port2", "UDP", 1235, 0)];
        }),
        service("ns2", "node-port", |s| {
            set_type(s, "NodePort");
            set_cluster_ips(s, &["172.30.55.10"]);
            // Node port 0: none allocated, so no NodePort frontend.
            s.spec.ports = vec![port("port1", "UDP", 345, 0), port("port2", "TCP", 344, 0)];
        }),
        service("ns1", "load-balancer", |s| {
            set_type(s, "LoadBalancer");
            set_cluster_ips(s, &["172.30.55.11"]);
            s.spec.ports = vec![
                port("foobar", "UDP", 8675, 30061),
                port("baz", "UDP", 8676, 30062),
            ];
            set_ingress(s, &["10.1.2.4"]);
        }),
        service("ns1", "only-local-load-balancer", |s| {
            set_type(s, "LoadBalancer");
            set_cluster_ips(s, &["172.30.55.12"]);
            s.spec.ports = vec![
                port("foobar2", "UDP", 8677, 30063),
                port("baz", "UDP", 8678, 30064),
            ];
            set_ingress(s, &["10.1.2.3"]);
            s.spec.external_traffic_policy = Some("Local".into());
            s.spec.health_check_node_port = Some(345);
        }),
    ]
}

#[test]
fn add_and_remove_services() {
    let services = add_remove_services();
    let plan = World::new(services.clone(), vec![]).plan();
    assert_eq!(port_count(&plan), 8);
    assert_eq!(
        health_ports(&plan),
        [("ns1/only-local-load-balancer".to_string(), 345)]
    );
    let node_port_frontends = plan
        .frontends()
        .filter(|(s, _, f)| s.name.name == "node-port" && f.scope == Scope::NodePort)
        .count();
    assert_eq!(node_port_frontends, 0);

    // Drop the first port of the first Service and remove the three others.
    let one = service("ns2", "cluster-ip", |s| {
        set_cluster_ips(s, &["172.30.55.4"]);
        s.spec.ports = vec![port("p2", "UDP", 1235, 0)];
    });
    let after = World::new(vec![one], vec![]).plan();
    assert_eq!(port_count(&after), 1);
    assert!(health_ports(&after).is_empty());
    let diff = plan.diff(&after);
    let changed: Vec<String> = diff.services.iter().map(|c| c.name.to_string()).collect();
    assert_eq!(changed.len(), 4, "{changed:?}");
}

#[test]
fn update_service_type() {
    let v1 = service("ns1", "svc1", |s| {
        set_cluster_ips(s, &["172.30.55.4"]);
        s.spec.ports = vec![port("p1", "UDP", 1234, 0), port("p2", "TCP", 1235, 0)];
    });
    let v2 = service("ns1", "svc1", |s| {
        set_type(s, "LoadBalancer");
        set_cluster_ips(s, &["172.30.55.4"]);
        s.spec.ports = vec![port("p1", "UDP", 1234, 7002), port("p2", "TCP", 1235, 7003)];
        set_ingress(s, &["10.1.2.3"]);
        s.spec.external_traffic_policy = Some("Local".into());
        s.spec.health_check_node_port = Some(345);
    });
    let plan1 = World::new(vec![v1.clone()], vec![]).plan();
    assert_eq!(port_count(&plan1), 2);
    assert!(health_ports(&plan1).is_empty());

    let plan2 = World::new(vec![v2.clone()], vec![]).plan();
    assert_eq!(port_count(&plan2), 2);
    assert_eq!(health_ports(&plan2), [("ns1/svc1".to_string(), 345)]);
    assert_eq!(plan1.diff(&plan2).services.len(), 1);

    // No change: an empty diff, so a relist writes nothing.
    let again = World::new(vec![v2], vec![]).plan();
    assert!(plan2.diff(&again).is_empty());

    // Back to ClusterIP: the health check and the external frontends go.
    let plan3 = World::new(vec![v1], vec![]).plan();
    assert!(health_ports(&plan3).is_empty());
    let change = &plan2.diff(&plan3).services[0];
    let mut removed: Vec<String> = change
        .removed_frontends()
        .iter()
        .map(|k| format!("{}:{}/{}", k.address, k.port, k.protocol))
        .collect();
    removed.sort();
    assert_eq!(
        removed,
        [
            "10.1.2.3:1234/UDP",
            "10.1.2.3:1235/TCP",
            "192.168.0.2:7002/UDP",
            "192.168.0.2:7003/TCP",
        ]
    );
}

#[test]
fn each_family_takes_only_its_own_addresses() {
    let v4 = service("test", "filter-v6-in-v4", |s| {
        set_type(s, "LoadBalancer");
        set_cluster_ips(s, &["10.0.0.1"]);
        s.spec.ports = vec![port("testPort", "TCP", 12345, 0)];
        s.spec.external_ips = strings(&["10.0.0.2", "2001:db8::2"]);
        s.spec.load_balancer_source_ranges = strings(&["10.0.0.0/24", "2001:db8::/64"]);
        set_ingress(s, &["10.0.0.3", "2001:db8::3"]);
    });
    let plan = World::new(vec![v4], vec![]).plan();
    let mut frontends: Vec<(String, Option<String>)> = plan
        .frontends()
        .map(|(_, _, f)| {
            (
                f.key.address.to_string(),
                f.source_ranges.as_ref().map(|r| {
                    r.iter()
                        .map(|n| n.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                }),
            )
        })
        .collect();
    frontends.sort();
    assert_eq!(
        frontends,
        [
            ("10.0.0.1".to_string(), None),
            ("10.0.0.2".to_string(), None),
            ("10.0.0.3".to_string(), Some("10.0.0.0/24".to_string())),
        ]
    );
}

#[test]
fn health_check_only_for_load_balancers_with_local_external_policy() {
    let node_port_local = service("ns1", "np", |s| {
        set_type(s, "NodePort");
        set_cluster_ips(s, &["172.30.0.41"]);
        s.spec.ports = vec![port("p", "TCP", 80, 3001)];
        s.spec.external_traffic_policy = Some("Local".into());
        s.spec.health_check_node_port = Some(30000);
    });
    let lb_cluster = service("ns1", "lb", |s| {
        set_type(s, "LoadBalancer");
        set_cluster_ips(s, &["172.30.0.42"]);
        s.spec.ports = vec![port("p", "TCP", 80, 3002)];
        s.spec.health_check_node_port = Some(30001);
    });
    let plan = World::new(vec![node_port_local, lb_cluster], vec![]).plan();
    assert!(health_ports(&plan).is_empty());
}

#[test]
fn service_proxy_name_label() {
    let labelled = |value: &str| {
        let value = value.to_string();
        service("ns1", &format!("for-{value}"), move |s| {
            set_cluster_ips(
                s,
                &[if value == "weft" {
                    "172.30.0.51"
                } else {
                    "172.30.0.52"
                }],
            );
            s.spec.ports = vec![port("p", "TCP", 80, 0)];
            s.metadata
                .labels
                .insert(weft_services::SERVICE_PROXY_NAME_LABEL.into(), value);
        })
    };
    let plain = service("ns1", "plain", |s| {
        set_cluster_ips(s, &["172.30.0.53"]);
        s.spec.ports = vec![port("p", "TCP", 80, 0)];
    });
    let services = vec![labelled("weft"), labelled("other"), plain];

    // As kube-proxy: any labelled Service belongs to another proxy.
    let plan = World::new(services.clone(), vec![]).plan();
    run_flows(
        "no proxy name",
        &plan,
        &[
            tcp(
                "labelled weft: not ours",
                pod(POD),
                "172.30.0.51:80",
                "",
                false,
            ),
            tcp(
                "labelled other: not ours",
                pod(POD),
                "172.30.0.52:80",
                "",
                false,
            ),
            tcp(
                "unlabelled: ours",
                pod(POD),
                "172.30.0.53:80",
                "REJECT",
                false,
            ),
        ],
    );

    // With a name, only the Services labelled with it.
    let mut world = World::new(services, vec![]);
    world.settings.service_proxy_name = Some("weft".into());
    run_flows(
        "proxy name weft",
        &world.plan(),
        &[
            tcp(
                "labelled weft: ours",
                pod(POD),
                "172.30.0.51:80",
                "REJECT",
                false,
            ),
            tcp(
                "labelled other: not ours",
                pod(POD),
                "172.30.0.52:80",
                "",
                false,
            ),
            tcp(
                "unlabelled: not ours",
                pod(POD),
                "172.30.0.53:80",
                "",
                false,
            ),
        ],
    );
}
