//! `weft_parse()` (bpf/include/weft_parse.h) on crafted frames, through the test-only
//! `parse_probe` program: the 5-tuple of TCP, UDP, SCTP and ICMP echo in both families,
//! IPv4 options, IPv6 extension headers, fragments, ICMP errors, and what counts as
//! malformed.

mod common;

use common::harness::Harness;
use common::packet::{icmp_error, Ext, Packet, ACK, L4, SYN, UDP};
use std::net::IpAddr;

const PARSE_IP: u32 = 0;
const PARSE_PASS: u32 = 1;
const PARSE_MALFORMED: u32 = 2;

const F_L4: u16 = 1 << 0;
const F_FRAG: u16 = 1 << 1;
const F_FRAG_LATER: u16 = 1 << 2;
const F_IP_OPTIONS: u16 = 1 << 3;
const F_ICMP_ERROR: u16 = 1 << 4;
const F_ICMP_ECHO: u16 = 1 << 5;

/// `struct weft_test_parse` of bpf/tests/harness.c.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    result: u32,
    family: u32,
    src: [u8; 16],
    dst: [u8; 16],
    sport: u16,
    dport: u16,
    proto: u8,
    tcp_flags: u8,
    icmp_type: u8,
    icmp_code: u8,
    flags: u16,
    l4_off: u16,
}

fn parse(h: &mut Harness, frame: &[u8]) -> Seen {
    assert_eq!(h.run("parse_probe", frame), 0);
    let b: [u8; 52] = h.output("weft_test_parse");
    let u16_be = |at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
    let u16_ne = |at: usize| u16::from_ne_bytes([b[at], b[at + 1]]);
    let u32_ne = |at: usize| u32::from_ne_bytes(b[at..at + 4].try_into().unwrap());
    Seen {
        result: u32_ne(0),
        family: u32_ne(4),
        src: b[8..24].try_into().unwrap(),
        dst: b[24..40].try_into().unwrap(),
        sport: u16_be(40),
        dport: u16_be(42),
        proto: b[44],
        tcp_flags: b[45],
        icmp_type: b[46],
        icmp_code: b[47],
        flags: u16_ne(48),
        l4_off: u16_ne(50),
    }
}

