//! Crafted Ethernet frames for the program tests.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub const GATEWAY_MAC: [u8; 6] = [0xee; 6];
pub const POD_A_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x0a, 0x01];
pub const POD_B_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x0b, 0x01];

const ETH_P_IP: u16 = 0x0800;
const ETH_P_ARP: u16 = 0x0806;
const ETH_P_IPV6: u16 = 0x86dd;

fn eth(dst: [u8; 6], src: [u8; 6], ethertype: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(1600);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

fn checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for chunk in bytes.chunks(2) {
        let word = u16::from_be_bytes([chunk[0], *chunk.get(1).unwrap_or(&0)]);
        sum += u32::from(word);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An IPv4 or IPv6 UDP datagram from `src` to `dst` whose IP packet is `ip_len`
/// bytes long, as a pod would send it to its gateway.
pub fn udp(src: IpAddr, dst: IpAddr, ip_len: usize) -> Vec<u8> {
    udp_from(POD_A_MAC, GATEWAY_MAC, src, dst, ip_len)
}

pub fn udp_from(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: IpAddr,
    dst: IpAddr,
    ip_len: usize,
) -> Vec<u8> {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => udp4(src_mac, dst_mac, s, d, ip_len),
        (IpAddr::V6(s), IpAddr::V6(d)) => udp6(src_mac, dst_mac, s, d, ip_len),
        _ => panic!("mixed families"),
    }
}

fn udp_header(payload_len: usize) -> Vec<u8> {
    let mut u = Vec::new();
    u.extend_from_slice(&40000u16.to_be_bytes());
    u.extend_from_slice(&5201u16.to_be_bytes());
    u.extend_from_slice(&((8 + payload_len) as u16).to_be_bytes());
    u.extend_from_slice(&0u16.to_be_bytes());
    u.extend((0..payload_len).map(|i| i as u8));
    u
}

fn udp4(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    ip_len: usize,
) -> Vec<u8> {
    assert!(ip_len >= 28);
    let mut f = eth(dst_mac, src_mac, ETH_P_IP);
    let mut ip = vec![0x45, 0];
    ip.extend_from_slice(&(ip_len as u16).to_be_bytes());
    ip.extend_from_slice(&[0x12, 0x34, 0x40, 0x00, 64, 17, 0, 0]); // DF set
    ip.extend_from_slice(&src.octets());
    ip.extend_from_slice(&dst.octets());
    let csum = checksum(&ip);
    ip[10..12].copy_from_slice(&csum.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&udp_header(ip_len - 28));
    f
}

fn ip6_header(src: Ipv6Addr, dst: Ipv6Addr, next: u8, payload_len: usize) -> Vec<u8> {
    let mut ip = vec![0x60, 0, 0, 0];
    ip.extend_from_slice(&(payload_len as u16).to_be_bytes());
    ip.push(next);
    ip.push(64);
    ip.extend_from_slice(&src.octets());
    ip.extend_from_slice(&dst.octets());
    ip
}

fn udp6(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: Ipv6Addr,
    dst: Ipv6Addr,
    ip_len: usize,
) -> Vec<u8> {
    assert!(ip_len >= 48);
    let mut f = eth(dst_mac, src_mac, ETH_P_IPV6);
    f.extend_from_slice(&ip6_header(src, dst, 17, ip_len - 40));
    f.extend_from_slice(&udp_header(ip_len - 48));
    f
}

/// A pod asking who has `target`.
pub fn arp_request(sender: Ipv4Addr, target: Ipv4Addr) -> Vec<u8> {
    let mut f = eth([0xff; 6], POD_A_MAC, ETH_P_ARP);
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&POD_A_MAC);
    f.extend_from_slice(&sender.octets());
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&target.octets());
    f
}

/// An ICMPv6 neighbour solicitation for `target` from `src` (link-local, or
/// unspecified for duplicate address detection).
pub fn neighbour_solicitation(src: Ipv6Addr, target: Ipv6Addr) -> Vec<u8> {
    let t = target.octets();
    let dst = Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(t[13]),
        u16::from_be_bytes([t[14], t[15]]),
    );
    let mut f = eth(
        [0x33, 0x33, 0xff, t[13], t[14], t[15]],
        POD_A_MAC,
        ETH_P_IPV6,
    );
    let mut icmp = vec![135, 0, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(&t);
    f.extend_from_slice(&ip6_header(src, dst, 58, icmp.len()));
    f.extend_from_slice(&icmp);
    f
}

/// A frame whose IP version nibble contradicts its ethertype. (Frames shorter than
/// their IP header cannot be crafted: BPF_PROG_TEST_RUN itself rejects them with
/// EINVAL, so the programs' truncation check is only reachable by real packets.)
pub fn wrong_ip_version(src: IpAddr, dst: IpAddr) -> Vec<u8> {
    let mut f = udp(src, dst, 60);
    f[14] = if src.is_ipv4() { 0x65 } else { 0x40 };
    f
}

/// An IPv4 header whose IHL is below the minimum of 5 words.
pub fn bad_ihl_ipv4(src: Ipv4Addr, dst: Ipv4Addr) -> Vec<u8> {
    let mut f = udp4(POD_A_MAC, GATEWAY_MAC, src, dst, 60);
    f[14] = 0x44;
    f
}
