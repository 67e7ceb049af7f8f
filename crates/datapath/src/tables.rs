//! Typed access to the pinned maps for the agent (and read-only tools such as
//! `weft status`): configuration, routes, and reading endpoints and counters.
//! Endpoints are written by the CNI plugin through [`crate::pod`].

use crate::error::{Error, Result};
use crate::layout::{
    ConfigValue, Counter, EndpointValue, Event, IpKey, MapSpec, RouteValue, COUNTER_MAX, EVENT_MAX,
    MAP_CONFIG, MAP_COUNTERS, MAP_ENDPOINTS, MAP_EVENTS, MAP_ROUTES,
};
use crate::model::{self, Counters, EndpointInfo, Events, NodeConfig, RouteKind};
use crate::pinned;
use crate::pins::PinLayout;
use aya::maps::lpm_trie::Key;
use aya::maps::{Array, HashMap, LpmTrie, Map, MapData, MapError, PerCpuArray};
use ipnet::IpNet;
use std::net::IpAddr;
use std::path::PathBuf;

/// The datapath's maps, opened from their pins.
pub struct Tables {
    pins: PinLayout,
    endpoints: HashMap<MapData, IpKey, EndpointValue>,
    routes: LpmTrie<MapData, IpKey, RouteValue>,
    config: Array<MapData, ConfigValue>,
    counters: PerCpuArray<MapData, u64>,
    events: PerCpuArray<MapData, u64>,
}

impl Tables {
    /// Opens the maps pinned under `pin_root`, checking each has the layout this
    /// build expects.
    pub fn open(pin_root: impl Into<PathBuf>) -> Result<Tables> {
        Tables::open_layout(PinLayout::new(pin_root))
    }

    pub(crate) fn open_layout(pins: PinLayout) -> Result<Tables> {
        let open = |spec: &MapSpec| -> Result<Map> {
            let path = pins.map_pin(spec);
            let fd = pinned::open_map(&pins, spec)?;
            let data = MapData::from_fd(fd).map_err(|e| Error::map("open", &path, e))?;
            Map::from_map_data(data).map_err(|e| Error::map("open", &path, e))
        };
        let endpoints = HashMap::try_from(open(&MAP_ENDPOINTS)?)
            .map_err(|e| Error::map("open", pins.map_pin(&MAP_ENDPOINTS), e))?;
        let routes = LpmTrie::try_from(open(&MAP_ROUTES)?)
            .map_err(|e| Error::map("open", pins.map_pin(&MAP_ROUTES), e))?;
        let config = Array::try_from(open(&MAP_CONFIG)?)
            .map_err(|e| Error::map("open", pins.map_pin(&MAP_CONFIG), e))?;
        let counters = PerCpuArray::try_from(open(&MAP_COUNTERS)?)
            .map_err(|e| Error::map("open", pins.map_pin(&MAP_COUNTERS), e))?;
        let events = PerCpuArray::try_from(open(&MAP_EVENTS)?)
            .map_err(|e| Error::map("open", pins.map_pin(&MAP_EVENTS), e))?;
        Ok(Tables {
            pins,
            endpoints,
            routes,
            config,
            counters,
            events,
        })
    }

    pub fn pins(&self) -> &PinLayout {
        &self.pins
    }

    pub fn set_config(&mut self, config: NodeConfig) -> Result<()> {
        self.config
            .set(0, ConfigValue::from(config), 0)
            .map_err(|e| Error::map("update", self.pins.map_pin(&MAP_CONFIG), e))
    }

    pub fn config(&self) -> Result<NodeConfig> {
        self.config
            .get(&0, 0)
            .map(NodeConfig::from)
            .map_err(|e| Error::map("lookup", self.pins.map_pin(&MAP_CONFIG), e))
    }

    /// Adds or replaces the entry for `net` (host bits are ignored).
    pub fn upsert_route(&mut self, net: IpNet, kind: RouteKind) -> Result<()> {
        let (len, ip) = model::route_key(net);
        self.routes
            .insert(&Key::new(len, ip), RouteValue::from(kind), 0)
            .map_err(|e| Error::map("update", self.pins.map_pin(&MAP_ROUTES), e))
    }

