//! `#[repr(C)]` mirrors of the map keys, values and constants declared in
//! `bpf/include/weft_types.h` and `bpf/include/maps/*.h` (one header per map).
//!
//! The C headers are the source of truth. `tests/layout.rs` reads the BTF of the compiled
//! objects and compares it with [`STRUCTS`], [`ENUMS`] and [`MAPS`], which are derived
//! from the types below (`size_of`, `offset_of!`), so a drift on either side fails the
//! build's tests rather than corrupting a map at run time.

use std::mem::{offset_of, size_of};

mod ct;
mod lb;
mod outcomes;
mod types;

pub use ct::*;
pub use lb::*;
pub use outcomes::*;
pub use types::*;

/// The kernel map types weft uses (`enum bpf_map_type`).
pub const BPF_MAP_TYPE_HASH: u32 = 1;
pub const BPF_MAP_TYPE_ARRAY: u32 = 2;
pub const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;
pub const BPF_MAP_TYPE_LPM_TRIE: u32 = 11;
pub const BPF_MAP_TYPE_LRU_HASH: u32 = 9;
/// `BPF_F_NO_PREALLOC`, required by LPM tries; the service maps use it so that a
/// replaced element is freed only after every reader is done.
pub const BPF_F_NO_PREALLOC: u32 = 1;

/// What a map looks like to the kernel: enough to tell whether a pinned map was made
/// from the same definition as the one this build embeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapShape {
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub flags: u32,
}

impl std::fmt::Display for MapShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "type {} key {}B value {}B max_entries {} flags {:#x}",
            self.map_type, self.key_size, self.value_size, self.max_entries, self.flags
        )
    }
}

/// How a map's number of entries is decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sizing {
    /// Fixed by the header: a pinned map with another size is another layout.
    Fixed,
    /// Chosen by the agent when it first creates the map (the header's value is the
    /// default); readers accept whatever size is pinned.
    Agent,
}

/// A map of the datapath: its name in the objects, its layout version (part of the
/// pinned name) and the shape this build expects.
#[derive(Clone, Copy, Debug)]
pub struct MapSpec {
    /// The map's name in the C headers and in the kernel (at most 15 bytes).
    pub name: &'static str,
    /// `WEFT_<MAP>_LAYOUT` of its header.
    pub version: u32,
    pub shape: MapShape,
    pub sizing: Sizing,
}

impl MapSpec {
    /// The file name of its pin under `maps/`: `<name>_v<version>`.
    pub fn pin_name(&self) -> String {
        format!("{}_v{}", self.name, self.version)
    }

    /// Whether a pinned map of shape `found` can be used as this map.
    pub fn accepts(&self, found: &MapShape) -> bool {
        match self.sizing {
            Sizing::Fixed => *found == self.shape,
            Sizing::Agent => {
                MapShape {
                    max_entries: self.shape.max_entries,
                    ..*found
                } == self.shape
            }
        }
    }
}

pub const MAP_ENDPOINTS: MapSpec = MapSpec {
    name: "weft_endpoints",
    version: ENDPOINTS_LAYOUT,
    sizing: Sizing::Fixed,
    shape: MapShape {
        map_type: BPF_MAP_TYPE_HASH,
        key_size: size_of::<IpKey>() as u32,
        value_size: size_of::<EndpointValue>() as u32,
        max_entries: MAX_ENDPOINTS,
        flags: 0,
    },
};

pub const MAP_ROUTES: MapSpec = MapSpec {
    name: "weft_routes",
    version: ROUTES_LAYOUT,
    sizing: Sizing::Fixed,
    shape: MapShape {
        map_type: BPF_MAP_TYPE_LPM_TRIE,
        key_size: size_of::<RouteKey>() as u32,
        value_size: size_of::<RouteValue>() as u32,
        max_entries: MAX_ROUTES,
        flags: BPF_F_NO_PREALLOC,
    },
};

