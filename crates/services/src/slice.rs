//! The compact EndpointSlice.

use std::net::IpAddr;

use weft_model::Issue;

use crate::ids::{Family, Protocol};
use crate::ip::{family_of, parse_ip};
use crate::meta::identify;
use crate::wire::EndpointSliceWire;

/// The label that ties a slice to its Service (same namespace).
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointSlice {
    pub namespace: String,
    pub name: String,
    /// The Service this slice belongs to, from the `kubernetes.io/service-name` label.
    pub service: String,
    /// `addressType`; `None` for FQDN slices, which carry nothing a proxy can use.
    pub family: Option<Family>,
    pub ports: Vec<EndpointPort>,
    pub endpoints: Vec<Endpoint>,
}

/// A slice port: the target port of every endpoint in this slice for the Service port of
/// the same name and protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointPort {
    pub name: String,
    pub protocol: Protocol,
    pub port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `addresses[0]`: the only address kube-proxy uses (the API defines the others as
    /// fungible copies).
    pub address: IpAddr,
    pub node: Option<String>,
    /// Ready and not terminating (absent `ready` means true; the API promises a terminating
    /// endpoint is never ready, and weft does not trust an object that says otherwise).
    pub ready: bool,
    /// Absent means true.
    pub serving: bool,
    /// Absent means false.
    pub terminating: bool,
    /// `hints.forZones[].name`, sorted.
    pub zone_hints: Vec<String>,
    /// `hints.forNodes[].name`, sorted.
    pub node_hints: Vec<String>,
}

impl EndpointSlice {
    pub fn object(&self) -> String {
        format!("EndpointSlice/{}/{}", self.namespace, self.name)
    }

    /// Reads and checks a slice; a slice with any problem is refused whole, naming the
    /// object and each offending field.
    pub fn from_wire(wire: &EndpointSliceWire) -> Result<EndpointSlice, Vec<Issue>> {
        let mut issues = Vec::new();
        let meta = &wire.metadata;
        let id = identify(meta, "EndpointSlice", &mut issues);
        let object = id.object;
        let service = meta
            .labels
            .get(SERVICE_NAME_LABEL)
            .cloned()
            .unwrap_or_default();
        if service.is_empty() {
            issues.push(Issue::new(
                &object,
                format!("metadata.labels[{SERVICE_NAME_LABEL}]"),
                "missing: the slice belongs to no Service",
            ));
        }
        let family = match wire.address_type.as_deref() {
            Some("IPv4") => Some(Family::V4),
            Some("IPv6") => Some(Family::V6),
            Some("FQDN") => None,
            other => {
                issues.push(Issue::new(
                    &object,
                    "addressType",
                    format!("{:?} is not IPv4, IPv6 or FQDN", other.unwrap_or("")),
                ));
                None
            }
        };
        let mut slice = EndpointSlice {
            namespace: id.namespace,
            name: id.name,
            service,
            family,
            ports: Vec::new(),
            endpoints: Vec::new(),
        };
        if let Some(family) = family {
            slice.ports = read_ports(wire, &object, &mut issues);
            slice.endpoints = read_endpoints(wire, family, &object, &mut issues);
        }
        if issues.is_empty() {
            Ok(slice)
        } else {
            Err(issues)
        }
    }
}

fn read_ports(
    wire: &EndpointSliceWire,
    object: &str,
    issues: &mut Vec<Issue>,
) -> Vec<EndpointPort> {
    let mut ports: Vec<EndpointPort> = Vec::new();
    for (i, p) in wire.ports.iter().enumerate() {
        let field = format!("ports[{i}]");
        let Some(protocol) = Protocol::from_kubernetes(p.protocol.as_deref()) else {
            issues.push(Issue::new(
                object,
                format!("{field}.protocol"),
                format!(
                    "{:?} is not TCP, UDP or SCTP",
                    p.protocol.as_deref().unwrap_or("")
                ),
            ));
            continue;
        };
        let port = match p.port {
            // A port without a number serves no Service port (kube-proxy skips it too).
            None | Some(0) => continue,
            Some(n) => match u16::try_from(n) {
                Ok(port) => port,
                Err(_) => {
                    issues.push(Issue::new(
                        object,
                        format!("{field}.port"),
                        format!("{n} is not a port"),
                    ));
                    continue;
                }
            },
        };
        let name = p.name.clone().unwrap_or_default();
        if let Some(j) = ports
            .iter()
            .position(|o| o.name == name && o.protocol == protocol)
        {
            issues.push(Issue::new(
                object,
                format!("{field}.name"),
                format!("{name:?}/{protocol} is already ports[{j}]"),
            ));
            continue;
        }
        ports.push(EndpointPort {
            name,
            protocol,
            port,
        });
    }
    ports
}

fn read_endpoints(
    wire: &EndpointSliceWire,
    family: Family,
    object: &str,
    issues: &mut Vec<Issue>,
) -> Vec<Endpoint> {
    let mut endpoints = Vec::new();
    for (i, e) in wire.endpoints.iter().enumerate() {
        let field = format!("endpoints[{i}].addresses[0]");
        let Some(text) = e.addresses.first() else {
            issues.push(Issue::new(
                object,
                format!("endpoints[{i}].addresses"),
                "empty",
            ));
            continue;
        };
        let address = match parse_ip(text) {
            Some(ip) if family_of(&ip) == family => ip,
            Some(ip) => {
                issues.push(Issue::new(
                    object,
                    field,
                    format!("{ip} is not an {family} address, as addressType says"),
                ));
                continue;
            }
            None => {
                issues.push(Issue::new(
                    object,
                    field,
                    format!("{text:?} is not an IP address"),
                ));
                continue;
            }
        };
        let c = &e.conditions;
        let terminating = c.terminating.unwrap_or(false);
        let hints = |pick: fn(&crate::wire::EndpointHintsWire) -> &Vec<crate::wire::HintWire>| {
            let mut names: Vec<String> = e
                .hints
                .as_ref()
                .map(|h| pick(h).iter().filter_map(|n| n.name.clone()).collect())
                .unwrap_or_default();
            names.sort();
            names.dedup();
            names
        };
        endpoints.push(Endpoint {
            address,
            node: e.node_name.clone().filter(|n| !n.is_empty()),
            ready: c.ready.unwrap_or(true) && !terminating,
            serving: c.serving.unwrap_or(true),
            terminating,
            zone_hints: hints(|h| &h.for_zones),
            node_hints: hints(|h| &h.for_nodes),
        });
    }
    endpoints
}
