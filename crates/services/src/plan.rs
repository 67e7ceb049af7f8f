//! The per-node plan: every frontend this node must serve and what to do with a new
//! connection to it. It is pure data computed by [`NodePlan::build`]; the datapath programs
//! it (and, through [`crate::PlanDiff`], only what changed), the tracer reads it.
//!
//! Shape, from the outside in:
//! - [`NodePlan`]: the Services by name, and the service CIDRs (unowned addresses in them
//!   are dropped).
//! - [`ServicePlan`]: one Service: its cluster IPs (a port it does not expose is refused),
//!   its ports, its health check.
//! - [`PortPlan`]: one (family, protocol, port) of the Service: the two backend sets (Cluster
//!   and Local traffic policy), what an empty set does, session affinity, and its frontends.
//!   Affinity state is per PortPlan and client address, shared by all its frontends.
//! - [`Frontend`]: one (address, protocol, port) with its [`Scope`], the [`Treatment`] of each
//!   source class (which backend set, whether to masquerade) and, for LoadBalancer
//!   frontends, the allowed source ranges.
//!
//! Two rules apply everywhere and are not repeated per frontend: a connection whose chosen
//! backend is its own source (hairpin) is masqueraded, and the Reject/Drop of an empty set
//! comes after the source-range check.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;
use serde::Serialize;

use crate::ids::{Family, Protocol, ServiceName};

/// The lookup key of a frontend. Unique across the whole plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct FrontendKey {
    pub address: IpAddr,
    pub protocol: Protocol,
    pub port: u16,
}

/// How a frontend came to exist. Host ports (CNI `portMappings`) will be another scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[non_exhaustive]
pub enum Scope {
    /// A cluster IP and service port. Internal traffic policy applies.
    ClusterIp,
    /// An `externalIPs` entry and service port. External traffic policy applies.
    ExternalIp,
    /// A VIP-mode `status.loadBalancer.ingress` IP and service port. External traffic policy
    /// and source ranges apply.
    LoadBalancer,
    /// One of this node's NodePort addresses and the node port. External traffic policy
    /// applies.
    NodePort,
}

impl Scope {
    pub fn is_external(self) -> bool {
        !matches!(self, Scope::ClusterIp)
    }
}

/// Where a connection comes from, as the datapath tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum SourceClass {
    /// A pod of the cluster (its address is in the cluster's pod CIDRs).
    Pod,
    /// This node itself (a host-network socket, or a source that is a local address).
    Node,
    /// Anything else.
    External,
}

/// Which backend set a connection is balanced over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Target {
    Cluster,
    Local,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Treatment {
    pub target: Target,
    /// Source-NAT to the node, so the reply comes back through it.
    pub masquerade: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Frontend {
    pub key: FrontendKey,
    pub scope: Scope,
    pub pod: Treatment,
    pub node: Treatment,
    pub external: Treatment,
    /// LoadBalancer frontends of a Service with `loadBalancerSourceRanges`: a new
    /// connection from outside these is dropped, whatever its class. `None`: no check.
    pub source_ranges: Option<Vec<IpNet>>,
}

impl Frontend {
    pub fn treatment(&self, class: SourceClass) -> Treatment {
        match class {
            SourceClass::Pod => self.pod,
            SourceClass::Node => self.node,
            SourceClass::External => self.external,
        }
    }

    pub fn admits(&self, source: &IpAddr) -> bool {
        self.source_ranges
            .as_ref()
            .is_none_or(|ranges| ranges.iter().any(|r| r.contains(source)))
    }

    /// The backend sets any source class can be sent to.
    pub fn targets(&self) -> Vec<Target> {
        let mut targets = vec![self.pod.target, self.node.target, self.external.target];
        targets.sort();
        targets.dedup();
        targets
    }
}

/// One backend: an endpoint's address and its target port for this service port.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Backend {
    pub address: IpAddr,
    pub port: u16,
    /// On this node.
    pub local: bool,
    /// False when the set fell back to serving-but-terminating endpoints.
    pub ready: bool,
}