pub const MAP_CONFIG: MapSpec = MapSpec {
    name: "weft_config",
    version: CONFIG_LAYOUT,
    sizing: Sizing::Fixed,
    shape: MapShape {
        map_type: BPF_MAP_TYPE_ARRAY,
        key_size: 4,
        value_size: size_of::<ConfigValue>() as u32,
        max_entries: 1,
        flags: 0,
    },
};

pub const MAP_COUNTERS: MapSpec = MapSpec {
    name: "weft_counters",
    version: COUNTERS_LAYOUT,
    sizing: Sizing::Fixed,
    shape: MapShape {
        map_type: BPF_MAP_TYPE_PERCPU_ARRAY,
        key_size: 4,
        value_size: size_of::<u64>() as u32,
        max_entries: COUNTER_SLOTS,
        flags: 0,
    },
};

pub const MAP_EVENTS: MapSpec = MapSpec {
    name: "weft_events",
    version: EVENTS_LAYOUT,
    sizing: Sizing::Fixed,
    shape: MapShape {
        map_type: BPF_MAP_TYPE_PERCPU_ARRAY,
        key_size: 4,
        value_size: size_of::<u64>() as u32,
        max_entries: EVENT_SLOTS,
        flags: 0,
    },
};

pub const MAP_CT: MapSpec = MapSpec {
    name: "weft_ct",
    version: CT_LAYOUT,
    sizing: Sizing::Agent,
    shape: MapShape {
        map_type: BPF_MAP_TYPE_LRU_HASH,
        key_size: size_of::<CtKey>() as u32,
        value_size: size_of::<CtEntry>() as u32,
        max_entries: CT_DEFAULT_ENTRIES,
        flags: 0,
    },
};

const fn lb_map(
    name: &'static str,
    map_type: u32,
    key: usize,
    value: usize,
    entries: u32,
    sizing: Sizing,
) -> MapSpec {
    MapSpec {
        name,
        version: LB_LAYOUT,
        sizing,
        shape: MapShape {
            map_type,
            key_size: key as u32,
            value_size: value as u32,
            max_entries: entries,
            // LRU maps must preallocate; the others free replaced elements after readers.
            flags: if map_type == BPF_MAP_TYPE_LRU_HASH {
                0
            } else {
                BPF_F_NO_PREALLOC
            },
        },
    }
}

pub const MAP_LB_FRONTENDS: MapSpec = lb_map(
    "weft_lb_fe",
    BPF_MAP_TYPE_HASH,
    size_of::<LbFrontendKey>(),
    size_of::<LbFrontendValue>(),
    LB_MAX_FRONTENDS,
    Sizing::Fixed,
);
pub const MAP_LB_SLOTS: MapSpec = lb_map(
    "weft_lb_slots",
    BPF_MAP_TYPE_HASH,
    size_of::<LbSlotKey>(),
    size_of::<LbSlotValue>(),
    LB_DEFAULT_SLOTS,
    Sizing::Agent,
);
pub const MAP_LB_BACKENDS: MapSpec = lb_map(
    "weft_lb_be",
    BPF_MAP_TYPE_HASH,
    4,
    size_of::<LbBackendValue>(),
    LB_DEFAULT_BACKENDS,
    Sizing::Agent,
);
pub const MAP_LB_AFFINITY: MapSpec = lb_map(
    "weft_lb_aff",
    BPF_MAP_TYPE_LRU_HASH,
    size_of::<LbAffinityKey>(),
    size_of::<LbAffinityValue>(),
    LB_DEFAULT_AFFINITY,
    Sizing::Agent,
);
pub const MAP_LB_ADDRS: MapSpec = lb_map(
    "weft_lb_addrs",
    BPF_MAP_TYPE_HASH,
    size_of::<IpKey>(),
    size_of::<LbAddrValue>(),
    LB_MAX_FRONTENDS,
    Sizing::Fixed,
);
pub const MAP_LB_CIDRS: MapSpec = lb_map(
    "weft_lb_cidrs",
    BPF_MAP_TYPE_LPM_TRIE,
    size_of::<RouteKey>(),
    size_of::<LbCidrValue>(),
    LB_MAX_CIDRS,
    Sizing::Fixed,
);

