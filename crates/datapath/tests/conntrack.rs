//! The connection-table engine on its own (bpf/include/weft_ct.h, through the test-only
//! `ct_probe` program, which tracks every flow without rewriting it): ICMP echo tracked
//! by its id, UDP and TCP by ports, both directions found, both entries kept in step.

mod common;

use aya::maps::{HashMap, MapData};
use common::harness::Harness;
use common::packet::{Packet, ACK, L4, SYN};
use std::net::IpAddr;
use weft_datapath::layout::{
    CtEntry, CtKey, CT_ESTABLISHED, CT_F_REPLY, CT_F_SEEN_REPLY, CT_OPENING,
};

const CREATED: u32 = 10;
const ORIGINAL: u32 = 11;
const REPLY: u32 = 12;
const UNTRACKABLE: u32 = 2;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn entries(h: &mut Harness) -> Vec<(CtKey, CtEntry)> {
    let map: HashMap<&MapData, CtKey, CtEntry> =
        HashMap::try_from(h.map("weft_ct")).expect("ct map");
    let mut out: Vec<_> = map.iter().map(|r| r.expect("entry")).collect();
    out.sort_by_key(|(k, _)| *k);
    out
}

/// bpf_ktime_get_ns()'s clock.
fn monotonic_ns() -> u64 {
    // SAFETY: clock_gettime writes into the timespec we own.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

const PAIRS: [(&str, &str); 2] = [
    ("10.244.1.10", "10.244.1.11"),
    ("fd00:10:244:1::10", "fd00:10:244:1::11"),
];

#[test]
fn icmp_echo_is_tracked_by_its_id_both_ways() {
    for (a, b) in PAIRS {
        let mut h = Harness::load();
        let v6 = ip(a).is_ipv6();
        let request = |id| Packet::new(ip(a), ip(b), L4::echo(v6, false, id)).bytes();
        let reply = |id| Packet::new(ip(b), ip(a), L4::echo(v6, true, id)).bytes();
        assert_eq!(h.run("ct_probe", &request(7)), CREATED);
        assert_eq!(h.run("ct_probe", &request(7)), ORIGINAL);
        assert_eq!(h.run("ct_probe", &reply(7)), REPLY);
        // Another id is another flow.
        assert_eq!(h.run("ct_probe", &request(8)), CREATED);
        let all = entries(&mut h);
        assert_eq!(all.len(), 4, "{all:?}");
        let now = monotonic_ns();
        for (k, e) in &all {
            let left = e.expires.saturating_sub(now);
            assert!(
                left <= 30_000_000_000 && left > 25_000_000_000,
                "ICMP echo lives 30 s: {left} ns left"
            );
            let id = u16::from_be_bytes(k.sport);
            assert_eq!(k.sport, k.dport, "an echo id stands for both ports");
            let want = if id == 7 { CT_ESTABLISHED } else { CT_OPENING };
            assert_eq!(e.state, want, "{k:?}");
            assert_eq!(e.flags & CT_F_SEEN_REPLY != 0, id == 7);
        }
        assert_eq!(
            all.iter()
                .filter(|(_, e)| e.flags & CT_F_REPLY != 0)
                .count(),
            2
        );
    }
}

#[test]
fn udp_and_tcp_are_tracked_by_ports_and_fragments_or_portless_packets_are_not() {
    for (a, b) in PAIRS {
        let mut h = Harness::load();
        let udp =
            |s: &str, d: &str, sp, dp| Packet::new(ip(s), ip(d), L4::udp(sp, dp, b"x")).bytes();
        assert_eq!(h.run("ct_probe", &udp(a, b, 1000, 53)), CREATED);
        assert_eq!(h.run("ct_probe", &udp(b, a, 53, 1000)), REPLY);
        assert_eq!(h.run("ct_probe", &udp(a, b, 1001, 53)), CREATED);
        let tcp =
            |s: &str, d: &str, sp, dp, f| Packet::new(ip(s), ip(d), L4::tcp(sp, dp, f)).bytes();
        assert_eq!(h.run("ct_probe", &tcp(a, b, 2000, 80, SYN)), CREATED);
        assert_eq!(h.run("ct_probe", &tcp(b, a, 80, 2000, SYN | ACK)), REPLY);
        assert_eq!(entries(&mut h).len(), 6);
        let mut later = Packet::new(ip(a), ip(b), L4::udp(1000, 53, &[0; 64]));
        if ip(a).is_ipv4() {
            later.fragment = Some((100, false));
        } else {
            later.ext = vec![common::packet::Ext::Fragment {
                offset: 100,
                more: false,
            }];
        }
        assert_eq!(h.run("ct_probe", &later.bytes()), UNTRACKABLE);
        let gre = Packet::new(
            ip(a),
            ip(b),
            L4::Raw {
                proto: 47,
                bytes: vec![0; 8],
            },
        );
        assert_eq!(h.run("ct_probe", &gre.bytes()), UNTRACKABLE);
    }
}
