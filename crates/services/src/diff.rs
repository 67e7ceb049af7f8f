//! What changed between two plans, per Service, so the datapath writes only that.

use std::collections::BTreeSet;
use std::net::SocketAddr;

use ipnet::IpNet;
use serde::Serialize;

use crate::ids::ServiceName;
use crate::plan::{Frontend, FrontendKey, NodePlan, PortPlan, ServicePlan};

/// The changes from one plan to another. `NodePlan::diff(old, new).apply(old) == new`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PlanDiff {
    /// The new service CIDRs, when they changed.
    pub service_cidrs: Option<Vec<IpNet>>,
    /// Every Service that appeared, went, or changed in any way, sorted by name.
    pub services: Vec<ServiceChange>,
}

/// One Service's change: `old` is `None` when it appeared, `new` is `None` when it went.
/// The datapath reprograms the Service from `new` and removes what only `old` had.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServiceChange {
    pub name: ServiceName,
    pub old: Option<ServicePlan>,
    pub new: Option<ServicePlan>,
}

/// A translated flow that must be forgotten: connectionless traffic to `frontend` pinned
/// to a `backend` the frontend no longer uses (kube-proxy deletes such conntrack entries
/// so the next datagram is balanced again).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct StaleFlow {
    pub frontend: FrontendKey,
    pub backend: SocketAddr,
}

impl NodePlan {
    /// The changes that turn `self` into `new`.
    pub fn diff(&self, new: &NodePlan) -> PlanDiff {
        let mut services = Vec::new();
        let names: BTreeSet<&ServiceName> = self
            .services()
            .keys()
            .chain(new.services().keys())
            .collect();
        for name in names {
            let old = self.services().get(name);
            let next = new.services().get(name);
            if old != next {
                services.push(ServiceChange {
                    name: name.clone(),
                    old: old.cloned(),
                    new: next.cloned(),
                });
            }
        }
        PlanDiff {
            service_cidrs: (self.service_cidrs() != new.service_cidrs())
                .then(|| new.service_cidrs().to_vec()),
            services,
        }
    }
}

impl PlanDiff {
    pub fn is_empty(&self) -> bool {
        self.service_cidrs.is_none() && self.services.is_empty()
    }

    /// Applies the changes to the plan they were computed from.
    pub fn apply(&self, plan: &mut NodePlan) {
        if let Some(cidrs) = &self.service_cidrs {
            plan.set_service_cidrs(cidrs.clone());
        }
        // Removals first, so a key moving between two Services is never owned twice.
        for change in &self.services {
            plan.put(&change.name, None);
        }
        for change in &self.services {
            if let Some(new) = &change.new {
                plan.put(&change.name, Some(new.clone()));
            }
        }
    }
}

fn frontends(plan: &Option<ServicePlan>) -> impl Iterator<Item = (&PortPlan, &Frontend)> {
    plan.iter().flat_map(|p| p.frontends())
}

/// The backends a frontend can send new connections to, whatever their source.
fn reachable(port: &PortPlan, frontend: &Frontend) -> BTreeSet<SocketAddr> {
    frontend
        .targets()
        .into_iter()
        .flat_map(|t| port.backends(t))
        .map(|b| SocketAddr::new(b.address, b.port))
        .collect()
}

impl ServiceChange {
    /// Frontends the old plan had and the new one has not.
    pub fn removed_frontends(&self) -> Vec<FrontendKey> {
        let kept: BTreeSet<FrontendKey> = frontends(&self.new).map(|(_, f)| f.key).collect();
        frontends(&self.old)
            .map(|(_, f)| f.key)
            .filter(|k| !kept.contains(k))
            .collect()
    }

    /// UDP and SCTP flows to forget: for every old frontend, each backend it could reach
    /// before and cannot reach now (all of them when the frontend itself went).
    pub fn stale_flows(&self) -> Vec<StaleFlow> {
        let mut stale = Vec::new();
        for (port, frontend) in frontends(&self.old) {
            if !frontend.key.protocol.needs_flow_flush() {
                continue;
            }
            let now: BTreeSet<SocketAddr> = frontends(&self.new)
                .find(|(_, f)| f.key == frontend.key)
                .map(|(p, f)| reachable(p, f))
                .unwrap_or_default();
            for backend in reachable(port, frontend).difference(&now) {
                stale.push(StaleFlow {
                    frontend: frontend.key,
                    backend: *backend,
                });
            }
        }
        stale
    }

    /// UDP and SCTP frontends that had no backend (or did not exist) and now have one:
    /// flows recorded while they were refused must be forgotten so the next datagram is
    /// translated (kube-proxy flushes conntrack for a UDP Service going from 0 to N).
    pub fn revived_frontends(&self) -> Vec<FrontendKey> {
        frontends(&self.new)
            .filter(|(_, f)| f.key.protocol.needs_flow_flush())
            .filter(|(p, f)| !reachable(p, f).is_empty())
            .filter(|(_, f)| {
                frontends(&self.old)
                    .find(|(_, o)| o.key == f.key)
                    .is_none_or(|(p, o)| reachable(p, o).is_empty())
            })
            .map(|(_, f)| f.key)
            .collect()
    }
}
