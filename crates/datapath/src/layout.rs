//! `#[repr(C)]` mirrors of the map keys, values and constants declared in
//! `bpf/include/weft_types.h` and `bpf/include/maps/*.h` (one header per map).
//!
//! The C headers are the source of truth. `tests/layout.rs` reads the BTF of the compiled
//! objects and compares it with [`STRUCTS`], [`ENUMS`] and [`MAPS`], which are derived
//! from the types below (`size_of`, `offset_of!`), so a drift on either side fails the
//! build's tests rather than corrupting a map at run time.

use std::mem::{offset_of, size_of};

/// `enum weft_family`.
pub const FAMILY_IPV4: u8 = 4;
pub const FAMILY_IPV6: u8 = 6;

/// `WEFT_LPM_FAMILY_BITS`: route prefix lengths count the family byte and its padding.
pub const LPM_FAMILY_BITS: u32 = 32;

/// `enum weft_endpoints_layout`.
pub const ENDPOINTS_LAYOUT: u32 = 1;
pub const MAX_ENDPOINTS: u32 = 16384;
/// `enum weft_routes_layout`.
pub const ROUTES_LAYOUT: u32 = 1;
pub const MAX_ROUTES: u32 = 65536;
/// `enum weft_config_layout`.
pub const CONFIG_LAYOUT: u32 = 1;
/// `enum weft_counters_layout`: the counters map has room beyond the counters defined,
/// so adding one does not change its layout.
pub const COUNTERS_LAYOUT: u32 = 1;
pub const COUNTER_SLOTS: u32 = 64;

/// `enum weft_route_kind`.
pub const ROUTE_LOCAL_CIDR: u32 = 1;
pub const ROUTE_REMOTE_CIDR: u32 = 2;
pub const ROUTE_HOST: u32 = 3;

/// `struct weft_ip`: key of `weft_endpoints`, data part of `weft_routes` keys.
/// `addr` holds the address in network byte order; IPv4 uses the first four bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct IpKey {
    pub family: u8,
    pub pad: [u8; 3],
    pub addr: [u8; 16],
}

/// `struct weft_endpoint`: value of `weft_endpoints`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EndpointValue {
    pub ifindex: u32,
    pub mac: [u8; 6],
    pub flags: u16,
}

/// `struct weft_route_key`: key of `weft_routes` (aya's `lpm_trie::Key<IpKey>` has the
/// same layout and is what the typed map uses).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RouteKey {
    pub prefixlen: u32,
    pub ip: IpKey,
}

/// `struct weft_route`: value of `weft_routes`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RouteValue {
    pub kind: u32,
    pub vtep_mac: [u8; 6],
    pub flags: u16,
}

/// `struct weft_config`: the single value of `weft_config`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConfigValue {
    pub vxlan_ifindex: u32,
    pub vtep_mac: [u8; 6],
    pub flags: u16,
}

// SAFETY: plain `repr(C)` structs of integers and byte arrays without implicit
// padding (checked by `no_implicit_padding` below), valid for every bit pattern.
unsafe impl aya::Pod for IpKey {}
unsafe impl aya::Pod for EndpointValue {}
unsafe impl aya::Pod for RouteKey {}
unsafe impl aya::Pod for RouteValue {}
unsafe impl aya::Pod for ConfigValue {}

/// `enum weft_counter`: what the programs did with a packet. Every drop has a reason.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Counter {
    LocalDelivery = 0,
    Encap = 1,
    DecapDelivery = 2,
    ToKernel = 3,
    MtuFallback = 4,
    OverlayFallback = 5,
    DropSpoofedSource = 6,
    DropUnknownLocalDest = 7,
    DropUnknownOverlaySource = 8,
    DropMalformed = 9,
}

/// `WEFT_CTR_MAX`: the number of counters (entries of `weft_counters`).
pub const COUNTER_MAX: u32 = 10;

impl Counter {
    pub const ALL: [Counter; COUNTER_MAX as usize] = [
        Counter::LocalDelivery,
        Counter::Encap,
        Counter::DecapDelivery,
        Counter::ToKernel,
        Counter::MtuFallback,
        Counter::OverlayFallback,
        Counter::DropSpoofedSource,
        Counter::DropUnknownLocalDest,
        Counter::DropUnknownOverlaySource,
        Counter::DropMalformed,
    ];

