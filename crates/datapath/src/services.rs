//! Service load balancing, the agent's side: an incremental API over the maps of
//! `bpf/include/maps/lb.h`, one frontend (address, port, protocol, scope) at a time, so a
//! Service's change rewrites that Service's frontends and nothing else.
//!
//! # Update order
//!
//! A packet reads a frontend's value, then one slot of the value's generation, then the
//! backend record. [`Services::upsert_frontend`] therefore writes, in this order:
//!
//! 1. the backend records of every backend of the new set (new ones under fresh ids);
//! 2. the new set's slots under the generation the packets do not read;
//! 3. the frontend's value (one hash element, replaced whole): count, draining count and
//!    generation switch at once;
//! 4. the frontend's address entry (ClusterIPs refuse ports they do not serve);
//! 5. the old generation's slots are deleted;
//! 6. connections of backends that left are purged (see below) with their affinity;
//! 7. backend records no frontend uses any more are deleted.
//!
//! A packet sees the old complete set or the new complete set, never a mix; one that read
//! the value just before step 3 and finds its slot deleted by step 5 re-reads the value
//! once (`lb_slot_retry`). The maps do not preallocate, so a replaced element stays valid
//! for any program still reading it. Removal runs the same steps the other way round:
//! value, address entry, slots, connections, records.
//!
//! # Backends that leave
//!
//! A backend removed from a frontend (in neither `backends` nor `draining`) loses its
//! connections through that frontend: UDP (and other datagram) entries are deleted, so
//! the very next datagram is balanced again; TCP entries are marked, so the client's next
//! packet is answered with a RST from the service address instead of being black-holed
//! until a timeout. A backend moved to `draining` (terminating: it takes no new flow)
//! keeps its TCP connections, while its UDP flows move on at once, as kube-proxy clears
//! the conntrack entries of UDP endpoints that stop being used.
//!
//! Everything is read back from the maps when [`Services::open`] runs, so an agent that
//! restarts continues where the last one stopped; leftovers of an update it died in are
//! removed then.

use crate::conntrack::{Conntrack, Purge, PurgeReport};
use crate::error::{Error, Result};
use crate::layout::{
    IpKey, LbAddrValue, LbAffinityKey, LbAffinityValue, LbBackendValue, LbCidrValue, LbFrontendKey,
    LbFrontendValue, LbSlotKey, LbSlotValue, MapSpec, RouteKey, BE_LOCAL, BE_TERMINATING,
    FE_AFFINITY, FE_CLUSTER_IP, FE_NONE_USABLE, FE_NO_ENDPOINTS, LB_ADDR_CLUSTER_IP,
    LB_GENERATION_SHIFT, LB_SCOPE_EXTERNAL, LB_SCOPE_INTERNAL, MAP_LB_ADDRS, MAP_LB_AFFINITY,
    MAP_LB_BACKENDS, MAP_LB_CIDRS, MAP_LB_FRONTENDS, MAP_LB_SLOTS,
};
use crate::model::{ip_from_key, ip_key, net_from_key, route_key};
use crate::pinned;
use crate::pins::PinLayout;
use crate::sys;
use ipnet::IpNet;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::time::Duration;

const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;

/// The transport protocols the datapath translates (SCTP is not: its checksum cannot be
/// updated incrementally).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum L4Proto {
    Tcp,
    Udp,
}

impl L4Proto {
    pub const fn number(self) -> u8 {
        match self {
            L4Proto::Tcp => IPPROTO_TCP,
            L4Proto::Udp => IPPROTO_UDP,
        }
    }

    fn from_number(n: u8) -> Option<L4Proto> {
        match n {
            IPPROTO_TCP => Some(L4Proto::Tcp),
            IPPROTO_UDP => Some(L4Proto::Udp),
            _ => None,
        }
    }
}

/// Which traffic a frontend serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// Pods and the node (ClusterIPs, and external addresses as pods see them): what
    /// from_pod translates.
    Internal,
    /// Traffic from outside the cluster (NodePort, LoadBalancer): for the north-south
    /// programs to come; nothing reads it yet.
    External,
}

