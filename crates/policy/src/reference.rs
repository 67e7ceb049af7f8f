//! The reference evaluator: NetworkPolicy semantics written straight from the API reference,
//! slow and obvious, with no identities, sets or tables. For one connection attempt it
//! decides allowed or not and says why. The compiler and the datapath's lookups are tested
//! against it; it shares nothing with them but the compact policy types (it even matches
//! selectors itself).
//!
//! The rules it implements, in the reference's words:
//! - A pod is isolated for ingress (egress) if any NetworkPolicy in its namespace selects it
//!   with `Ingress` (`Egress`) among its `policyTypes`; otherwise everything is allowed in
//!   that direction.
//! - An isolated pod accepts (sends) only what at least one rule of one selecting policy
//!   allows: the union of all of them, so policies never conflict.
//! - A connection needs both the source's egress and the destination's ingress to allow it.
//! - A rule allows traffic matching any of its peers (every peer when `from`/`to` is empty)
//!   and any of its ports (every port when `ports` is empty).
//! - A pod peer matches pods (never hosts or unknown addresses): `podSelector` alone in the
//!   policy's namespace, `namespaceSelector` alone any pod of the selected namespaces, both
//!   together the selected pods of the selected namespaces. Namespaces always carry
//!   `kubernetes.io/metadata.name`.
//! - `ipBlock` matches addresses in `cidr` and in no `except`, pod addresses included.
//! - A port matches the protocol and the port number, a range up to `endPort`, or a named
//!   container port of the destination pod (same name and protocol).
//! - Traffic from a pod's own node is always allowed in (kubelet probes). Host-network pods
//!   are never isolated and count as their node. Finished pods and pods without addresses
//!   are not there.

use std::fmt;
use std::net::IpAddr;

use crate::cluster::Cluster;
use crate::policy::{Direction, NamespaceScope, NetworkPolicy, Peer, PortMatch, Rule};
use crate::selector::{Operator, Selector};
use crate::view::{Labels, PodView, NAMESPACE_NAME_LABEL};

/// One connection attempt: `protocol` is the IP protocol number; `port` the destination
/// port (ignored, and 0 by convention, for protocols without ports).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Connection {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub protocol: u8,
    pub port: u16,
}

/// Who an address is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Party {
    Pod {
        namespace: String,
        name: String,
    },
    Node {
        name: String,
    },
    /// Nobody known, or claimed by more than one pod or node (then nobody can tell who sent
    /// it, and it must not pass for any of them).
    Unknown,
}

impl fmt::Display for Party {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Party::Pod { namespace, name } => write!(f, "{namespace}/{name}"),
            Party::Node { name } => write!(f, "node {name}"),
            Party::Unknown => write!(f, "outside the cluster"),
        }
    }
}

/// A rule of a policy: `namespace/name`, direction, index in that direction's list.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleRef {
    pub policy: String,
    pub direction: Direction,
    pub rule: usize,
}

impl fmt::Display for RuleRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} rule {}", self.policy, self.direction, self.rule)
    }
}

/// The decision of one side (the source's egress or the destination's ingress).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Side {
    /// This side is not a pod policy applies to.
    NotAPod,
    /// No policy selects the pod in this direction.
    NotIsolated,
    /// Ingress from the pod's own node.
    FromOwnNode,
    /// Every rule that allows it.
    Allowed(Vec<RuleRef>),
    /// Isolated by these policies (`namespace/name`), and none of their rules allows it.
    Denied(Vec<String>),
}

