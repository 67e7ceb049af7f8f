//! The per-packet service path on crafted frames (BPF_PROG_TEST_RUN), IPv4 and IPv6, TCP
//! and UDP: translation to a backend, replies translated back (same node in from_pod,
//! across nodes in from_overlay), connection-table states, refusals built in BPF (no
//! endpoints, unknown port), drops (none usable here, unallocated service address,
//! fragments, ping), affinity, hairpin, ICMP errors about translated flows, and what a
//! backend's removal does to its connections.

mod common;

use common::packet::{icmp_error, Ext, Packet, ACK, FIN, ICMP, ICMPV6, L4, RST, SYN, UDP};
use common::scenario::{
    ip, service_node, Addrs, BACKEND_MAC, LOCAL_VTEP_MAC, REMOTE_VTEP_MAC, V4, V6,
};
use common::{
    in_netns, overlay_netns, run, Outcome, PinRoot, TC_ACT_OK, TC_ACT_REDIRECT, TC_ACT_SHOT,
};
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;
use weft_datapath::{
    Backend, Conntrack, Counter, CtDirection, CtState, Event, Frontend, FrontendSpec, L4Proto,
    Program, Services, Tuple, WhenEmpty,
};

const FROM_POD: Program = Program::FromPod;
const FROM_OVERLAY: Program = Program::FromOverlay;
const CLIENT_PORT: u16 = 40000;

fn sa(addr: &str, port: u16) -> SocketAddr {
    SocketAddr::new(ip(addr), port)
}

fn tcp(src: SocketAddr, dst: SocketAddr, flags: u8) -> Packet {
    Packet::new(
        src.ip(),
        dst.ip(),
        L4::Tcp {
            sport: src.port(),
            dport: dst.port(),
            seq: 1000,
            ack: if flags & ACK != 0 { 5000 } else { 0 },
            flags,
            payload: Vec::new(),
        },
    )
}

fn udp(src: SocketAddr, dst: SocketAddr, payload: &[u8]) -> Packet {
    Packet::new(src.ip(), dst.ip(), L4::udp(src.port(), dst.port(), payload))
}

/// What a pod sends a packet as (to its gateway), and what a remote node's from_pod put
/// on the overlay.
fn from_pod_frame(p: Packet) -> Vec<u8> {
    p.bytes()
}

fn from_overlay_frame(p: Packet) -> Vec<u8> {
    p.macs(REMOTE_VTEP_MAC, LOCAL_VTEP_MAC).bytes()
}

fn frontend(a: &Addrs, port: u16, proto: L4Proto) -> Frontend {
    Frontend::internal(ip(a.service), port, proto)
}

fn one_backend(addr: SocketAddr) -> FrontendSpec {
    FrontendSpec::cluster_ip(vec![Backend::new(addr)])
}

fn conntrack(root: &Path) -> Conntrack {
    Conntrack::open(root).expect("conntrack")
}

fn assert_translated(o: &Outcome, src: SocketAddr, dst: SocketAddr, what: &str) {
    assert_eq!(o.retval, TC_ACT_REDIRECT, "{what}: verdict, {o:?}");
    let p = o.parsed();
    assert!(p.checksums_ok, "{what}: checksums of {p:?}");
    assert_eq!(
        (
            SocketAddr::new(p.src, p.sport),
            SocketAddr::new(p.dst, p.dport)
        ),
        (src, dst),
        "{what}"
    );
}

#[test]
fn a_new_flow_to_a_clusterip_goes_to_its_backend_and_is_tracked_both_ways() {
    let root = PinRoot::new("sv");
    let (_dp, mut svc) = service_node(root.path(), 0);
    for a in [V4, V6] {
        for proto in [L4Proto::Tcp, L4Proto::Udp] {
            let backend = sa(a.backend_local, 8080);
            let fe = frontend(&a, 80, proto);
            svc.upsert_frontend(fe, &one_backend(backend)).unwrap();
            let client = sa(a.pod_a, CLIENT_PORT);
            let vip = sa(a.service, 80);
            let packet = match proto {
                L4Proto::Tcp => tcp(client, vip, SYN),
                L4Proto::Udp => udp(client, vip, b"query"),
            };
            let o = run(root.path(), FROM_POD, &from_pod_frame(packet));
            assert_eq!(o.counter, Counter::LocalDelivery);
            assert_translated(&o, client, backend, "to the backend");
            for e in [Event::LbNewFlow, Event::CtCreated, Event::NatForward] {
                assert_eq!(o.event(e), 1, "{e:?} in {:?}", o.events);
            }
            let id = svc.frontend_id(&fe).unwrap();
            let proto_n = proto.number();
            let records: Vec<_> = conntrack(root.path())
                .records()
                .unwrap()
                .into_iter()
                .filter(|r| r.frontend == id && r.key.proto == proto_n)
                .collect();
            assert_eq!(records.len(), 2, "{records:?}");
            let orig = records
                .iter()
                .find(|r| r.direction == CtDirection::Original)
                .unwrap();
            let reply = records
                .iter()
                .find(|r| r.direction == CtDirection::Reply)
                .unwrap();
            assert_eq!(
                orig.key,
                Tuple {
                    proto: proto_n,
                    src: client,
                    dst: vip
                }
            );
            assert_eq!(
                orig.rewritten,
                Tuple {
                    proto: proto_n,
                    src: client,
                    dst: backend
                }
            );
            assert_eq!(
                reply.key,
                Tuple {
                    proto: proto_n,
                    src: backend,
                    dst: client
                }
            );
            assert_eq!(
                reply.rewritten,
                Tuple {
                    proto: proto_n,
                    src: vip,
                    dst: client
                }
            );
            assert!(orig.rewrites_destination && !orig.rewrites_source);
            assert!(reply.rewrites_source && !reply.rewrites_destination);
            assert_eq!(orig.backend, svc.backend_id(backend).unwrap());
            for r in [orig, reply] {
                assert_eq!(r.state, CtState::Opening);
            }
            // The next packet of the flow finds its entry: no new flow.
            let again = match proto {
                L4Proto::Tcp => tcp(client, vip, ACK),
                L4Proto::Udp => udp(client, vip, b"again"),
            };
            let o = run(root.path(), FROM_POD, &from_pod_frame(again));
            assert_translated(&o, client, backend, "same flow");
            assert_eq!(o.event(Event::LbNewFlow), 0);
        }
    }
}

