//! The compiled form: the tables one node's datapath holds, as the BPF maps will hold them
//! (same keys, values, byte order and prefix lengths), plus the metadata that explains them.
//!
//! | table | BPF type | key | value |
//! |---|---|---|---|
//! | `identities` | HASH | [`IpKey`] (20 B): any address in the cluster | `u32` identity |
//! | `endpoints` | HASH | [`IpKey`]: a pod on this node | [`EndpointPolicy`] (16 B) |
//! | `allow` | LPM_TRIE | [`AllowKey`] (4 + 12 B): set, peer, protocol, port | [`Verdict`] (12 B) |
//! | `cidrs` | LPM_TRIE | [`CidrKey`] (4 + 24 B): set, address | `u32` class |
//!
//! `docs/policy.md` gives the lookup order.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::policy::Direction;
use crate::view::{Protocol, SortedLabels};

/// Addresses nobody in the cluster holds (and addresses claimed twice).
pub const IDENTITY_WORLD: u32 = 0;
/// This node's own addresses: traffic from it to its pods is always allowed in.
pub const IDENTITY_HOST: u32 = 1;
/// Other nodes' addresses (and so host-network pods elsewhere). Matches no pod selector.
pub const IDENTITY_REMOTE_NODE: u32 = 2;
/// Identities of (namespace, labels) start here; below are reserved for the datapath.
pub const IDENTITY_FIRST_POD: u32 = 256;
/// The peer field of an allow key holds an identity, or a CIDR class with this bit set.
pub const CLASS_BIT: u32 = 0x8000_0000;
/// `cidrs` value for an address range carved out by `except`: no class, nothing allowed.
pub const CLASS_NONE: u32 = 0;
/// A policy set id of 0 means: not isolated in this direction.
pub const SET_NONE: u32 = 0;

/// [`EndpointPolicy::flags`]: the agent does not know this pod's policy yet. Everything is
/// dropped except ingress from the node itself, until the agent lifts it.
pub const ENDPOINT_PENDING: u32 = 1;

/// [`Verdict::action`]. NetworkPolicy only allows; the tiers to come add deny and pass.
pub const ACTION_ALLOW: u8 = 1;
pub const ACTION_DENY: u8 = 2;
pub const ACTION_PASS: u8 = 3;

/// Bits of an allow key after `prefixlen`: set (32), peer (32), protocol (8), pad (8),
/// port (16). Entries always cover set and peer.
pub const ALLOW_KEY_BITS: u32 = 96;
pub const ALLOW_PREFIX_ANY_PROTOCOL: u32 = 64;
pub const ALLOW_PREFIX_ANY_PORT: u32 = 80;
/// Bits of a CIDR key before the address: set (32), family and pad (32).
pub const CIDR_PREFIX_BASE: u32 = 64;

/// Suggested map sizes (`max_entries`).
pub const MAX_IDENTITY_ADDRESSES: u32 = 262_144;
pub const MAX_POLICY_ENDPOINTS: u32 = 16_384;
pub const MAX_ALLOW_ENTRIES: u32 = 262_144;
pub const MAX_CIDR_ENTRIES: u32 = 65_536;

pub const FAMILY_IPV4: u8 = 4;
pub const FAMILY_IPV6: u8 = 6;

/// `struct weft_ip`: family, three zero bytes, 16 address bytes in network order (an IPv4
/// address in the first four).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IpKey {
    pub family: u8,
    pub addr: [u8; 16],
}

impl IpKey {
    pub fn bits(&self) -> u32 {
        if self.family == FAMILY_IPV4 {
            32
        } else {
            128
        }
    }

    pub fn to_bytes(&self) -> [u8; 20] {
        let mut b = [0u8; 20];
        b[0] = self.family;
        b[4..].copy_from_slice(&self.addr);
        b
    }

    pub fn from_bytes(b: &[u8; 20]) -> IpKey {
        let mut addr = [0u8; 16];
        addr.copy_from_slice(&b[4..]);
        IpKey { family: b[0], addr }
    }

    pub fn ip(&self) -> IpAddr {
        if self.family == FAMILY_IPV4 {
            IpAddr::V4(Ipv4Addr::new(
                self.addr[0],
                self.addr[1],
                self.addr[2],
                self.addr[3],
            ))
        } else {
            IpAddr::V6(Ipv6Addr::from(self.addr))
        }
    }
}

