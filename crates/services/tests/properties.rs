//! Properties of the plan over random Services and EndpointSlices: backend sets follow the
//! readiness rules, Local sets hold only local endpoints, frontends match service ports,
//! the tracer agrees with the plan, and diffs applied to the old plan give the new one.

use std::collections::BTreeMap;
use std::net::IpAddr;

use proptest::prelude::*;
use weft_services::wire::{
    EndpointConditionsWire, EndpointHintsWire, EndpointPortWire, EndpointSliceWire, EndpointWire,
    HintWire, LoadBalancerIngressWire, ServicePortWire, ServiceWire, WireMeta,
};
use weft_services::{
    EndpointSlice, Family, NodeContext, NodePlan, NodePortAddresses, Protocol, Scope, Service,
    ServiceName, Settings, Source, SourceClass, Target, Verdict, WhenEmpty, SERVICE_NAME_LABEL,
    SERVICE_PROXY_NAME_LABEL,
};

const NODE: &str = "test-node";
const NODES: [&str; 3] = [NODE, "node-b", "node-c"];
const PORT_NAMES: [&str; 3] = ["a", "b", "c"];
const EXTERNAL_IPS: [&str; 3] = ["192.168.99.1", "192.168.99.2", "2001:db8:99::1"];
const LB_IPS: [&str; 3] = ["1.2.3.4", "1.2.3.5", "2001:db8:98::1"];
const RANGES: [&str; 5] = [
    "203.0.113.0/25",
    "192.168.0.0/24",
    "10.0.0.0/8",
    "2001:db8::/32",
    "0.0.0.0/0",
];

#[derive(Debug, Clone)]
struct SvcSpec {
    kind: u8,
    dual: bool,
    ports: Vec<(usize, bool, u16)>,
    external_local: bool,
    internal_local: bool,
    affinity: bool,
    external_ips: Vec<usize>,
    lb_ips: Vec<usize>,
    ranges: Vec<usize>,
    health_check: bool,
    other_proxy: bool,
}

type Conditions = (Option<bool>, Option<bool>, Option<bool>);

#[derive(Debug, Clone)]
struct SliceSpec {
    service: usize,
    v6: bool,
    ports: Vec<(usize, bool, u16)>,
    endpoints: Vec<(usize, Conditions, Option<usize>)>,
}

#[derive(Debug, Clone)]
struct WorldSpec {
    services: Vec<SvcSpec>,
    slices: Vec<SliceSpec>,
    masquerade_all: bool,
    detector: bool,
    node_ports: u8,
    zone: bool,
}

fn svc_spec() -> impl Strategy<Value = SvcSpec> {
    (
        (
            0u8..3,
            any::<bool>(),
            prop::collection::vec((0usize..3, prop::bool::weighted(0.2), 1u16..4), 1..4),
        ),
        (any::<bool>(), any::<bool>(), any::<bool>()),
        (
            prop::collection::vec(0usize..3, 0..3),
            prop::collection::vec(0usize..3, 0..3),
            prop::collection::vec(0usize..5, 0..3),
        ),
        (any::<bool>(), prop::bool::weighted(0.1)),
    )
        .prop_map(
            |(
                (kind, dual, ports),
                (external_local, internal_local, affinity),
                (external_ips, lb_ips, ranges),
                (health_check, other_proxy),
            )| SvcSpec {
                kind,
                dual,
                ports,
                external_local,
                internal_local,
                affinity,
                external_ips,
                lb_ips,
                ranges,
                health_check,
                other_proxy,
            },
        )
}

fn conditions() -> impl Strategy<Value = Conditions> {
    let c = || prop::option::of(any::<bool>());
    (c(), c(), c())
}

fn slice_spec(services: usize) -> impl Strategy<Value = SliceSpec> {
    (
        0..services.max(1),
        any::<bool>(),
        prop::collection::vec((0usize..3, prop::bool::weighted(0.2), 1u16..4), 1..4),
        prop::collection::vec((0usize..3, conditions(), prop::option::of(0usize..2)), 0..6),
    )
        .prop_map(|(service, v6, ports, endpoints)| SliceSpec {
            service,
            v6,
            ports,
            endpoints,
        })
}