#[test]
fn replies_on_the_same_node_come_back_from_the_service_address() {
    let root = PinRoot::new("sr");
    let (_dp, mut svc) = service_node(root.path(), 0);
    for a in [V4, V6] {
        for proto in [L4Proto::Tcp, L4Proto::Udp] {
            let (client, vip, backend) = (
                sa(a.pod_a, CLIENT_PORT),
                sa(a.service, 80),
                sa(a.backend_local, 8080),
            );
            svc.upsert_frontend(frontend(&a, 80, proto), &one_backend(backend))
                .unwrap();
            let (first, answer) = match proto {
                L4Proto::Tcp => (tcp(client, vip, SYN), tcp(backend, client, SYN | ACK)),
                L4Proto::Udp => (udp(client, vip, b"q"), udp(backend, client, b"a")),
            };
            run(root.path(), FROM_POD, &from_pod_frame(first));
            let o = run(
                root.path(),
                FROM_POD,
                &from_pod_frame(answer.macs(BACKEND_MAC, common::packet::GATEWAY_MAC)),
            );
            assert_eq!(o.counter, Counter::LocalDelivery);
            assert_translated(&o, vip, client, "reply");
            assert_eq!(o.event(Event::NatReverse), 1);
            for r in conntrack(root.path()).records().unwrap() {
                if r.key.proto == proto.number() && (r.key.src == client || r.key.dst == client) {
                    assert_eq!(r.state, CtState::Established, "{r:?}");
                    assert!(r.seen_reply);
                }
            }
        }
    }
}

#[test]
fn cross_node_backends_are_reached_through_the_overlay_and_replies_translated_on_arrival() {
    let root = PinRoot::new("sx");
    let (ns, vxlan) = overlay_netns();
    let path = root.path().to_path_buf();
    in_netns(ns.path(), move || {
        let (_dp, mut svc) = service_node(&path, common::ifindex(&vxlan));
        for a in [V4, V6] {
            for proto in [L4Proto::Tcp, L4Proto::Udp] {
                let (client, vip, backend) = (
                    sa(a.pod_a, CLIENT_PORT + 1),
                    sa(a.service, 443),
                    sa(a.remote_pod, 8443),
                );
                svc.upsert_frontend(frontend(&a, 443, proto), &one_backend(backend))
                    .unwrap();
                let (first, answer) = match proto {
                    L4Proto::Tcp => (tcp(client, vip, SYN), tcp(backend, client, SYN | ACK)),
                    L4Proto::Udp => (udp(client, vip, b"q"), udp(backend, client, b"a")),
                };
                let o = run(&path, FROM_POD, &from_pod_frame(first));
                assert_eq!(o.counter, Counter::Encap);
                assert_translated(&o, client, backend, "to the remote backend");
                assert_eq!(o.parsed().dst_mac, REMOTE_VTEP_MAC);
                let o = run(&path, FROM_OVERLAY, &from_overlay_frame(answer));
                assert_eq!(o.counter, Counter::DecapDelivery);
                assert_translated(&o, vip, client, "reply from the remote backend");
            }
        }
    });
}

