//! The fence as a workload feels it: chained after Debian's bridge in a simulated node, an
//! opted-in pod's proxy UID reaches the world while every other UID, root included, is
//! refused at once for TCP, UDP, ICMP and raw IP, over IPv4 and IPv6; loopback and replies
//! of established flows keep working; DEL lifts the fence.

mod guard_support;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use guard_support::probe::{self, FrameHow, Held, Server, CONNECT_TIMEOUT_MS, REFUSAL_TIMEOUT_MS};
use guard_support::*;
use serde_json::json;

#[test]
fn probe_entry() {
    probe::entry();
}

fn tcp(pod: &Pod, uid: u32, addr: IpAddr, port: u16, timeout_ms: u64) -> String {
    probe::run(pod.path(), uid, &probe::tcp_action(addr, port, timeout_ms))
}

/// Refused at once: EPERM on send (IPv4 ICMP), or the fence's ICMP "administratively
/// prohibited" (EACCES) coming back (IPv6 ping sockets never see the EPERM).
fn assert_refused(outcome: &str, what: &str) {
    assert!(
        outcome == "eperm" || outcome == "rejected:EACCES",
        "{what}: {outcome} is not a refusal"
    );
}

#[test]
fn dual_stack_pod_is_fenced_to_its_proxy_uid() {
    let lab = Lab::new("tr");
    let world = PongServer::start(lab.world.path());
    let pod = lab.pod("agent-1").with_annotations(opted_in(PROXY_UID));
    let chain = lab.guarded_chain(true, json!({}));
    let result = chain.add(&pod.att).expect("ADD bridge + guard");
    let pod_v4 = pod.address(false).expect("pod has an IPv4 address");
    let pod_v6 = pod.address(true).expect("pod has an IPv6 address");
    assert!(lab.has_fence(&pod));
    let v4 = IpAddr::V4(WORLD_V4);
    let v6 = IpAddr::V6(WORLD_V6);

    // The proxy UID opens new flows of every kind.
    for addr in [v4, v6] {
        assert_eq!(
            tcp(&pod, PROXY_UID, addr, world.port, CONNECT_TIMEOUT_MS),
            "connected",
            "proxy tcp {addr}"
        );
        assert_eq!(
            probe::run(pod.path(), PROXY_UID, &format!("udp {addr} 9")),
            "sent",
            "proxy udp {addr}"
        );
        assert_eq!(
            probe::run(pod.path(), PROXY_UID, &format!("icmp {addr}")),
            "reply",
            "proxy ping {addr}"
        );
    }

    // Everyone else, root included, is refused at once.
    for uid in [OTHER_UID, 0] {
        for addr in [v4, v6] {
            assert_eq!(
                tcp(&pod, uid, addr, world.port, REFUSAL_TIMEOUT_MS),
                "refused",
                "uid {uid} tcp {addr}"
            );
            assert_eq!(
                probe::run(pod.path(), uid, &format!("udp {addr} 53")),
                "eperm",
                "uid {uid} udp {addr}"
            );
            assert_refused(
                &probe::run(pod.path(), uid, &format!("icmp {addr}")),
                &format!("uid {uid} ping {addr}"),
            );
        }
    }
    // Every other protocol: raw IP with SCTP's number and an experimental one (root only
    // can open raw sockets).
    for proto in [132, 253] {
        for addr in [v4, v6] {
            assert_eq!(
                probe::run(pod.path(), 0, &format!("raw {proto} {addr}")),
                "eperm",
                "raw {proto} {addr}"
            );
        }
    }

    // ICMPv6 typed as neighbour discovery from a user socket is refused too (only the
    // kernel's own ND, which has no socket owner, passes); the proxy's passes.
    for (uid, expected) in [(OTHER_UID, "eperm"), (0, "eperm"), (PROXY_UID, "sent")] {
        assert_eq!(
            probe::run_with_net_raw(pod.path(), uid, &format!("nd6 {v6}")),
            expected,
            "uid {uid} raw ND to {v6}"
        );
    }

    // Loopback works for every UID.
    let local = PongServer::start(pod.path());
    for uid in [OTHER_UID, 0, PROXY_UID] {
        for addr in [
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        ] {
            assert_eq!(
                tcp(&pod, uid, addr, local.port, CONNECT_TIMEOUT_MS),
                "connected",
                "uid {uid} loopback {addr}"
            );
        }
    }

    // A server in the pod running as UID 1000 answers a connection from the world: the
    // replies of a flow the world opened pass.
    for (port, addr) in [(8080, pod_v4), (8081, pod_v6)] {
        let server = Server::start(pod.path(), OTHER_UID, port);
        ping_pong_from(lab.world.path(), addr, port)
            .unwrap_or_else(|e| panic!("world -> pod {addr}: {e}"));
        assert_eq!(server.finish(), "served");
    }

    chain
        .check(&pod.att, &result)
        .expect("CHECK of an intact fence");
    chain.del(&pod.att, Some(&result)).expect("DEL");
    assert!(!lab.has_fence(&pod), "DEL removed the fence");
}

