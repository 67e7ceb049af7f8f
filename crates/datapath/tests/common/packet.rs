//! Building frames with every header a test needs (IPv4 options, IPv6 extension
//! headers, fragments, TCP/UDP/SCTP/ICMP with correct checksums), and reading frames back
//! (including the header embedded in an ICMP error) with their checksums verified.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub const ETH_P_IP: u16 = 0x0800;
pub const ETH_P_IPV6: u16 = 0x86dd;
pub const TCP: u8 = 6;
pub const UDP: u8 = 17;
pub const SCTP: u8 = 132;
pub const ICMP: u8 = 1;
pub const ICMPV6: u8 = 58;

pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const PSH: u8 = 0x08;
pub const ACK: u8 = 0x10;

/// The transport part of a packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum L4 {
    Tcp {
        sport: u16,
        dport: u16,
        seq: u32,
        ack: u32,
        flags: u8,
        payload: Vec<u8>,
    },
    Udp {
        sport: u16,
        dport: u16,
        payload: Vec<u8>,
    },
    /// ICMP or ICMPv6 (by the packet's family): type, code, the 4 bytes after the
    /// checksum (echo: id and sequence), then the payload (an error: the embedded packet).
    Icmp {
        kind: u8,
        code: u8,
        rest: [u8; 4],
        payload: Vec<u8>,
    },
    Sctp {
        sport: u16,
        dport: u16,
    },
    /// Any protocol, raw bytes.
    Raw {
        proto: u8,
        bytes: Vec<u8>,
    },
}

impl L4 {
    pub fn tcp(sport: u16, dport: u16, flags: u8) -> L4 {
        L4::Tcp {
            sport,
            dport,
            seq: 1000,
            ack: if flags & ACK != 0 { 2000 } else { 0 },
            flags,
            payload: Vec::new(),
        }
    }

    pub fn udp(sport: u16, dport: u16, payload: &[u8]) -> L4 {
        L4::Udp {
            sport,
            dport,
            payload: payload.to_vec(),
        }
    }

    /// An echo request (`reply` false) or reply with `id`, for the family of the packet.
    pub fn echo(v6: bool, reply: bool, id: u16) -> L4 {
        let kind = match (v6, reply) {
            (false, false) => 8,
            (false, true) => 0,
            (true, false) => 128,
            (true, true) => 129,
        };
        let mut rest = [0u8; 4];
        rest[..2].copy_from_slice(&id.to_be_bytes());
        rest[2..].copy_from_slice(&1u16.to_be_bytes());
        L4::Icmp {
            kind,
            code: 0,
            rest,
            payload: b"ping".to_vec(),
        }
    }
}

/// An IPv6 extension header before the transport header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ext {
    HopByHop,
    DestOpts,
    /// A fragment header: offset in 8-byte units, more-fragments flag.
    Fragment {
        offset: u16,
        more: bool,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src: IpAddr,
    pub dst: IpAddr,
    pub ttl: u8,
    pub l4: L4,
    /// IPv4 options (padded to 4 bytes).
    pub options: Vec<u8>,
    /// IPv4 fragment: offset in 8-byte units, more-fragments flag.
    pub fragment: Option<(u16, bool)>,
    pub ext: Vec<Ext>,
}

pub const POD_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x0a, 0x01];
pub const GATEWAY_MAC: [u8; 6] = [0xee; 6];

impl Packet {
    pub fn new(src: IpAddr, dst: IpAddr, l4: L4) -> Packet {
        assert_eq!(src.is_ipv4(), dst.is_ipv4(), "mixed families");
        Packet {
            src_mac: POD_MAC,
            dst_mac: GATEWAY_MAC,
            src,
            dst,
            ttl: 64,
            l4,
            options: Vec::new(),
            fragment: None,
            ext: Vec::new(),
        }
    }

    pub fn macs(mut self, src: [u8; 6], dst: [u8; 6]) -> Packet {
        self.src_mac = src;
        self.dst_mac = dst;
        self
    }