impl From<IpAddr> for IpKey {
    fn from(ip: IpAddr) -> IpKey {
        let mut addr = [0u8; 16];
        match ip {
            IpAddr::V4(v4) => {
                addr[..4].copy_from_slice(&v4.octets());
                IpKey {
                    family: FAMILY_IPV4,
                    addr,
                }
            }
            IpAddr::V6(v6) => IpKey {
                family: FAMILY_IPV6,
                addr: v6.octets(),
            },
        }
    }
}

/// `allow` key: LPM over set, peer, protocol, pad, port (port in network order so that a
/// port prefix is a numeric block; set and peer in host order, always fully covered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AllowKey {
    pub prefixlen: u32,
    pub set: u32,
    pub peer: u32,
    pub protocol: u8,
    pub port: u16,
}

impl AllowKey {
    /// The 12 data bytes after `prefixlen`, as the trie compares them.
    pub fn data(&self) -> [u8; 12] {
        let mut b = [0u8; 12];
        b[0..4].copy_from_slice(&self.set.to_ne_bytes());
        b[4..8].copy_from_slice(&self.peer.to_ne_bytes());
        b[8] = self.protocol;
        b[10..12].copy_from_slice(&self.port.to_be_bytes());
        b
    }

    /// The whole key as the map holds it: `prefixlen` (host order), then [`AllowKey::data`].
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(&self.prefixlen.to_ne_bytes());
        b[4..].copy_from_slice(&self.data());
        b
    }

    pub fn from_data(prefixlen: u32, b: &[u8; 12]) -> AllowKey {
        AllowKey {
            prefixlen,
            set: u32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
            peer: u32::from_ne_bytes([b[4], b[5], b[6], b[7]]),
            protocol: b[8],
            port: u16::from_be_bytes([b[10], b[11]]),
        }
    }
}

/// `cidrs` key: LPM over set, then the address as `struct weft_ip`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CidrKey {
    pub prefixlen: u32,
    pub set: u32,
    pub ip: IpKey,
}

impl CidrKey {
    pub fn data(&self) -> [u8; 24] {
        let mut b = [0u8; 24];
        b[0..4].copy_from_slice(&self.set.to_ne_bytes());
        b[4..].copy_from_slice(&self.ip.to_bytes());
        b
    }

    pub fn to_bytes(&self) -> [u8; 28] {
        let mut b = [0u8; 28];
        b[..4].copy_from_slice(&self.prefixlen.to_ne_bytes());
        b[4..].copy_from_slice(&self.data());
        b
    }

    pub fn from_data(prefixlen: u32, b: &[u8; 24]) -> CidrKey {
        let mut ip = [0u8; 20];
        ip.copy_from_slice(&b[4..]);
        CidrKey {
            prefixlen,
            set: u32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
            ip: IpKey::from_bytes(&ip),
        }
    }
}

/// Clears every bit of `data` after the first `prefixlen`, as an LPM trie ignores them.
pub fn mask<const N: usize>(data: &[u8; N], prefixlen: u32) -> [u8; N] {
    let mut out = *data;
    for (i, byte) in out.iter_mut().enumerate() {
        let start = (i * 8) as u32;
        if prefixlen <= start {
            *byte = 0;
        } else if prefixlen < start + 8 {
            *byte &= 0xffu8 << (8 - (prefixlen - start));
        }
    }
    out
}

/// `endpoints` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EndpointPolicy {
    /// The pod's own identity (the same as in `identities`; carried in drop events).
    pub identity: u32,
    /// [`SET_NONE`] when no policy isolates the pod for ingress.
    pub ingress_set: u32,
    pub egress_set: u32,
    pub flags: u32,
}

impl EndpointPolicy {
    pub fn pending() -> EndpointPolicy {
        EndpointPolicy {
            identity: IDENTITY_WORLD,
            ingress_set: SET_NONE,
            egress_set: SET_NONE,
            flags: ENDPOINT_PENDING,
        }
    }

    /// `struct weft_policy_endpoint { u32 identity, ingress_set, egress_set, flags }`.
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        for (i, v) in [self.identity, self.ingress_set, self.egress_set, self.flags]
            .into_iter()
            .enumerate()
        {
            b[i * 4..i * 4 + 4].copy_from_slice(&v.to_ne_bytes());
        }
        b
    }

    pub fn set(&self, direction: Direction) -> u32 {
        match direction {
            Direction::Ingress => self.ingress_set,
            Direction::Egress => self.egress_set,
        }
    }
}

/// `allow` value: what to do and which rule said so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Verdict {
    /// Lower wins. NetworkPolicy: 0 (its allows never conflict). Tiers: the policy's
    /// priority, ties broken by rule order.
    pub priority: u32,
    pub action: u8,
    /// Policy id ([`Meta::policies`]).
    pub policy: u32,
    /// 0 ingress, 1 egress.
    pub direction: u8,
    /// Index of the rule in the policy's ingress or egress list.
    pub rule: u16,
}