fn addr_bytes(ip: IpAddr) -> [u8; 16] {
    let mut out = [0u8; 16];
    match ip {
        IpAddr::V4(v4) => out[..4].copy_from_slice(&v4.octets()),
        IpAddr::V6(v6) => out = v6.octets(),
    }
    out
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

const PAIRS: [(&str, &str); 2] = [
    ("10.244.1.10", "10.96.0.10"),
    ("fd00:10:244:1::10", "fd00:10:96::10"),
];

fn l4_start(src: IpAddr) -> u16 {
    if src.is_ipv4() {
        34
    } else {
        54
    }
}

#[test]
fn tcp_udp_and_sctp_yield_the_full_five_tuple() {
    let mut h = Harness::load();
    for (s, d) in PAIRS {
        let (src, dst) = (ip(s), ip(d));
        for (l4, proto) in [
            (L4::tcp(40000, 80, SYN | ACK), 6),
            (L4::udp(40001, 53, b"q"), 17),
            (
                L4::Sctp {
                    sport: 40002,
                    dport: 9,
                },
                132,
            ),
        ] {
            let (sport, dport) = match &l4 {
                L4::Tcp { sport, dport, .. } | L4::Udp { sport, dport, .. } => (*sport, *dport),
                L4::Sctp { sport, dport } => (*sport, *dport),
                _ => unreachable!(),
            };
            let seen = parse(&mut h, &Packet::new(src, dst, l4).bytes());
            assert_eq!(
                seen,
                Seen {
                    result: PARSE_IP,
                    family: if src.is_ipv4() { 4 } else { 6 },
                    src: addr_bytes(src),
                    dst: addr_bytes(dst),
                    sport,
                    dport,
                    proto,
                    tcp_flags: if proto == 6 { SYN | ACK } else { 0 },
                    icmp_type: 0,
                    icmp_code: 0,
                    flags: F_L4,
                    l4_off: l4_start(src),
                },
                "{s} -> {d} proto {proto}"
            );
        }
    }
}

#[test]
fn icmp_echo_yields_its_id_as_both_ports() {
    let mut h = Harness::load();
    for (s, d) in PAIRS {
        let (src, dst) = (ip(s), ip(d));
        for reply in [false, true] {
            let seen = parse(
                &mut h,
                &Packet::new(src, dst, L4::echo(src.is_ipv6(), reply, 0x4242)).bytes(),
            );
            assert_eq!(seen.result, PARSE_IP);
            assert_eq!((seen.sport, seen.dport), (0x4242, 0x4242), "{s}");
            assert_eq!(seen.flags, F_L4 | F_ICMP_ECHO);
            let want = match (src.is_ipv6(), reply) {
                (false, false) => 8,
                (false, true) => 0,
                (true, false) => 128,
                (true, true) => 129,
            };
            assert_eq!(seen.icmp_type, want);
        }
    }
}

#[test]
fn icmp_errors_are_flagged_and_carry_no_ports() {
    let mut h = Harness::load();
    for (s, d) in PAIRS {
        let (src, dst) = (ip(s), ip(d));
        let quoted = Packet::new(dst, src, L4::udp(53, 40001, b"answer"));
        let (kind, code) = if src.is_ipv4() { (3, 3) } else { (1, 4) };
        let seen = parse(&mut h, &icmp_error(src, dst, kind, code, &quoted).bytes());
        assert_eq!(seen.result, PARSE_IP);
        assert_eq!(seen.flags, F_ICMP_ERROR, "{s}");
        assert_eq!((seen.icmp_type, seen.icmp_code), (kind, code));
        assert_eq!((seen.sport, seen.dport), (0, 0));
    }
}

#[test]
fn ipv4_options_are_skipped() {
    let mut h = Harness::load();
    let mut p = Packet::new(ip(PAIRS[0].0), ip(PAIRS[0].1), L4::tcp(1234, 443, SYN));
    p.options = vec![1, 1, 1, 0]; // NOP NOP NOP EOL
    let seen = parse(&mut h, &p.bytes());
    assert_eq!(seen.result, PARSE_IP);
    assert_eq!((seen.sport, seen.dport, seen.proto), (1234, 443, 6));
    assert_eq!(seen.flags, F_L4 | F_IP_OPTIONS);
    assert_eq!(seen.l4_off, 14 + 24);
}

#[test]
fn ipv6_extension_headers_are_skipped() {
    let mut h = Harness::load();
    let mut p = Packet::new(ip(PAIRS[1].0), ip(PAIRS[1].1), L4::udp(5353, 53, b"x"));
    p.ext = vec![Ext::HopByHop, Ext::DestOpts];
    let seen = parse(&mut h, &p.bytes());
    assert_eq!(seen.result, PARSE_IP);
    assert_eq!((seen.sport, seen.dport, seen.proto), (5353, 53, UDP));
    assert_eq!(seen.flags, F_L4 | F_IP_OPTIONS);
    assert_eq!(seen.l4_off, 54 + 16);
}

#[test]
fn first_fragments_have_ports_and_later_ones_are_flagged_without() {
    let mut h = Harness::load();
    for (s, d) in PAIRS {
        let (src, dst) = (ip(s), ip(d));
        for (offset, more, want) in [
            (0u16, true, F_FRAG | F_L4),
            (185, true, F_FRAG | F_FRAG_LATER),
            (370, false, F_FRAG | F_FRAG_LATER),
        ] {
            let mut p = Packet::new(src, dst, L4::udp(40000, 53, &[7; 64]));
            if src.is_ipv4() {
                p.fragment = Some((offset, more));
            } else {
                p.ext = vec![Ext::Fragment { offset, more }];
            }
            let seen = parse(&mut h, &p.bytes());
            assert_eq!(seen.result, PARSE_IP, "{s} offset {offset}");
            let want = if src.is_ipv6() {
                want | F_IP_OPTIONS
            } else {
                want
            };
            assert_eq!(seen.flags, want, "{s} offset {offset}");
            assert_eq!(seen.proto, UDP);
            let ports = if offset == 0 { (40000, 53) } else { (0, 0) };
            assert_eq!((seen.sport, seen.dport), ports, "{s} offset {offset}");
        }
    }
}

#[test]
fn protocols_without_ports_yield_addresses_only() {
    let mut h = Harness::load();
    for (s, d) in PAIRS {
        let p = Packet::new(
            ip(s),
            ip(d),
            L4::Raw {
                proto: 47, // GRE
                bytes: vec![0; 8],
            },
        );
        let seen = parse(&mut h, &p.bytes());
        assert_eq!(seen.result, PARSE_IP);
        assert_eq!((seen.proto, seen.flags), (47, 0));
        assert_eq!(seen.dst, addr_bytes(ip(d)));
    }
}

#[test]
fn truncated_transport_headers_and_bad_lengths_are_malformed() {
    let mut h = Harness::load();
    for (s, d) in PAIRS {
        // A TCP header cut to 10 bytes (the IP length says so too).
        let p = Packet::new(
            ip(s),
            ip(d),
            L4::Raw {
                proto: 6,
                bytes: vec![0; 10],
            },
        );
        assert_eq!(parse(&mut h, &p.bytes()).result, PARSE_MALFORMED, "{s}");
        // A TCP data offset below 5 words.
        let mut frame = Packet::new(ip(s), ip(d), L4::tcp(1, 2, SYN)).bytes();
        let off = usize::from(l4_start(ip(s))) + 12;
        frame[off] = 4 << 4;
        assert_eq!(parse(&mut h, &frame).result, PARSE_MALFORMED, "{s}");
    }
    // An IPv4 total length shorter than its header.
    let mut frame = Packet::new(ip(PAIRS[0].0), ip(PAIRS[0].1), L4::udp(1, 2, b"")).bytes();
    frame[16..18].copy_from_slice(&19u16.to_be_bytes());
    assert_eq!(parse(&mut h, &frame).result, PARSE_MALFORMED);
}

#[test]
fn link_scoped_ipv6_sources_and_non_ip_frames_pass() {
    let mut h = Harness::load();
    let p = Packet::new(ip("fe80::2"), ip("fe80::1"), L4::echo(true, false, 1));
    assert_eq!(parse(&mut h, &p.bytes()).result, PARSE_PASS);
    let arp = common::frames::arp_request(
        "10.244.1.10".parse().unwrap(),
        "169.254.1.1".parse().unwrap(),
    );
    assert_eq!(parse(&mut h, &arp).result, PARSE_PASS);
}