#[test]
fn tcp_states_follow_both_directions_and_set_the_timeouts() {
    let root = PinRoot::new("st");
    let (_dp, mut svc) = service_node(root.path(), 0);
    for a in [V4, V6] {
        let (vip, backend) = (sa(a.service, 80), sa(a.backend_local, 8080));
        svc.upsert_frontend(frontend(&a, 80, L4Proto::Tcp), &one_backend(backend))
            .unwrap();
        let state_of = |client: SocketAddr| {
            let records: Vec<_> = conntrack(root.path())
                .records()
                .unwrap()
                .into_iter()
                .filter(|r| r.key.src == client || r.key.dst == client)
                .collect();
            assert_eq!(records.len(), 2, "{records:?}");
            assert_eq!(records[0].state, records[1].state, "both entries agree");
            let left = records[0].expires_in.expect("alive");
            (records[0].state, left)
        };
        let within = |left: Duration, secs: u64| {
            left <= Duration::from_secs(secs)
                && left > Duration::from_secs(secs) - Duration::from_secs(5)
        };
        let pod = |p: Packet| from_pod_frame(p);
        let back = |p: Packet| from_pod_frame(p.macs(BACKEND_MAC, common::packet::GATEWAY_MAC));

        // The handshake and an orderly close.
        let client = sa(a.pod_a, 41000);
        run(root.path(), FROM_POD, &pod(tcp(client, vip, SYN)));
        let (s, left) = state_of(client);
        assert!(s == CtState::Opening && within(left, 60), "{s:?} {left:?}");
        run(
            root.path(),
            FROM_POD,
            &back(tcp(backend, client, SYN | ACK)),
        );
        let (s, left) = state_of(client);
        assert!(
            s == CtState::Established && within(left, 21600),
            "{s:?} {left:?}"
        );
        run(root.path(), FROM_POD, &pod(tcp(client, vip, FIN | ACK)));
        let (s, left) = state_of(client);
        assert!(s == CtState::Closing && within(left, 120), "{s:?} {left:?}");
        run(
            root.path(),
            FROM_POD,
            &back(tcp(backend, client, FIN | ACK)),
        );
        let (s, left) = state_of(client);
        assert!(s == CtState::Closed && within(left, 10), "{s:?} {left:?}");
        // A new SYN on the closed tuple starts a new connection.
        let o = run(root.path(), FROM_POD, &pod(tcp(client, vip, SYN)));
        assert_eq!(
            (o.event(Event::CtReopened), o.event(Event::LbNewFlow)),
            (1, 1)
        );
        assert_eq!(state_of(client).0, CtState::Opening);

        // A reset closes at once.
        let client = sa(a.pod_a, 41001);
        run(root.path(), FROM_POD, &pod(tcp(client, vip, SYN)));
        run(
            root.path(),
            FROM_POD,
            &back(tcp(backend, client, RST | ACK)),
        );
        let (s, left) = state_of(client);
        assert!(s == CtState::Closed && within(left, 10), "{s:?} {left:?}");
    }
}

#[test]
fn udp_timeouts_before_and_after_a_reply() {
    let root = PinRoot::new("su");
    let (_dp, mut svc) = service_node(root.path(), 0);
    for a in [V4, V6] {
        let (client, vip, backend) = (
            sa(a.pod_a, 42000),
            sa(a.service, 53),
            sa(a.backend_local, 5353),
        );
        svc.upsert_frontend(frontend(&a, 53, L4Proto::Udp), &one_backend(backend))
            .unwrap();
        run(
            root.path(),
            FROM_POD,
            &from_pod_frame(udp(client, vip, b"q")),
        );
        let left = |client: SocketAddr| {
            conntrack(root.path())
                .records()
                .unwrap()
                .into_iter()
                .find(|r| r.key.src == client)
                .and_then(|r| r.expires_in)
                .unwrap()
        };
        assert!(left(client) <= Duration::from_secs(30) && left(client) > Duration::from_secs(25));
        run(
            root.path(),
            FROM_POD,
            &from_pod_frame(
                udp(backend, client, b"a").macs(BACKEND_MAC, common::packet::GATEWAY_MAC),
            ),
        );
        assert!(
            left(client) <= Duration::from_secs(120) && left(client) > Duration::from_secs(115)
        );
    }
}

#[test]
fn one_client_port_to_two_frontends_sharing_a_backend_is_refused_for_the_second() {
    let root = PinRoot::new("sq");
    let (_dp, mut svc) = service_node(root.path(), 0);
    for a in [V4, V6] {
        let backend = sa(a.backend_local, 53);
        svc.upsert_frontend(frontend(&a, 53, L4Proto::Udp), &one_backend(backend))
            .unwrap();
        svc.upsert_frontend(frontend(&a, 54, L4Proto::Udp), &one_backend(backend))
            .unwrap();
        let client = sa(a.pod_a, 55000);
        let o = run(
            root.path(),
            FROM_POD,
            &from_pod_frame(udp(client, sa(a.service, 53), b"1")),
        );
        assert_eq!(o.counter, Counter::LocalDelivery);
        // Both would have the reply tuple backend -> client: replies could not be told
        // apart. The second is dropped and counted (kube-proxy's conntrack refuses it too).
        let o = run(
            root.path(),
            FROM_POD,
            &from_pod_frame(udp(client, sa(a.service, 54), b"2")),
        );
        assert_eq!((o.retval, o.counter), (TC_ACT_SHOT, Counter::DropCtInsert));
        assert_eq!(o.event(Event::CtInsertFailed), 1);
    }
}