    /// Removes the entry for exactly `net`. Idempotent: `Ok(false)` if it was absent.
    pub fn remove_route(&mut self, net: IpNet) -> Result<bool> {
        let (len, ip) = model::route_key(net);
        match self.routes.remove(&Key::new(len, ip)) {
            Ok(()) => Ok(true),
            Err(e) if is_not_found(&e) => Ok(false),
            Err(e) => Err(Error::map("delete", self.pins.map_pin(&MAP_ROUTES), e)),
        }
    }

    /// Every route entry. An entry this build cannot interpret is an error naming
    /// it, never skipped: the programs would act on it.
    pub fn routes(&self) -> Result<Vec<(IpNet, RouteKind)>> {
        let path = self.pins.map_pin(&MAP_ROUTES);
        let mut out = Vec::new();
        for entry in self.routes.iter() {
            let (key, value) = entry.map_err(|e| Error::map("iterate", &path, e))?;
            let net = model::net_from_key(key.prefix_len(), &key.data());
            let kind = RouteKind::from_value(&value);
            match (net, kind) {
                (Some(net), Some(kind)) => out.push((net, kind)),
                _ => {
                    return Err(Error::UnknownEntry {
                        path,
                        detail: format!(
                            "key prefixlen {} {:?}, value {:?}",
                            key.prefix_len(),
                            key.data(),
                            value
                        ),
                    })
                }
            }
        }
        out.sort_by_key(|(net, _)| *net);
        Ok(out)
    }

    /// Every endpoint (pods on this node), as written by the CNI plugin.
    pub fn endpoints(&self) -> Result<Vec<(IpAddr, EndpointInfo)>> {
        let path = self.pins.map_pin(&MAP_ENDPOINTS);
        let mut out = Vec::new();
        for entry in self.endpoints.iter() {
            let (key, value) = entry.map_err(|e| Error::map("iterate", &path, e))?;
            let ip = model::ip_from_key(&key).ok_or_else(|| Error::UnknownEntry {
                path: path.clone(),
                detail: format!("key {key:?}"),
            })?;
            out.push((ip, EndpointInfo::from(value)));
        }
        out.sort_by_key(|(ip, _)| *ip);
        Ok(out)
    }

    /// The counters (one outcome per packet), each summed over CPUs.
    pub fn counters(&self) -> Result<Counters> {
        let path = self.pins.map_pin(&MAP_COUNTERS);
        let mut values = [0u64; COUNTER_MAX as usize];
        for (slot, counter) in values.iter_mut().zip(Counter::ALL) {
            *slot = sum_per_cpu(&self.counters, counter as u32, &path)?;
        }
        Ok(Counters::from_values(values))
    }

    /// The events (connection table, load balancing, translation), summed over CPUs.
    pub fn events(&self) -> Result<Events> {
        let path = self.pins.map_pin(&MAP_EVENTS);
        let mut values = [0u64; EVENT_MAX as usize];
        for (slot, event) in values.iter_mut().zip(Event::ALL) {
            *slot = sum_per_cpu(&self.events, event as u32, &path)?;
        }
        Ok(Events::from_values(values))
    }
}

impl std::fmt::Debug for Tables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tables")
            .field("pins", &self.pins)
            .finish_non_exhaustive()
    }
}

fn sum_per_cpu(map: &PerCpuArray<MapData, u64>, index: u32, path: &PathBuf) -> Result<u64> {
    let per_cpu = map
        .get(&index, 0)
        .map_err(|e| Error::map("lookup", path, e))?;
    Ok(per_cpu.iter().fold(0u64, |acc, v| acc.wrapping_add(*v)))
}

fn is_not_found(e: &MapError) -> bool {
    match e {
        MapError::KeyNotFound => true,
        MapError::SyscallError(s) => s.io_error.raw_os_error() == Some(libc::ENOENT),
        _ => false,
    }
}