/// A service frontend: kube-proxy keys service ports by (address, protocol, port), so the
/// same port on TCP and on UDP are two frontends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Frontend {
    pub addr: IpAddr,
    pub port: u16,
    pub proto: L4Proto,
    pub scope: Scope,
}

impl Frontend {
    pub fn internal(addr: IpAddr, port: u16, proto: L4Proto) -> Frontend {
        Frontend {
            addr,
            port,
            proto,
            scope: Scope::Internal,
        }
    }
}

impl std::fmt::Display for Frontend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let proto = match self.proto {
            L4Proto::Tcp => "tcp",
            L4Proto::Udp => "udp",
        };
        write!(f, "{}/{proto}", SocketAddr::new(self.addr, self.port))?;
        if self.scope == Scope::External {
            f.write_str(" (external)")?;
        }
        Ok(())
    }
}

/// A backend new flows may be balanced to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Backend {
    pub addr: SocketAddr,
    /// The endpoint is terminating (used because no ready one is).
    pub terminating: bool,
    /// The endpoint is on this node.
    pub local: bool,
}

impl Backend {
    pub fn new(addr: SocketAddr) -> Backend {
        Backend {
            addr,
            terminating: false,
            local: false,
        }
    }
}

/// What a packet meets when a frontend has no backend for new flows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WhenEmpty {
    /// The service has no endpoints at all: refuse (TCP RST, ICMP port unreachable).
    Reject,
    /// It has endpoints, none usable from this node (internalTrafficPolicy Local): drop.
    Drop,
}

/// What a frontend balances over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrontendSpec {
    /// Backends for new flows, chosen uniformly at random (or by affinity).
    pub backends: Vec<Backend>,
    /// Backends that take no new flow but keep their TCP connections (terminating
    /// endpoints no longer used while others serve).
    pub draining: Vec<SocketAddr>,
    pub when_empty: WhenEmpty,
    /// Session affinity by client address, with its timeout (sessionAffinity ClientIP).
    pub affinity: Option<Duration>,
    /// A ClusterIP: a port or protocol its address does not serve is refused.
    pub cluster_ip: bool,
}

impl FrontendSpec {
    /// A ClusterIP frontend over `backends`, no affinity, rejecting when empty.
    pub fn cluster_ip(backends: Vec<Backend>) -> FrontendSpec {
        FrontendSpec {
            backends,
            draining: Vec::new(),
            when_empty: WhenEmpty::Reject,
            affinity: None,
            cluster_ip: true,
        }
    }
}

/// What [`Services::upsert_frontend`] or [`Services::remove_frontend`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrontendChange {
    /// The frontend did not exist before.
    pub created: bool,
    /// Something was written (false: it was already as asked).
    pub written: bool,
    /// Connections whose backend left: datagram flows forgotten (they rebalance), TCP
    /// connections marked (their clients get a RST).
    pub connections: PurgeReport,
}

/// A frontend as the maps hold it.
#[derive(Clone, Debug)]
struct Installed {
    value: LbFrontendValue,
    backends: Vec<Backend>,
    draining: Vec<SocketAddr>,
}

impl Installed {
    fn spec(&self) -> FrontendSpec {
        let v = &self.value;
        FrontendSpec {
            backends: self.backends.clone(),
            draining: self.draining.clone(),
            when_empty: if v.flags & FE_NONE_USABLE != 0 {
                WhenEmpty::Drop
            } else {
                WhenEmpty::Reject
            },
            affinity: (v.flags & FE_AFFINITY != 0)
                .then(|| Duration::from_secs(u64::from(v.affinity_timeout))),
            cluster_ip: v.flags & FE_CLUSTER_IP != 0,
        }
    }

    fn addrs(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        self.backends
            .iter()
            .map(|b| b.addr)
            .chain(self.draining.iter().copied())
    }
}

/// One pinned map, typed access by raw `bpf()` calls.
struct Table {
    path: PathBuf,
    fd: OwnedFd,
}