#[test]
fn a_frontend_without_endpoints_answers_tcp_with_a_rst_and_udp_with_port_unreachable() {
    let root = PinRoot::new("sn");
    let (_dp, mut svc) = service_node(root.path(), 0);
    for a in [V4, V6] {
        let v6 = ip(a.service).is_ipv6();
        for proto in [L4Proto::Tcp, L4Proto::Udp] {
            svc.upsert_frontend(
                frontend(&a, 80, proto),
                &FrontendSpec::cluster_ip(Vec::new()),
            )
            .unwrap();
        }
        let (client, vip) = (sa(a.pod_a, 43000), sa(a.service, 80));

        let syn = tcp(client, vip, SYN);
        let o = run(root.path(), FROM_POD, &from_pod_frame(syn.clone()));
        assert_eq!(o.counter, Counter::RejectNoEndpoints);
        assert_eq!(o.retval, TC_ACT_REDIRECT);
        let rst = o.parsed();
        assert!(rst.checksums_ok, "{rst:?}");
        assert_eq!(
            (rst.src, rst.sport, rst.dst, rst.dport),
            (vip.ip(), 80, client.ip(), client.port())
        );
        assert_eq!(rst.tcp_flags, RST | ACK);
        assert_eq!(rst.ack, 1001, "acknowledges the SYN");
        assert_eq!(
            (rst.dst_mac, rst.src_mac),
            (syn.src_mac, syn.dst_mac),
            "back to the pod"
        );

        // A segment with ACK gets a bare RST with its ack as sequence number.
        let o = run(
            root.path(),
            FROM_POD,
            &from_pod_frame(tcp(client, vip, ACK)),
        );
        let rst = o.parsed();
        assert_eq!((rst.tcp_flags, rst.seq), (RST, 5000));
        // A RST is never answered.
        let o = run(
            root.path(),
            FROM_POD,
            &from_pod_frame(tcp(client, vip, RST)),
        );
        assert_eq!(
            (o.retval, o.counter),
            (TC_ACT_SHOT, Counter::RejectNoEndpoints)
        );

        let datagram = udp(client, vip, b"query");
        let o = run(root.path(), FROM_POD, &from_pod_frame(datagram.clone()));
        assert_eq!(
            (o.retval, o.counter),
            (TC_ACT_REDIRECT, Counter::RejectNoEndpoints)
        );
        let icmp = o.parsed();
        assert!(icmp.checksums_ok, "{icmp:?}");
        assert_eq!((icmp.src, icmp.dst), (vip.ip(), client.ip()));
        assert_eq!(icmp.proto, if v6 { ICMPV6 } else { ICMP });
        assert_eq!(icmp.icmp, Some(if v6 { (1, 4) } else { (3, 3) }));
        let quoted = icmp.inner.expect("quotes the datagram");
        assert_eq!(
            (quoted.src, quoted.sport, quoted.dst, quoted.dport),
            (client.ip(), client.port(), vip.ip(), 80)
        );
        assert_eq!(quoted.proto, UDP);
    }
}

#[test]
fn a_frontend_with_endpoints_none_usable_here_drops() {
    let root = PinRoot::new("sd");
    let (_dp, mut svc) = service_node(root.path(), 0);
    for a in [V4, V6] {
        let spec = FrontendSpec {
            when_empty: WhenEmpty::Drop,
            ..FrontendSpec::cluster_ip(Vec::new())
        };
        svc.upsert_frontend(frontend(&a, 80, L4Proto::Tcp), &spec)
            .unwrap();
        let o = run(
            root.path(),
            FROM_POD,
            &from_pod_frame(tcp(sa(a.pod_a, 1), sa(a.service, 80), SYN)),
        );
        assert_eq!(
            (o.retval, o.counter),
            (TC_ACT_SHOT, Counter::DropNoLocalBackend)
        );
    }
}

#[test]
fn a_clusterip_refuses_ports_and_protocols_it_does_not_serve() {
    let root = PinRoot::new("sp");
    let (_dp, mut svc) = service_node(root.path(), 0);
    for a in [V4, V6] {
        let backend = sa(a.backend_local, 8080);
        svc.upsert_frontend(frontend(&a, 80, L4Proto::Tcp), &one_backend(backend))
            .unwrap();
        let client = sa(a.pod_a, 44000);
        // Wrong port, and the right port on the other protocol.
        let o = run(
            root.path(),
            FROM_POD,
            &from_pod_frame(tcp(client, sa(a.service, 81), SYN)),
        );
        assert_eq!(
            (o.retval, o.counter),
            (TC_ACT_REDIRECT, Counter::RejectUnknownPort)
        );
        assert_eq!(o.parsed().tcp_flags, RST | ACK);
        let o = run(
            root.path(),
            FROM_POD,
            &from_pod_frame(udp(client, sa(a.service, 80), b"x")),
        );
        assert_eq!(
            (o.retval, o.counter),
            (TC_ACT_REDIRECT, Counter::RejectUnknownPort)
        );
        assert!(o.parsed().icmp.is_some());
        // Ping is not served.
        let ping = Packet::new(
            ip(a.pod_a),
            ip(a.service),
            L4::echo(ip(a.service).is_ipv6(), false, 7),
        );
        let o = run(root.path(), FROM_POD, &from_pod_frame(ping));
        assert_eq!(
            (o.retval, o.counter),
            (TC_ACT_SHOT, Counter::DropServiceProto)
        );
    }
}