#[test]
fn del_lifts_the_fence() {
    let lab = Lab::new("dl");
    let world = PongServer::start(lab.world.path());
    let pod = lab.pod("agent-2").with_annotations(opted_in(PROXY_UID));
    let chain = lab.guarded_chain(false, json!({}));
    let result = chain.add(&pod.att).expect("ADD");
    let v4 = IpAddr::V4(WORLD_V4);
    assert_eq!(
        tcp(&pod, OTHER_UID, v4, world.port, REFUSAL_TIMEOUT_MS),
        "refused"
    );
    // DEL of the guard alone (the bridge stays): the pod is plain again.
    let guard_only = lab.chain("1.0.0", vec![lab.guard(json!({}))]);
    guard_only.del(&pod.att, Some(&result)).expect("DEL guard");
    assert_eq!(
        tcp(&pod, OTHER_UID, v4, world.port, CONNECT_TIMEOUT_MS),
        "connected"
    );
    guard_only
        .del(&pod.att, Some(&result))
        .expect("DEL is idempotent");
    chain.del(&pod.att, None).expect("DEL without prevResult");
}

#[test]
fn ipv4_only_pod_is_fenced_for_ipv6_too() {
    let lab = Lab::new("v4");
    let pod = lab.pod("agent-3").with_annotations(opted_in(PROXY_UID));
    let chain = lab.guarded_chain(false, json!({}));
    chain.add(&pod.att).expect("ADD");
    assert_eq!(pod.address(true), None, "no IPv6 address yet");
    assert!(lab.has_fence(&pod));

    let local = PongServer::start(pod.path());
    assert_eq!(
        tcp(
            &pod,
            OTHER_UID,
            IpAddr::V6(Ipv6Addr::LOCALHOST),
            local.port,
            CONNECT_TIMEOUT_MS
        ),
        "connected",
        "IPv6 loopback stays open"
    );

    // IPv6 arrives later (an address and an on-link default route): it is fenced already.
    pod.ns
        .ip(&["-6", "addr", "add", "fd77::99/64", "dev", "eth0", "nodad"]);
    pod.ns.ip(&["-6", "route", "add", "default", "dev", "eth0"]);
    let v6 = IpAddr::V6(WORLD_V6);
    let r = probe::run(pod.path(), OTHER_UID, &format!("udp {v6} 53"));
    assert_eq!(r, "eperm");
    assert_eq!(tcp(&pod, OTHER_UID, v6, 80, REFUSAL_TIMEOUT_MS), "refused");
    assert_refused(
        &probe::run(pod.path(), OTHER_UID, &format!("icmp {v6}")),
        "ping",
    );
    // The route works: the proxy's datagram leaves.
    assert_eq!(
        probe::run(pod.path(), PROXY_UID, &format!("udp {v6} 53")),
        "sent"
    );
}

/// The bypass the frame fence closes: a process that keeps CAP_NET_RAW writes a hand-made
/// Ethernet frame (IPv4 or IPv6, UDP to the world) on an AF_PACKET socket, queued or with
/// `PACKET_QDISC_BYPASS`. From UID 1000 or root it never leaves the pod (the send fails with
/// ENOBUFS); the same frame from the proxy UID reaches the world, which shows the frame
/// itself is deliverable. Each refused frame is followed by a proxy frame on the same path,
/// so once that one has arrived the refused one can no longer be on its way.
#[test]
fn raw_frames_leave_the_pod_only_from_the_proxy_uid() {
    let lab = Lab::new("rf");
    let sink = UdpSink::start(lab.world.path());
    let pod = lab.pod("agent-raw").with_annotations(opted_in(PROXY_UID));
    let chain = lab.guarded_chain(true, json!({}));
    let result = chain.add(&pod.att).expect("ADD bridge + guard");
    let gateway = lab.gateway_mac();
    let routes = [
        (pod.address(false).expect("pod IPv4"), IpAddr::V4(WORLD_V4)),
        (pod.address(true).expect("pod IPv6"), IpAddr::V6(WORLD_V6)),
    ];
    let send = |uid: u32, src: IpAddr, dst: IpAddr, tag: &str, how: FrameHow| {
        let action = probe::frame_action("eth0", &gateway, src, dst, sink.port, tag, how);
        probe::run_with_net_raw(pod.path(), uid, &action)
    };
    for (src, dst) in routes {
        for how in [FrameHow::Queued, FrameHow::Bypass, FrameHow::Dgram] {
            for uid in [OTHER_UID, 0] {
                let refused = format!("uid{uid}-{dst}-{how:?}");
                assert_eq!(
                    send(uid, src, dst, &refused, how),
                    "enobufs",
                    "{refused}: the frame fence drops it at egress"
                );
                let marker = format!("proxy-after-{refused}");
                assert_eq!(send(PROXY_UID, src, dst, &marker, how), "sent");
                assert!(sink.wait_for(&marker), "{marker} reached the world");
                assert!(!sink.saw(&refused), "{refused} left the pod");
            }
        }
    }
    chain.check(&pod.att, &result).expect("CHECK");
    // DEL of the guard alone (the bridge stays) removes the frame fence too, and then the
    // same frame from UID 1000 leaves: the test would see a bypass.
    let guard_only = lab.chain("1.0.0", vec![lab.guard(json!({}))]);
    guard_only.del(&pod.att, Some(&result)).expect("DEL guard");
    let out = pod.nft(&["list", "table", "netdev", "weft_guard"]);
    assert!(!out.success(), "DEL removed the frame fence");
    let (src, dst) = routes[0];
    assert_eq!(
        send(OTHER_UID, src, dst, "unfenced", FrameHow::Bypass),
        "sent"
    );
    assert!(sink.wait_for("unfenced"), "the probe frame is deliverable");
    chain.del(&pod.att, None).expect("DEL");
}