impl Verdict {
    pub fn allow(policy: u32, direction: Direction, rule: usize) -> Verdict {
        Verdict {
            priority: 0,
            action: ACTION_ALLOW,
            policy,
            direction: direction_code(direction),
            rule: u16::try_from(rule).unwrap_or(u16::MAX),
        }
    }

    /// Of two matches, the one that decides: lower priority, then deny before allow, then
    /// the lower policy id and rule index (so explanations are stable).
    pub fn best(a: Verdict, b: Verdict) -> Verdict {
        if a.rank() <= b.rank() {
            a
        } else {
            b
        }
    }

    fn rank(&self) -> (u32, u8, u32, u8, u16) {
        let action_rank = match self.action {
            ACTION_DENY => 0,
            ACTION_ALLOW => 1,
            _ => 2,
        };
        (
            self.priority,
            action_rank,
            self.policy,
            self.direction,
            self.rule,
        )
    }

    /// `struct weft_policy_verdict { u32 policy; u16 rule; u8 direction; u8 action;
    /// u32 priority; }`, 12 bytes, host order.
    pub fn to_bytes(&self) -> [u8; 12] {
        let mut b = [0u8; 12];
        b[0..4].copy_from_slice(&self.policy.to_ne_bytes());
        b[4..6].copy_from_slice(&self.rule.to_ne_bytes());
        b[6] = self.direction;
        b[7] = self.action;
        b[8..12].copy_from_slice(&self.priority.to_ne_bytes());
        b
    }

    pub fn direction(&self) -> Direction {
        if self.direction == 0 {
            Direction::Ingress
        } else {
            Direction::Egress
        }
    }
}

pub fn direction_code(d: Direction) -> u8 {
    match d {
        Direction::Ingress => 0,
        Direction::Egress => 1,
    }
}

/// What the ids in the tables mean, for explanations and counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Meta {
    /// Policy id → `namespace/name`.
    pub policies: BTreeMap<u32, String>,
    pub sets: BTreeMap<u32, SetInfo>,
    pub identities: BTreeMap<u32, IdentityInfo>,
    /// Local endpoint address → `namespace/name`.
    pub endpoints: BTreeMap<IpKey, String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetInfo {
    pub direction: Direction,
    /// Ids of the policies selecting the endpoints of this set, ascending.
    pub policies: Vec<u32>,
    /// Ingress only: the named ports those policies mention, resolved against the
    /// endpoints' container ports (endpoints that resolve them differently get other sets).
    pub named_ports: Vec<(String, Protocol, Vec<u16>)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityInfo {
    pub namespace: String,
    pub labels: SortedLabels,
}

/// Everything one node's datapath holds for policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeTables {
    pub node: String,
    pub identities: BTreeMap<IpKey, u32>,
    pub endpoints: BTreeMap<IpKey, EndpointPolicy>,
    pub allow: BTreeMap<AllowKey, Verdict>,
    pub cidrs: BTreeMap<CidrKey, u32>,
    /// For the CNI ADD, before the pod has addresses: `namespace/name` of every pod
    /// scheduled here → the endpoint value to install with its first address.
    pub prepared: BTreeMap<String, EndpointPolicy>,
    pub meta: Meta,
}

/// What changed in one table: write `upsert`, then remove `delete`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changes<K, V> {
    pub upsert: Vec<(K, V)>,
    pub delete: Vec<K>,
}

