//! `from_overlay` on crafted (already decapsulated) frames, every path, IPv4 and IPv6.

mod common;

use common::frames::{self, udp_from};
use common::scenario::{ip, node, Addrs, LOCAL_VTEP_MAC, REMOTE_VTEP_MAC, V4, V6};
use common::{expect, PinRoot, TC_ACT_OK, TC_ACT_REDIRECT, TC_ACT_SHOT};
use weft_datapath::{Counter, Program};

const FROM_OVERLAY: Program = Program::FromOverlay;

/// What the remote node's from_pod put on the wire: inner MACs are the VTEPs'.
fn overlay_frame(src: &str, dst: &str) -> Vec<u8> {
    udp_from(REMOTE_VTEP_MAC, LOCAL_VTEP_MAC, ip(src), ip(dst), 200)
}

#[test]
fn remote_pod_to_local_pod_is_delivered_to_the_peer() {
    let root = PinRoot::new("dd");
    let _dp = node(root.path(), 0);
    for a in [V4, V6] {
        let frame = overlay_frame(a.remote_pod, a.pod_b);
        let run = expect(
            root.path(),
            FROM_OVERLAY,
            &frame,
            TC_ACT_REDIRECT,
            Counter::DecapDelivery,
        );
        assert_eq!(run.data_out, frame);
    }
}

#[test]
fn source_outside_every_remote_cidr_is_dropped() {
    let root = PinRoot::new("us");
    let _dp = node(root.path(), 0);
    for a in [V4, V6] {
        // The world, this node's own pod CIDR and this node's own VTEP address (a HOST
        // route: no peer sends from it) are not legitimate overlay sources.
        for src in [a.world, a.pod_a, a.unknown_local, a.local_vtep] {
            let frame = overlay_frame(src, a.pod_b);
            expect(
                root.path(),
                FROM_OVERLAY,
                &frame,
                TC_ACT_SHOT,
                Counter::DropUnknownOverlaySource,
            );
        }
    }
}

#[test]
fn a_peers_vtep_address_as_source_is_accepted() {
    let root = PinRoot::new("hs");
    let _dp = node(root.path(), 0);
    for a in [V4, V6] {
        // The network address of the remote pod CIDR: the peer node's own traffic.
        let peer_vtep = a.remote_cidr.split('/').next().unwrap();
        let frame = overlay_frame(peer_vtep, a.pod_b);
        expect(
            root.path(),
            FROM_OVERLAY,
            &frame,
            TC_ACT_REDIRECT,
            Counter::DecapDelivery,
        );
    }
}

#[test]
fn traffic_to_the_vtep_address_goes_to_the_kernel() {
    let root = PinRoot::new("hv");
    let _dp = node(root.path(), 0);
    for a in [V4, V6] {
        let frame = overlay_frame(a.remote_pod, a.local_vtep);
        let run = expect(
            root.path(),
            FROM_OVERLAY,
            &frame,
            TC_ACT_OK,
            Counter::ToKernel,
        );
        assert_eq!(run.data_out, frame);
    }
}

#[test]
fn unknown_destination_in_the_local_cidr_is_dropped() {
    let root = PinRoot::new("od");
    let _dp = node(root.path(), 0);
    for a in [V4, V6] {
        let frame = overlay_frame(a.remote_pod, a.unknown_local);
        expect(
            root.path(),
            FROM_OVERLAY,
            &frame,
            TC_ACT_SHOT,
            Counter::DropUnknownLocalDest,
        );
    }
}

#[test]
fn destination_outside_the_local_cidr_goes_to_the_kernel() {
    let root = PinRoot::new("ow");
    let _dp = node(root.path(), 0);
    for a in [V4, V6] {
        let frame = overlay_frame(a.remote_pod, a.world);
        expect(
            root.path(),
            FROM_OVERLAY,
            &frame,
            TC_ACT_OK,
            Counter::ToKernel,
        );
    }
}

#[test]
fn arp_and_neighbour_discovery_go_to_the_kernel() {
    let root = PinRoot::new("oa");
    let _dp = node(root.path(), 0);
    let arp = frames::arp_request("10.244.2.0".parse().unwrap(), "10.244.1.0".parse().unwrap());
    expect(
        root.path(),
        FROM_OVERLAY,
        &arp,
        TC_ACT_OK,
        Counter::ToKernel,
    );
    let ns = frames::neighbour_solicitation("fe80::2".parse().unwrap(), "fe80::1".parse().unwrap());
    expect(root.path(), FROM_OVERLAY, &ns, TC_ACT_OK, Counter::ToKernel);
}

#[test]
fn malformed_ip_headers_are_dropped() {
    let root = PinRoot::new("om");
    let _dp = node(root.path(), 0);
    for a in [V4, V6] {
        let frame = frames::wrong_ip_version(ip(a.remote_pod), ip(a.pod_b));
        expect(
            root.path(),
            FROM_OVERLAY,
            &frame,
            TC_ACT_SHOT,
            Counter::DropMalformed,
        );
    }
    let a: Addrs = V4;
    let frame = frames::bad_ihl_ipv4(a.remote_pod.parse().unwrap(), a.pod_b.parse().unwrap());
    expect(
        root.path(),
        FROM_OVERLAY,
        &frame,
        TC_ACT_SHOT,
        Counter::DropMalformed,
    );
}
