//! `from_pod` on crafted frames (BPF_PROG_TEST_RUN), every path, IPv4 and IPv6.

mod common;

use common::frames::{self, udp, udp_from, GATEWAY_MAC};
use common::scenario::{ip, node, Addrs, LOCAL_VTEP_MAC, REMOTE_VTEP_MAC, V4, V6};
use common::{expect, in_netns, overlay_netns, PinRoot, TC_ACT_OK, TC_ACT_REDIRECT, TC_ACT_SHOT};
use std::net::Ipv6Addr;
use weft_datapath::{Counter, NodeConfig, Program, Tables};

const FROM_POD: Program = Program::FromPod;

#[test]
fn local_destination_is_redirected_to_the_peer_unchanged() {
    let root = PinRoot::new("lo");
    let _dp = node(root.path(), 0);
    for a in [V4, V6] {
        let frame = udp(ip(a.pod_a), ip(a.pod_b), 100);
        let run = expect(
            root.path(),
            FROM_POD,
            &frame,
            TC_ACT_REDIRECT,
            Counter::LocalDelivery,
        );
        assert_eq!(
            run.data_out, frame,
            "same-node path must not rewrite the frame"
        );
    }
}

#[test]
fn remote_destination_is_encapsulated_with_vtep_macs() {
    let root = PinRoot::new("en");
    let (ns, vxlan) = overlay_netns();
    let path = root.path().to_path_buf();
    in_netns(ns.path(), move || {
        let _dp = node(&path, common::ifindex(&vxlan));
        for a in [V4, V6] {
            let frame = udp(ip(a.pod_a), ip(a.remote_pod), 1000);
            let run = expect(&path, FROM_POD, &frame, TC_ACT_REDIRECT, Counter::Encap);
            assert_eq!(run.data_out[..6], REMOTE_VTEP_MAC, "inner destination MAC");
            assert_eq!(run.data_out[6..12], LOCAL_VTEP_MAC, "inner source MAC");
            assert_eq!(
                run.data_out[12..],
                frame[12..],
                "rest of the frame untouched"
            );
        }
    });
}

#[test]
fn frame_that_fits_the_overlay_mtu_exactly_is_encapsulated() {
    let root = PinRoot::new("mf");
    let (ns, vxlan) = overlay_netns();
    let path = root.path().to_path_buf();
    in_netns(ns.path(), move || {
        let _dp = node(&path, common::ifindex(&vxlan));
        for a in [V4, V6] {
            let frame = udp(ip(a.pod_a), ip(a.remote_pod), 1450);
            expect(&path, FROM_POD, &frame, TC_ACT_REDIRECT, Counter::Encap);
        }
    });
}

#[test]
fn oversize_frame_goes_to_the_kernel_for_icmp_instead_of_outer_fragmentation() {
    let root = PinRoot::new("mt");
    let (ns, vxlan) = overlay_netns();
    let path = root.path().to_path_buf();
    in_netns(ns.path(), move || {
        let _dp = node(&path, common::ifindex(&vxlan));
        for a in [V4, V6] {
            let frame = udp(ip(a.pod_a), ip(a.remote_pod), 1451);
            let run = expect(&path, FROM_POD, &frame, TC_ACT_OK, Counter::MtuFallback);
            assert_eq!(run.data_out, frame, "handed to the kernel unchanged");
        }
    });
}

#[test]
fn remote_destination_without_overlay_config_goes_to_the_kernel_route() {
    let root = PinRoot::new("nc");
    let _dp = node(root.path(), 0);
    for a in [V4, V6] {
        let frame = udp(ip(a.pod_a), ip(a.remote_pod), 100);
        let run = expect(
            root.path(),
            FROM_POD,
            &frame,
            TC_ACT_OK,
            Counter::OverlayFallback,
        );
        assert_eq!(run.data_out, frame);
    }
}

#[test]
fn remote_destination_with_a_vanished_vxlan_device_goes_to_the_kernel_route() {
    let root = PinRoot::new("gn");
    let (ns, _vxlan) = overlay_netns();
    let path = root.path().to_path_buf();
    in_netns(ns.path(), move || {
        let mut dp = node(&path, 0);
        dp.set_config(NodeConfig {
            vxlan_ifindex: 0x7fff_fff0, // no such device in this namespace
            vtep_mac: LOCAL_VTEP_MAC,
        })
        .expect("config");
        for a in [V4, V6] {
            let frame = udp(ip(a.pod_a), ip(a.remote_pod), 100);
            expect(&path, FROM_POD, &frame, TC_ACT_OK, Counter::OverlayFallback);
        }
    });
}

