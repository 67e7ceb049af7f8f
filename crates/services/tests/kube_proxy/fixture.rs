//! The world kube-proxy's proxier tests run in, and a runner for packet-flow tables.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};

use weft_services::wire::{
    EndpointConditionsWire, EndpointHintsWire, EndpointPortWire, EndpointSliceWire, EndpointWire,
    HintWire, LoadBalancerIngressWire, ServicePortWire, ServiceWire, WireMeta,
};
use weft_services::{
    EndpointSlice, NodeContext, NodePlan, Protocol, Service, Settings, Source, SERVICE_NAME_LABEL,
};

pub const NODE_NAME: &str = "test-node";
pub const NODE_IP: &str = "192.168.0.2";
/// A second address on the node, not its primary one.
pub const NODE_IP_ALT: &str = "192.168.1.2";
pub const NODE_IP6: &str = "2001:db8::1";
pub const NODE_IP6_ALT: &str = "2001:db8:1::2";
pub const POD: &str = "10.0.0.2";
pub const EXTERNAL: &str = "203.0.113.2";
/// Outside `203.0.113.0/25`, the source range some tests allow.
pub const EXTERNAL_BLOCKED: &str = "203.0.113.130";

pub fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

pub fn sock(text: &str) -> SocketAddr {
    text.parse().unwrap()
}

pub fn test_node() -> NodeContext {
    NodeContext {
        name: NODE_NAME.into(),
        zone: None,
        primary_addresses: vec![ip(NODE_IP), ip(NODE_IP6)],
        local_addresses: vec![
            ip(NODE_IP),
            ip(NODE_IP_ALT),
            ip("127.0.0.1"),
            ip(NODE_IP6),
            ip(NODE_IP6_ALT),
            ip("::1"),
        ],
    }
}

pub fn test_settings() -> Settings {
    Settings {
        service_cidrs: Settings::parse_service_cidrs(&["172.30.0.0/16", "fd00:172:30::/112"])
            .unwrap(),
        ..Settings::default()
    }
}

// ---------------------------------------------------------------------------------------
// Services

pub fn service(namespace: &str, name: &str, edit: impl FnOnce(&mut ServiceWire)) -> ServiceWire {
    let mut wire = ServiceWire {
        metadata: meta(namespace, name),
        ..ServiceWire::default()
    };
    edit(&mut wire);
    wire
}

pub fn meta(namespace: &str, name: &str) -> WireMeta {
    WireMeta {
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        ..WireMeta::default()
    }
}

pub fn port(name: &str, protocol: &str, port: i64, node_port: i64) -> ServicePortWire {
    ServicePortWire {
        name: Some(name.into()),
        protocol: Some(protocol.into()),
        port: Some(port),
        node_port: (node_port != 0).then_some(node_port),
    }
}

pub fn set_type(svc: &mut ServiceWire, kind: &str) {
    svc.spec.type_ = Some(kind.into());
}

pub fn set_cluster_ips(svc: &mut ServiceWire, ips: &[&str]) {
    svc.spec.cluster_ip = ips.first().map(|s| s.to_string());
    svc.spec.cluster_ips = ips.iter().map(|s| s.to_string()).collect();
}

pub fn set_ingress(svc: &mut ServiceWire, ips: &[&str]) {
    svc.status.load_balancer.ingress = ips
        .iter()
        .map(|ip| LoadBalancerIngressWire {
            ip: Some(ip.to_string()),
            ip_mode: None,
        })
        .collect();
}

pub fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

// ---------------------------------------------------------------------------------------
// EndpointSlices

/// An endpoint with explicit (ready, serving, terminating) conditions.
pub fn endpoint(address: &str, node: Option<&str>, conditions: (bool, bool, bool)) -> EndpointWire {
    EndpointWire {
        addresses: vec![address.into()],
        conditions: EndpointConditionsWire {
            ready: Some(conditions.0),
            serving: Some(conditions.1),
            terminating: Some(conditions.2),
        },
        node_name: node.map(String::from),
        hints: None,
    }
}

/// A ready endpoint, conditions left to their defaults as many controllers write them.
pub fn ready(address: &str, node: Option<&str>) -> EndpointWire {
    EndpointWire {
        addresses: vec![address.into()],
        conditions: EndpointConditionsWire::default(),
        node_name: node.map(String::from),
        hints: None,
    }
}

pub fn with_zone_hints(mut e: EndpointWire, zones: &[&str]) -> EndpointWire {
    e.hints = Some(EndpointHintsWire {
        for_zones: zones
            .iter()
            .map(|z| HintWire {
                name: Some(z.to_string()),
            })
            .collect(),
        for_nodes: Vec::new(),
    });
    e
}