fn world_spec() -> impl Strategy<Value = WorldSpec> {
    prop::collection::vec(svc_spec(), 0..6).prop_flat_map(|services| {
        let n = services.len();
        (
            Just(services),
            prop::collection::vec(slice_spec(n), 0..12),
            any::<bool>(),
            prop::bool::weighted(0.8),
            0u8..3,
            any::<bool>(),
        )
            .prop_map(
                |(services, slices, masquerade_all, detector, node_ports, zone)| WorldSpec {
                    services,
                    slices,
                    masquerade_all,
                    detector,
                    node_ports,
                    zone,
                },
            )
    })
}

fn protocol(udp: bool) -> &'static str {
    if udp {
        "UDP"
    } else {
        "TCP"
    }
}

fn meta(name: &str) -> WireMeta {
    WireMeta {
        name: Some(name.into()),
        namespace: Some("ns".into()),
        ..WireMeta::default()
    }
}

fn service_wire(i: usize, spec: &SvcSpec) -> ServiceWire {
    let mut wire = ServiceWire {
        metadata: meta(&format!("svc{i}")),
        ..ServiceWire::default()
    };
    wire.metadata.creation_timestamp = Some(format!("2024-01-01T00:00:{:02}Z", i));
    if spec.other_proxy {
        wire.metadata
            .labels
            .insert(SERVICE_PROXY_NAME_LABEL.into(), "other".into());
    }
    let s = &mut wire.spec;
    s.type_ = Some(["ClusterIP", "NodePort", "LoadBalancer"][spec.kind as usize].into());
    s.cluster_ips = vec![format!("172.30.0.{}", i + 1)];
    if spec.dual {
        s.cluster_ips.push(format!("fd00:172:30::{}", i + 1));
    }
    let mut seen_names = Vec::new();
    let mut seen_ports = Vec::new();
    for (j, (name, udp, number)) in spec.ports.iter().enumerate() {
        let port = 80 + *number as i64;
        if seen_names.contains(name) || seen_ports.contains(&(*udp, port)) {
            continue;
        }
        seen_names.push(*name);
        seen_ports.push((*udp, port));
        s.ports.push(ServicePortWire {
            name: Some(PORT_NAMES[*name].into()),
            protocol: Some(protocol(*udp).into()),
            port: Some(port),
            node_port: Some(30000 + (i * 8 + j) as i64),
        });
    }
    s.external_ips = spec
        .external_ips
        .iter()
        .map(|k| EXTERNAL_IPS[*k].into())
        .collect();
    s.load_balancer_source_ranges = spec.ranges.iter().map(|k| RANGES[*k].into()).collect();
    s.external_traffic_policy = Some(
        if spec.external_local {
            "Local"
        } else {
            "Cluster"
        }
        .into(),
    );
    s.internal_traffic_policy = Some(
        if spec.internal_local {
            "Local"
        } else {
            "Cluster"
        }
        .into(),
    );
    if spec.affinity {
        s.session_affinity = Some("ClientIP".into());
    }
    if spec.health_check {
        s.health_check_node_port = Some(31000 + i as i64);
    }
    wire.status.load_balancer.ingress = spec
        .lb_ips
        .iter()
        .map(|k| LoadBalancerIngressWire {
            ip: Some(LB_IPS[*k].into()),
            ip_mode: None,
        })
        .collect();
    wire
}