impl Table {
    fn open(pins: &PinLayout, spec: &MapSpec) -> Result<Table> {
        Ok(Table {
            path: pins.map_pin(spec),
            fd: pinned::open_map(pins, spec)?,
        })
    }

    fn get<K: aya::Pod, V: aya::Pod + Default>(&self, key: &K) -> Result<Option<V>> {
        sys::map_lookup(self.fd.as_fd(), key)
            .map_err(|e| Error::bpf("BPF_MAP_LOOKUP_ELEM", &self.path, e))
    }

    fn put<K: aya::Pod, V: aya::Pod>(&self, key: &K, value: &V) -> Result<()> {
        sys::map_update(self.fd.as_fd(), key, value, sys::BPF_ANY)
            .map_err(|e| Error::bpf("BPF_MAP_UPDATE_ELEM", &self.path, e))
    }

    fn del<K: aya::Pod>(&self, key: &K) -> Result<bool> {
        sys::map_delete(self.fd.as_fd(), key)
            .map_err(|e| Error::bpf("BPF_MAP_DELETE_ELEM", &self.path, e))
    }

    fn keys<K: aya::Pod + Default + Ord>(&self) -> Result<Vec<K>> {
        let mut out = BTreeSet::new();
        let mut key: Option<K> = None;
        loop {
            let next = sys::map_next_key(self.fd.as_fd(), key.as_ref())
                .map_err(|e| Error::bpf("BPF_MAP_GET_NEXT_KEY", &self.path, e))?;
            match next {
                // A key seen before: the walk restarted, the map has been seen whole.
                Some(k) if !out.contains(&k) => {
                    out.insert(k);
                    key = Some(k);
                }
                _ => return Ok(out.into_iter().collect()),
            }
        }
    }
}

/// The service maps of one node, opened from their pins, with what they hold indexed.
pub struct Services {
    frontends_map: Table,
    slots: Table,
    backends_map: Table,
    affinity: Table,
    addrs: Table,
    cidrs: Table,
    conntrack: Conntrack,
    frontends: BTreeMap<Frontend, Installed>,
    /// Every backend record: address -> (id, how many frontends use it).
    backends: BTreeMap<SocketAddr, (u32, usize)>,
    next_frontend: u32,
    next_backend: u32,
}

impl Services {
    /// Opens the service maps pinned under `pin_root` and reads them back (removing what
    /// an interrupted update left behind).
    pub fn open(pin_root: impl Into<PathBuf>) -> Result<Services> {
        Services::open_layout(&PinLayout::new(pin_root))
    }

    pub(crate) fn open_layout(pins: &PinLayout) -> Result<Services> {
        let mut s = Services {
            frontends_map: Table::open(pins, &MAP_LB_FRONTENDS)?,
            slots: Table::open(pins, &MAP_LB_SLOTS)?,
            backends_map: Table::open(pins, &MAP_LB_BACKENDS)?,
            affinity: Table::open(pins, &MAP_LB_AFFINITY)?,
            addrs: Table::open(pins, &MAP_LB_ADDRS)?,
            cidrs: Table::open(pins, &MAP_LB_CIDRS)?,
            conntrack: Conntrack::open_layout(pins)?,
            frontends: BTreeMap::new(),
            backends: BTreeMap::new(),
            next_frontend: 1,
            next_backend: 1,
        };
        s.read_back()?;
        Ok(s)
    }

    fn unknown(table: &Table, detail: String) -> Error {
        Error::UnknownEntry {
            path: table.path.clone(),
            detail,
        }
    }

