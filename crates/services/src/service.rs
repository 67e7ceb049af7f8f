//! The compact Service: what the plan needs from a Kubernetes Service, validated and
//! normalised, and nothing else.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::Serialize;
use weft_model::Issue;

use crate::ids::{Protocol, ServiceName};
use crate::ip::{family_of, parse_cidr, parse_ip};
use crate::meta::identify;
use crate::wire::ServiceWire;

/// Services carrying this label belong to another proxy (kube-proxy ignores every Service
/// that has it; weft takes the ones whose value is its configured name).
pub const SERVICE_PROXY_NAME_LABEL: &str = "service.kubernetes.io/service-proxy-name";
/// `sessionAffinityConfig.clientIP.timeoutSeconds` when the Service does not say (3 hours).
pub const DEFAULT_AFFINITY_TIMEOUT_SECONDS: u32 = 10_800;
/// The API server's upper bound for the affinity timeout (one day).
pub const MAX_AFFINITY_TIMEOUT_SECONDS: u32 = 86_400;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ServiceType {
    ClusterIp,
    NodePort,
    LoadBalancer,
    ExternalName,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TrafficPolicy {
    Cluster,
    Local,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePort {
    /// Matches the EndpointSlice port of the same name and protocol, which carries the
    /// target port as resolved for the endpoints of that slice (named target ports can
    /// resolve to a different number per pod, so the Service's `targetPort` is not read).
    pub name: String,
    pub protocol: Protocol,
    pub port: u16,
    /// Only for NodePort and LoadBalancer Services (a ClusterIP Service's value is ignored).
    pub node_port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    pub name: ServiceName,
    pub service_type: ServiceType,
    /// `clusterIP: None`. A headless Service has nothing to proxy and keeps no other field.
    pub headless: bool,
    /// `spec.clusterIPs` (or `spec.clusterIP`), at most one per family, primary first.
    /// Empty for headless and ExternalName Services and while no address is allocated.
    pub cluster_ips: Vec<IpAddr>,
    pub ports: Vec<ServicePort>,
    pub external_ips: Vec<IpAddr>,
    /// `status.loadBalancer.ingress[].ip` of a LoadBalancer Service, VIP mode only.
    pub load_balancer_ips: Vec<IpAddr>,
    /// `spec.loadBalancerSourceRanges`, trimmed and normalised, both families.
    pub source_ranges: Vec<IpNet>,
    pub external_policy: TrafficPolicy,
    pub internal_policy: TrafficPolicy,
    /// `sessionAffinity: ClientIP` with its timeout in seconds.
    pub affinity_timeout: Option<u32>,
    /// Only kept when the Service needs one (LoadBalancer with `externalTrafficPolicy: Local`).
    pub health_check_node_port: Option<u16>,
    /// The `service.kubernetes.io/service-proxy-name` label.
    pub proxy_name: Option<String>,
    /// `metadata.creationTimestamp`: on a frontend clash the older Service keeps it.
    pub created: Option<String>,
}

/// Why the plan leaves a valid Service out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    ExternalName,
    Headless,
    /// No cluster IP allocated yet.
    NoClusterIp,
}

impl Service {
    pub fn skip(&self) -> Option<Skip> {
        if self.service_type == ServiceType::ExternalName {
            Some(Skip::ExternalName)
        } else if self.headless {
            Some(Skip::Headless)
        } else if self.cluster_ips.is_empty() {
            Some(Skip::NoClusterIp)
        } else {
            None
        }
    }

    /// Reachable by something other than its cluster IPs (Kubernetes' "externally
    /// accessible"): only then does `externalTrafficPolicy` mean anything.
    pub fn externally_accessible(&self) -> bool {
        match self.service_type {
            ServiceType::NodePort | ServiceType::LoadBalancer => true,
            ServiceType::ClusterIp => !self.external_ips.is_empty(),
            ServiceType::ExternalName => false,
        }
    }

    pub fn external_policy_local(&self) -> bool {
        self.externally_accessible() && self.external_policy == TrafficPolicy::Local
    }

    pub fn internal_policy_local(&self) -> bool {
        self.internal_policy == TrafficPolicy::Local
    }

    /// A LoadBalancer with `externalTrafficPolicy: Local` gets a health-check node port, so
    /// the load balancer sends traffic only to nodes with local endpoints.
    pub fn needs_health_check(&self) -> bool {
        self.service_type == ServiceType::LoadBalancer && self.external_policy_local()
    }

    /// Reads and checks a Service. Every problem is reported, naming the object and field;
    /// a Service with any problem is refused whole, so nothing half-understood (a source
    /// range dropped, say) ever reaches the datapath.
    pub fn from_wire(wire: &ServiceWire) -> Result<Service, Vec<Issue>> {
        let mut issues = Vec::new();
        let meta = &wire.metadata;
        let id = identify(meta, "Service", &mut issues);
        let name = ServiceName::new(id.namespace, id.name);
        let object = id.object;
        let spec = &wire.spec;

        let service_type = match spec.type_.as_deref() {
            None | Some("ClusterIP") => ServiceType::ClusterIp,
            Some("NodePort") => ServiceType::NodePort,
            Some("LoadBalancer") => ServiceType::LoadBalancer,
            Some("ExternalName") => ServiceType::ExternalName,
            Some(other) => {
                issues.push(Issue::new(
                    &object,
                    "spec.type",
                    format!("{other:?} is not ClusterIP, NodePort, LoadBalancer or ExternalName"),
                ));
                ServiceType::ClusterIp
            }
        };
        let minimal = |service_type, headless| Service {
            name: name.clone(),
            service_type,
            headless,
            cluster_ips: Vec::new(),
            ports: Vec::new(),
            external_ips: Vec::new(),
            load_balancer_ips: Vec::new(),
            source_ranges: Vec::new(),
            external_policy: TrafficPolicy::Cluster,
            internal_policy: TrafficPolicy::Cluster,
            affinity_timeout: None,
            health_check_node_port: None,
            proxy_name: None,
            created: None,
        };
        if service_type == ServiceType::ExternalName {
            // DNS only: no address of it is ever proxied, whatever else the object holds.
            return if issues.is_empty() {
                Ok(minimal(ServiceType::ExternalName, false))
            } else {
                Err(issues)
            };
        }

        let (cluster_ip_texts, field): (Vec<&str>, &str) = if spec.cluster_ips.is_empty() {
            (
                spec.cluster_ip.as_deref().into_iter().collect(),
                "spec.clusterIP",
            )
        } else {
            (
                spec.cluster_ips.iter().map(String::as_str).collect(),
                "spec.clusterIPs",
            )
        };
        let indexed = |i: usize| {
            if spec.cluster_ips.is_empty() {
                field.to_string()
            } else {
                format!("{field}[{i}]")
            }
        };
        if cluster_ip_texts.first() == Some(&"None") {
            return if issues.is_empty() {
                Ok(minimal(service_type, true))
            } else {
                Err(issues)
            };
        }
        let mut cluster_ips: Vec<IpAddr> = Vec::new();
        for (i, text) in cluster_ip_texts.iter().enumerate() {
            if text.is_empty() {
                continue;
            }
            match parse_ip(text) {
                Some(ip) if cluster_ips.iter().any(|c| family_of(c) == family_of(&ip)) => issues
                    .push(Issue::new(
                        &object,
                        indexed(i),
                        format!("{text} is a second {} cluster IP", family_of(&ip)),
                    )),
                Some(ip) => cluster_ips.push(ip),
                None => issues.push(Issue::new(
                    &object,
                    indexed(i),
                    format!("{text:?} is not an IP address"),
                )),
            }
        }
        if let (Some(single), Some(first)) = (spec.cluster_ip.as_deref(), cluster_ips.first()) {
            if !spec.cluster_ips.is_empty()
                && !single.is_empty()
                && parse_ip(single) != Some(*first)
            {
                issues.push(Issue::new(
                    &object,
                    "spec.clusterIP",
                    format!("{single} differs from spec.clusterIPs[0] {first}"),
                ));
            }
        }

        let ports = read_ports(wire, &object, service_type, &mut issues);
        let external_ips = read_ips(
            spec.external_ips.iter().map(|s| Some(s.as_str())),
            "spec.externalIPs",
            "",
            &object,
            &mut issues,
        );
        let load_balancer_ips = if service_type == ServiceType::LoadBalancer {
            let vip_mode = wire.status.load_balancer.ingress.iter().map(|ingress| {
                match ingress.ip_mode.as_deref() {
                    None | Some("VIP") => ingress.ip.as_deref().filter(|ip| !ip.is_empty()),
                    // `Proxy` (and anything newer): the LB does not deliver to the VIP.
                    Some(_) => None,
                }
            });
            read_ips(
                vip_mode,
                "status.loadBalancer.ingress",
                ".ip",
                &object,
                &mut issues,
            )
        } else {
            Vec::new()
        };
        let mut source_ranges: Vec<IpNet> = Vec::new();
        for (i, text) in spec.load_balancer_source_ranges.iter().enumerate() {
            match parse_cidr(text) {
                Some(net) if source_ranges.contains(&net) => {}
                Some(net) => source_ranges.push(net),
                None => issues.push(Issue::new(
                    &object,
                    format!("spec.loadBalancerSourceRanges[{i}]"),
                    format!("{text:?} is not a CIDR"),
                )),
            }
        }

        let external_policy = read_policy(
            spec.external_traffic_policy.as_deref(),
            "spec.externalTrafficPolicy",
            &object,
            &mut issues,
        );
        let internal_policy = read_policy(
            spec.internal_traffic_policy.as_deref(),
            "spec.internalTrafficPolicy",
            &object,
            &mut issues,
        );
        let affinity_timeout = match spec.session_affinity.as_deref() {
            None | Some("None") => None,
            Some("ClientIP") => {
                let configured = spec
                    .session_affinity_config
                    .as_ref()
                    .and_then(|c| c.client_ip.as_ref())
                    .and_then(|c| c.timeout_seconds);
                match configured {
                    None => Some(DEFAULT_AFFINITY_TIMEOUT_SECONDS),
                    Some(t) if (1..=i64::from(MAX_AFFINITY_TIMEOUT_SECONDS)).contains(&t) => {
                        Some(t as u32)
                    }
                    Some(t) => {
                        issues.push(Issue::new(
                            &object,
                            "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
                            format!("{t} is outside 1..={MAX_AFFINITY_TIMEOUT_SECONDS}"),
                        ));
                        None
                    }
                }
            }
            Some(other) => {
                issues.push(Issue::new(
                    &object,
                    "spec.sessionAffinity",
                    format!("{other:?} is not None or ClientIP"),
                ));
                None
            }
        };

        let mut service = Service {
            name: name.clone(),
            service_type,
            headless: false,
            cluster_ips,
            ports,
            external_ips,
            load_balancer_ips,
            source_ranges,
            external_policy,
            internal_policy,
            affinity_timeout,
            health_check_node_port: None,
            proxy_name: meta.labels.get(SERVICE_PROXY_NAME_LABEL).cloned(),
            created: meta.creation_timestamp.clone(),
        };
        if service.needs_health_check() {
            // Missing: kube-proxy serves no health check either; the load balancer then
            // fails its probes, which is the safe outcome.
            match spec.health_check_node_port {
                None | Some(0) => {}
                Some(p) => match u16::try_from(p) {
                    Ok(port) => service.health_check_node_port = Some(port),
                    Err(_) => issues.push(Issue::new(
                        &object,
                        "spec.healthCheckNodePort",
                        format!("{p} is not a port"),
                    )),
                },
            }
        }
        if issues.is_empty() {
            Ok(service)
        } else {
            Err(issues)
        }
    }
}

fn read_ports(
    wire: &ServiceWire,
    object: &str,
    service_type: ServiceType,
    issues: &mut Vec<Issue>,
) -> Vec<ServicePort> {
    let mut ports: Vec<ServicePort> = Vec::new();
    for (i, p) in wire.spec.ports.iter().enumerate() {
        let field = format!("spec.ports[{i}]");
        let protocol = Protocol::from_kubernetes(p.protocol.as_deref());
        if protocol.is_none() {
            issues.push(Issue::new(
                object,
                format!("{field}.protocol"),
                format!(
                    "{:?} is not TCP, UDP or SCTP",
                    p.protocol.as_deref().unwrap_or("")
                ),
            ));
        }
        let port = match p.port.map(u16::try_from) {
            Some(Ok(port)) if port != 0 => Some(port),
            Some(_) => {
                issues.push(Issue::new(
                    object,
                    format!("{field}.port"),
                    format!("{} is not a port", p.port.unwrap_or_default()),
                ));
                None
            }
            None => {
                issues.push(Issue::new(object, format!("{field}.port"), "missing"));
                None
            }
        };
        let node_port = match p.node_port {
            None | Some(0) => None,
            Some(n) => match u16::try_from(n) {
                Ok(n) => Some(n),
                Err(_) => {
                    issues.push(Issue::new(
                        object,
                        format!("{field}.nodePort"),
                        format!("{n} is not a port"),
                    ));
                    None
                }
            },
        };
        let node_port = match service_type {
            ServiceType::NodePort | ServiceType::LoadBalancer => node_port,
            ServiceType::ClusterIp | ServiceType::ExternalName => None,
        };
        let name = p.name.clone().unwrap_or_default();
        let (Some(protocol), Some(port)) = (protocol, port) else {
            continue;
        };
        if let Some(j) = ports
            .iter()
            .position(|o| o.protocol == protocol && o.port == port)
        {
            issues.push(Issue::new(
                object,
                field,
                format!("{port}/{protocol} is already spec.ports[{j}]"),
            ));
            continue;
        }
        if let Some(j) = ports.iter().position(|o| o.name == name) {
            issues.push(Issue::new(
                object,
                format!("{field}.name"),
                format!("{name:?} is already the name of spec.ports[{j}]"),
            ));
            continue;
        }
        ports.push(ServicePort {
            name,
            protocol,
            port,
            node_port,
        });
    }
    ports
}

/// Reads a list of addresses; `None` entries are skipped (kept for the index in messages).
fn read_ips<'a>(
    texts: impl Iterator<Item = Option<&'a str>>,
    field: &str,
    suffix: &str,
    object: &str,
    issues: &mut Vec<Issue>,
) -> Vec<IpAddr> {
    let mut ips: Vec<IpAddr> = Vec::new();
    for (i, text) in texts.enumerate() {
        let Some(text) = text else { continue };
        match parse_ip(text) {
            Some(ip) if ips.contains(&ip) => {}
            Some(ip) => ips.push(ip),
            None => issues.push(Issue::new(
                object,
                format!("{field}[{i}]{suffix}"),
                format!("{text:?} is not an IP address"),
            )),
        }
    }
    ips
}

fn read_policy(
    text: Option<&str>,
    field: &str,
    object: &str,
    issues: &mut Vec<Issue>,
) -> TrafficPolicy {
    match text {
        None | Some("Cluster") => TrafficPolicy::Cluster,
        Some("Local") => TrafficPolicy::Local,
        Some(other) => {
            issues.push(Issue::new(
                object,
                field,
                format!("{other:?} is not Cluster or Local"),
            ));
            TrafficPolicy::Cluster
        }
    }
}