fn slice_wire(k: usize, spec: &SliceSpec) -> EndpointSliceWire {
    let mut metadata = meta(&format!("svc{}-{k}", spec.service));
    metadata
        .labels
        .insert(SERVICE_NAME_LABEL.into(), format!("svc{}", spec.service));
    let mut ports: Vec<EndpointPortWire> = Vec::new();
    for (name, udp, number) in &spec.ports {
        if ports.iter().any(|p| {
            p.name.as_deref() == Some(PORT_NAMES[*name])
                && p.protocol.as_deref() == Some(protocol(*udp))
        }) {
            continue;
        }
        ports.push(EndpointPortWire {
            name: Some(PORT_NAMES[*name].into()),
            protocol: Some(protocol(*udp).into()),
            port: Some(8000 + *number as i64),
        });
    }
    // Addresses are unique per Service and family, so the merge never has to pick a copy.
    let endpoints = spec
        .endpoints
        .iter()
        .enumerate()
        .map(
            |(e, (node, (ready, serving, terminating), zone))| EndpointWire {
                addresses: vec![if spec.v6 {
                    format!("fd00:10:{}::{}:{}", spec.service, k, e + 1)
                } else {
                    format!("10.{}.{}.{}", spec.service, k, e + 1)
                }],
                conditions: EndpointConditionsWire {
                    ready: *ready,
                    serving: *serving,
                    terminating: *terminating,
                },
                node_name: Some(NODES[*node].into()),
                hints: zone.map(|z| EndpointHintsWire {
                    for_zones: vec![HintWire {
                        name: Some(["zone-a", "zone-b"][z].into()),
                    }],
                    for_nodes: vec![],
                }),
            },
        )
        .collect();
    EndpointSliceWire {
        metadata,
        address_type: Some(if spec.v6 { "IPv6" } else { "IPv4" }.into()),
        ports,
        endpoints,
    }
}

struct Built {
    services: Vec<Service>,
    slices: Vec<EndpointSlice>,
    node: NodeContext,
    plan: NodePlan,
}

fn build(spec: &WorldSpec) -> Built {
    let services: Vec<Service> = spec
        .services
        .iter()
        .enumerate()
        .map(|(i, s)| {
            Service::from_wire(&service_wire(i, s)).expect("generated Services are valid")
        })
        .collect();
    let slices: Vec<EndpointSlice> = spec
        .slices
        .iter()
        .enumerate()
        .map(|(k, s)| {
            EndpointSlice::from_wire(&slice_wire(k, s)).expect("generated slices are valid")
        })
        .collect();
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let node = NodeContext {
        name: NODE.into(),
        zone: spec.zone.then(|| "zone-a".into()),
        primary_addresses: vec![ip("192.168.0.2"), ip("2001:db8::1")],
        local_addresses: vec![
            ip("192.168.0.2"),
            ip("192.168.1.2"),
            ip("127.0.0.1"),
            ip("2001:db8::1"),
            ip("::1"),
        ],
    };
    let settings = settings_for(spec);
    let (plan, _clashes) = NodePlan::build(&services, &slices, &node, &settings);
    Built {
        services,
        slices,
        node,
        plan,
    }
}

/// (address, target port) -> (node, ready, serving, terminating) for one Service, family,
/// and slice port, read straight from the compact slices.
type Raw = BTreeMap<(IpAddr, u16), (Option<String>, bool, bool, bool)>;

fn raw_endpoints(
    built: &Built,
    service: &ServiceName,
    family: Family,
    name: &str,
    protocol: Protocol,
) -> Raw {
    let mut raw = Raw::new();
    for slice in &built.slices {
        if slice.namespace != service.namespace
            || slice.service != service.name
            || slice.family != Some(family)
        {
            continue;
        }
        for port in slice
            .ports
            .iter()
            .filter(|p| p.name == name && p.protocol == protocol)
        {
            for e in &slice.endpoints {
                raw.insert(
                    (e.address, port.port),
                    (e.node.clone(), e.ready, e.serving, e.terminating),
                );
            }
        }
    }
    raw
}

fn check_backend_sets(built: &Built) -> Result<(), TestCaseError> {
    for service in built.plan.services().values() {
        for port in service.ports.values() {
            let raw = raw_endpoints(
                built,
                &service.name,
                port.key.family,
                &port.name,
                port.key.protocol,
            );
            for target in [Target::Cluster, Target::Local] {
                let set = port.backends(target);
                let local_only = target == Target::Local;
                let pool: Vec<_> = raw
                    .values()
                    .filter(|(node, ..)| !local_only || node.as_deref() == Some(NODE))
                    .collect();
                let any_ready = pool.iter().any(|(_, ready, ..)| *ready);
                for b in set {
                    let (node, ready, serving, terminating) =
                        raw.get(&(b.address, b.port)).ok_or_else(|| {
                            TestCaseError::fail(format!(
                                "{b:?} is not an endpoint of {}",
                                service.name
                            ))
                        })?;
                    prop_assert!(
                        *ready || (*serving && *terminating),
                        "unusable backend {b:?}"
                    );
                    prop_assert_eq!(b.ready, *ready);
                    prop_assert!(
                        b.ready || !any_ready,
                        "terminating {b:?} while a ready endpoint exists"
                    );
                    if local_only {
                        prop_assert!(
                            b.local && node.as_deref() == Some(NODE),
                            "remote {b:?} in a Local set"
                        );
                    }
                    prop_assert_eq!(b.local, node.as_deref() == Some(NODE));
                }
                let any_usable = raw.values().any(|(_, r, s, t)| *r || (*s && *t));
                prop_assert_eq!(port.when_empty == WhenEmpty::Reject, !any_usable);
            }
        }
    }
    Ok(())
}