    fn read_back(&mut self) -> Result<()> {
        let mut records: BTreeMap<u32, LbBackendValue> = BTreeMap::new();
        for id in self.backends_map.keys::<u32>()? {
            if let Some(v) = self.backends_map.get::<_, LbBackendValue>(&id)? {
                records.insert(id, v);
                self.next_backend = self.next_backend.max(id.saturating_add(1));
            }
        }
        let backend_of = |id: u32| -> Option<(SocketAddr, LbBackendValue)> {
            let v = records.get(&id)?;
            let ip = ip_from_key(&v.ip)?;
            Some((SocketAddr::new(ip, u16::from_be_bytes(v.port)), *v))
        };
        let mut live_slots = BTreeSet::new();
        for key in self.frontends_map.keys::<LbFrontendKey>()? {
            let Some(value) = self.frontends_map.get::<_, LbFrontendValue>(&key)? else {
                continue;
            };
            let frontend = frontend_of(&key)
                .ok_or_else(|| Self::unknown(&self.frontends_map, format!("key {key:?}")))?;
            let mut installed = Installed {
                value,
                backends: Vec::new(),
                draining: Vec::new(),
            };
            for index in 1..=value.count.saturating_add(value.draining) {
                let slot_key = slot_key(value.id, value.generation, index);
                let slot: LbSlotValue = self.slots.get(&slot_key)?.ok_or_else(|| {
                    Self::unknown(&self.slots, format!("{frontend}: slot {index} is missing"))
                })?;
                let (addr, record) = backend_of(slot.backend).ok_or_else(|| {
                    Self::unknown(
                        &self.backends_map,
                        format!("{frontend}: backend {} has no record", slot.backend),
                    )
                })?;
                live_slots.insert(slot_key);
                if index <= value.count {
                    installed.backends.push(Backend {
                        addr,
                        terminating: record.flags & BE_TERMINATING != 0,
                        local: record.flags & BE_LOCAL != 0,
                    });
                } else {
                    installed.draining.push(addr);
                }
            }
            self.next_frontend = self.next_frontend.max(value.id.saturating_add(1));
            self.frontends.insert(frontend, installed);
        }
        // Leftovers of an interrupted update: slots no live generation owns, records no
        // frontend uses.
        for key in self.slots.keys::<LbSlotKey>()? {
            if !live_slots.contains(&key) {
                self.slots.del(&key)?;
            }
        }
        let mut refs: BTreeMap<SocketAddr, usize> = BTreeMap::new();
        for installed in self.frontends.values() {
            for addr in installed.addrs() {
                *refs.entry(addr).or_default() += 1;
            }
        }
        for (id, _) in records.iter() {
            let Some((addr, _)) = backend_of(*id) else {
                self.backends_map.del(id)?;
                continue;
            };
            match refs.get(&addr) {
                Some(n) if !self.backends.contains_key(&addr) => {
                    self.backends.insert(addr, (*id, *n));
                }
                _ => {
                    self.backends_map.del(id)?;
                }
            }
        }
        for addr in self
            .frontends
            .keys()
            .map(|f| f.addr)
            .collect::<BTreeSet<_>>()
        {
            self.write_addr(addr)?;
        }
        Ok(())
    }

    /// Every frontend, with what it balances over, as the maps hold it.
    pub fn frontends(&self) -> Vec<(Frontend, FrontendSpec)> {
        self.frontends.iter().map(|(f, i)| (*f, i.spec())).collect()
    }

    /// The id connections and affinity entries refer to a frontend by.
    pub fn frontend_id(&self, frontend: &Frontend) -> Option<u32> {
        self.frontends.get(frontend).map(|i| i.value.id)
    }

    /// The id of the backend record of `addr`, if a frontend uses it.
    pub fn backend_id(&self, addr: SocketAddr) -> Option<u32> {
        self.backends.get(&addr).map(|(id, _)| *id)
    }

