//! The lookups the BPF programs perform on the compiled tables, and nothing more: the same
//! keys, byte layouts, prefix lengths and order. The BPF side is to be tested against this
//! (with `BPF_PROG_TEST_RUN` on tables filled from the same compilation).
//!
//! The lookup order, for a packet at the point where the local endpoint is known (the
//! source's `from_pod` for egress; wherever the destination endpoint is resolved for
//! ingress), with `port` the destination port of the connection's original direction (0
//! for protocols without ports):
//! 1. `endpoints[endpoint]`: missing means not a local endpoint (not policy's business).
//! 2. `identities[peer]`, world when missing.
//! 3. Ingress and the peer is the node itself (`host`): allow (kubelet probes).
//! 4. The endpoint is pending: drop.
//! 5. The direction's set is 0: not isolated, allow.
//! 6. `allow[(set, identity, protocol, port)]`.
//! 7. `cidrs[(set, peer address)]`: a class; when not `CLASS_NONE`,
//!    `allow[(set, class, protocol, port)]`.
//! 8. The stronger of the verdicts of 6 and 7 allows; neither: drop (no rule).

use std::collections::BTreeSet;
use std::net::IpAddr;

use crate::policy::Direction;
use crate::table::*;
use crate::view::Protocol;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The endpoint is isolated in this direction and no rule allows it.
    NoRule = 1,
    /// The agent has not programmed the endpoint's policy yet.
    Pending = 2,
    /// An established connection that a change of policy or labels no longer allows.
    Revoked = 3,
}

/// What a policy drop event carries (the datapath emits it; `explain` words it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DropEvent {
    pub reason: DropReason,
    pub direction: Direction,
    /// The local endpoint whose policy dropped it.
    pub endpoint: IpAddr,
    /// The other side.
    pub peer: IpAddr,
    pub set: u32,
    pub peer_identity: u32,
    /// The CIDR class the peer address fell in, 0 when none.
    pub peer_class: u32,
    pub protocol: u8,
    pub port: u16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allowed {
    NotIsolated,
    FromHost,
    Rule(Verdict),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allow(Allowed),
    Drop(DropEvent),
}

impl Decision {
    pub fn allowed(&self) -> bool {
        matches!(self, Decision::Allow(_))
    }
}

/// One node's tables, ready to be looked up.
#[derive(Debug, Clone)]
pub struct Simulator {
    tables: NodeTables,
    /// Prefix lengths present, longest first: an LPM lookup is the first hit among them.
    allow_lens: Vec<u32>,
    cidr_lens: Vec<u32>,
}

impl Simulator {
    pub fn new(tables: NodeTables) -> Simulator {
        let allow_lens: BTreeSet<u32> = tables.allow.keys().map(|k| k.prefixlen).collect();
        let cidr_lens: BTreeSet<u32> = tables.cidrs.keys().map(|k| k.prefixlen).collect();
        Simulator {
            tables,
            allow_lens: allow_lens.into_iter().rev().collect(),
            cidr_lens: cidr_lens.into_iter().rev().collect(),
        }
    }

    pub fn tables(&self) -> &NodeTables {
        &self.tables
    }

    pub fn is_local(&self, ip: IpAddr) -> bool {
        self.tables.endpoints.contains_key(&IpKey::from(ip))
    }

    /// The policy decision for `endpoint` (local) talking to `peer` in `direction`. `None`
    /// when `endpoint` is not an endpoint of this node.
    pub fn check(
        &self,
        direction: Direction,
        endpoint: IpAddr,
        peer: IpAddr,
        protocol: u8,
        port: u16,
    ) -> Option<Decision> {
        let ep = *self.tables.endpoints.get(&IpKey::from(endpoint))?;
        let port = if Protocol::from_number(protocol).is_some() {
            port
        } else {
            0
        };
        let peer_identity = self
            .tables
            .identities
            .get(&IpKey::from(peer))
            .copied()
            .unwrap_or(IDENTITY_WORLD);
        let drop = |reason, set, peer_class| DropEvent {
            reason,
            direction,
            endpoint,
            peer,
            set,
            peer_identity,
            peer_class,
            protocol,
            port,
        };
        if direction == Direction::Ingress && peer_identity == IDENTITY_HOST {
            return Some(Decision::Allow(Allowed::FromHost));
        }
        if ep.flags & ENDPOINT_PENDING != 0 {
            return Some(Decision::Drop(drop(
                DropReason::Pending,
                SET_NONE,
                CLASS_NONE,
            )));
        }
        let set = ep.set(direction);
        if set == SET_NONE {
            return Some(Decision::Allow(Allowed::NotIsolated));
        }
        let by_identity = self.allow_lookup(set, peer_identity, protocol, port);
        let class = self.cidr_lookup(set, peer).unwrap_or(CLASS_NONE);
        let by_class = if class == CLASS_NONE {
            None
        } else {
            self.allow_lookup(set, class, protocol, port)
        };
        let verdict = match (by_identity, by_class) {
            (Some(a), Some(b)) => Some(Verdict::best(a, b)),
            (a, b) => a.or(b),
        };
        Some(match verdict {
            Some(v) if v.action == ACTION_ALLOW => Decision::Allow(Allowed::Rule(v)),
            _ => Decision::Drop(drop(DropReason::NoRule, set, class)),
        })
    }

    fn allow_lookup(&self, set: u32, peer: u32, protocol: u8, port: u16) -> Option<Verdict> {
        let data = AllowKey {
            prefixlen: ALLOW_KEY_BITS,
            set,
            peer,
            protocol,
            port,
        }
        .data();
        self.allow_lens.iter().find_map(|&len| {
            let key = AllowKey::from_data(len, &mask(&data, len));
            self.tables.allow.get(&key).copied()
        })
    }

    fn cidr_lookup(&self, set: u32, addr: IpAddr) -> Option<u32> {
        let ip = IpKey::from(addr);
        let data = CidrKey {
            prefixlen: CIDR_PREFIX_BASE + ip.bits(),
            set,
            ip,
        }
        .data();
        let full = CIDR_PREFIX_BASE + ip.bits();
        self.cidr_lens
            .iter()
            .filter(|&&len| len <= full)
            .find_map(|&len| {
                let key = CidrKey::from_data(len, &mask(&data, len));
                self.tables.cidrs.get(&key).copied()
            })
    }
}

/// The decisions along a connection's path through a cluster's nodes: the source's egress
/// on the node holding it, the destination's ingress on the node holding it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathDecision {
    pub egress: Option<Decision>,
    pub ingress: Option<Decision>,
}

impl PathDecision {
    pub fn allowed(&self) -> bool {
        self.egress.is_none_or(|d| d.allowed()) && self.ingress.is_none_or(|d| d.allowed())
    }
}

/// Evaluates a connection's first packet against every node's tables.
pub fn path(
    nodes: &[Simulator],
    src: IpAddr,
    dst: IpAddr,
    protocol: u8,
    port: u16,
) -> PathDecision {
    PathDecision {
        egress: nodes
            .iter()
            .find_map(|n| n.check(Direction::Egress, src, dst, protocol, port)),
        ingress: nodes
            .iter()
            .find_map(|n| n.check(Direction::Ingress, dst, src, protocol, port)),
    }
}