/// What a frontend does with a new connection when the backend set it uses is empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum WhenEmpty {
    /// The Service has no usable endpoint anywhere: refuse (TCP RST / ICMP unreachable,
    /// ECONNREFUSED at a socket).
    Reject,
    /// It has endpoints, none usable from here (a Local policy with none local): drop.
    Drop,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct PortKey {
    pub family: Family,
    pub protocol: Protocol,
    pub port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PortPlan {
    pub key: PortKey,
    /// The service port's name (it selects the slice port, hence the target port).
    pub name: String,
    /// Usable endpoints under the Cluster policy, sorted by address and port. Empty when no
    /// frontend uses the Cluster set. Never capped.
    pub cluster: Vec<Backend>,
    /// Usable endpoints on this node, sorted. Empty when no frontend uses the Local set.
    pub local: Vec<Backend>,
    pub when_empty: WhenEmpty,
    /// `sessionAffinity: ClientIP`: a client address keeps its backend this many seconds
    /// after its last connection (or packet), across every frontend of this port.
    pub affinity_timeout: Option<u32>,
    /// Sorted by key.
    pub frontends: Vec<Frontend>,
}

impl PortPlan {
    pub fn backends(&self, target: Target) -> &[Backend] {
        match target {
            Target::Cluster => &self.cluster,
            Target::Local => &self.local,
        }
    }
}

/// The health-check node port of a LoadBalancer Service with `externalTrafficPolicy:
/// Local`: an HTTP server on the node's NodePort addresses that answers 200 with the
/// number of local ready endpoints when there is one, 503 otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HealthCheck {
    pub node_port: u16,
    /// Sorted.
    pub addresses: Vec<IpAddr>,
    /// Distinct local endpoint addresses that are ready (terminating ones never count), per
    /// family of the Service: a request arriving over IPv4 is answered with the IPv4 count.
    pub local_ready: BTreeMap<Family, u32>,
}

impl HealthCheck {
    pub fn local_endpoints(&self, family: Family) -> u32 {
        self.local_ready.get(&family).copied().unwrap_or(0)
    }

    /// The HTTP status to answer a check that arrived over `family`.
    pub fn status(&self, family: Family) -> u16 {
        if self.local_endpoints(family) > 0 {
            200
        } else {
            503
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServicePlan {
    pub name: ServiceName,
    /// False: another proxy serves this Service (its `service-proxy-name` label). It has no
    /// ports here; its cluster IPs are listed only so they are not dropped as unowned.
    pub proxied: bool,
    pub cluster_ips: Vec<IpAddr>,
    pub ports: BTreeMap<PortKey, PortPlan>,
    pub health_check: Option<HealthCheck>,
}

impl ServicePlan {
    pub fn frontends(&self) -> impl Iterator<Item = (&PortPlan, &Frontend)> {
        self.ports
            .values()
            .flat_map(|p| p.frontends.iter().map(move |f| (p, f)))
    }
}

/// Everything this node serves. Build it with [`NodePlan::build`]; compare two with
/// [`NodePlan::diff`]. Read-only outside the crate, so its lookups always agree with it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NodePlan {
    services: BTreeMap<ServiceName, ServicePlan>,
    service_cidrs: Vec<IpNet>,
    #[serde(skip)]
    index: Index,
}

/// Lookups derived from `services`, kept in step by every constructor. A built plan never
/// has two Services claiming one key (the build resolves clashes), so each entry has
/// exactly one owner and can be added and removed per Service.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Index {
    frontends: BTreeMap<FrontendKey, (ServiceName, PortKey)>,
    cluster_ips: BTreeMap<IpAddr, ServiceName>,
    health_checks: BTreeMap<(IpAddr, u16), ServiceName>,
}

impl Index {
    fn insert(&mut self, service: &ServicePlan) {
        for (port, frontend) in service.frontends() {
            self.frontends
                .insert(frontend.key, (service.name.clone(), port.key));
        }
        for ip in &service.cluster_ips {
            self.cluster_ips.insert(*ip, service.name.clone());
        }
        if let Some(hc) = &service.health_check {
            for ip in &hc.addresses {
                self.health_checks
                    .insert((*ip, hc.node_port), service.name.clone());
            }
        }
    }