    /// Makes `frontend` balance over `spec` (see the module docs for the order of
    /// writes). Idempotent: an unchanged frontend writes nothing.
    pub fn upsert_frontend(
        &mut self,
        frontend: Frontend,
        spec: &FrontendSpec,
    ) -> Result<FrontendChange> {
        validate(&frontend, spec)?;
        let old = self.frontends.get(&frontend).cloned();
        let mut value = LbFrontendValue {
            id: old.as_ref().map_or(self.next_frontend, |o| o.value.id),
            count: spec.backends.len() as u32,
            draining: spec.draining.len() as u32,
            affinity_timeout: spec.affinity.map_or(0, |d| d.as_secs() as u32),
            flags: flags_of(spec),
            generation: 0,
            ..Default::default()
        };
        if let Some(old) = &old {
            if old.spec() == *spec {
                return Ok(FrontendChange::default());
            }
            value.generation = 1 - old.value.generation;
        } else {
            self.next_frontend += 1;
        }

        // 1. Backend records.
        let mut ids = Vec::with_capacity(spec.backends.len() + spec.draining.len());
        let record_flags = |b: &Backend| {
            (if b.terminating { BE_TERMINATING } else { 0 }) | if b.local { BE_LOCAL } else { 0 }
        };
        for (addr, flags) in spec
            .backends
            .iter()
            .map(|b| (b.addr, Some(record_flags(b))))
            .chain(spec.draining.iter().map(|a| (*a, None)))
        {
            ids.push(self.ensure_backend(addr, flags)?);
        }
        // 2. The new set under the other generation; 3. the switch.
        for (i, id) in ids.iter().enumerate() {
            let key = slot_key(value.id, value.generation, i as u32 + 1);
            self.slots.put(&key, &LbSlotValue { backend: *id })?;
        }
        self.frontends_map.put(&frontend_key(&frontend), &value)?;
        let installed = Installed {
            value,
            backends: spec.backends.clone(),
            draining: spec.draining.clone(),
        };
        self.frontends.insert(frontend, installed);
        // 4. The address entry.
        self.write_addr(frontend.addr)?;

        let mut change = FrontendChange {
            created: old.is_none(),
            written: true,
            ..Default::default()
        };
        if let Some(old) = old {
            // 5. The old generation.
            self.delete_slots(&old.value)?;
            // 6. Connections and affinity of backends that left or stopped taking flows.
            let now: BTreeSet<SocketAddr> = spec
                .backends
                .iter()
                .map(|b| b.addr)
                .chain(spec.draining.iter().copied())
                .collect();
            let selectable: BTreeSet<SocketAddr> = spec.backends.iter().map(|b| b.addr).collect();
            let mut removed = BTreeSet::new();
            let mut drained = BTreeSet::new();
            for addr in old.addrs() {
                let Some(id) = self.backend_id(addr) else {
                    continue;
                };
                if !now.contains(&addr) {
                    removed.insert(id);
                } else if !selectable.contains(&addr) {
                    drained.insert(id);
                }
            }
            if !removed.is_empty() || !drained.is_empty() {
                change.connections = self.purge_connections(value.id, Some(&removed), &drained)?;
                self.purge_affinity(value.id, |b| removed.contains(&b) || drained.contains(&b))?;
            }
            // 7. Records no one uses.
            for addr in old.addrs() {
                self.release_backend(addr)?;
            }
        }
        Ok(change)
    }

    /// Removes `frontend`; its connections are purged as for removed backends.
    /// Idempotent: `Ok(None)` when it did not exist.
    pub fn remove_frontend(&mut self, frontend: &Frontend) -> Result<Option<FrontendChange>> {
        let Some(old) = self.frontends.remove(frontend) else {
            return Ok(None);
        };
        self.frontends_map.del(&frontend_key(frontend))?;
        self.write_addr(frontend.addr)?;
        self.delete_slots(&old.value)?;
        let connections = self.purge_connections(old.value.id, None, &BTreeSet::new())?;
        self.purge_affinity(old.value.id, |_| true)?;
        for addr in old.addrs() {
            self.release_backend(addr)?;
        }
        Ok(Some(FrontendChange {
            created: false,
            written: true,
            connections,
        }))
    }

    /// Makes the node's service CIDRs exactly `cidrs` (from configuration): a packet to
    /// an address in them that no frontend has is dropped.
    pub fn set_service_cidrs(&mut self, cidrs: &[IpNet]) -> Result<()> {
        for net in cidrs {
            if net.prefix_len() == 0 {
                return Err(Error::InvalidService {
                    frontend: net.to_string(),
                    field: "service CIDR",
                    reason: "a /0 would claim every address".to_string(),
                });
            }
        }
        let want: BTreeSet<IpNet> = cidrs.iter().map(IpNet::trunc).collect();
        let have: BTreeSet<IpNet> = self.service_cidrs()?.into_iter().collect();
        for net in want.difference(&have) {
            let (prefixlen, ip) = route_key(*net);
            self.cidrs
                .put(&RouteKey { prefixlen, ip }, &LbCidrValue::default())?;
        }
        for net in have.difference(&want) {
            let (prefixlen, ip) = route_key(*net);
            self.cidrs.del(&RouteKey { prefixlen, ip })?;
        }
        Ok(())
    }