    /// The metric-style name: `local_delivery`, `drop_spoofed_source`, ...
    pub const fn name(self) -> &'static str {
        match self {
            Counter::LocalDelivery => "local_delivery",
            Counter::Encap => "encap",
            Counter::DecapDelivery => "decap_delivery",
            Counter::ToKernel => "to_kernel",
            Counter::MtuFallback => "mtu_fallback",
            Counter::OverlayFallback => "overlay_fallback",
            Counter::DropSpoofedSource => "drop_spoofed_source",
            Counter::DropUnknownLocalDest => "drop_unknown_local_dest",
            Counter::DropUnknownOverlaySource => "drop_unknown_overlay_source",
            Counter::DropMalformed => "drop_malformed",
        }
    }

    /// The C enumerator name, as it appears in BTF.
    pub const fn c_name(self) -> &'static str {
        match self {
            Counter::LocalDelivery => "WEFT_CTR_LOCAL_DELIVERY",
            Counter::Encap => "WEFT_CTR_ENCAP",
            Counter::DecapDelivery => "WEFT_CTR_DECAP_DELIVERY",
            Counter::ToKernel => "WEFT_CTR_TO_KERNEL",
            Counter::MtuFallback => "WEFT_CTR_MTU_FALLBACK",
            Counter::OverlayFallback => "WEFT_CTR_OVERLAY_FALLBACK",
            Counter::DropSpoofedSource => "WEFT_CTR_DROP_SPOOFED_SOURCE",
            Counter::DropUnknownLocalDest => "WEFT_CTR_DROP_UNKNOWN_LOCAL_DEST",
            Counter::DropUnknownOverlaySource => "WEFT_CTR_DROP_UNKNOWN_OVERLAY_SOURCE",
            Counter::DropMalformed => "WEFT_CTR_DROP_MALFORMED",
        }
    }

    /// Whether this outcome is a drop (each drop counter is one reason).
    pub const fn is_drop(self) -> bool {
        matches!(
            self,
            Counter::DropSpoofedSource
                | Counter::DropUnknownLocalDest
                | Counter::DropUnknownOverlaySource
                | Counter::DropMalformed
        )
    }
}

/// The kernel map types weft uses (`enum bpf_map_type`).
pub const BPF_MAP_TYPE_HASH: u32 = 1;
pub const BPF_MAP_TYPE_ARRAY: u32 = 2;
pub const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;
pub const BPF_MAP_TYPE_LPM_TRIE: u32 = 11;
/// `BPF_F_NO_PREALLOC`, required by LPM tries.
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

/// Every map of the datapath.
pub const MAPS: [MapSpec; 4] = [MAP_ENDPOINTS, MAP_ROUTES, MAP_CONFIG, MAP_COUNTERS];

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
];

/// C structs that never cross into Rust, each with the reason. The `weft_btf_*` anchors
/// (which only carry enums into BTF, see `weft_types.h`) are recognised by name.
pub const INTERNAL_STRUCTS: &[(&str, &str)] = &[(
    "weft_pkt",
    "the programs' parse result (bpf/include/weft_parse.h), on the BPF stack only",
)];

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
    (
        "weft_counter",
        &[
            (
                Counter::LocalDelivery.c_name(),
                Counter::LocalDelivery as u64,
            ),
            (Counter::Encap.c_name(), Counter::Encap as u64),
            (
                Counter::DecapDelivery.c_name(),
                Counter::DecapDelivery as u64,
            ),
            (Counter::ToKernel.c_name(), Counter::ToKernel as u64),
            (Counter::MtuFallback.c_name(), Counter::MtuFallback as u64),
            (
                Counter::OverlayFallback.c_name(),
                Counter::OverlayFallback as u64,
            ),
            (
                Counter::DropSpoofedSource.c_name(),
                Counter::DropSpoofedSource as u64,
            ),
            (
                Counter::DropUnknownLocalDest.c_name(),
                Counter::DropUnknownLocalDest as u64,
            ),
            (
                Counter::DropUnknownOverlaySource.c_name(),
                Counter::DropUnknownOverlaySource as u64,
            ),
            (
                Counter::DropMalformed.c_name(),
                Counter::DropMalformed as u64,
            ),
            ("WEFT_CTR_MAX", COUNTER_MAX as u64),
        ],
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

    #[test]
    fn counters_are_dense_and_named_once() {
        for (i, c) in Counter::ALL.iter().enumerate() {
            assert_eq!(*c as usize, i);
        }
        let mut names: Vec<_> = Counter::ALL.iter().map(|c| c.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Counter::ALL.len());
    }
}