fn check_frontends(built: &Built) -> Result<(), TestCaseError> {
    let by_name: BTreeMap<&ServiceName, &Service> =
        built.services.iter().map(|s| (&s.name, s)).collect();
    for (service, port, frontend) in built.plan.frontends() {
        let spec = by_name[&service.name];
        prop_assert_eq!(frontend.key.protocol, port.key.protocol);
        let service_port = spec.ports.iter().find(|p| {
            p.protocol == port.key.protocol && p.port == port.key.port && p.name == port.name
        });
        prop_assert!(
            service_port.is_some(),
            "{:?} matches no service port",
            port.key
        );
        let service_port = service_port.unwrap();
        match frontend.scope {
            Scope::NodePort => {
                prop_assert_eq!(Some(frontend.key.port), service_port.node_port);
                prop_assert!(built.node.is_local(&frontend.key.address));
                prop_assert!(!frontend.key.address.is_loopback());
            }
            Scope::ClusterIp => {
                prop_assert_eq!(frontend.key.port, service_port.port);
                prop_assert!(spec.cluster_ips.contains(&frontend.key.address));
            }
            Scope::ExternalIp => {
                prop_assert_eq!(frontend.key.port, service_port.port);
                prop_assert!(spec.external_ips.contains(&frontend.key.address));
            }
            Scope::LoadBalancer => {
                prop_assert_eq!(frontend.key.port, service_port.port);
                prop_assert!(spec.load_balancer_ips.contains(&frontend.key.address));
            }
            _ => prop_assert!(false, "unknown scope"),
        }
        if frontend.scope != Scope::LoadBalancer {
            prop_assert!(frontend.source_ranges.is_none());
        }
        // The index finds this very frontend.
        let (found_service, found_port, found) = built.plan.frontend(&frontend.key).unwrap();
        prop_assert_eq!(&found_service.name, &service.name);
        prop_assert_eq!(found_port.key, port.key);
        prop_assert_eq!(found, frontend);
    }
    Ok(())
}