#[test]
fn source_of_another_pod_is_dropped_as_spoofed() {
    let root = PinRoot::new("sp");
    let _dp = node(root.path(), 0);
    for a in [V4, V6] {
        // pod_b's address exists, but on another veth (ifindex 42, not 1).
        let frame = udp(ip(a.pod_b), ip(a.pod_a), 100);
        expect(
            root.path(),
            FROM_POD,
            &frame,
            TC_ACT_SHOT,
            Counter::DropSpoofedSource,
        );
    }
}

#[test]
fn source_that_is_no_endpoint_is_dropped_as_spoofed() {
    let root = PinRoot::new("su");
    let _dp = node(root.path(), 0);
    for a in [V4, V6] {
        for src in [a.unknown_local, a.world, a.remote_pod] {
            let frame = udp(ip(src), ip(a.world), 100);
            expect(
                root.path(),
                FROM_POD,
                &frame,
                TC_ACT_SHOT,
                Counter::DropSpoofedSource,
            );
        }
    }
}

#[test]
fn unknown_destination_in_the_local_cidr_is_dropped() {
    let root = PinRoot::new("ud");
    let _dp = node(root.path(), 0);
    for a in [V4, V6] {
        let frame = udp(ip(a.pod_a), ip(a.unknown_local), 100);
        expect(
            root.path(),
            FROM_POD,
            &frame,
            TC_ACT_SHOT,
            Counter::DropUnknownLocalDest,
        );
    }
}

#[test]
fn world_bound_traffic_goes_to_the_kernel_untouched() {
    let root = PinRoot::new("wo");
    let _dp = node(root.path(), 0);
    for a in [V4, V6] {
        let frame = udp(ip(a.pod_a), ip(a.world), 100);
        let run = expect(root.path(), FROM_POD, &frame, TC_ACT_OK, Counter::ToKernel);
        assert_eq!(run.data_out, frame, "masquerade is the kernel's job");
    }
}

#[test]
fn traffic_to_the_node_vtep_address_goes_to_the_kernel() {
    let root = PinRoot::new("vt");
    let _dp = node(root.path(), 0);
    for a in [V4, V6] {
        let frame = udp(ip(a.pod_a), ip(a.local_vtep), 100);
        expect(root.path(), FROM_POD, &frame, TC_ACT_OK, Counter::ToKernel);
    }
}

#[test]
fn arp_goes_to_the_kernel() {
    let root = PinRoot::new("ar");
    let _dp = node(root.path(), 0);
    let frame = frames::arp_request(
        "10.244.1.10".parse().unwrap(),
        "169.254.1.1".parse().unwrap(),
    );
    let run = expect(root.path(), FROM_POD, &frame, TC_ACT_OK, Counter::ToKernel);
    assert_eq!(run.data_out, frame);
}

#[test]
fn neighbour_discovery_goes_to_the_kernel() {
    let root = PinRoot::new("nd");
    let _dp = node(root.path(), 0);
    let gateway: Ipv6Addr = "fe80::1".parse().unwrap();
    for src in ["fe80::2", "::"] {
        let frame = frames::neighbour_solicitation(src.parse().unwrap(), gateway);
        expect(root.path(), FROM_POD, &frame, TC_ACT_OK, Counter::ToKernel);
    }
}

#[test]
fn malformed_ip_headers_are_dropped() {
    let root = PinRoot::new("ml");
    let _dp = node(root.path(), 0);
    for a in [V4, V6] {
        let frame = frames::wrong_ip_version(ip(a.pod_a), ip(a.pod_b));
        expect(
            root.path(),
            FROM_POD,
            &frame,
            TC_ACT_SHOT,
            Counter::DropMalformed,
        );
    }
    let frame = frames::bad_ihl_ipv4(V4.pod_a.parse().unwrap(), V4.pod_b.parse().unwrap());
    expect(
        root.path(),
        FROM_POD,
        &frame,
        TC_ACT_SHOT,
        Counter::DropMalformed,
    );
}

#[test]
fn the_pods_own_mac_does_not_matter_only_its_address_and_veth() {
    let root = PinRoot::new("mc");
    let _dp = node(root.path(), 0);
    let a: Addrs = V4;
    let frame = udp_from(
        [0x02, 9, 9, 9, 9, 9],
        GATEWAY_MAC,
        ip(a.pod_a),
        ip(a.pod_b),
        64,
    );
    expect(
        root.path(),
        FROM_POD,
        &frame,
        TC_ACT_REDIRECT,
        Counter::LocalDelivery,
    );
    let counters = Tables::open(root.path()).unwrap().counters().unwrap();
    assert_eq!(counters.drops(), 0);
}
