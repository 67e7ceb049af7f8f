//! Computing the plan from Services, EndpointSlices, the node and the settings.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use ipnet::IpNet;
use weft_model::Issue;

use crate::endpoints::{categorize, merge_slices, PortEndpoint};
use crate::ids::{Family, ServiceName};
use crate::ip::{family_of, host_net, net_family};
use crate::plan::{
    Backend, Frontend, FrontendKey, HealthCheck, NodePlan, PortKey, PortPlan, Scope, ServicePlan,
    Target, Treatment, WhenEmpty,
};
use crate::service::{Service, ServicePort};
use crate::settings::{NodeContext, Settings};
use crate::slice::EndpointSlice;

impl NodePlan {
    /// The whole plan for this node. Services are planned independently; then, where two
    /// claim the same frontend (an external or load-balancer IP and port shared by two
    /// Services, or one equal to another's cluster IP), the older Service keeps it (then
    /// the first by name) and the other loses just that frontend, reported as an issue.
    /// Cluster IP, external IP and load-balancer frontends come before NodePort ones, as in
    /// kube-proxy, where the service-IP lookup precedes the NodePort lookup.
    pub fn build<'a>(
        services: impl IntoIterator<Item = &'a Service>,
        slices: impl IntoIterator<Item = &'a EndpointSlice>,
        node: &NodeContext,
        settings: &Settings,
    ) -> (NodePlan, Vec<Issue>) {
        let mut issues = Vec::new();
        let mut by_service: BTreeMap<(&str, &str), Vec<&EndpointSlice>> = BTreeMap::new();
        for slice in slices {
            by_service
                .entry((slice.namespace.as_str(), slice.service.as_str()))
                .or_default()
                .push(slice);
        }

        let mut ordered: Vec<&Service> = Vec::new();
        let mut seen: BTreeSet<&ServiceName> = BTreeSet::new();
        for service in services {
            if seen.insert(&service.name) {
                ordered.push(service);
            } else {
                issues.push(Issue::new(
                    service.name.object(),
                    "metadata.name",
                    "defined more than once",
                ));
            }
        }
        ordered.sort_by(|a, b| {
            (a.created.is_none(), &a.created, &a.name).cmp(&(
                b.created.is_none(),
                &b.created,
                &b.name,
            ))
        });

        let mut planned: Vec<(&Service, ServicePlan)> = ordered
            .into_iter()
            .filter_map(|service| {
                let key = (service.name.namespace.as_str(), service.name.name.as_str());
                let slices = by_service.get(&key).map(Vec::as_slice).unwrap_or(&[]);
                plan_service(service, slices, node, settings).map(|plan| (service, plan))
            })
            .collect();
        resolve_clashes(&mut planned, &mut issues);

        let services = planned
            .into_iter()
            .map(|(_, plan)| (plan.name.clone(), plan))
            .collect();
        (
            NodePlan::from_parts(services, settings.service_cidrs.clone()),
            issues,
        )
    }
}

/// `planned` is oldest first: each key goes to the first Service that claims it.
fn resolve_clashes(planned: &mut [(&Service, ServicePlan)], issues: &mut Vec<Issue>) {
    let mut frontends: BTreeMap<FrontendKey, ServiceName> = BTreeMap::new();
    for node_ports in [false, true] {
        for (service, plan) in planned.iter_mut() {
            for port in plan.ports.values_mut() {
                let port_name = port.name.clone();
                port.frontends.retain(|f| {
                    if (f.scope == Scope::NodePort) != node_ports {
                        return true;
                    }
                    if let Some(owner) = frontends.get(&f.key) {
                        issues.push(clash(service, f, &port_name, owner));
                        return false;
                    }
                    frontends.insert(f.key, service.name.clone());
                    true
                });
            }
        }
    }
    let mut cluster_ips: BTreeMap<IpAddr, ServiceName> = BTreeMap::new();
    let mut health: BTreeMap<(IpAddr, u16), ServiceName> = BTreeMap::new();
    for (service, plan) in planned.iter_mut() {
        plan.cluster_ips.retain(|ip| match cluster_ips.get(ip) {
            Some(owner) => {
                issues.push(Issue::new(
                    service.name.object(),
                    "spec.clusterIPs",
                    format!(
                        "{ip} is already the cluster IP of {}; left out",
                        owner.object()
                    ),
                ));
                false
            }
            None => {
                cluster_ips.insert(*ip, service.name.clone());
                true
            }
        });
        if let Some(hc) = &plan.health_check {
            let taken = hc
                .addresses
                .iter()
                .find_map(|ip| health.get(&(*ip, hc.node_port)));
            if let Some(owner) = taken {
                issues.push(Issue::new(
                    service.name.object(),
                    "spec.healthCheckNodePort",
                    format!(
                        "{} is already the health-check port of {}; no health check is served",
                        hc.node_port,
                        owner.object()
                    ),
                ));
                plan.health_check = None;
            } else {
                for ip in &hc.addresses {
                    health.insert((*ip, hc.node_port), service.name.clone());
                }
            }
        }
    }
}