#[test]
fn nothing_about_a_service_address_falls_through_to_the_default_route() {
    let root = PinRoot::new("sa");
    let (_dp, mut svc) = service_node(root.path(), 0);
    for a in [V4, V6] {
        let client = sa(a.pod_a, 45000);
        // In the service CIDRs, no service has it.
        for packet in [
            tcp(client, sa(a.unallocated, 80), SYN),
            udp(client, sa(a.unallocated, 53), b""),
        ] {
            let o = run(root.path(), FROM_POD, &from_pod_frame(packet));
            assert_eq!(
                (o.retval, o.counter),
                (TC_ACT_SHOT, Counter::DropServiceUnallocated)
            );
        }
        // Outside them, the world is the kernel's, as before.
        let o = run(
            root.path(),
            FROM_POD,
            &from_pod_frame(tcp(client, sa(a.world, 80), SYN)),
        );
        assert_eq!((o.retval, o.counter), (TC_ACT_OK, Counter::ToKernel));
        // An external address (not a ClusterIP) with a frontend: its other ports are the
        // kernel's.
        let external = Frontend::internal(ip(a.world), 80, L4Proto::Tcp);
        let spec = FrontendSpec {
            cluster_ip: false,
            ..one_backend(sa(a.backend_local, 8080))
        };
        svc.upsert_frontend(external, &spec).unwrap();
        let o = run(
            root.path(),
            FROM_POD,
            &from_pod_frame(tcp(client, sa(a.world, 80), SYN)),
        );
        assert_eq!(o.counter, Counter::LocalDelivery);
        let o = run(
            root.path(),
            FROM_POD,
            &from_pod_frame(tcp(client, sa(a.world, 22), SYN)),
        );
        assert_eq!((o.retval, o.counter), (TC_ACT_OK, Counter::ToKernel));
    }
}

#[test]
fn fragments_to_a_service_are_dropped() {
    let root = PinRoot::new("sf");
    let (_dp, mut svc) = service_node(root.path(), 0);
    for a in [V4, V6] {
        svc.upsert_frontend(
            frontend(&a, 53, L4Proto::Udp),
            &one_backend(sa(a.backend_local, 53)),
        )
        .unwrap();
        for (offset, more) in [(0u16, true), (185, false)] {
            let mut p = udp(sa(a.pod_a, 46000), sa(a.service, 53), &[1; 64]);
            if ip(a.service).is_ipv4() {
                p.fragment = Some((offset, more));
            } else {
                p.ext = vec![Ext::Fragment { offset, more }];
            }
            let o = run(root.path(), FROM_POD, &from_pod_frame(p));
            assert_eq!(
                (o.retval, o.counter),
                (TC_ACT_SHOT, Counter::DropFragment),
                "offset {offset}"
            );
        }
    }
}

#[test]
fn session_affinity_keeps_a_client_on_its_backend_and_without_it_flows_spread() {
    let root = PinRoot::new("sy");
    let (_dp, mut svc) = service_node(root.path(), 0);
    for a in [V4, V6] {
        let backends = vec![
            Backend::new(sa(a.backend_local, 8080)),
            Backend::new(sa(a.remote_pod, 8080)),
        ];
        let spread = frontend(&a, 80, L4Proto::Udp);
        svc.upsert_frontend(spread, &FrontendSpec::cluster_ip(backends.clone()))
            .unwrap();
        let sticky = frontend(&a, 81, L4Proto::Udp);
        let spec = FrontendSpec {
            affinity: Some(Duration::from_secs(10800)),
            ..FrontendSpec::cluster_ip(backends)
        };
        svc.upsert_frontend(sticky, &spec).unwrap();
        let mut seen_spread = std::collections::BTreeSet::new();
        let mut seen_sticky = std::collections::BTreeSet::new();
        for i in 0..48u16 {
            let client = sa(a.pod_a, 47000 + i);
            let o = run(
                root.path(),
                FROM_POD,
                &from_pod_frame(udp(client, sa(a.service, 80), b"x")),
            );
            seen_spread.insert(o.parsed().dst);
            // Another port: the same client port to two frontends sharing a backend would
            // be one reply tuple for two connections (refused, as by kube-proxy's conntrack).
            let o = run(
                root.path(),
                FROM_POD,
                &from_pod_frame(udp(sa(a.pod_a, 57000 + i), sa(a.service, 81), b"x")),
            );
            seen_sticky.insert(o.parsed().dst);
            if i > 0 {
                assert_eq!(o.event(Event::LbAffinityHit), 1);
            }
        }
        assert_eq!(seen_spread.len(), 2, "48 flows over 2 backends use both");
        assert_eq!(
            seen_sticky.len(),
            1,
            "one client, one backend: {seen_sticky:?}"
        );
    }
}

#[test]
fn hairpin_a_backend_reaching_its_own_service_sees_the_service_address_as_client() {
    let root = PinRoot::new("sh");
    let (_dp, mut svc) = service_node(root.path(), 0);
    for a in [V4, V6] {
        let own = sa(a.pod_a, 8080);
        svc.upsert_frontend(frontend(&a, 80, L4Proto::Tcp), &one_backend(own))
            .unwrap();
        let (client, vip) = (sa(a.pod_a, 48000), sa(a.service, 80));
        let o = run(
            root.path(),
            FROM_POD,
            &from_pod_frame(tcp(client, vip, SYN)),
        );
        assert_eq!(o.event(Event::LbHairpin), 1);
        assert_eq!(o.counter, Counter::LocalDelivery);
        assert_translated(&o, sa(a.service, client.port()), own, "hairpin, to itself");
        // Its answer goes to the service address, and comes back as from the service.
        let answer = tcp(own, sa(a.service, client.port()), SYN | ACK);
        let o = run(root.path(), FROM_POD, &from_pod_frame(answer));
        assert_translated(&o, vip, client, "hairpin reply");
    }
}