fn check_tracer(built: &Built) -> Result<(), TestCaseError> {
    for (_, port, frontend) in built.plan.frontends() {
        let v6 = frontend.key.address.is_ipv6();
        let sources = if v6 {
            ["fd00:10::99", "2001:db8::1", "2600:5200::1"]
        } else {
            ["10.99.0.1", "192.168.0.2", "203.0.113.2"]
        };
        for (class, address) in [SourceClass::Pod, SourceClass::Node, SourceClass::External]
            .into_iter()
            .zip(sources)
        {
            let source = Source {
                class,
                address: address.parse().unwrap(),
            };
            let destination = std::net::SocketAddr::new(frontend.key.address, frontend.key.port);
            let verdict = built.plan.trace(source, frontend.key.protocol, destination);
            let treatment = frontend.treatment(class);
            match &verdict {
                Verdict::Forward {
                    reach,
                    affinity_timeout,
                } => {
                    prop_assert!(frontend.admits(&source.address));
                    prop_assert_eq!(*affinity_timeout, port.affinity_timeout);
                    let set: Vec<_> = port
                        .backends(treatment.target)
                        .iter()
                        .map(|b| std::net::SocketAddr::new(b.address, b.port))
                        .collect();
                    prop_assert_eq!(verdict.backends(), set);
                    prop_assert!(reach.iter().all(|r| r.masquerade == treatment.masquerade));
                }
                Verdict::Drop => prop_assert!(
                    !frontend.admits(&source.address)
                        || (port.backends(treatment.target).is_empty()
                            && port.when_empty == WhenEmpty::Drop)
                ),
                Verdict::Reject => prop_assert!(
                    port.backends(treatment.target).is_empty()
                        && port.when_empty == WhenEmpty::Reject
                ),
                other => prop_assert!(false, "a frontend answered {other:?}"),
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn backend_sets_follow_the_readiness_rules(spec in world_spec()) {
        check_backend_sets(&build(&spec))?;
    }

    #[test]
    fn frontends_match_service_ports(spec in world_spec()) {
        check_frontends(&build(&spec))?;
    }

    #[test]
    fn the_tracer_agrees_with_the_plan(spec in world_spec()) {
        check_tracer(&build(&spec))?;
    }

    #[test]
    fn a_diff_applied_to_the_old_plan_gives_the_new(old in world_spec(), new in world_spec()) {
        let (old, new) = (build(&old).plan, build(&new).plan);
        prop_assert!(old.diff(&old).is_empty());
        let diff = old.diff(&new);
        let mut applied = old.clone();
        diff.apply(&mut applied);
        prop_assert_eq!(&applied, &new);
        for change in &diff.services {
            prop_assert!(change.old.is_some() || change.new.is_some());
            prop_assert_ne!(&change.old, &change.new);
            for stale in change.stale_flows() {
                prop_assert!(stale.frontend.protocol.needs_flow_flush());
            }
        }
    }

    #[test]
    fn building_does_not_depend_on_input_order(spec in world_spec()) {
        let built = build(&spec);
        let mut services = built.services.clone();
        let mut slices = built.slices.clone();
        services.reverse();
        slices.reverse();
        let (reversed, _) = NodePlan::build(&services, &slices, &built.node, &settings_for(&spec));
        prop_assert_eq!(&built.plan, &reversed);
    }
}

fn settings_for(spec: &WorldSpec) -> Settings {
    Settings {
        node_port_addresses: match spec.node_ports {
            0 => NodePortAddresses::Primary,
            1 => NodePortAddresses::parse(&["0.0.0.0/0", "::/0"]).unwrap(),
            _ => NodePortAddresses::parse(&["192.168.1.0/24"]).unwrap(),
        },
        service_cidrs: Settings::parse_service_cidrs(&["172.30.0.0/16", "fd00:172:30::/112"])
            .unwrap(),
        masquerade_all: spec.masquerade_all,
        local_traffic_detector: spec.detector,
        service_proxy_name: None,
    }
}

/// The properties above are only as good as the worlds they see: make sure the generator
/// reaches every case they are about.
#[test]
fn the_generator_covers_every_case() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut seen = BTreeMap::<&str, usize>::new();
    for _ in 0..200 {
        let spec = world_spec().new_tree(&mut runner).unwrap().current();
        let built = build(&spec);
        for s in built.plan.services().values() {
            *seen.entry("health check").or_default() += s.health_check.is_some() as usize;
            *seen.entry("foreign").or_default() += (!s.proxied) as usize;
            for p in s.ports.values() {
                *seen.entry("cluster backend").or_default() += p.cluster.len();
                *seen.entry("local backend").or_default() += p.local.len();
                *seen.entry("terminating backend").or_default() += p
                    .cluster
                    .iter()
                    .chain(&p.local)
                    .filter(|b| !b.ready)
                    .count();
                *seen.entry("drop").or_default() +=
                    (p.when_empty == WhenEmpty::Drop && p.local.is_empty()) as usize;
                *seen.entry("reject").or_default() += (p.when_empty == WhenEmpty::Reject) as usize;
                *seen.entry("affinity").or_default() += p.affinity_timeout.is_some() as usize;
                for f in &p.frontends {
                    *seen.entry("source ranges").or_default() += f.source_ranges.is_some() as usize;
                    *seen.entry("node port").or_default() += (f.scope == Scope::NodePort) as usize;
                    *seen.entry("v6").or_default() += f.key.address.is_ipv6() as usize;
                }
            }
        }
    }
    let missing: Vec<_> = seen
        .iter()
        .filter(|(_, n)| **n == 0)
        .map(|(k, _)| *k)
        .collect();
    assert!(
        missing.is_empty(),
        "never generated: {missing:?} ({seen:?})"
    );
    assert_eq!(seen.len(), 11);
}