    pub fn service_cidrs(&self) -> Result<Vec<IpNet>> {
        let mut out = Vec::new();
        for key in self.cidrs.keys::<RouteKey>()? {
            let net = net_from_key(key.prefixlen, &key.ip)
                .ok_or_else(|| Self::unknown(&self.cidrs, format!("key {key:?}")))?;
            out.push(net);
        }
        out.sort();
        Ok(out)
    }

    /// Removes expired connections in batches: see [`Conntrack::gc`].
    pub fn conntrack(&self) -> &Conntrack {
        &self.conntrack
    }

    fn ensure_backend(&mut self, addr: SocketAddr, flags: Option<u8>) -> Result<u32> {
        let (id, refs) = match self.backends.get(&addr) {
            Some((id, refs)) => (*id, *refs),
            None => {
                let id = self.next_backend;
                self.next_backend += 1;
                (id, 0)
            }
        };
        let mut value = LbBackendValue {
            ip: ip_key(addr.ip()),
            port: addr.port().to_be_bytes(),
            ..Default::default()
        };
        let current: Option<LbBackendValue> = if refs > 0 {
            self.backends_map.get(&id)?
        } else {
            None
        };
        // A draining use keeps the flags the backend already has.
        value.flags = flags.unwrap_or_else(|| current.map_or(0, |c| c.flags));
        if current != Some(value) {
            self.backends_map.put(&id, &value)?;
        }
        self.backends.insert(addr, (id, refs + 1));
        Ok(id)
    }

    fn release_backend(&mut self, addr: SocketAddr) -> Result<()> {
        let Some((id, refs)) = self.backends.get(&addr).copied() else {
            return Ok(());
        };
        if refs > 1 {
            self.backends.insert(addr, (id, refs - 1));
        } else {
            self.backends.remove(&addr);
            self.backends_map.del(&id)?;
        }
        Ok(())
    }

    fn delete_slots(&self, value: &LbFrontendValue) -> Result<()> {
        for index in 1..=value.count.saturating_add(value.draining) {
            self.slots
                .del(&slot_key(value.id, value.generation, index))?;
        }
        Ok(())
    }

    /// The address entry of `addr`: whether internal frontends have it, and if one of
    /// them is a ClusterIP.
    fn write_addr(&self, addr: IpAddr) -> Result<()> {
        let users: Vec<&Installed> = self
            .frontends
            .iter()
            .filter(|(f, _)| f.addr == addr && f.scope == Scope::Internal)
            .map(|(_, i)| i)
            .collect();
        let key = ip_key(addr);
        if users.is_empty() {
            self.addrs.del(&key)?;
            return Ok(());
        }
        let value = LbAddrValue {
            flags: if users.iter().any(|i| i.value.flags & FE_CLUSTER_IP != 0) {
                LB_ADDR_CLUSTER_IP
            } else {
                0
            },
            frontends: users.len() as u32,
        };
        if self.addrs.get::<IpKey, LbAddrValue>(&key)? != Some(value) {
            self.addrs.put(&key, &value)?;
        }
        Ok(())
    }

    /// `removed` `None`: every connection of the frontend goes.
    fn purge_connections(
        &self,
        frontend: u32,
        removed: Option<&BTreeSet<u32>>,
        drained: &BTreeSet<u32>,
    ) -> Result<PurgeReport> {
        self.conntrack.purge(|key, e| {
            if e.frontend != frontend {
                return Purge::Keep;
            }
            let tcp = key.proto == IPPROTO_TCP;
            let gone = removed.is_none_or(|r| r.contains(&e.backend));
            if gone {
                if tcp {
                    Purge::MarkGone
                } else {
                    Purge::Delete
                }
            } else if drained.contains(&e.backend) && !tcp {
                Purge::Delete
            } else {
                Purge::Keep
            }
        })
    }