#[test]
fn icmp_errors_about_translated_flows_are_translated_outside_and_inside() {
    let root = PinRoot::new("si");
    let (ns, vxlan) = overlay_netns();
    let path = root.path().to_path_buf();
    in_netns(ns.path(), move || {
        let (_dp, mut svc) = service_node(&path, common::ifindex(&vxlan));
        for a in [V4, V6] {
            let v6 = ip(a.service).is_ipv6();
            let unreachable = if v6 { (1, 4) } else { (3, 3) };
            let (client, vip, backend) = (
                sa(a.pod_a, 49000),
                sa(a.service, 53),
                sa(a.remote_pod, 5353),
            );
            svc.upsert_frontend(frontend(&a, 53, L4Proto::Udp), &one_backend(backend))
                .unwrap();
            run(&path, FROM_POD, &from_pod_frame(udp(client, vip, b"query")));
            // What the backend saw, and what its kernel answers: port unreachable.
            let sent = udp(client, backend, b"query");

            let err = icmp_error(
                backend.ip(),
                client.ip(),
                unreachable.0,
                unreachable.1,
                &sent,
            );
            let o = run(&path, FROM_OVERLAY, &from_overlay_frame(err));
            assert_eq!(o.counter, Counter::DecapDelivery);
            assert_eq!(o.event(Event::IcmpErrorTranslated), 1);
            let p = o.parsed();
            assert!(p.checksums_ok, "{p:?}");
            assert_eq!(
                (p.src, p.dst),
                (vip.ip(), client.ip()),
                "the backend itself reported"
            );
            let q = p.inner.unwrap();
            assert_eq!(
                (q.src, q.sport, q.dst, q.dport),
                (client.ip(), client.port(), vip.ip(), 53)
            );

            // From a hop in between (the peer node's VTEP address): its own source stays.
            let hop: IpAddr = ip(a.remote_cidr.split('/').next().unwrap());
            let too_big = if v6 { (2, 0) } else { (3, 4) };
            let err = icmp_error(hop, client.ip(), too_big.0, too_big.1, &sent);
            let o = run(&path, FROM_OVERLAY, &from_overlay_frame(err));
            let p = o.parsed();
            assert!(p.checksums_ok, "{p:?}");
            assert_eq!((p.src, p.dst), (hop, client.ip()));
            let q = p.inner.unwrap();
            assert_eq!((q.dst, q.dport), (vip.ip(), 53));

            // The client's kernel reporting about a reply (which came from the service
            // address): towards the backend, quoting what the backend sent.
            let reply_as_seen = udp(vip, client, b"answer");
            let err = icmp_error(
                client.ip(),
                vip.ip(),
                unreachable.0,
                unreachable.1,
                &reply_as_seen,
            );
            let o = run(&path, FROM_POD, &from_pod_frame(err));
            assert_eq!(o.counter, Counter::Encap);
            let p = o.parsed();
            assert!(p.checksums_ok, "{p:?}");
            assert_eq!((p.src, p.dst), (client.ip(), backend.ip()));
            let q = p.inner.unwrap();
            assert_eq!(
                (q.src, q.sport, q.dst, q.dport),
                (backend.ip(), 5353, client.ip(), client.port())
            );

            // An error about no tracked flow, to a service address: dropped.
            let stray = udp(client, sa(a.service, 9999), b"?");
            let err = icmp_error(
                ip(a.pod_a),
                ip(a.service),
                unreachable.0,
                unreachable.1,
                &stray,
            );
            let o = run(&path, FROM_POD, &from_pod_frame(err));
            assert_eq!(
                (o.retval, o.counter),
                (TC_ACT_SHOT, Counter::DropServiceProto)
            );
        }
    });
}

