//! From EndpointSlices to the endpoints each Service port may use on this node.
//!
//! [`merge_slices`] is kube-proxy's EndpointsMap for one Service: endpoints keyed per slice
//! port (name, protocol), every slice of the Service unioned. [`categorize`] is its
//! CategorizeEndpoints: which of them the Cluster and the Local traffic policies use.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::ids::{Family, Protocol};
use crate::slice::EndpointSlice;

/// An endpoint as one Service port sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortEndpoint {
    pub address: IpAddr,
    /// The target port, from the slice port of the Service port's name and protocol.
    pub port: u16,
    /// On this node (`nodeName` equals the node's name; no `nodeName` means remote).
    pub local: bool,
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
    pub zone_hints: Vec<String>,
    pub node_hints: Vec<String>,
}

impl PortEndpoint {
    /// Usable when nothing is ready: still serving while it terminates (KEP-1669).
    pub fn serving_terminating(&self) -> bool {
        self.serving && self.terminating
    }

    pub fn usable(&self) -> bool {
        self.ready || self.serving_terminating()
    }
}

/// A Service's endpoints of one family, per slice port `(name, protocol)`, sorted by
/// address and port.
pub type PortEndpoints = BTreeMap<(String, Protocol), Vec<PortEndpoint>>;

/// Unions the slices of one Service (the caller passes only that Service's slices; slices
/// of another family are skipped). An endpoint listed by two slices counts once: the
/// first slice by name wins, except that a local copy beats a remote one (kube-proxy
/// prefers the local one as well, and otherwise picks arbitrarily).
pub fn merge_slices<'a>(
    family: Family,
    node_name: &str,
    slices: impl IntoIterator<Item = &'a EndpointSlice>,
) -> PortEndpoints {
    let mut ordered: Vec<&EndpointSlice> = slices
        .into_iter()
        .filter(|s| s.family == Some(family))
        .collect();
    ordered.sort_by(|a, b| a.name.cmp(&b.name));
    let mut merged: BTreeMap<(String, Protocol), BTreeMap<(IpAddr, u16), PortEndpoint>> =
        BTreeMap::new();
    for slice in ordered {
        for port in &slice.ports {
            let set = merged
                .entry((port.name.clone(), port.protocol))
                .or_default();
            for e in &slice.endpoints {
                let local = e.node.as_deref() == Some(node_name);
                let key = (e.address, port.port);
                if set.get(&key).is_some_and(|kept| kept.local || !local) {
                    continue;
                }
                set.insert(
                    key,
                    PortEndpoint {
                        address: e.address,
                        port: port.port,
                        local,
                        ready: e.ready,
                        serving: e.serving,
                        terminating: e.terminating,
                        zone_hints: e.zone_hints.clone(),
                        node_hints: e.node_hints.clone(),
                    },
                );
            }
        }
    }
    merged
        .into_iter()
        .map(|(key, set)| (key, set.into_values().collect()))
        .collect()
}

/// The endpoints each traffic policy uses. `None` means the Service port never uses that
/// policy (so nothing is computed for it); `Some(empty)` means it does and has nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Categorized {
    pub cluster: Option<Vec<PortEndpoint>>,
    pub local: Option<Vec<PortEndpoint>>,
    /// Some endpoint anywhere is usable (ready, or serving while terminating). When false
    /// every frontend refuses connections; when true an empty set drops them.
    pub has_any: bool,
}

/// Which endpoints topology hints restrict the Cluster set to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Topology<'a> {
    Everywhere,
    SameNode,
    SameZone(&'a str),
}

/// Hints are followed only when every ready endpoint has them and at least one is for this
/// node (node hints, PreferSameNode) or this node's zone (zone hints); otherwise they are
/// ignored altogether, as kube-proxy does.
fn topology<'a>(
    endpoints: &[PortEndpoint],
    node_name: &str,
    zone: Option<&'a str>,
) -> Topology<'a> {
    let ready: Vec<&PortEndpoint> = endpoints.iter().filter(|e| e.ready).collect();
    if ready.is_empty() {
        return Topology::Everywhere;
    }
    let for_node = |e: &&PortEndpoint| e.node_hints.iter().any(|n| n == node_name);
    if ready.iter().all(|e| !e.node_hints.is_empty()) && ready.iter().any(for_node) {
        return Topology::SameNode;
    }
    if let Some(zone) = zone.filter(|z| !z.is_empty()) {
        let for_zone = |e: &&PortEndpoint| e.zone_hints.iter().any(|z| z == zone);
        if ready.iter().all(|e| !e.zone_hints.is_empty()) && ready.iter().any(for_zone) {
            return Topology::SameZone(zone);
        }
    }
    Topology::Everywhere
}

fn available(e: &PortEndpoint, topology: Topology<'_>, node_name: &str) -> bool {
    match topology {
        Topology::Everywhere => true,
        Topology::SameNode => e.node_hints.iter().any(|n| n == node_name),
        Topology::SameZone(zone) => e.zone_hints.iter().any(|z| z == zone),
    }
}

/// Ready endpoints first; only when a policy has none, the serving-and-terminating ones,
/// decided for the Cluster and the Local set independently. Endpoints that are not serving
/// are never used. Topology narrows only the Cluster set's ready endpoints.
pub fn categorize(
    endpoints: &[PortEndpoint],
    uses_cluster: bool,
    uses_local: bool,
    node_name: &str,
    zone: Option<&str>,
) -> Categorized {
    let cluster = uses_cluster.then(|| {
        let topology = topology(endpoints, node_name, zone);
        let ready: Vec<PortEndpoint> = endpoints
            .iter()
            .filter(|e| e.ready && available(e, topology, node_name))
            .cloned()
            .collect();
        if ready.is_empty() {
            fallback(endpoints.iter())
        } else {
            ready
        }
    });
    let local = uses_local.then(|| {
        let ready: Vec<PortEndpoint> = endpoints
            .iter()
            .filter(|e| e.local && e.ready)
            .cloned()
            .collect();
        if ready.is_empty() {
            fallback(endpoints.iter().filter(|e| e.local))
        } else {
            ready
        }
    });
    Categorized {
        cluster,
        local,
        has_any: endpoints.iter().any(PortEndpoint::usable),
    }
}

fn fallback<'a>(endpoints: impl Iterator<Item = &'a PortEndpoint>) -> Vec<PortEndpoint> {
    endpoints
        .filter(|e| e.serving_terminating())
        .cloned()
        .collect()
}