impl<K, V> Changes<K, V> {
    pub fn len(&self) -> usize {
        self.upsert.len() + self.delete.len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn changes<K: Ord + Copy, V: PartialEq + Copy>(
    old: &BTreeMap<K, V>,
    new: &BTreeMap<K, V>,
) -> Changes<K, V> {
    Changes {
        upsert: new
            .iter()
            .filter(|(k, v)| old.get(k) != Some(v))
            .map(|(k, v)| (*k, *v))
            .collect(),
        delete: old
            .keys()
            .filter(|k| !new.contains_key(k))
            .copied()
            .collect(),
    }
}

/// The writes that turn one node's tables into the next, in the order `docs/policy.md`
/// gives for applying them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TablesDiff {
    pub allow: Changes<AllowKey, Verdict>,
    pub cidrs: Changes<CidrKey, u32>,
    pub identities: Changes<IpKey, u32>,
    pub endpoints: Changes<IpKey, EndpointPolicy>,
}

impl TablesDiff {
    pub fn len(&self) -> usize {
        self.allow.len() + self.cidrs.len() + self.identities.len() + self.endpoints.len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl NodeTables {
    pub fn diff(&self, new: &NodeTables) -> TablesDiff {
        TablesDiff {
            allow: changes(&self.allow, &new.allow),
            cidrs: changes(&self.cidrs, &new.cidrs),
            identities: changes(&self.identities, &new.identities),
            endpoints: changes(&self.endpoints, &new.endpoints),
        }
    }

    /// Applies a diff in the order the agent writes the maps: every upsert (allow, CIDR,
    /// identities, endpoints), then every delete (endpoints, identities, CIDR, allow), so
    /// nothing refers to an entry not yet written or already gone.
    pub fn apply(&mut self, diff: &TablesDiff) {
        fn upsert<K: Ord + Copy, V: Copy>(t: &mut BTreeMap<K, V>, c: &Changes<K, V>) {
            for (k, v) in &c.upsert {
                t.insert(*k, *v);
            }
        }
        fn delete<K: Ord + Copy, V>(t: &mut BTreeMap<K, V>, c: &Changes<K, V>) {
            for k in &c.delete {
                t.remove(k);
            }
        }
        upsert(&mut self.allow, &diff.allow);
        upsert(&mut self.cidrs, &diff.cidrs);
        upsert(&mut self.identities, &diff.identities);
        upsert(&mut self.endpoints, &diff.endpoints);
        delete(&mut self.endpoints, &diff.endpoints);
        delete(&mut self.identities, &diff.identities);
        delete(&mut self.cidrs, &diff.cidrs);
        delete(&mut self.allow, &diff.allow);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_through_their_bytes() {
        let k = AllowKey {
            prefixlen: 96,
            set: 7,
            peer: CLASS_BIT | 3,
            protocol: 6,
            port: 8080,
        };
        assert_eq!(AllowKey::from_data(96, &k.data()), k);
        assert_eq!(&k.data()[10..], &8080u16.to_be_bytes());
        let c = CidrKey {
            prefixlen: 64 + 24,
            set: 9,
            ip: IpKey::from("10.1.2.0".parse::<IpAddr>().unwrap()),
        };
        assert_eq!(CidrKey::from_data(c.prefixlen, &c.data()), c);
        assert_eq!(c.ip.ip(), "10.1.2.0".parse::<IpAddr>().unwrap());
        let v6 = IpKey::from("fd00::1".parse::<IpAddr>().unwrap());
        assert_eq!(v6.ip(), "fd00::1".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn values_have_the_documented_layout() {
        let v = Verdict {
            priority: 7,
            action: ACTION_ALLOW,
            policy: 0x0102_0304,
            direction: 1,
            rule: 5,
        };
        let b = v.to_bytes();
        assert_eq!(&b[0..4], &0x0102_0304u32.to_ne_bytes());
        assert_eq!(&b[4..6], &5u16.to_ne_bytes());
        assert_eq!((b[6], b[7]), (1, ACTION_ALLOW));
        assert_eq!(&b[8..], &7u32.to_ne_bytes());
        let e = EndpointPolicy {
            identity: 300,
            ingress_set: 1,
            egress_set: 2,
            flags: ENDPOINT_PENDING,
        };
        assert_eq!(&e.to_bytes()[12..], &ENDPOINT_PENDING.to_ne_bytes());
        let k = AllowKey {
            prefixlen: 80,
            set: 1,
            peer: 2,
            protocol: 17,
            port: 0,
        };
        assert_eq!(&k.to_bytes()[..4], &80u32.to_ne_bytes());
        assert_eq!(k.to_bytes()[12], 17);
    }

    #[test]
    fn mask_clears_the_bits_past_the_prefix() {
        let d = [0xffu8; 4];
        assert_eq!(mask(&d, 0), [0, 0, 0, 0]);
        assert_eq!(mask(&d, 12), [0xff, 0xf0, 0, 0]);
        assert_eq!(mask(&d, 32), d);
    }

    #[test]
    fn the_stronger_verdict_decides() {
        let a = Verdict::allow(3, Direction::Ingress, 1);
        let b = Verdict::allow(2, Direction::Ingress, 5);
        assert_eq!(Verdict::best(a, b), b);
        let deny = Verdict {
            action: ACTION_DENY,
            ..a
        };
        assert_eq!(Verdict::best(b, deny), deny);
        let earlier = Verdict { priority: 0, ..a };
        let later = Verdict {
            priority: 9,
            ..deny
        };
        assert_eq!(Verdict::best(later, earlier), earlier);
    }
}