#[test]
fn a_removed_udp_backend_stops_receiving_at_once_and_a_removed_tcp_backend_resets_its_clients() {
    let root = PinRoot::new("sb");
    let (_dp, mut svc) = service_node(root.path(), 0);
    for a in [V4, V6] {
        let (old, new) = (sa(a.backend_local, 8080), sa(a.pod_b, 8080));
        let vip_udp = sa(a.service, 53);
        let vip_tcp = sa(a.service, 80);
        let fe_udp = frontend(&a, 53, L4Proto::Udp);
        let fe_tcp = frontend(&a, 80, L4Proto::Tcp);
        svc.upsert_frontend(fe_udp, &one_backend(old)).unwrap();
        svc.upsert_frontend(fe_tcp, &one_backend(old)).unwrap();
        let client = sa(a.pod_a, 50000);
        let o = run(
            root.path(),
            FROM_POD,
            &from_pod_frame(udp(client, vip_udp, b"1")),
        );
        assert_eq!(o.parsed().dst, old.ip());
        run(
            root.path(),
            FROM_POD,
            &from_pod_frame(tcp(client, vip_tcp, SYN)),
        );
        run(
            root.path(),
            FROM_POD,
            &from_pod_frame(
                tcp(old, client, SYN | ACK).macs(BACKEND_MAC, common::packet::GATEWAY_MAC),
            ),
        );

        let change = svc.upsert_frontend(fe_udp, &one_backend(new)).unwrap();
        assert_eq!(
            (change.connections.deleted, change.connections.marked_gone),
            (1, 0)
        );
        let o = run(
            root.path(),
            FROM_POD,
            &from_pod_frame(udp(client, vip_udp, b"2")),
        );
        assert_eq!(o.event(Event::LbNewFlow), 1, "rebalanced");
        assert_eq!(
            o.parsed().dst,
            new.ip(),
            "the next datagram goes to the new backend"
        );

        let change = svc.upsert_frontend(fe_tcp, &one_backend(new)).unwrap();
        assert_eq!(
            (change.connections.deleted, change.connections.marked_gone),
            (0, 1)
        );
        let o = run(
            root.path(),
            FROM_POD,
            &from_pod_frame(tcp(client, vip_tcp, ACK | common::packet::PSH)),
        );
        assert_eq!(
            (o.retval, o.counter),
            (TC_ACT_REDIRECT, Counter::ResetBackendGone)
        );
        let rst = o.parsed();
        assert!(rst.checksums_ok);
        assert_eq!((rst.src, rst.sport, rst.tcp_flags), (vip_tcp.ip(), 80, RST));
        // The old backend, if it still answers, reaches nobody.
        let o = run(
            root.path(),
            FROM_POD,
            &from_pod_frame(tcp(old, client, ACK).macs(BACKEND_MAC, common::packet::GATEWAY_MAC)),
        );
        assert_eq!(
            (o.retval, o.counter),
            (TC_ACT_SHOT, Counter::DropBackendGone)
        );
        // A new connection from the same port goes to the new backend.
        let o = run(
            root.path(),
            FROM_POD,
            &from_pod_frame(tcp(client, vip_tcp, SYN)),
        );
        assert_translated(&o, client, new, "new connection after the reset");
    }
}

#[test]
fn a_draining_backend_keeps_its_tcp_connections_and_loses_its_udp_flows() {
    let root = PinRoot::new("sg");
    let (_dp, mut svc) = service_node(root.path(), 0);
    for a in [V4, V6] {
        let (old, new) = (sa(a.backend_local, 8080), sa(a.pod_b, 8080));
        for (proto, port) in [(L4Proto::Tcp, 80), (L4Proto::Udp, 53)] {
            let fe = frontend(&a, port, proto);
            svc.upsert_frontend(fe, &one_backend(old)).unwrap();
            let (client, vip) = (sa(a.pod_a, 51000), sa(a.service, port));
            let first = match proto {
                L4Proto::Tcp => tcp(client, vip, SYN),
                L4Proto::Udp => udp(client, vip, b"1"),
            };
            run(root.path(), FROM_POD, &from_pod_frame(first));
            let spec = FrontendSpec {
                draining: vec![old],
                ..one_backend(new)
            };
            svc.upsert_frontend(fe, &spec).unwrap();
            let next = match proto {
                L4Proto::Tcp => tcp(client, vip, ACK),
                L4Proto::Udp => udp(client, vip, b"2"),
            };
            let o = run(root.path(), FROM_POD, &from_pod_frame(next));
            let want = if proto == L4Proto::Tcp { old } else { new };
            assert_translated(&o, client, want, "after draining");
            // New flows never go to the draining backend.
            for i in 0..16 {
                let fresh = match proto {
                    L4Proto::Tcp => tcp(sa(a.pod_a, 52000 + i), vip, SYN),
                    L4Proto::Udp => udp(sa(a.pod_a, 52000 + i), vip, b"n"),
                };
                let o = run(root.path(), FROM_POD, &from_pod_frame(fresh));
                assert_eq!(o.parsed().dst, new.ip());
            }
        }
    }
}

#[test]
fn a_removed_frontend_resets_its_tcp_clients_and_its_address_is_then_unallocated() {
    let root = PinRoot::new("sm");
    let (_dp, mut svc) = service_node(root.path(), 0);
    for a in [V4, V6] {
        let fe = frontend(&a, 80, L4Proto::Tcp);
        svc.upsert_frontend(fe, &one_backend(sa(a.backend_local, 8080)))
            .unwrap();
        let (client, vip) = (sa(a.pod_a, 53000), sa(a.service, 80));
        run(
            root.path(),
            FROM_POD,
            &from_pod_frame(tcp(client, vip, SYN)),
        );
        let change = svc.remove_frontend(&fe).unwrap().unwrap();
        assert_eq!(change.connections.marked_gone, 1);
        assert!(svc.remove_frontend(&fe).unwrap().is_none(), "idempotent");
        let o = run(
            root.path(),
            FROM_POD,
            &from_pod_frame(tcp(client, vip, ACK)),
        );
        assert_eq!(o.counter, Counter::ResetBackendGone);
        let o = run(
            root.path(),
            FROM_POD,
            &from_pod_frame(tcp(sa(a.pod_a, 53001), vip, SYN)),
        );
        assert_eq!(
            (o.retval, o.counter),
            (TC_ACT_SHOT, Counter::DropServiceUnallocated)
        );
    }
}

