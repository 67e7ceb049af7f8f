//! The shared key types (`weft_types.h`) and the maps of the first layout: endpoints,
//! routes, config, counters (`maps/{endpoints,routes,config,counters}.h`).

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

/// `enum weft_route_kind`.
pub const ROUTE_LOCAL_CIDR: u32 = 1;
pub const ROUTE_REMOTE_CIDR: u32 = 2;
pub const ROUTE_HOST: u32 = 3;

/// `struct weft_ip`: key of `weft_endpoints`, data part of `weft_routes` keys.
/// `addr` holds the address in network byte order; IPv4 uses the first four bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
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