fn clash(service: &Service, frontend: &Frontend, port_name: &str, owner: &ServiceName) -> Issue {
    let ip = frontend.key.address;
    let position = |list: &[IpAddr]| list.iter().position(|a| *a == ip).unwrap_or(0);
    let field = match frontend.scope {
        Scope::ClusterIp => format!("spec.clusterIPs[{}]", position(&service.cluster_ips)),
        Scope::ExternalIp => format!("spec.externalIPs[{}]", position(&service.external_ips)),
        Scope::LoadBalancer => format!(
            "status.loadBalancer.ingress[{}].ip",
            position(&service.load_balancer_ips)
        ),
        _ => format!(
            "spec.ports[{}].nodePort",
            service
                .ports
                .iter()
                .position(|p| p.name == port_name)
                .unwrap_or(0)
        ),
    };
    Issue::new(
        service.name.object(),
        field,
        format!(
            "{}:{}/{} is already served for {}, the older Service; left out",
            ip,
            frontend.key.port,
            frontend.key.protocol,
            owner.object()
        ),
    )
}

/// One Service's plan, on its own (no clash resolution with other Services). `None` for
/// Services nothing proxies: ExternalName, headless, no cluster IP yet. `slices` are the
/// Service's EndpointSlices; others are ignored.
pub fn plan_service(
    service: &Service,
    slices: &[&EndpointSlice],
    node: &NodeContext,
    settings: &Settings,
) -> Option<ServicePlan> {
    if service.skip().is_some() {
        return None;
    }
    let slices: Vec<&EndpointSlice> = slices
        .iter()
        .copied()
        .filter(|s| s.namespace == service.name.namespace && s.service == service.name.name)
        .collect();
    let mut plan = ServicePlan {
        name: service.name.clone(),
        proxied: settings.serves(service.proxy_name.as_deref()),
        cluster_ips: service.cluster_ips.clone(),
        ports: BTreeMap::new(),
        health_check: None,
    };
    if !plan.proxied {
        return Some(plan);
    }
    let health_port = service
        .health_check_node_port
        .filter(|_| service.needs_health_check());
    let mut local_ready: BTreeMap<Family, u32> = BTreeMap::new();
    let mut health_addresses: Vec<IpAddr> = Vec::new();
    for cluster_ip in &service.cluster_ips {
        let family = family_of(cluster_ip);
        let endpoints = merge_slices(family, &node.name, slices.iter().copied());
        let node_port_addresses = settings.node_port_addresses.select(node, family);
        for port in &service.ports {
            let key = PortKey {
                family,
                protocol: port.protocol,
                port: port.port,
            };
            let port_endpoints = endpoints
                .get(&(port.name.clone(), port.protocol))
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            let port_plan = plan_port(
                service,
                port,
                key,
                *cluster_ip,
                port_endpoints,
                &node_port_addresses,
                node,
                settings,
            );
            plan.ports.insert(key, port_plan);
        }
        if health_port.is_some() {
            let ready: BTreeSet<IpAddr> = endpoints
                .values()
                .flatten()
                .filter(|e| e.local && e.ready)
                .map(|e| e.address)
                .collect();
            local_ready.insert(family, ready.len() as u32);
            health_addresses.extend(node_port_addresses);
        }
    }
    if let Some(node_port) = health_port {
        health_addresses.sort();
        health_addresses.dedup();
        plan.health_check = Some(HealthCheck {
            node_port,
            addresses: health_addresses,
            local_ready,
        });
    }
    Some(plan)
}