/// Every map of the datapath.
pub const MAPS: [MapSpec; 12] = [
    MAP_ENDPOINTS,
    MAP_ROUTES,
    MAP_CONFIG,
    MAP_COUNTERS,
    MAP_EVENTS,
    MAP_CT,
    MAP_LB_FRONTENDS,
    MAP_LB_SLOTS,
    MAP_LB_BACKENDS,
    MAP_LB_AFFINITY,
    MAP_LB_ADDRS,
    MAP_LB_CIDRS,
];

/// A field of a mirrored struct: name, byte offset, byte size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldLayout {
    pub name: &'static str,
    pub offset: usize,
    pub size: usize,
}

/// A mirrored struct as the Rust side lays it out, named as in C.
#[derive(Clone, Copy, Debug)]
pub struct StructLayout {
    pub c_name: &'static str,
    pub size: usize,
    pub fields: &'static [FieldLayout],
}

/// The size of a field, from its type (the closure is never called: it only names the
/// field, so no size is ever typed by hand).
const fn field_size<T, F>(_field: fn(&T) -> &F) -> usize {
    size_of::<F>()
}

macro_rules! field {
    ($ty:ty, $field:ident) => {
        FieldLayout {
            name: stringify!($field),
            offset: offset_of!($ty, $field),
            size: field_size::<$ty, _>(|s: &$ty| &s.$field),
        }
    };
}

macro_rules! mirror {
    ($ty:ty as $c_name:literal { $($field:ident),* $(,)? }) => {
        StructLayout {
            c_name: $c_name,
            size: size_of::<$ty>(),
            fields: &[$(field!($ty, $field)),*],
        }
    };
}

/// Every struct of the map headers that crosses into Rust (map keys and values), as
/// laid out by the Rust mirrors. `tests/layout.rs` fails when the BTF holds a `weft_`
/// struct that is neither here nor in [`INTERNAL_STRUCTS`].
pub const STRUCTS: &[StructLayout] = &[
    mirror!(IpKey as "weft_ip" { family, pad, addr }),
    mirror!(EndpointValue as "weft_endpoint" { ifindex, mac, flags }),
    mirror!(RouteKey as "weft_route_key" { prefixlen, ip }),
    mirror!(RouteValue as "weft_route" { kind, vtep_mac, flags }),
    mirror!(ConfigValue as "weft_config" { vxlan_ifindex, vtep_mac, flags }),
    mirror!(CtKey as "weft_ct_key" { saddr, daddr, sport, dport, proto, family, pad }),
    mirror!(CtEntry as "weft_ct_entry" {
        expires, nat_saddr, nat_daddr, nat_sport, nat_dport, frontend, backend, rule, flags,
        state, verdict, pad,
    }),
    mirror!(LbFrontendKey as "weft_lb_frontend_key" { ip, port, proto, scope }),
    mirror!(LbFrontendValue as "weft_lb_frontend" {
        id, count, draining, affinity_timeout, flags, generation, pad, maglev, source_ranges,
    }),
    mirror!(LbSlotKey as "weft_lb_slot_key" { frontend, slot }),
    mirror!(LbSlotValue as "weft_lb_slot" { backend }),
    mirror!(LbBackendValue as "weft_lb_backend" { ip, port, flags, pad }),
    mirror!(LbAffinityKey as "weft_lb_affinity_key" { frontend, client }),
    mirror!(LbAffinityValue as "weft_lb_affinity" { last_used, backend, pad }),
    mirror!(LbAddrValue as "weft_lb_addr" { flags, frontends }),
    mirror!(LbCidrValue as "weft_lb_cidr" { flags }),
];