/// A socket that exists before the fence does not get around it: UID 1000, holding
/// CAP_NET_RAW, opens its AF_PACKET socket (with `PACKET_QDISC_BYPASS`) before the guard's
/// ADD and writes its frame after it; the frame fence drops it when it is sent.
#[test]
fn a_raw_socket_opened_before_the_fence_is_fenced_too() {
    let lab = Lab::new("rb");
    let sink = UdpSink::start(lab.world.path());
    let pod = lab.pod("agent-early").with_annotations(opted_in(PROXY_UID));
    // The bridge alone first: the pod has its address, and no fence yet.
    let bridge = lab.chain("1.0.0", vec![lab.bridge(false)]);
    let prev = bridge.add(&pod.att).expect("ADD bridge");
    let gateway = lab.gateway_mac();
    let (src, dst) = (pod.address(false).expect("pod IPv4"), IpAddr::V4(WORLD_V4));
    let action =
        |tag: &str, how| probe::frame_action("eth0", &gateway, src, dst, sink.port, tag, how);
    let early = Held::start_with_net_raw(pod.path(), OTHER_UID, &action("early", FrameHow::Held));
    // Now the guard, as the second plugin of the chain.
    let guard = lab.run_guard(
        "ADD",
        Some(&pod),
        &lab.guard_request("1.0.0", json!({}), &pod, Some(&prev)),
        &[],
    );
    assert!(guard.success(), "{guard:#?}");
    assert!(lab.has_frame_fence(&pod));
    assert_eq!(
        early.release(),
        "enobufs",
        "the early socket's frame is dropped"
    );
    let marker =
        probe::run_with_net_raw(pod.path(), PROXY_UID, &action("marker", FrameHow::Bypass));
    assert_eq!(marker, "sent");
    assert!(sink.wait_for("marker"));
    assert!(!sink.saw("early"), "the early socket's frame left the pod");
    let full = lab.guarded_chain(false, json!({}));
    full.del(&pod.att, None).expect("DEL");
}

/// Conntrack keeps a UDP flow for a while after its socket is gone, and SO_REUSEADDR lets
/// any UID share a UDP port. Neither lets another UID ride the proxy's flow: the fence only
/// takes established packets in the reply direction (answers to flows the world opened),
/// so UID 1000 repeating the proxy's 5-tuple, with no capability at all, is refused.
#[test]
fn another_uid_cannot_reuse_the_proxys_udp_flow() {
    let lab = Lab::new("ru");
    let sink = UdpSink::start(lab.world.path());
    let pod = lab.pod("agent-reuse").with_annotations(opted_in(PROXY_UID));
    let chain = lab.guarded_chain(true, json!({}));
    let result = chain.add(&pod.att).expect("ADD");
    for (lport, world) in [(41000, IpAddr::V4(WORLD_V4)), (41001, IpAddr::V6(WORLD_V6))] {
        let flow =
            |tag: &str, wait: &str| format!("udp-from {lport} {world} {} {tag} {wait}", sink.port);
        // The proxy talks to the world and gets its answer: conntrack holds the flow.
        assert_eq!(
            probe::run(pod.path(), PROXY_UID, &flow("proxy", "reply")),
            "reply"
        );
        // Its socket is closed; the same 5-tuple from UID 1000 is still refused.
        let tag = format!("reuse-{lport}");
        assert_eq!(
            probe::run(pod.path(), OTHER_UID, &flow(&tag, "noreply")),
            "eperm",
            "uid {OTHER_UID} from the proxy's port {lport} to {world}"
        );
        assert!(!sink.saw(&tag));
    }
    chain.check(&pod.att, &result).expect("CHECK");
    chain.del(&pod.att, Some(&result)).expect("DEL");
}