    fn proto(&self) -> u8 {
        match &self.l4 {
            L4::Tcp { .. } => TCP,
            L4::Udp { .. } => UDP,
            L4::Icmp { .. } => {
                if self.src.is_ipv4() {
                    ICMP
                } else {
                    ICMPV6
                }
            }
            L4::Sctp { .. } => SCTP,
            L4::Raw { proto, .. } => *proto,
        }
    }

    /// The transport header and payload, checksummed.
    fn transport(&self) -> Vec<u8> {
        let pseudo = |len: usize, proto: u8| pseudo_header(self.src, self.dst, proto, len);
        match &self.l4 {
            L4::Tcp {
                sport,
                dport,
                seq,
                ack,
                flags,
                payload,
            } => {
                let mut t = Vec::new();
                t.extend_from_slice(&sport.to_be_bytes());
                t.extend_from_slice(&dport.to_be_bytes());
                t.extend_from_slice(&seq.to_be_bytes());
                t.extend_from_slice(&ack.to_be_bytes());
                t.push(5 << 4);
                t.push(*flags);
                t.extend_from_slice(&64240u16.to_be_bytes());
                t.extend_from_slice(&[0, 0, 0, 0]);
                t.extend_from_slice(payload);
                let sum = checksum(&[pseudo(t.len(), TCP), t.clone()].concat());
                t[16..18].copy_from_slice(&sum.to_be_bytes());
                t
            }
            L4::Udp {
                sport,
                dport,
                payload,
            } => {
                let mut t = Vec::new();
                t.extend_from_slice(&sport.to_be_bytes());
                t.extend_from_slice(&dport.to_be_bytes());
                t.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
                t.extend_from_slice(&[0, 0]);
                t.extend_from_slice(payload);
                let mut sum = checksum(&[pseudo(t.len(), UDP), t.clone()].concat());
                if sum == 0 {
                    sum = 0xffff;
                }
                t[6..8].copy_from_slice(&sum.to_be_bytes());
                t
            }
            L4::Icmp {
                kind,
                code,
                rest,
                payload,
            } => {
                let mut t = vec![*kind, *code, 0, 0];
                t.extend_from_slice(rest);
                t.extend_from_slice(payload);
                let sum = if self.src.is_ipv4() {
                    checksum(&t)
                } else {
                    checksum(&[pseudo(t.len(), ICMPV6), t.clone()].concat())
                };
                t[2..4].copy_from_slice(&sum.to_be_bytes());
                t
            }
            L4::Sctp { sport, dport } => {
                let mut t = Vec::new();
                t.extend_from_slice(&sport.to_be_bytes());
                t.extend_from_slice(&dport.to_be_bytes());
                t.extend_from_slice(&[0; 8]); // verification tag, CRC32c (not checked)
                t
            }
            L4::Raw { bytes, .. } => bytes.clone(),
        }
    }

