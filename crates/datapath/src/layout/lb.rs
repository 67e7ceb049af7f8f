//! `maps/lb.h`: service load balancing.

use super::IpKey;

/// `enum weft_lb_layout`.
pub const LB_LAYOUT: u32 = 1;
pub const LB_MAX_FRONTENDS: u32 = 65536;
pub const LB_DEFAULT_SLOTS: u32 = 262144;
pub const LB_DEFAULT_BACKENDS: u32 = 65536;
pub const LB_DEFAULT_AFFINITY: u32 = 65536;
pub const LB_MAX_CIDRS: u32 = 64;
pub const LB_GENERATION_SHIFT: u32 = 31;

/// `enum weft_lb_scope`.
pub const LB_SCOPE_INTERNAL: u8 = 0;
pub const LB_SCOPE_EXTERNAL: u8 = 1;

/// `enum weft_lb_frontend_flag`.
pub const FE_NO_ENDPOINTS: u16 = 1 << 0;
pub const FE_NONE_USABLE: u16 = 1 << 1;
pub const FE_AFFINITY: u16 = 1 << 2;
pub const FE_CLUSTER_IP: u16 = 1 << 3;

/// `enum weft_lb_backend_flag`.
pub const BE_TERMINATING: u8 = 1 << 0;
pub const BE_LOCAL: u8 = 1 << 1;

/// `enum weft_lb_addr_flag`.
pub const LB_ADDR_CLUSTER_IP: u32 = 1 << 0;

/// `struct weft_lb_frontend_key`. `port` in network byte order.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LbFrontendKey {
    pub ip: IpKey,
    pub port: [u8; 2],
    pub proto: u8,
    pub scope: u8,
}

/// `struct weft_lb_frontend`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LbFrontendValue {
    pub id: u32,
    pub count: u32,
    pub draining: u32,
    pub affinity_timeout: u32,
    pub flags: u16,
    pub generation: u8,
    pub pad: u8,
    pub maglev: u32,
    pub source_ranges: u32,
}

/// `struct weft_lb_slot_key`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LbSlotKey {
    pub frontend: u32,
    pub slot: u32,
}

/// `struct weft_lb_slot`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LbSlotValue {
    pub backend: u32,
}

/// `struct weft_lb_backend`. `port` in network byte order.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LbBackendValue {
    pub ip: IpKey,
    pub port: [u8; 2],
    pub flags: u8,
    pub pad: u8,
}

/// `struct weft_lb_affinity_key`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LbAffinityKey {
    pub frontend: u32,
    pub client: IpKey,
}

/// `struct weft_lb_affinity`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LbAffinityValue {
    pub last_used: u64,
    pub backend: u32,
    pub pad: u32,
}

/// `struct weft_lb_addr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LbAddrValue {
    pub flags: u32,
    pub frontends: u32,
}

/// `struct weft_lb_cidr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LbCidrValue {
    pub flags: u32,
}

// SAFETY: plain `repr(C)` structs of integers and byte arrays without implicit padding
// (checked by `no_implicit_padding`), valid for every bit pattern.
unsafe impl aya::Pod for LbFrontendKey {}
unsafe impl aya::Pod for LbFrontendValue {}
unsafe impl aya::Pod for LbSlotKey {}
unsafe impl aya::Pod for LbSlotValue {}
unsafe impl aya::Pod for LbBackendValue {}
unsafe impl aya::Pod for LbAffinityKey {}
unsafe impl aya::Pod for LbAffinityValue {}
unsafe impl aya::Pod for LbAddrValue {}
unsafe impl aya::Pod for LbCidrValue {}
