//! Real traffic through the per-packet service path: a two-node cluster in namespaces
//! (pods wired as the plugin wires them) runs today's datapath, Services are programmed
//! through `weft_datapath::Services`, and clients that no socket hook sees (there is
//! none: ordinary processes, and a raw AF_PACKET sender) reach them, on the same node and
//! across nodes, IPv4 and IPv6, TCP and UDP. Replies must come from the Service address:
//! connected sockets only accept those, and the raw sender's reply is read with
//! recvfrom. Then backends are removed under running clients: UDP moves at once, TCP is
//! reset.

mod common;

use common::cluster::{Cluster, ClusterNode};
use common::in_netns;
use common::packet::{Packet, GATEWAY_MAC, L4};
use common::pods::Pod;
use common::servers::EchoServer;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;
use weft_datapath::{Backend, Counter, Event, Frontend, FrontendSpec, L4Proto, Services, Tables};

const TCP_PORT: u16 = 8080;
const UDP_PORT: u16 = 5353;
const TIMEOUT: Duration = Duration::from_secs(5);

fn vip(v6: bool) -> IpAddr {
    if v6 {
        "fd00:10:96::10".parse().unwrap()
    } else {
        "10.96.0.10".parse().unwrap()
    }
}

fn service_cidrs() -> [ipnet::IpNet; 2] {
    [
        "10.96.0.0/16".parse().unwrap(),
        "fd00:10:96::/112".parse().unwrap(),
    ]
}

/// Echo servers on every address of a pod.
fn serve(pod: &Pod, name: &str) -> Vec<EchoServer> {
    pod.addrs()
        .into_iter()
        .map(|a| {
            EchoServer::start(
                pod.ns.path(),
                name,
                SocketAddr::new(a, TCP_PORT),
                SocketAddr::new(a, UDP_PORT),
            )
        })
        .collect()
}

fn backend(pod: &Pod, v6: bool, port: u16) -> Backend {
    Backend::new(SocketAddr::new(if v6 { pod.v6 } else { pod.v4 }, port))
}

/// A connected UDP socket of `pod` to `to`, made in its namespace.
fn udp_client(pod: &Pod, to: SocketAddr) -> UdpSocket {
    let any: IpAddr = if to.is_ipv4() {
        "0.0.0.0".parse().unwrap()
    } else {
        "::".parse().unwrap()
    };
    in_netns(pod.ns.path(), move || {
        let s = UdpSocket::bind(SocketAddr::new(any, 0)).expect("bind");
        s.connect(to).expect("connect");
        s.set_read_timeout(Some(TIMEOUT)).expect("timeout");
        s
    })
}

fn tcp_client(pod: &Pod, to: SocketAddr) -> std::io::Result<TcpStream> {
    in_netns(pod.ns.path(), move || {
        let s = TcpStream::connect_timeout(&to, TIMEOUT)?;
        s.set_read_timeout(Some(TIMEOUT))?;
        Ok(s)
    })
}