    /// The IP packet (no Ethernet header).
    pub fn ip_bytes(&self) -> Vec<u8> {
        let transport = self.transport();
        match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let mut options = self.options.clone();
                while !options.len().is_multiple_of(4) {
                    options.push(0);
                }
                let ihl = 5 + options.len() / 4;
                let total = ihl * 4 + transport.len();
                let mut ip = vec![0x40 | ihl as u8, 0];
                ip.extend_from_slice(&(total as u16).to_be_bytes());
                ip.extend_from_slice(&0x1234u16.to_be_bytes());
                let frag = match self.fragment {
                    Some((offset, more)) => offset | if more { 0x2000 } else { 0 },
                    None => 0x4000, // DF
                };
                ip.extend_from_slice(&frag.to_be_bytes());
                ip.extend_from_slice(&[self.ttl, self.proto(), 0, 0]);
                ip.extend_from_slice(&s.octets());
                ip.extend_from_slice(&d.octets());
                ip.extend_from_slice(&options);
                let sum = checksum(&ip);
                ip[10..12].copy_from_slice(&sum.to_be_bytes());
                ip.extend_from_slice(&transport);
                ip
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                let mut exts = Vec::new();
                let codes: Vec<u8> = self
                    .ext
                    .iter()
                    .map(|e| match e {
                        Ext::HopByHop => 0,
                        Ext::DestOpts => 60,
                        Ext::Fragment { .. } => 44,
                    })
                    .chain(std::iter::once(self.proto()))
                    .collect();
                for (i, e) in self.ext.iter().enumerate() {
                    let next = codes[i + 1];
                    match e {
                        Ext::HopByHop | Ext::DestOpts => {
                            // 8 bytes: next, length 0, a PadN option of 4 bytes.
                            exts.extend_from_slice(&[next, 0, 1, 4, 0, 0, 0, 0]);
                        }
                        Ext::Fragment { offset, more } => {
                            let field = (offset << 3) | u16::from(*more);
                            exts.extend_from_slice(&[next, 0]);
                            exts.extend_from_slice(&field.to_be_bytes());
                            exts.extend_from_slice(&0xabcdu32.to_be_bytes());
                        }
                    }
                }
                let mut ip = vec![0x60, 0, 0, 0];
                ip.extend_from_slice(&((exts.len() + transport.len()) as u16).to_be_bytes());
                ip.push(codes[0]);
                ip.push(self.ttl);
                ip.extend_from_slice(&s.octets());
                ip.extend_from_slice(&d.octets());
                ip.extend_from_slice(&exts);
                ip.extend_from_slice(&transport);
                ip
            }
            _ => panic!("mixed families"),
        }
    }

    /// The frame.
    pub fn bytes(&self) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(&self.dst_mac);
        f.extend_from_slice(&self.src_mac);
        let ethertype = if self.src.is_ipv4() {
            ETH_P_IP
        } else {
            ETH_P_IPV6
        };
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(&self.ip_bytes());
        f
    }
}

/// An ICMP(v6) error from `src` to `dst` quoting `quoted` (an IP packet, cut as a
/// router would: 8 transport bytes for IPv4, whole for IPv6).
pub fn icmp_error(src: IpAddr, dst: IpAddr, kind: u8, code: u8, quoted: &Packet) -> Packet {
    let mut inner = quoted.ip_bytes();
    if src.is_ipv4() {
        let ihl = usize::from(inner[0] & 0x0f) * 4;
        inner.truncate(ihl + 8);
    }
    Packet::new(
        src,
        dst,
        L4::Icmp {
            kind,
            code,
            rest: [0; 4],
            payload: inner,
        },
    )
}

fn pseudo_header(src: IpAddr, dst: IpAddr, proto: u8, len: usize) -> Vec<u8> {
    let mut p = Vec::new();
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            p.extend_from_slice(&s.octets());
            p.extend_from_slice(&d.octets());
            p.extend_from_slice(&[0, proto]);
            p.extend_from_slice(&(len as u16).to_be_bytes());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            p.extend_from_slice(&s.octets());
            p.extend_from_slice(&d.octets());
            p.extend_from_slice(&(len as u32).to_be_bytes());
            p.extend_from_slice(&[0, 0, 0, proto]);
        }
        _ => panic!("mixed families"),
    }
    p
}