    fn remove(&mut self, service: &ServicePlan) {
        let name = &service.name;
        for (_, frontend) in service.frontends() {
            if self
                .frontends
                .get(&frontend.key)
                .is_some_and(|(o, _)| o == name)
            {
                self.frontends.remove(&frontend.key);
            }
        }
        for ip in &service.cluster_ips {
            if self.cluster_ips.get(ip) == Some(name) {
                self.cluster_ips.remove(ip);
            }
        }
        if let Some(hc) = &service.health_check {
            for ip in &hc.addresses {
                let key = (*ip, hc.node_port);
                if self.health_checks.get(&key) == Some(name) {
                    self.health_checks.remove(&key);
                }
            }
        }
    }
}

impl NodePlan {
    pub(crate) fn from_parts(
        services: BTreeMap<ServiceName, ServicePlan>,
        service_cidrs: Vec<IpNet>,
    ) -> NodePlan {
        let mut index = Index::default();
        for service in services.values() {
            index.insert(service);
        }
        NodePlan {
            services,
            service_cidrs,
            index,
        }
    }

    /// Replaces (or with `None` removes) one Service's plan, keeping lookups in step.
    pub(crate) fn put(&mut self, name: &ServiceName, plan: Option<ServicePlan>) {
        if let Some(old) = self.services.remove(name) {
            self.index.remove(&old);
        }
        if let Some(new) = plan {
            self.index.insert(&new);
            self.services.insert(name.clone(), new);
        }
    }

    pub(crate) fn set_service_cidrs(&mut self, cidrs: Vec<IpNet>) {
        self.service_cidrs = cidrs;
    }

    pub fn services(&self) -> &BTreeMap<ServiceName, ServicePlan> {
        &self.services
    }

    /// Addresses in these that belong to no Service are dropped.
    pub fn service_cidrs(&self) -> &[IpNet] {
        &self.service_cidrs
    }

    /// The frontend serving (address, protocol, port), with its port and Service.
    pub fn frontend(&self, key: &FrontendKey) -> Option<(&ServicePlan, &PortPlan, &Frontend)> {
        let (name, port_key) = self.index.frontends.get(key)?;
        let service = self.services.get(name)?;
        let port = service.ports.get(port_key)?;
        let frontend = port.frontends.iter().find(|f| f.key == *key)?;
        Some((service, port, frontend))
    }

    /// Every frontend of the plan, with its port and Service.
    pub fn frontends(&self) -> impl Iterator<Item = (&ServicePlan, &PortPlan, &Frontend)> {
        self.services
            .values()
            .flat_map(|s| s.frontends().map(move |(p, f)| (s, p, f)))
    }

    /// The Service owning a cluster IP (proxied here or by another proxy).
    pub fn cluster_ip_owner(&self, ip: &IpAddr) -> Option<&ServicePlan> {
        self.services.get(self.index.cluster_ips.get(ip)?)
    }

    /// The health check listening on (address, TCP port), if any.
    pub fn health_check_at(&self, ip: &IpAddr, port: u16) -> Option<(&ServicePlan, &HealthCheck)> {
        let service = self
            .services
            .get(self.index.health_checks.get(&(*ip, port))?)?;
        Some((service, service.health_check.as_ref()?))
    }

    pub fn in_service_cidrs(&self, ip: &IpAddr) -> bool {
        self.service_cidrs.iter().any(|c| c.contains(ip))
    }
}
