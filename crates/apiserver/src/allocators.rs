//! Service address and port allocation from the configured ranges, as kube-apiserver's
//! allocators behave: requested values are honoured when free and in range, duplicates are
//! refused, and dynamic picks prefer the upper part of the range (the lower band is kept
//! for static assignments).

use ipnet::IpNet;
use std::collections::BTreeSet;
use std::net::IpAddr;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    #[error("provided IP is already allocated")]
    IpAllocated,
    #[error("the provided IP ({ip}) is not in the valid range. The range of valid IPs is {range}")]
    IpOutOfRange { ip: IpAddr, range: IpNet },
    #[error("provided port is already allocated")]
    PortAllocated,
    #[error("provided port is not in the valid range. The range of valid ports is {lo}-{hi}")]
    PortOutOfRange { lo: u16, hi: u16 },
    #[error("range is full")]
    Full,
}

/// The static band apimachinery keeps for requested values: size/16, between 16 and 256.
fn static_band(size: u128) -> u128 {
    (size / 16).clamp(16, 256).min(size)
}

fn to_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

fn from_u128(v: u128, v4: bool) -> IpAddr {
    if v4 {
        IpAddr::V4((v as u32).into())
    } else {
        IpAddr::V6(v.into())
    }
}

#[derive(Debug)]
pub struct IpAllocator {
    range: IpNet,
    used: BTreeSet<u128>,
    /// First usable offset and number of usable addresses.
    base: u128,
    size: u128,
}

impl IpAllocator {
    pub fn new(range: IpNet) -> Self {
        let range = range.trunc();
        let network = to_u128(range.network());
        let host_bits = u32::from(range.max_prefix_len() - range.prefix_len());
        let total: u128 = if host_bits >= 128 {
            u128::MAX
        } else {
            1u128 << host_bits
        };
        // The network address is never handed out; for IPv4 neither is the broadcast address.
        let size = match range {
            IpNet::V4(_) => total.saturating_sub(2),
            IpNet::V6(_) => total.saturating_sub(1),
        }
        .min(1 << 20);
        IpAllocator {
            range,
            used: BTreeSet::new(),
            base: network + 1,
            size,
        }
    }

    pub fn range(&self) -> IpNet {
        self.range
    }

    pub fn is_v4(&self) -> bool {
        matches!(self.range, IpNet::V4(_))
    }

    pub fn reserve(&mut self, ip: IpAddr) -> Result<(), AllocError> {
        let v = to_u128(ip);
        if !self.range.contains(&ip) || v < self.base || v >= self.base + self.size {
            return Err(AllocError::IpOutOfRange {
                ip,
                range: self.range,
            });
        }
        if !self.used.insert(v) {
            return Err(AllocError::IpAllocated);
        }
        Ok(())
    }

    pub fn allocate(&mut self) -> Result<IpAddr, AllocError> {
        let band = static_band(self.size);
        let offset = pick(&self.used, self.base, band, self.size).ok_or(AllocError::Full)?;
        self.used.insert(self.base + offset);
        Ok(from_u128(self.base + offset, self.is_v4()))
    }

    pub fn release(&mut self, ip: IpAddr) {
        self.used.remove(&to_u128(ip));
    }
}

/// A free offset: a random start in `[band, size)` probing upwards, then the lower band.
fn pick(used: &BTreeSet<u128>, base: u128, band: u128, size: u128) -> Option<u128> {
    let free = |o: u128| !used.contains(&(base + o));
    let upper = size - band;
    if upper > 0 {
        let start = u128::from(crate::meta::random_u64()) % upper;
        if let Some(o) = (start..upper)
            .chain(0..start)
            .map(|o| o + band)
            .find(|o| free(*o))
        {
            return Some(o);
        }
    }
    let start = if band > 0 {
        u128::from(crate::meta::random_u64()) % band
    } else {
        0
    };
    (start..band).chain(0..start).find(|o| free(*o))
}

#[derive(Debug)]
pub struct PortAllocator {
    lo: u16,
    hi: u16,
    used: BTreeSet<u16>,
}

impl PortAllocator {
    pub fn new(lo: u16, hi: u16) -> Self {
        PortAllocator {
            lo,
            hi,
            used: BTreeSet::new(),
        }
    }

    pub fn reserve(&mut self, port: u16) -> Result<(), AllocError> {
        if port < self.lo || port > self.hi {
            return Err(AllocError::PortOutOfRange {
                lo: self.lo,
                hi: self.hi,
            });
        }
        if !self.used.insert(port) {
            return Err(AllocError::PortAllocated);
        }
        Ok(())
    }

    pub fn allocate(&mut self) -> Result<u16, AllocError> {
        let size = u128::from(self.hi - self.lo) + 1;
        let used: BTreeSet<u128> = self.used.iter().map(|p| u128::from(*p)).collect();
        let offset =
            pick(&used, u128::from(self.lo), static_band(size), size).ok_or(AllocError::Full)?;
        let port = self.lo + offset as u16;
        self.used.insert(port);
        Ok(port)
    }

    pub fn release(&mut self, port: u16) {
        self.used.remove(&port);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ips_are_unique_in_range_and_requested_ones_honoured() {
        let mut a = IpAllocator::new("10.96.0.0/28".parse().unwrap());
        a.reserve("10.96.0.1".parse().unwrap()).unwrap();
        assert_eq!(
            a.reserve("10.96.0.1".parse().unwrap()),
            Err(AllocError::IpAllocated)
        );
        assert!(matches!(
            a.reserve("10.96.0.0".parse().unwrap()),
            Err(AllocError::IpOutOfRange { .. })
        ));
        assert!(matches!(
            a.reserve("10.96.0.15".parse().unwrap()),
            Err(AllocError::IpOutOfRange { .. })
        ));
        let mut seen = BTreeSet::new();
        for _ in 0..13 {
            let ip = a.allocate().unwrap();
            assert!(seen.insert(ip));
            assert!(a.range().contains(&ip));
        }
        assert_eq!(a.allocate(), Err(AllocError::Full));
        a.release("10.96.0.7".parse().unwrap());
        assert_eq!(
            a.allocate().unwrap(),
            "10.96.0.7".parse::<IpAddr>().unwrap()
        );
    }

    #[test]
    fn v6_and_ports() {
        let mut a = IpAllocator::new("fd00:10:96::/112".parse().unwrap());
        let ip = a.allocate().unwrap();
        assert!(ip.is_ipv6());
        let mut p = PortAllocator::new(30000, 30002);
        p.reserve(30001).unwrap();
        assert_eq!(p.reserve(30001), Err(AllocError::PortAllocated));
        assert!(matches!(
            p.reserve(80),
            Err(AllocError::PortOutOfRange { .. })
        ));
        let x = p.allocate().unwrap();
        let y = p.allocate().unwrap();
        assert_ne!(x, y);
        assert_eq!(p.allocate(), Err(AllocError::Full));
    }
}
