//! Small address types the protocol carries as strings: MAC addresses and requested IPs
//! (`<ip>[/<prefix>]`, the CONVENTIONS.md form used by `CNI_ARGS` `IP` and runtimeConfig `ips`).

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// A 48-bit MAC address. Parses `aa:bb:cc:dd:ee:ff` or `aa-bb-cc-dd-ee-ff` (any hex case);
/// displays lower-case with colons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MacAddr(pub [u8; 6]);

/// Why an address string did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a valid {kind}")]
pub struct AddrParseError {
    text: String,
    kind: &'static str,
}

impl AddrParseError {
    fn new(text: &str, kind: &'static str) -> Self {
        Self {
            text: text.to_owned(),
            kind,
        }
    }
}

impl FromStr for MacAddr {
    type Err = AddrParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let error = || AddrParseError::new(text, "MAC address");
        let separator = if text.contains('-') { '-' } else { ':' };
        let mut octets = [0u8; 6];
        let mut parts = text.split(separator);
        for octet in &mut octets {
            let part = parts.next().ok_or_else(error)?;
            if part.len() != 2 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(error());
            }
            *octet = u8::from_str_radix(part, 16).map_err(|_| error())?;
        }
        if parts.next().is_some() {
            return Err(error());
        }
        Ok(MacAddr(octets))
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

/// An IP a runtime asks for: an address with an optional prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpRequest {
    /// The address.
    pub addr: IpAddr,
    /// The prefix length, when given (at most 32 for IPv4, 128 for IPv6).
    pub prefix_len: Option<u8>,
}

impl FromStr for IpRequest {
    type Err = AddrParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let error = || AddrParseError::new(text, "IP address with optional prefix");
        let (addr_text, prefix_text) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        let addr: IpAddr = addr_text.parse().map_err(|_| error())?;
        let max_prefix = if addr.is_ipv4() { 32 } else { 128 };
        let prefix_len = match prefix_text {
            None => None,
            Some(prefix) => {
                let digits_only = !prefix.is_empty() && prefix.bytes().all(|b| b.is_ascii_digit());
                let len: u8 = prefix.parse().map_err(|_| error())?;
                if !digits_only || len > max_prefix {
                    return Err(error());
                }
                Some(len)
            }
        };
        Ok(IpRequest { addr, prefix_len })
    }
}

impl fmt::Display for IpRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.prefix_len {
            Some(len) => write!(f, "{}/{len}", self.addr),
            None => write!(f, "{}", self.addr),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_parses_both_separators_and_displays_lowercase() {
        let mac: MacAddr = "02:AB:cd:00:11:ff".parse().unwrap();
        assert_eq!(mac.0, [0x02, 0xab, 0xcd, 0x00, 0x11, 0xff]);
        assert_eq!(mac.to_string(), "02:ab:cd:00:11:ff");
        assert_eq!("02-ab-cd-00-11-ff".parse::<MacAddr>().unwrap(), mac);
    }

    #[test]
    fn mac_rejects_malformed() {
        for bad in [
            "",
            "02:ab:cd:00:11",
            "02:ab:cd:00:11:ff:00",
            "2:ab:cd:00:11:ff",
            "zz:ab:cd:00:11:ff",
            "02:ab-cd:00:11:ff",
            "+2:ab:cd:00:11:ff",
            "02abcd0011ff",
        ] {
            assert!(bad.parse::<MacAddr>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn ip_request_with_and_without_prefix() {
        let plain: IpRequest = "10.93.0.77".parse().unwrap();
        assert_eq!(plain.prefix_len, None);
        assert_eq!(plain.to_string(), "10.93.0.77");
        let with_prefix: IpRequest = "2001:db8::5/64".parse().unwrap();
        assert_eq!(with_prefix.prefix_len, Some(64));
        assert_eq!(with_prefix.to_string(), "2001:db8::5/64");
        for bad in [
            "",
            "10.0.0.1/33",
            "2001:db8::1/129",
            "10.0.0.1/",
            "10.0.0.1/+8",
            "10.0.0.256",
        ] {
            assert!(bad.parse::<IpRequest>().is_err(), "{bad:?}");
        }
    }
}
