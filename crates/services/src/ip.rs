//! Address parsing as the Kubernetes API server accepted it for years.
//!
//! Before Go 1.17, `net.ParseIP` read IPv4 octets with leading zeros as decimal, so objects
//! stored in etcd can still hold `172.30.0.041` or `203.0.113.000/025`. kube-proxy parses
//! them "sloppily" (decimal, never octal) and so do we, then always works with the
//! normalised value. `std`'s parser refuses leading zeros, which would make such a Service
//! vanish from the datapath.

use std::net::{IpAddr, Ipv4Addr};

use ipnet::IpNet;

use crate::ids::Family;

/// Parses an address, accepting IPv4 octets with leading zeros (read as decimal).
pub fn parse_ip(text: &str) -> Option<IpAddr> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(ip);
    }
    parse_ipv4_sloppy(text).map(IpAddr::V4)
}

fn parse_ipv4_sloppy(text: &str) -> Option<Ipv4Addr> {
    let mut octets = [0u8; 4];
    let mut parts = text.split('.');
    for octet in &mut octets {
        let part = parts.next()?;
        // Go's parser stops at 0xFFFFFF; any digit count is fine while the value fits.
        if part.is_empty() || part.len() > 8 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *octet = part.parse::<u32>().ok()?.try_into().ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(Ipv4Addr::from(octets))
}

/// Parses a CIDR the way kube-proxy does: surrounding whitespace tolerated (API validation
/// of `loadBalancerSourceRanges` lets it through), leading zeros in IPv4 octets and in the
/// prefix length read as decimal, host bits cleared.
pub fn parse_cidr(text: &str) -> Option<IpNet> {
    let (addr, prefix) = text.trim().split_once('/')?;
    let addr = parse_ip(addr)?;
    if prefix.is_empty() || prefix.len() > 3 || !prefix.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let prefix: u8 = prefix.parse().ok()?;
    IpNet::new(addr, prefix).ok().map(|net| net.trunc())
}

pub fn family_of(ip: &IpAddr) -> Family {
    match ip {
        IpAddr::V4(_) => Family::V4,
        IpAddr::V6(_) => Family::V6,
    }
}

pub fn net_family(net: &IpNet) -> Family {
    match net {
        IpNet::V4(_) => Family::V4,
        IpNet::V6(_) => Family::V6,
    }
}

/// The single-address network of `ip` (`/32` or `/128`).
pub fn host_net(ip: IpAddr) -> IpNet {
    IpNet::from(ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leading_zeros_are_decimal() {
        assert_eq!(
            parse_ip("172.30.0.041"),
            Some("172.30.0.41".parse().unwrap())
        );
        assert_eq!(parse_ip("010.0.0.8"), Some("10.0.0.8".parse().unwrap()));
        assert_eq!(parse_ip("1.2.3.004"), Some("1.2.3.4".parse().unwrap()));
        assert_eq!(parse_ip("fd00::1"), Some("fd00::1".parse().unwrap()));
    }

    #[test]
    fn garbage_is_refused() {
        for bad in [
            "",
            "1.2.3",
            "1.2.3.4.5",
            "1.2.3.256",
            "1.2.3.-1",
            "a.b.c.d",
            "1..2.3",
            " 1.2.3.4",
        ] {
            assert_eq!(parse_ip(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn cidrs_are_trimmed_and_normalised() {
        assert_eq!(
            parse_cidr(" 203.0.113.0/25"),
            Some("203.0.113.0/25".parse().unwrap())
        );
        assert_eq!(
            parse_cidr("203.0.113.000/025"),
            Some("203.0.113.0/25".parse().unwrap())
        );
        assert_eq!(
            parse_cidr("10.1.2.3/24"),
            Some("10.1.2.0/24".parse().unwrap())
        );
        assert_eq!(
            parse_cidr("2001:db8::1/64"),
            Some("2001:db8::/64".parse().unwrap())
        );
        for bad in [
            "10.0.0.0",
            "10.0.0.0/33",
            "10.0.0.0/",
            "/8",
            "::/129",
            "10.0.0.0/-1",
        ] {
            assert_eq!(parse_cidr(bad), None, "{bad:?}");
        }
    }
}
