//! A packet tracer over the plan: what happens to the first packet of a new connection.
//! It is the oracle for tests (table-driven here, end to end in the lab): the datapath is
//! right when every connection it makes lands where the tracer says it may.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use crate::ids::{Protocol, ServiceName};
use crate::ip::family_of;
use crate::plan::{FrontendKey, NodePlan, SourceClass, WhenEmpty};

/// Who opens the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source {
    pub class: SourceClass,
    pub address: IpAddr,
}

impl Source {
    pub fn pod(address: IpAddr) -> Source {
        Source {
            class: SourceClass::Pod,
            address,
        }
    }

    pub fn node(address: IpAddr) -> Source {
        Source {
            class: SourceClass::Node,
            address,
        }
    }

    pub fn external(address: IpAddr) -> Source {
        Source {
            class: SourceClass::External,
            address,
        }
    }
}

/// A backend a connection may land on, and whether the backend sees the node's address
/// instead of the client's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Reach {
    pub backend: SocketAddr,
    pub masquerade: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Balanced over these backends (sorted; any of them may be chosen). With affinity, a
    /// client's later connections stick to its first choice for `affinity_timeout` seconds.
    Forward {
        reach: Vec<Reach>,
        affinity_timeout: Option<u32>,
    },
    /// Refused: TCP reset or ICMP unreachable; a socket sees ECONNREFUSED.
    Reject,
    /// Silently dropped: the client times out.
    Drop,
    /// Answered by the node's health-check server for the Service.
    HealthCheck {
        service: ServiceName,
        status: u16,
        local_endpoints: u32,
    },
    /// Not service traffic: delivered to whatever owns the address, untouched.
    NotServiceTraffic,
}

impl Verdict {
    /// Whether the backend sees the node's address: `Some` when every possible backend
    /// agrees (they differ only for a hairpin among several backends), `None` when not
    /// forwarded at all.
    pub fn masquerade(&self) -> Option<bool> {
        match self {
            Verdict::Forward { reach, .. } => {
                let first = reach.first()?.masquerade;
                reach.iter().all(|r| r.masquerade == first).then_some(first)
            }
            _ => None,
        }
    }

    pub fn backends(&self) -> Vec<SocketAddr> {
        match self {
            Verdict::Forward { reach, .. } => reach.iter().map(|r| r.backend).collect(),
            _ => Vec::new(),
        }
    }
}

/// kube-proxy's tracer notation: `"10.0.0.1:80, [fd00::1]:80"`, `"REJECT"`, `"DROP"`,
/// `"HEALTHCHECK 200"`, and `""` for traffic that is not a Service's.
impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Forward { reach, .. } => {
                let list: Vec<String> = reach.iter().map(|r| r.backend.to_string()).collect();
                f.write_str(&list.join(", "))
            }
            Verdict::Reject => f.write_str("REJECT"),
            Verdict::Drop => f.write_str("DROP"),
            Verdict::HealthCheck { status, .. } => write!(f, "HEALTHCHECK {status}"),
            Verdict::NotServiceTraffic => Ok(()),
        }
    }
}

impl NodePlan {
    /// Follows the first packet of a new connection through the plan, in kube-proxy's
    /// order: the frontend (exact address, protocol and port), its source ranges, the
    /// backend set of the source's class (Reject or Drop when empty); then the health-check
    /// ports; then a cluster IP on a port its Service does not expose (Reject); then an
    /// address in the service CIDRs that no Service owns (Drop).
    pub fn trace(&self, source: Source, protocol: Protocol, destination: SocketAddr) -> Verdict {
        if family_of(&source.address) != family_of(&destination.ip()) {
            return Verdict::NotServiceTraffic;
        }
        let key = FrontendKey {
            address: destination.ip(),
            protocol,
            port: destination.port(),
        };
        if let Some((_, port, frontend)) = self.frontend(&key) {
            if !frontend.admits(&source.address) {
                return Verdict::Drop;
            }
            let treatment = frontend.treatment(source.class);
            let backends = port.backends(treatment.target);
            if backends.is_empty() {
                return match port.when_empty {
                    WhenEmpty::Reject => Verdict::Reject,
                    WhenEmpty::Drop => Verdict::Drop,
                };
            }
            let reach = backends
                .iter()
                .map(|b| Reach {
                    backend: SocketAddr::new(b.address, b.port),
                    // Hairpin: the reply must come back through the node, not straight
                    // from the pod to itself.
                    masquerade: treatment.masquerade || b.address == source.address,
                })
                .collect();
            return Verdict::Forward {
                reach,
                affinity_timeout: port.affinity_timeout,
            };
        }
        if protocol == Protocol::Tcp {
            if let Some((service, hc)) = self.health_check_at(&destination.ip(), destination.port())
            {
                let family = family_of(&destination.ip());
                return Verdict::HealthCheck {
                    service: service.name.clone(),
                    status: hc.status(family),
                    local_endpoints: hc.local_endpoints(family),
                };
            }
        }
        if let Some(owner) = self.cluster_ip_owner(&destination.ip()) {
            return if owner.proxied {
                Verdict::Reject
            } else {
                Verdict::NotServiceTraffic
            };
        }
        if self.in_service_cidrs(&destination.ip()) {
            return Verdict::Drop;
        }
        Verdict::NotServiceTraffic
    }
}