#[test]
fn the_api_reads_back_what_it_wrote_writes_nothing_twice_and_validates() {
    let root = PinRoot::new("sk");
    let (_dp, mut svc) = service_node(root.path(), 0);
    let a = V4;
    let fe = frontend(&a, 80, L4Proto::Tcp);
    let spec = FrontendSpec {
        backends: vec![
            Backend {
                addr: sa(a.backend_local, 8080),
                terminating: true,
                local: true,
            },
            Backend::new(sa(a.remote_pod, 8080)),
        ],
        draining: vec![sa(a.pod_b, 8080)],
        affinity: Some(Duration::from_secs(600)),
        ..FrontendSpec::cluster_ip(Vec::new())
    };
    assert!(svc.upsert_frontend(fe, &spec).unwrap().created);
    assert!(
        !svc.upsert_frontend(fe, &spec).unwrap().written,
        "unchanged"
    );
    let v6 = frontend(&V6, 53, L4Proto::Udp);
    svc.upsert_frontend(v6, &one_backend(sa(V6.backend_local, 53)))
        .unwrap();
    // A restarted agent finds the same.
    let reopened = Services::open(root.path()).unwrap();
    let mut want = vec![
        (fe, spec.clone()),
        (v6, one_backend(sa(V6.backend_local, 53))),
    ];
    want.sort_by_key(|(f, _)| *f);
    assert_eq!(reopened.frontends(), want);
    assert_eq!(reopened.frontend_id(&fe), svc.frontend_id(&fe));
    let mut cidrs = reopened.service_cidrs().unwrap();
    cidrs.sort();
    assert_eq!(cidrs.len(), 2);

    for (bad, field) in [
        (
            FrontendSpec::cluster_ip(vec![Backend::new(sa(V6.backend_local, 80))]),
            "backends",
        ),
        (
            FrontendSpec::cluster_ip(vec![Backend::new(sa(a.backend_local, 0))]),
            "backends",
        ),
        (
            FrontendSpec {
                draining: vec![sa(a.backend_local, 8080)],
                ..one_backend(sa(a.backend_local, 8080))
            },
            "draining",
        ),
        (
            FrontendSpec {
                affinity: Some(Duration::ZERO),
                ..one_backend(sa(a.backend_local, 8080))
            },
            "affinity",
        ),
    ] {
        match svc.upsert_frontend(fe, &bad) {
            Err(weft_datapath::Error::InvalidService { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{bad:?}: expected InvalidService({field}), got {other:?}"),
        }
    }
    assert!(svc
        .set_service_cidrs(&["0.0.0.0/0".parse().unwrap()])
        .is_err());
}

#[test]
fn garbage_collection_removes_expired_entries_only() {
    let root = PinRoot::new("sc");
    let (_dp, mut svc) = service_node(root.path(), 0);
    let a = V4;
    svc.upsert_frontend(
        frontend(&a, 53, L4Proto::Udp),
        &one_backend(sa(a.backend_local, 53)),
    )
    .unwrap();
    for i in 0..20 {
        run(
            root.path(),
            FROM_POD,
            &from_pod_frame(udp(sa(a.pod_a, 54000 + i), sa(a.service, 53), b"q")),
        );
    }
    // Age half of the connections: both their entries, as time would.
    let map_pin = root.path().join("maps/weft_ct_v1");
    let data = aya::maps::MapData::from_pin(&map_pin).unwrap();
    let mut map: aya::maps::HashMap<
        _,
        weft_datapath::layout::CtKey,
        weft_datapath::layout::CtEntry,
    > = aya::maps::HashMap::try_from(aya::maps::Map::from_map_data(data).unwrap()).unwrap();
    let keys: Vec<_> = map.keys().map(|k| k.unwrap()).collect();
    assert_eq!(keys.len(), 40);
    let aged: Vec<_> = keys
        .iter()
        .filter(|k| {
            let port = u16::from_be_bytes(if k.sport == 53u16.to_be_bytes() {
                k.dport
            } else {
                k.sport
            });
            port % 2 == 0
        })
        .copied()
        .collect();
    for k in &aged {
        let mut e = map.get(k, 0).unwrap();
        e.expires = 1;
        map.insert(k, e, 0).unwrap();
    }
    let ct = svc.conntrack();
    let mut cursor = weft_datapath::GcCursor::default();
    let mut removed = 0;
    let mut rounds = 0;
    loop {
        let r = ct.gc(&mut cursor, 7).unwrap();
        assert!(r.visited <= 7);
        removed += r.removed;
        rounds += 1;
        if r.done {
            break;
        }
    }
    assert!(rounds > 1, "batches");
    assert_eq!(removed, aged.len());
    assert_eq!(ct.records().unwrap().len(), 40 - aged.len());
    assert_eq!(ct.gc_all().unwrap().removed, 0);
}