/// C structs that never cross into Rust, each with the reason. The `weft_btf_*` anchors
/// (which only carry enums into BTF, see `weft_types.h`) are recognised by name.
pub const INTERNAL_STRUCTS: &[(&str, &str)] = &[
    (
        "weft_pkt",
        "the programs' parse result (bpf/include/weft_parse.h), on the BPF stack only",
    ),
    (
        "weft_quoted",
        "where an ICMP error's quoted packet lies (bpf/include/weft_icmp.h), on the stack",
    ),
    (
        "weft_tcp_min",
        "a TCP header being built into a RST (bpf/include/weft_reply.h), on the stack",
    ),
];

/// Every constant enum of `weft_maps.h`: C enum name, then (enumerator, value).
pub const ENUMS: &[(&str, &[(&str, u64)])] = &[
    (
        "weft_family",
        &[
            ("WEFT_FAMILY_IPV4", FAMILY_IPV4 as u64),
            ("WEFT_FAMILY_IPV6", FAMILY_IPV6 as u64),
        ],
    ),
    (
        "weft_lpm",
        &[("WEFT_LPM_FAMILY_BITS", LPM_FAMILY_BITS as u64)],
    ),
    (
        "weft_endpoints_layout",
        &[
            ("WEFT_ENDPOINTS_LAYOUT", ENDPOINTS_LAYOUT as u64),
            ("WEFT_MAX_ENDPOINTS", MAX_ENDPOINTS as u64),
        ],
    ),
    (
        "weft_routes_layout",
        &[
            ("WEFT_ROUTES_LAYOUT", ROUTES_LAYOUT as u64),
            ("WEFT_MAX_ROUTES", MAX_ROUTES as u64),
        ],
    ),
    (
        "weft_config_layout",
        &[("WEFT_CONFIG_LAYOUT", CONFIG_LAYOUT as u64)],
    ),
    (
        "weft_counters_layout",
        &[
            ("WEFT_COUNTERS_LAYOUT", COUNTERS_LAYOUT as u64),
            ("WEFT_COUNTER_SLOTS", COUNTER_SLOTS as u64),
        ],
    ),
    (
        "weft_route_kind",
        &[
            ("WEFT_ROUTE_LOCAL_CIDR", ROUTE_LOCAL_CIDR as u64),
            ("WEFT_ROUTE_REMOTE_CIDR", ROUTE_REMOTE_CIDR as u64),
            ("WEFT_ROUTE_HOST", ROUTE_HOST as u64),
        ],
    ),
    Counter::C_ENUM,
    Event::C_ENUM,
    (
        "weft_events_layout",
        &[
            ("WEFT_EVENTS_LAYOUT", EVENTS_LAYOUT as u64),
            ("WEFT_EVENT_SLOTS", EVENT_SLOTS as u64),
        ],
    ),
    (
        "weft_ct_layout",
        &[
            ("WEFT_CT_LAYOUT", CT_LAYOUT as u64),
            ("WEFT_CT_DEFAULT_ENTRIES", CT_DEFAULT_ENTRIES as u64),
        ],
    ),
    (
        "weft_ct_timeout",
        &[
            ("WEFT_CT_TIMEOUT_TCP_OPENING", CT_TIMEOUT_TCP_OPENING as u64),
            (
                "WEFT_CT_TIMEOUT_TCP_ESTABLISHED",
                CT_TIMEOUT_TCP_ESTABLISHED as u64,
            ),
            ("WEFT_CT_TIMEOUT_TCP_CLOSING", CT_TIMEOUT_TCP_CLOSING as u64),
            ("WEFT_CT_TIMEOUT_TCP_CLOSED", CT_TIMEOUT_TCP_CLOSED as u64),
            ("WEFT_CT_TIMEOUT_UDP_OPENING", CT_TIMEOUT_UDP_OPENING as u64),
            (
                "WEFT_CT_TIMEOUT_UDP_ESTABLISHED",
                CT_TIMEOUT_UDP_ESTABLISHED as u64,
            ),
            ("WEFT_CT_TIMEOUT_ICMP", CT_TIMEOUT_ICMP as u64),
            ("WEFT_CT_TIMEOUT_OTHER", CT_TIMEOUT_OTHER as u64),
            ("WEFT_CT_REFRESH", CT_REFRESH as u64),
        ],
    ),
    (
        "weft_ct_flag",
        &[
            ("WEFT_CT_F_REPLY", CT_F_REPLY as u64),
            ("WEFT_CT_F_NAT_SRC", CT_F_NAT_SRC as u64),
            ("WEFT_CT_F_NAT_DST", CT_F_NAT_DST as u64),
            ("WEFT_CT_F_SEEN_REPLY", CT_F_SEEN_REPLY as u64),
            ("WEFT_CT_F_FIN_ORIG", CT_F_FIN_ORIG as u64),
            ("WEFT_CT_F_FIN_REPLY", CT_F_FIN_REPLY as u64),
            ("WEFT_CT_F_RST", CT_F_RST as u64),
            ("WEFT_CT_F_BACKEND_GONE", CT_F_BACKEND_GONE as u64),
            ("WEFT_CT_F_SHARED", CT_F_SHARED as u64),
        ],
    ),
    (
        "weft_ct_state",
        &[
            ("WEFT_CT_OPENING", CT_OPENING as u64),
            ("WEFT_CT_ESTABLISHED", CT_ESTABLISHED as u64),
            ("WEFT_CT_CLOSING", CT_CLOSING as u64),
            ("WEFT_CT_CLOSED", CT_CLOSED as u64),
        ],
    ),
    (
        "weft_lb_layout",
        &[
            ("WEFT_LB_LAYOUT", LB_LAYOUT as u64),
            ("WEFT_LB_MAX_FRONTENDS", LB_MAX_FRONTENDS as u64),
            ("WEFT_LB_DEFAULT_SLOTS", LB_DEFAULT_SLOTS as u64),
            ("WEFT_LB_DEFAULT_BACKENDS", LB_DEFAULT_BACKENDS as u64),
            ("WEFT_LB_DEFAULT_AFFINITY", LB_DEFAULT_AFFINITY as u64),
            ("WEFT_LB_MAX_CIDRS", LB_MAX_CIDRS as u64),
            ("WEFT_LB_GENERATION_SHIFT", LB_GENERATION_SHIFT as u64),
        ],
    ),
    (
        "weft_lb_scope",
        &[
            ("WEFT_LB_SCOPE_INTERNAL", LB_SCOPE_INTERNAL as u64),
            ("WEFT_LB_SCOPE_EXTERNAL", LB_SCOPE_EXTERNAL as u64),
        ],
    ),
    (
        "weft_lb_frontend_flag",
        &[
            ("WEFT_FE_NO_ENDPOINTS", FE_NO_ENDPOINTS as u64),
            ("WEFT_FE_NONE_USABLE", FE_NONE_USABLE as u64),
            ("WEFT_FE_AFFINITY", FE_AFFINITY as u64),
            ("WEFT_FE_CLUSTER_IP", FE_CLUSTER_IP as u64),
        ],
    ),
    (
        "weft_lb_backend_flag",
        &[
            ("WEFT_BE_TERMINATING", BE_TERMINATING as u64),
            ("WEFT_BE_LOCAL", BE_LOCAL as u64),
        ],
    ),
    (
        "weft_lb_addr_flag",
        &[("WEFT_LB_ADDR_CLUSTER_IP", LB_ADDR_CLUSTER_IP as u64)],
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// `aya::Pod` promises every byte is a field byte: implicit padding would leak
    /// uninitialised memory into map keys (and break hash lookups).
    #[test]
    fn no_implicit_padding() {
        for s in STRUCTS {
            let covered: usize = s.fields.iter().map(|f| f.size).sum();
            assert_eq!(covered, s.size, "{} has implicit padding", s.c_name);
        }
    }

    #[test]
    fn aya_lpm_key_matches_route_key() {
        assert_eq!(
            size_of::<aya::maps::lpm_trie::Key<IpKey>>(),
            size_of::<RouteKey>()
        );
    }
}