pub fn checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for chunk in bytes.chunks(2) {
        sum += u32::from(u16::from_be_bytes([chunk[0], *chunk.get(1).unwrap_or(&0)]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// A frame read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
    pub src: IpAddr,
    pub dst: IpAddr,
    pub ttl: u8,
    pub proto: u8,
    /// Ports; for ICMP echo the id in both.
    pub sport: u16,
    pub dport: u16,
    pub tcp_flags: u8,
    pub seq: u32,
    pub ack: u32,
    pub icmp: Option<(u8, u8)>,
    /// The transport payload (an ICMP error: the embedded packet).
    pub payload: Vec<u8>,
    /// The IP header checksum (IPv4) and the transport checksum verify. An ICMP error's
    /// embedded packet is checked as far as it is there.
    pub checksums_ok: bool,
    /// An ICMP error's embedded packet.
    pub inner: Option<Box<Parsed>>,
}

/// Reads a frame (Ethernet first). Panics on anything that is not a plain IP packet
/// with a transport header, which is all the programs ever emit.
pub fn parse(frame: &[u8]) -> Parsed {
    let mut dst_mac = [0u8; 6];
    let mut src_mac = [0u8; 6];
    dst_mac.copy_from_slice(&frame[..6]);
    src_mac.copy_from_slice(&frame[6..12]);
    let mut p = parse_ip(&frame[14..], false);
    p.dst_mac = dst_mac;
    p.src_mac = src_mac;
    p
}

/// Reads an IP packet; `quoted` (inside an ICMP error) tolerates a cut-off tail.
pub fn parse_ip(ip: &[u8], quoted: bool) -> Parsed {
    let v4 = ip[0] >> 4 == 4;
    let declared = if v4 {
        usize::from(u16::from_be_bytes([ip[2], ip[3]]))
    } else {
        40 + usize::from(u16::from_be_bytes([ip[4], ip[5]]))
    };
    // A quoted packet may be cut short; its transport checksum is checked when it is not.
    let complete = ip.len() >= declared;
    let (src, dst, ttl, proto, l4, mut ok) = if v4 {
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        let s: [u8; 4] = ip[12..16].try_into().unwrap();
        let d: [u8; 4] = ip[16..20].try_into().unwrap();
        let end = if quoted { ip.len() } else { declared };
        (
            IpAddr::V4(Ipv4Addr::from(s)),
            IpAddr::V4(Ipv4Addr::from(d)),
            ip[8],
            ip[9],
            ip[ihl..end.min(ip.len())].to_vec(),
            checksum(&ip[..ihl]) == 0,
        )
    } else {
        let s: [u8; 16] = ip[8..24].try_into().unwrap();
        let d: [u8; 16] = ip[24..40].try_into().unwrap();
        let end = if quoted { ip.len() } else { declared };
        (
            IpAddr::V6(Ipv6Addr::from(s)),
            IpAddr::V6(Ipv6Addr::from(d)),
            ip[7],
            ip[6],
            ip[40..end.min(ip.len())].to_vec(),
            true,
        )
    };
    let full = |l4: &[u8]| !quoted || l4.len() >= 8;
    let l4_sum_ok = |l4: &[u8], proto: u8| -> bool {
        checksum(&[pseudo_header(src, dst, proto, l4.len()), l4.to_vec()].concat()) == 0
    };
    let mut out = Parsed {
        dst_mac: [0; 6],
        src_mac: [0; 6],
        src,
        dst,
        ttl,
        proto,
        sport: 0,
        dport: 0,
        tcp_flags: 0,
        seq: 0,
        ack: 0,
        icmp: None,
        payload: Vec::new(),
        checksums_ok: false,
        inner: None,
    };
    let port = |b: &[u8], at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
    match proto {
        TCP | UDP | SCTP if full(&l4) => {
            out.sport = port(&l4, 0);
            out.dport = port(&l4, 2);
            if proto == TCP && l4.len() >= 20 {
                out.seq = u32::from_be_bytes(l4[4..8].try_into().unwrap());
                out.ack = u32::from_be_bytes(l4[8..12].try_into().unwrap());
                out.tcp_flags = l4[13];
                let off = usize::from(l4[12] >> 4) * 4;
                out.payload = l4[off.min(l4.len())..].to_vec();
            } else if proto == UDP {
                out.payload = l4[8.min(l4.len())..].to_vec();
            }
            if complete {
                ok &= match proto {
                    UDP if port(&l4, 6) == 0 && v4 => true,
                    TCP | UDP => l4_sum_ok(&l4, proto),
                    _ => true,
                };
            }
        }
        ICMP | ICMPV6 => {
            out.icmp = Some((l4[0], l4[1]));
            let echo = matches!(l4[0], 0 | 8 | 128 | 129);
            if echo {
                out.sport = port(&l4, 4);
                out.dport = out.sport;
            }
            out.payload = l4[8..].to_vec();
            if !quoted {
                ok &= if v4 {
                    checksum(&l4) == 0
                } else {
                    l4_sum_ok(&l4, ICMPV6)
                };
            }
            let error = if v4 {
                matches!(l4[0], 3 | 11 | 12)
            } else {
                (1..=4).contains(&l4[0])
            };
            if error && !quoted {
                let inner = parse_ip(&l4[8..], true);
                ok &= inner.checksums_ok;
                out.inner = Some(Box::new(inner));
            }
        }
        _ => out.payload = l4.clone(),
    }
    out.checksums_ok = ok;
    out
}
