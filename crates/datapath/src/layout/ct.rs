//! `maps/ct.h`: the connection table.

/// `enum weft_ct_layout`.
pub const CT_LAYOUT: u32 = 1;
pub const CT_DEFAULT_ENTRIES: u32 = 131072;

/// `enum weft_ct_timeout`, in seconds (the header explains each value).
pub const CT_TIMEOUT_TCP_OPENING: u32 = 60;
pub const CT_TIMEOUT_TCP_ESTABLISHED: u32 = 21600;
pub const CT_TIMEOUT_TCP_CLOSING: u32 = 120;
pub const CT_TIMEOUT_TCP_CLOSED: u32 = 10;
pub const CT_TIMEOUT_UDP_OPENING: u32 = 30;
pub const CT_TIMEOUT_UDP_ESTABLISHED: u32 = 120;
pub const CT_TIMEOUT_ICMP: u32 = 30;
pub const CT_TIMEOUT_OTHER: u32 = 60;
pub const CT_REFRESH: u32 = 1;

/// `enum weft_ct_flag`.
pub const CT_F_REPLY: u16 = 1 << 0;
pub const CT_F_NAT_SRC: u16 = 1 << 1;
pub const CT_F_NAT_DST: u16 = 1 << 2;
pub const CT_F_SEEN_REPLY: u16 = 1 << 4;
pub const CT_F_FIN_ORIG: u16 = 1 << 5;
pub const CT_F_FIN_REPLY: u16 = 1 << 6;
pub const CT_F_RST: u16 = 1 << 7;
pub const CT_F_BACKEND_GONE: u16 = 1 << 8;
pub const CT_F_SHARED: u16 = 0xfff0;

/// `enum weft_ct_state`.
pub const CT_OPENING: u8 = 1;
pub const CT_ESTABLISHED: u8 = 2;
pub const CT_CLOSING: u8 = 3;
pub const CT_CLOSED: u8 = 4;

/// `struct weft_ct_key`: a direction's tuple. Addresses as in [`super::IpKey`] (network
/// byte order, IPv4 in the first four bytes); ports in network byte order.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CtKey {
    pub saddr: [u8; 16],
    pub daddr: [u8; 16],
    pub sport: [u8; 2],
    pub dport: [u8; 2],
    pub proto: u8,
    pub family: u8,
    pub pad: [u8; 2],
}

/// `struct weft_ct_entry`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtEntry {
    /// `bpf_ktime_get_ns()` (CLOCK_MONOTONIC) after which the entry is dead.
    pub expires: u64,
    pub nat_saddr: [u8; 16],
    pub nat_daddr: [u8; 16],
    pub nat_sport: [u8; 2],
    pub nat_dport: [u8; 2],
    pub frontend: u32,
    pub backend: u32,
    pub rule: u32,
    pub flags: u16,
    pub state: u8,
    pub verdict: u8,
    pub pad: u32,
}

// SAFETY: plain `repr(C)` structs of integers and byte arrays without implicit padding
// (checked by `no_implicit_padding`), valid for every bit pattern.
unsafe impl aya::Pod for CtKey {}
unsafe impl aya::Pod for CtEntry {}