    fn purge_affinity(&self, frontend: u32, drop: impl Fn(u32) -> bool) -> Result<()> {
        for key in self.affinity.keys::<LbAffinityKey>()? {
            if key.frontend != frontend {
                continue;
            }
            let value: Option<LbAffinityValue> = self.affinity.get(&key)?;
            if value.is_some_and(|v| drop(v.backend)) {
                self.affinity.del(&key)?;
            }
        }
        Ok(())
    }
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services")
            .field("frontends", &self.frontends.len())
            .field("backends", &self.backends.len())
            .finish_non_exhaustive()
    }
}

fn flags_of(spec: &FrontendSpec) -> u16 {
    let mut flags = 0;
    if spec.backends.is_empty() {
        flags |= match spec.when_empty {
            WhenEmpty::Reject => FE_NO_ENDPOINTS,
            WhenEmpty::Drop => FE_NONE_USABLE,
        };
    }
    if spec.affinity.is_some() {
        flags |= FE_AFFINITY;
    }
    if spec.cluster_ip {
        flags |= FE_CLUSTER_IP;
    }
    flags
}

fn slot_key(frontend: u32, generation: u8, index: u32) -> LbSlotKey {
    LbSlotKey {
        frontend,
        slot: (u32::from(generation) << LB_GENERATION_SHIFT) | index,
    }
}

fn frontend_key(f: &Frontend) -> LbFrontendKey {
    LbFrontendKey {
        ip: ip_key(f.addr),
        port: f.port.to_be_bytes(),
        proto: f.proto.number(),
        scope: match f.scope {
            Scope::Internal => LB_SCOPE_INTERNAL,
            Scope::External => LB_SCOPE_EXTERNAL,
        },
    }
}

fn frontend_of(key: &LbFrontendKey) -> Option<Frontend> {
    Some(Frontend {
        addr: ip_from_key(&key.ip)?,
        port: u16::from_be_bytes(key.port),
        proto: L4Proto::from_number(key.proto)?,
        scope: match key.scope {
            LB_SCOPE_INTERNAL => Scope::Internal,
            LB_SCOPE_EXTERNAL => Scope::External,
            _ => return None,
        },
    })
}

fn invalid(frontend: &Frontend, field: &'static str, reason: impl Into<String>) -> Error {
    Error::InvalidService {
        frontend: frontend.to_string(),
        field,
        reason: reason.into(),
    }
}

fn validate(f: &Frontend, spec: &FrontendSpec) -> Result<()> {
    if f.port == 0 {
        return Err(invalid(f, "port", "0 is not a service port"));
    }
    if f.addr.is_unspecified() || f.addr.is_multicast() {
        return Err(invalid(f, "address", "not a unicast address"));
    }
    let mut seen = BTreeSet::new();
    for (field, addr) in spec
        .backends
        .iter()
        .map(|b| ("backends", b.addr))
        .chain(spec.draining.iter().map(|a| ("draining", *a)))
    {
        if addr.is_ipv4() != f.addr.is_ipv4() {
            return Err(invalid(
                f,
                field,
                format!("{addr} is not of the frontend's family"),
            ));
        }
        if addr.port() == 0 || addr.ip().is_unspecified() {
            return Err(invalid(
                f,
                field,
                format!("{addr} is not a backend address"),
            ));
        }
        if !seen.insert(addr) {
            return Err(invalid(f, field, format!("{addr} is listed twice")));
        }
    }
    if let Some(timeout) = spec.affinity {
        if timeout.as_secs() == 0 || timeout.as_secs() > u64::from(u32::MAX) {
            return Err(invalid(
                f,
                "affinity",
                format!("{timeout:?} is not a timeout of 1 s to {} s", u32::MAX),
            ));
        }
    }
    Ok(())
}