impl Side {
    pub fn allows(&self) -> bool {
        !matches!(self, Side::Denied(_))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub connection: Connection,
    pub src: Party,
    pub dst: Party,
    pub egress: Side,
    pub ingress: Side,
}

impl Verdict {
    pub fn allowed(&self) -> bool {
        self.egress.allows() && self.ingress.allows()
    }
}

pub fn evaluate(cluster: &Cluster, conn: &Connection) -> Verdict {
    let src = who(cluster, conn.src);
    let dst = who(cluster, conn.dst);
    let egress = match src {
        Some(Who::Pod(pod)) => side(cluster, pod, Direction::Egress, |policy, rule| {
            rule_allows(
                cluster,
                policy,
                rule,
                dst,
                conn.dst,
                conn,
                dst.and_then(Who::pod),
            )
        }),
        _ => Side::NotAPod,
    };
    let ingress = match dst {
        Some(Who::Pod(pod)) => match src {
            Some(Who::Node(node)) if node == pod.node => Side::FromOwnNode,
            _ => side(cluster, pod, Direction::Ingress, |policy, rule| {
                rule_allows(cluster, policy, rule, src, conn.src, conn, Some(pod))
            }),
        },
        _ => Side::NotAPod,
    };
    Verdict {
        connection: *conn,
        src: party(src),
        dst: party(dst),
        egress,
        ingress,
    }
}

#[derive(Clone, Copy)]
enum Who<'c, 'a> {
    Pod(&'c PodView<'a>),
    Node(&'a str),
}

impl<'c, 'a> Who<'c, 'a> {
    fn pod(self) -> Option<&'c PodView<'a>> {
        match self {
            Who::Pod(p) => Some(p),
            Who::Node(_) => None,
        }
    }
}

fn party(w: Option<Who>) -> Party {
    match w {
        Some(Who::Pod(p)) => Party::Pod {
            namespace: p.namespace.to_string(),
            name: p.name.to_string(),
        },
        Some(Who::Node(n)) => Party::Node {
            name: n.to_string(),
        },
        None => Party::Unknown,
    }
}

/// The one live pod or node holding `addr`, or nobody.
fn who<'c, 'a>(cluster: &'c Cluster<'a>, addr: IpAddr) -> Option<Who<'c, 'a>> {
    let pods: Vec<&PodView> = cluster
        .pods
        .iter()
        .filter(|p| !p.host_network && !p.terminal && p.ips.contains(&addr))
        .collect();
    let nodes: Vec<&str> = cluster
        .nodes
        .iter()
        .filter(|n| n.addresses.contains(&addr))
        .map(|n| n.name)
        .collect();
    match (pods.as_slice(), nodes.as_slice()) {
        ([pod], []) => Some(Who::Pod(pod)),
        ([], [node]) => Some(Who::Node(node)),
        ([], nodes) if !nodes.is_empty() && nodes.iter().all(|n| *n == nodes[0]) => {
            Some(Who::Node(nodes[0]))
        }
        _ => None,
    }
}

fn side(
    cluster: &Cluster,
    pod: &PodView,
    direction: Direction,
    allows: impl Fn(&NetworkPolicy, &Rule) -> bool,
) -> Side {
    let selecting: Vec<&NetworkPolicy> = cluster
        .policies
        .iter()
        .copied()
        .filter(|p| p.namespace == pod.namespace && selects(&p.pod_selector, pod.labels))
        .filter(|p| p.rules(direction).is_some())
        .collect();
    if selecting.is_empty() {
        return Side::NotIsolated;
    }
    let mut by = Vec::new();
    for policy in &selecting {
        for (i, rule) in policy.rules(direction).unwrap_or(&[]).iter().enumerate() {
            if allows(policy, rule) {
                by.push(RuleRef {
                    policy: policy.key(),
                    direction,
                    rule: i,
                });
            }
        }
    }
    if by.is_empty() {
        let mut names: Vec<String> = selecting.iter().map(|p| p.key()).collect();
        names.sort();
        Side::Denied(names)
    } else {
        by.sort();
        Side::Allowed(by)
    }
}

/// `peer`/`peer_addr`: the other side; `port_owner`: the destination pod, whose container
/// ports named ports refer to.
fn rule_allows(
    cluster: &Cluster,
    policy: &NetworkPolicy,
    rule: &Rule,
    peer: Option<Who>,
    peer_addr: IpAddr,
    conn: &Connection,
    port_owner: Option<&PodView>,
) -> bool {
    let peer_ok = match &rule.peers {
        None => true,
        Some(peers) => peers
            .iter()
            .any(|p| peer_matches(cluster, policy, p, peer, peer_addr)),
    };
    let port_ok = match &rule.ports {
        None => true,
        Some(ports) => ports.iter().any(|p| {
            p.protocol.number() == conn.protocol
                && match &p.port {
                    PortMatch::Any => true,
                    PortMatch::Range(lo, hi) => *lo <= conn.port && conn.port <= *hi,
                    PortMatch::Named(name) => port_owner.is_some_and(|owner| {
                        owner.ports.iter().any(|cp| {
                            cp.name == *name && cp.protocol == p.protocol && cp.port == conn.port
                        })
                    }),
                }
        }),
    };
    peer_ok && port_ok
}

fn peer_matches(
    cluster: &Cluster,
    policy: &NetworkPolicy,
    peer: &Peer,
    who: Option<Who>,
    addr: IpAddr,
) -> bool {
    match peer {
        Peer::IpBlock(block) => {
            block.cidr.contains(&addr) && !block.except.iter().any(|e| e.contains(&addr))
        }
        Peer::Pods { namespaces, pods } => {
            let Some(Who::Pod(pod)) = who else {
                return false;
            };
            let namespace_ok = match namespaces {
                NamespaceScope::Own => pod.namespace == policy.namespace,
                NamespaceScope::Selected(sel) => selects(
                    sel,
                    &NsLabels {
                        cluster,
                        name: pod.namespace,
                    },
                ),
            };
            namespace_ok && selects(pods, pod.labels)
        }
    }
}

struct NsLabels<'c, 'a> {
    cluster: &'c Cluster<'a>,
    name: &'c str,
}

impl Labels for NsLabels<'_, '_> {
    fn get(&self, key: &str) -> Option<&str> {
        if key == NAMESPACE_NAME_LABEL {
            return Some(self.name);
        }
        self.cluster
            .namespaces
            .iter()
            .find(|n| n.name == self.name)
            .and_then(|n| n.labels.get(key))
    }
    fn each(&self, f: &mut dyn FnMut(&str, &str)) {
        let own = self.cluster.namespaces.iter().find(|n| n.name == self.name);
        let mut pairs: Vec<(String, String)> = Vec::new();
        if let Some(n) = own {
            n.labels
                .each(&mut |k, v| pairs.push((k.to_string(), v.to_string())));
        }
        pairs.retain(|(k, _)| k != NAMESPACE_NAME_LABEL);
        pairs.push((NAMESPACE_NAME_LABEL.to_string(), self.name.to_string()));
        pairs.sort();
        for (k, v) in &pairs {
            f(k, v);
        }
    }
}

/// A selector written out from the API reference (deliberately not `Selector::matches`).
fn selects(sel: &Selector, labels: &dyn Labels) -> bool {
    for (k, v) in &sel.match_labels {
        if labels.get(k) != Some(v.as_str()) {
            return false;
        }
    }
    for r in &sel.match_expressions {
        let value = labels.get(&r.key);
        let listed = value.is_some_and(|v| r.values.iter().any(|x| x == v));
        let ok = match r.operator {
            Operator::In => listed,
            Operator::NotIn => !listed,
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        };
        if !ok {
            return false;
        }
    }
    true
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.connection;
        let what = crate::view::format_proto_port(c.protocol, c.port);
        write!(
            f,
            "{what} from {} ({}) to {} ({}): {}",
            self.src,
            c.src,
            self.dst,
            c.dst,
            if self.allowed() { "allowed" } else { "denied" }
        )?;
        write!(f, "\n  egress of {}: ", self.src)?;
        side_text(f, &self.egress, Direction::Egress, &what)?;
        write!(f, "\n  ingress of {}: ", self.dst)?;
        side_text(f, &self.ingress, Direction::Ingress, &what)
    }
}

fn side_text(f: &mut fmt::Formatter<'_>, side: &Side, dir: Direction, what: &str) -> fmt::Result {
    match side {
        Side::NotAPod => write!(f, "not a pod, no {dir} policy applies"),
        Side::NotIsolated => write!(f, "not isolated (no policy selects it for {dir})"),
        Side::FromOwnNode => write!(f, "allowed: traffic from the pod's own node"),
        Side::Allowed(by) => {
            let list: Vec<String> = by.iter().map(|r| r.to_string()).collect();
            write!(f, "allowed by {}", list.join(", "))
        }
        Side::Denied(selected_by) => write!(
            f,
            "{}; no rule allows {what}",
            crate::explain::denied_by_default(selected_by)
        ),
    }
}