pub fn slice_port(name: &str, protocol: &str, port: i64) -> EndpointPortWire {
    EndpointPortWire {
        name: Some(name.into()),
        protocol: Some(protocol.into()),
        port: Some(port),
    }
}

pub fn slice(
    namespace: &str,
    name: &str,
    service: &str,
    ports: Vec<EndpointPortWire>,
    endpoints: Vec<EndpointWire>,
) -> EndpointSliceWire {
    let family = match endpoints.first().map(|e| e.addresses[0].contains(':')) {
        Some(true) => "IPv6",
        _ => "IPv4",
    };
    let mut metadata = meta(namespace, name);
    metadata
        .labels
        .insert(SERVICE_NAME_LABEL.into(), service.into());
    EndpointSliceWire {
        metadata,
        address_type: Some(family.into()),
        ports,
        endpoints,
    }
}

// ---------------------------------------------------------------------------------------
// Building plans

/// Services and slices (as wire objects), the node and the settings.
pub struct World {
    pub services: Vec<ServiceWire>,
    pub slices: Vec<EndpointSliceWire>,
    pub node: NodeContext,
    pub settings: Settings,
}

impl World {
    pub fn new(services: Vec<ServiceWire>, slices: Vec<EndpointSliceWire>) -> World {
        World {
            services,
            slices,
            node: test_node(),
            settings: test_settings(),
        }
    }

    /// Validates every object (any issue fails the test) and builds the plan.
    pub fn plan(&self) -> NodePlan {
        let services: Vec<Service> = self
            .services
            .iter()
            .map(|w| Service::from_wire(w).unwrap_or_else(|i| panic!("{i:?}")))
            .collect();
        let slices: Vec<EndpointSlice> = self
            .slices
            .iter()
            .map(|w| EndpointSlice::from_wire(w).unwrap_or_else(|i| panic!("{i:?}")))
            .collect();
        let (plan, issues) = NodePlan::build(&services, &slices, &self.node, &self.settings);
        assert!(issues.is_empty(), "{issues:?}");
        plan
    }
}

// ---------------------------------------------------------------------------------------
// Packet-flow tables, as kube-proxy's tracer writes them

pub struct Flow {
    pub name: &'static str,
    pub source: Source,
    pub protocol: Protocol,
    pub destination: &'static str,
    /// The set of backends, or `REJECT`, `DROP`, `HEALTHCHECK <status>`, or `""` for
    /// traffic that is not a Service's.
    pub output: &'static str,
    /// Whether the backend sees the node's address. Only checked when forwarded.
    pub masq: bool,
}

pub fn pod(address: &str) -> Source {
    Source::pod(ip(address))
}

pub fn node(address: &str) -> Source {
    Source::node(ip(address))
}

pub fn external(address: &str) -> Source {
    Source::external(ip(address))
}

pub fn tcp(
    name: &'static str,
    source: Source,
    destination: &'static str,
    output: &'static str,
    masq: bool,
) -> Flow {
    Flow {
        name,
        source,
        protocol: Protocol::Tcp,
        destination,
        output,
        masq,
    }
}

pub fn udp(
    name: &'static str,
    source: Source,
    destination: &'static str,
    output: &'static str,
    masq: bool,
) -> Flow {
    Flow {
        protocol: Protocol::Udp,
        ..tcp(name, source, destination, output, masq)
    }
}

pub fn sctp(
    name: &'static str,
    source: Source,
    destination: &'static str,
    output: &'static str,
    masq: bool,
) -> Flow {
    Flow {
        protocol: Protocol::Sctp,
        ..tcp(name, source, destination, output, masq)
    }
}

fn as_set(output: &str) -> BTreeSet<String> {
    output
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// Traces every flow and fails with all mismatches at once.
pub fn run_flows(context: &str, plan: &NodePlan, flows: &[Flow]) {
    let mut failures = Vec::new();
    for flow in flows {
        let verdict = plan.trace(flow.source, flow.protocol, sock(flow.destination));
        let got = verdict.to_string();
        if as_set(&got) != as_set(flow.output) {
            failures.push(format!(
                "{}: {:?} {} -> {}: got {got:?}, want {:?}",
                flow.name, flow.source.class, flow.protocol, flow.destination, flow.output
            ));
            continue;
        }
        if let weft_services::Verdict::Forward { .. } = verdict {
            match verdict.masquerade() {
                Some(masq) if masq == flow.masq => {}
                other => failures.push(format!(
                    "{}: masquerade {other:?}, want {} ({verdict:?})",
                    flow.name, flow.masq
                )),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{context}:\n  {}",
        failures.join("\n  ")
    );
}