#[allow(clippy::too_many_arguments)]
fn plan_port(
    service: &Service,
    port: &ServicePort,
    key: PortKey,
    cluster_ip: IpAddr,
    endpoints: &[PortEndpoint],
    node_port_addresses: &[IpAddr],
    node: &NodeContext,
    settings: &Settings,
) -> PortPlan {
    let family = key.family;
    let of_family = |ips: &[IpAddr]| -> Vec<IpAddr> {
        ips.iter()
            .copied()
            .filter(|ip| family_of(ip) == family)
            .collect()
    };
    let external_ips = of_family(&service.external_ips);
    let load_balancer_ips = of_family(&service.load_balancer_ips);
    let node_port_addresses: &[IpAddr] = if port.node_port.is_some() {
        node_port_addresses
    } else {
        &[]
    };
    // Whether this port is reachable other than by cluster IP; node ports count even when
    // this node has no address to serve them on.
    let externally_accessible =
        port.node_port.is_some() || !external_ips.is_empty() || !load_balancer_ips.is_empty();
    let internal_local = service.internal_policy_local();
    let external_local = service.external_policy_local();
    let uses_cluster = !internal_local || externally_accessible;
    let uses_local = internal_local || (external_local && externally_accessible);
    let categorized = categorize(
        endpoints,
        uses_cluster,
        uses_local,
        &node.name,
        node.zone.as_deref(),
    );
    let backends = |set: Option<Vec<PortEndpoint>>| -> Vec<Backend> {
        set.unwrap_or_default()
            .into_iter()
            .map(|e| Backend {
                address: e.address,
                port: e.port,
                local: e.local,
                ready: e.ready,
            })
            .collect()
    };

    let internal = internal_treatments(internal_local, settings);
    let external = external_treatments(external_local, settings);
    let mut frontends: Vec<Frontend> = Vec::new();
    let protocol = key.protocol;
    let mut add = |address: IpAddr, port_number: u16, scope: Scope, ranges: Option<Vec<IpNet>>| {
        let frontend_key = FrontendKey {
            address,
            protocol,
            port: port_number,
        };
        // One Service listing an address twice (an external IP that is also its LB IP)
        // keeps the first, more specific scope.
        if frontends.iter().any(|f| f.key == frontend_key) {
            return;
        }
        let [pod, from_node, outside] = if scope.is_external() {
            external
        } else {
            internal
        };
        frontends.push(Frontend {
            key: frontend_key,
            scope,
            pod,
            node: from_node,
            external: outside,
            source_ranges: ranges,
        });
    };
    add(cluster_ip, port.port, Scope::ClusterIp, None);
    for ip in &load_balancer_ips {
        add(
            *ip,
            port.port,
            Scope::LoadBalancer,
            source_ranges(service, *ip, family, node),
        );
    }
    for ip in &external_ips {
        add(*ip, port.port, Scope::ExternalIp, None);
    }
    if let Some(node_port) = port.node_port {
        for ip in node_port_addresses {
            add(*ip, node_port, Scope::NodePort, None);
        }
    }
    frontends.sort_by_key(|f| f.key);

    PortPlan {
        key,
        name: port.name.clone(),
        cluster: backends(categorized.cluster),
        local: backends(categorized.local),
        when_empty: if categorized.has_any {
            WhenEmpty::Drop
        } else {
            WhenEmpty::Reject
        },
        affinity_timeout: service.affinity_timeout,
        frontends,
    }
}

/// Cluster IP frontends: internal traffic policy picks the set for every source; anything
/// not from a pod is masqueraded (so replies from a remote endpoint come back through this
/// node), pods too with `masqueradeAll`.
fn internal_treatments(local: bool, settings: &Settings) -> [Treatment; 3] {
    let target = if local {
        Target::Local
    } else {
        Target::Cluster
    };
    let pod = Treatment {
        target,
        masquerade: settings.masquerade_all,
    };
    // Without a detector nothing can tell pods from others, so nothing is masqueraded on
    // that ground.
    let other = Treatment {
        target,
        masquerade: settings.masquerade_all || settings.local_traffic_detector,
    };
    [pod, other, other]
}

/// External frontends (NodePort, external IP, load balancer). `Cluster`: everything goes
/// to every endpoint and is masqueraded. `Local`: outside clients keep their address and
/// reach only local endpoints; pods are short-circuited to every endpoint unmasqueraded,
/// as if they had gone out and come back; the node itself goes to every endpoint,
/// masqueraded. Internal traffic policy and `masqueradeAll` do not apply here.
fn external_treatments(local: bool, settings: &Settings) -> [Treatment; 3] {
    let everywhere = Treatment {
        target: Target::Cluster,
        masquerade: true,
    };
    if !local {
        return [everywhere; 3];
    }
    let outside = Treatment {
        target: Target::Local,
        masquerade: false,
    };
    let pod = if settings.local_traffic_detector {
        Treatment {
            target: Target::Cluster,
            masquerade: false,
        }
    } else {
        outside
    };
    [pod, everywhere, outside]
}

/// The source ranges of one LoadBalancer frontend, or `None` when every source is let in.
/// Ranges of the other family are not for this frontend; when the Service lists ranges but
/// none of this family, nothing of this family is let in (fail closed; kube-proxy lets
/// everything in). A zero-length prefix lets everything in. When the node's own primary
/// address is in the ranges, the LB IP itself is let in as a source too: a VIP configured
/// on the node makes the node's own connections to it come from the VIP.
fn source_ranges(
    service: &Service,
    lb_ip: IpAddr,
    family: Family,
    node: &NodeContext,
) -> Option<Vec<IpNet>> {
    if service.source_ranges.is_empty() {
        return None;
    }
    let mut ranges: Vec<IpNet> = service
        .source_ranges
        .iter()
        .copied()
        .filter(|r| net_family(r) == family)
        .collect();
    if ranges.iter().any(|r| r.prefix_len() == 0) {
        return None;
    }
    let node_inside = node
        .primary(family)
        .is_some_and(|ip| ranges.iter().any(|r| r.contains(&ip)));
    if node_inside && !ranges.iter().any(|r| r.contains(&lb_ip)) {
        ranges.push(host_net(lb_ip));
    }
    Some(ranges)
}