fn ask_udp(sock: &UdpSocket, what: &str) -> String {
    sock.send(what.as_bytes()).expect("send");
    let mut buf = [0u8; 256];
    let n = sock
        .recv(&mut buf)
        .unwrap_or_else(|e| panic!("no answer to {what}: {e}"));
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

fn ask_tcp(conn: &mut TcpStream, what: &str) -> std::io::Result<String> {
    conn.write_all(what.as_bytes())?;
    let mut buf = [0u8; 256];
    let n = conn.read(&mut buf)?;
    if n == 0 {
        return Err(std::io::Error::new(ErrorKind::UnexpectedEof, "closed"));
    }
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// Sends a UDP datagram from `pod` to `to` as a raw frame on its interface (AF_PACKET:
/// no socket of the pod's stack is involved on the way out), and reads the answer on a
/// socket bound to the datagram's source: returns who answered and what.
fn raw_udp(pod: &Pod, to: SocketAddr, sport: u16, what: &str) -> (SocketAddr, String) {
    let src = pod.addr_like(to.ip());
    let frame = Packet::new(src, to.ip(), L4::udp(sport, to.port(), what.as_bytes()))
        .macs(pod.mac(), GATEWAY_MAC)
        .bytes();
    let dev = pod.pod_veth.clone();
    in_netns(pod.ns.path(), move || {
        let answer = UdpSocket::bind(SocketAddr::new(src, sport)).expect("bind the source port");
        answer.set_read_timeout(Some(TIMEOUT)).expect("timeout");
        send_raw(&dev, &frame);
        let mut buf = [0u8; 256];
        let (n, from) = answer
            .recv_from(&mut buf)
            .expect("an answer to the raw datagram");
        (from, String::from_utf8_lossy(&buf[..n]).into_owned())
    })
}

fn send_raw(dev: &str, frame: &[u8]) {
    let name = std::ffi::CString::new(dev).expect("name");
    // SAFETY: plain socket calls on buffers we own; the fd is closed before returning.
    unsafe {
        let fd = libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW,
            i32::from((libc::ETH_P_ALL as u16).to_be()),
        );
        assert!(
            fd >= 0,
            "AF_PACKET socket: {}",
            std::io::Error::last_os_error()
        );
        let mut addr: libc::sockaddr_ll = std::mem::zeroed();
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_ifindex = libc::if_nametoindex(name.as_ptr()) as i32;
        addr.sll_halen = 6;
        addr.sll_addr[..6].copy_from_slice(&frame[..6]);
        let sent = libc::sendto(
            fd,
            frame.as_ptr().cast(),
            frame.len(),
            0,
            (&addr as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        );
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        assert_eq!(sent, frame.len() as isize, "AF_PACKET send: {err}");
    }
}

fn services(node: &ClusterNode) -> Services {
    let mut s = Services::open(node.root.path()).expect("services");
    s.set_service_cidrs(&service_cidrs()).expect("cidrs");
    s
}

fn counters_of(node: &ClusterNode) -> (weft_datapath::Counters, weft_datapath::Events) {
    let t = Tables::open(node.root.path()).expect("maps");
    (t.counters().unwrap(), t.events().unwrap())
}

#[test]
fn clients_no_socket_hook_sees_reach_services_and_hear_back_from_the_service_address() {
    let cluster = Cluster::new([2, 1]);
    cluster.install();
    let (a, b, c) = (cluster.pod(1, 0), cluster.pod(1, 1), cluster.pod(2, 0));
    let _servers = [serve(b, "same-node"), serve(c, "cross-node")];
    let mut svc = services(cluster.node(1));
    for v6 in [false, true] {
        for (port, pod, name) in [(80u16, b, "same-node"), (81, c, "cross-node")] {
            let proto_spec = |p| FrontendSpec::cluster_ip(vec![backend(pod, v6, p)]);
            svc.upsert_frontend(
                Frontend::internal(vip(v6), port, L4Proto::Tcp),
                &proto_spec(TCP_PORT),
            )
            .unwrap();
            svc.upsert_frontend(
                Frontend::internal(vip(v6), port, L4Proto::Udp),
                &proto_spec(UDP_PORT),
            )
            .unwrap();
            let to = SocketAddr::new(vip(v6), port);

            let mut conn = tcp_client(a, to).unwrap_or_else(|e| panic!("TCP to {to}: {e}"));
            assert_eq!(conn.peer_addr().unwrap(), to);
            assert_eq!(
                ask_tcp(&mut conn, "hello").unwrap(),
                format!("{name}:hello"),
                "TCP {to}"
            );
            assert_eq!(
                ask_tcp(&mut conn, "again").unwrap(),
                format!("{name}:again")
            );

            let sock = udp_client(a, to);
            assert_eq!(ask_udp(&sock, "ping"), format!("{name}:ping"), "UDP {to}");

            let (from, answer) = raw_udp(a, to, 33000 + port, "raw");
            assert_eq!(
                (from, answer),
                (to, format!("{name}:raw")),
                "AF_PACKET {to}"
            );
        }
    }
    let (n1, e1) = counters_of(cluster.node(1));
    assert_eq!(n1.drops(), 0, "{:?}", n1.iter().collect::<Vec<_>>());
    assert!(e1.get(Event::NatForward) > 0 && e1.get(Event::NatReverse) > 0);
    let (n2, _) = counters_of(cluster.node(2));
    assert_eq!(n2.drops(), 0, "{:?}", n2.iter().collect::<Vec<_>>());
}

#[test]
fn removing_backends_under_running_clients_moves_udp_at_once_and_resets_tcp() {
    let cluster = Cluster::new([2, 1]);
    cluster.install();
    let (a, b, c) = (cluster.pod(1, 0), cluster.pod(1, 1), cluster.pod(2, 0));
    let servers_b = serve(b, "old");
    let _servers_c = serve(c, "new");
    let mut svc = services(cluster.node(1));
    for v6 in [false, true] {
        let fe_udp = Frontend::internal(vip(v6), 53, L4Proto::Udp);
        let fe_tcp = Frontend::internal(vip(v6), 80, L4Proto::Tcp);
        svc.upsert_frontend(
            fe_udp,
            &FrontendSpec::cluster_ip(vec![backend(b, v6, UDP_PORT)]),
        )
        .unwrap();
        svc.upsert_frontend(
            fe_tcp,
            &FrontendSpec::cluster_ip(vec![backend(b, v6, TCP_PORT)]),
        )
        .unwrap();

        // A UDP client in lockstep: each datagram waits for its echo.
        let sock = udp_client(a, SocketAddr::new(vip(v6), 53));
        let tag = if v6 { "v6" } else { "v4" };
        for i in 0..5 {
            assert_eq!(
                ask_udp(&sock, &format!("{tag}-u{i}")),
                format!("old:{tag}-u{i}")
            );
        }
        let mut conn = tcp_client(a, SocketAddr::new(vip(v6), 80)).unwrap();
        assert_eq!(
            ask_tcp(&mut conn, &format!("{tag}-t0")).unwrap(),
            format!("old:{tag}-t0")
        );

        let moved = svc
            .upsert_frontend(
                fe_udp,
                &FrontendSpec::cluster_ip(vec![backend(c, v6, UDP_PORT)]),
            )
            .unwrap();
        assert_eq!(moved.connections.deleted, 1);
        // The very next datagram goes to the new backend, from the same socket.
        for i in 5..10 {
            assert_eq!(
                ask_udp(&sock, &format!("{tag}-u{i}")),
                format!("new:{tag}-u{i}")
            );
        }

        let reset = svc
            .upsert_frontend(
                fe_tcp,
                &FrontendSpec::cluster_ip(vec![backend(c, v6, TCP_PORT)]),
            )
            .unwrap();
        assert_eq!(reset.connections.marked_gone, 1);
        // The connection's next segment is answered with a RST: the client learns at
        // once instead of retransmitting into a black hole.
        let err = ask_tcp(&mut conn, &format!("{tag}-t1")).expect_err("the connection is reset");
        assert_eq!(err.kind(), ErrorKind::ConnectionReset, "{err}");
        let mut fresh = tcp_client(a, SocketAddr::new(vip(v6), 80)).unwrap();
        assert_eq!(
            ask_tcp(&mut fresh, &format!("{tag}-t2")).unwrap(),
            format!("new:{tag}-t2")
        );
    }
    // The removed backend got nothing after its removal.
    let old: Vec<String> = servers_b.iter().flat_map(|s| s.received()).collect();
    for got in &old {
        let late = ["u5", "u6", "u7", "u8", "u9", "t1", "t2"]
            .iter()
            .any(|s| got.ends_with(s));
        assert!(
            !late,
            "the old backend got {got} after it was removed: {old:?}"
        );
    }
    let (n1, _) = counters_of(cluster.node(1));
    assert_eq!(
        n1.get(Counter::ResetBackendGone),
        2,
        "{:?}",
        n1.iter().collect::<Vec<_>>()
    );
}
