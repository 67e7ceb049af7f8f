//! Address arithmetic shared by validation and allocation.
//!
//! Both families are handled as `u128` so that ranges, cursors and iteration need one
//! code path; the family travels alongside so a number is never turned back into the
//! wrong kind of address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// The address family of an address or subnet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    pub fn of(addr: IpAddr) -> Family {
        match addr {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        }
    }

    pub fn of_net(net: &IpNet) -> Family {
        Family::of(net.addr())
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        })
    }
}

pub fn to_u128(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

/// The address of `family` with numeric value `n`, or `None` when `n` does not fit.
pub fn from_u128(family: Family, n: u128) -> Option<IpAddr> {
    match family {
        Family::V4 => u32::try_from(n).ok().map(|v| IpAddr::V4(Ipv4Addr::from(v))),
        Family::V6 => Some(IpAddr::V6(Ipv6Addr::from(n))),
    }
}

/// The address after `addr`, or `None` at the top of the family's space.
pub fn next(addr: IpAddr) -> Option<IpAddr> {
    to_u128(addr)
        .checked_add(1)
        .and_then(|n| from_u128(Family::of(addr), n))
}

/// The address before `addr`, or `None` at the bottom of the family's space.
pub fn prev(addr: IpAddr) -> Option<IpAddr> {
    to_u128(addr)
        .checked_sub(1)
        .and_then(|n| from_u128(Family::of(addr), n))
}
