//! What the datapath refuses or contains: oversize packets, spoofed sources, foreign VNIs,
//! and tunnel packets in connection tracking. Root only; a lab per test.

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::Duration;

use weft::lab::netns;
use weft_netlink::{AddrFlags, Handle, VxlanSpec};

mod common;
use common::TestLab;

fn addr_of(addrs: &[IpAddr], v4: bool) -> IpAddr {
    *addrs.iter().find(|a| a.is_ipv4() == v4).unwrap()
}

fn counter(lab: &TestLab, node: u32, outcome: &str) -> f64 {
    lab.metric(
        node,
        &format!("weft_datapath_packets_total{{outcome=\"{outcome}\"}}"),
    )
    .unwrap_or(-1.0)
}

fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> anyhow::Result<T> + Send + 'static) -> T {
    netns::in_netns(&netns::path_of(ns), f).unwrap()
}

#[test]
fn a_pod_sending_more_than_the_path_mtu_gets_frag_needed_and_packet_too_big() {
    weft_testkit::require_tool("ping");
    let lab = TestLab::up(2, 1);
    let pod = lab.pod("pod1-1").clone();
    let remote = lab.pod("pod2-1").clone();
    // Misconfigure the pod (and its veth) to the underlay's MTU: the overlay cannot carry it.
    let host_veth = pod.result["interfaces"][0]["name"]
        .as_str()
        .unwrap()
        .to_string();
    in_ns(&pod.netns, || {
        let mut h = Handle::new()?;
        let eth0 = h.link_by_name("eth0")?.unwrap();
        Ok(h.set_mtu(eth0.index, 1500)?)
    });
    let node_ns = lab.state.node(1).unwrap().netns.clone();
    in_ns(&node_ns, move || {
        let mut h = Handle::new()?;
        let veth = h.link_by_name(&host_veth)?.unwrap();
        Ok(h.set_mtu(veth.index, 1500)?)
    });
    let ping = |args: &[&str]| {
        let out =
            weft_testkit::run(weft_testkit::cmd_in(&netns::path_of(&pod.netns), "ping").args(args));
        format!("{}{}", out.stdout, out.stderr)
    };
    let v4 = ping(&[
        "-c",
        "2",
        "-W",
        "1",
        "-M",
        "do",
        "-s",
        "1472",
        &addr_of(&remote.addresses, true).to_string(),
    ]);
    assert!(
        v4.contains("Frag needed") && v4.contains("mtu = 1450"),
        "{v4}"
    );
    assert!(
        v4.contains(" 0 received"),
        "an oversize packet got through (outer fragmentation?): {v4}"
    );
    let v6 = ping(&[
        "-6",
        "-c",
        "2",
        "-W",
        "1",
        "-M",
        "do",
        "-s",
        "1452",
        &addr_of(&remote.addresses, false).to_string(),
    ]);
    assert!(
        v6.to_lowercase().contains("too big") && v6.contains("1450"),
        "{v6}"
    );
    assert!(counter(&lab, 1, "mtu_fallback") >= 2.0);
    // Within the MTU everything still flows.
    let ok = ping(&[
        "-c",
        "1",
        "-W",
        "2",
        "-M",
        "do",
        "-s",
        "1400",
        &addr_of(&remote.addresses, true).to_string(),
    ]);
    assert!(ok.contains(" 1 received"), "{ok}");
}

#[test]
fn a_pod_sending_from_an_address_that_is_not_its_own_is_dropped_and_counted() {
    let lab = TestLab::up(2, 2);
    let liar = lab.pod("pod1-1").clone();
    let neighbour = lab.pod("pod1-2").clone();
    let remote = lab.pod("pod2-1").clone();
    let port = 33000 + (std::process::id() % 1000) as u16;
    let target_remote = addr_of(&remote.addresses, true);
    let target_local = addr_of(&neighbour.addresses, true);
    let receivers: Vec<UdpSocket> = [&remote, &neighbour]
        .iter()
        .map(|p| {
            let ns = p.netns.clone();
            in_ns(&ns, move || {
                let s = UdpSocket::bind(("0.0.0.0", port))?;
                s.set_read_timeout(Some(Duration::from_millis(800)))?;
                Ok(s)
            })
        })
        .collect();
    // An address from the node's range that was never given to this pod, and the address
    // of another pod on the same node.
    let forged = ["10.244.1.77".parse::<IpAddr>().unwrap(), target_local];
    let before = counter(&lab, 1, "drop_spoofed_source");
    for source in forged {
        let ns = liar.netns.clone();
        in_ns(&ns, move || {
            let mut h = Handle::new()?;
            let eth0 = h.link_by_name("eth0")?.unwrap();
            let _ = h.add_address(
                eth0.index,
                IpNetExt::host(source),
                AddrFlags { nodad: true },
            );
            let s = UdpSocket::bind(SocketAddr::new(source, 0))?;
            for to in [target_remote, target_local] {
                s.send_to(b"forged", SocketAddr::new(to, port))?;
            }
            Ok(())
        });
    }
    let mut buf = [0u8; 16];
    for r in &receivers {
        match r.recv_from(&mut buf) {
            Ok((_, from)) => panic!("a forged packet from {from} was delivered"),
            Err(e) => assert!(
                matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
                "{e}"
            ),
        }
    }
    // pod1-2's own address to itself is local delivery in the pod, never reaching the veth.
    assert!(
        counter(&lab, 1, "drop_spoofed_source") >= before + 3.0,
        "spoofed packets were not counted as drops"
    );
}

struct IpNetExt;
impl IpNetExt {
    fn host(addr: IpAddr) -> ipnet::IpNet {
        ipnet::IpNet::new(addr, if addr.is_ipv4() { 32 } else { 128 }).unwrap()
    }
}

#[test]
fn overlay_packets_carrying_another_vni_are_not_delivered() {
    let lab = TestLab::up(2, 1);
    let pod = lab.pod("pod1-1").clone();
    let target = addr_of(&pod.addresses, true);
    let port = 34000 + (std::process::id() % 1000) as u16;
    let receiver = in_ns(&pod.netns, move || {
        let s = UdpSocket::bind(("0.0.0.0", port))?;
        s.set_read_timeout(Some(Duration::from_millis(1500)))?;
        Ok(s)
    });
    let node1_vtep_mac = [0x0e, 0x77, 198, 51, 100, 11];
    let node2 = lab.state.node(2).unwrap().netns.clone();
    // Node 2 builds a second tunnel with VNI 7 towards node 1, addressed exactly like the real
    // one (inner destination MAC = node 1's VTEP MAC, source in node 2's pod CIDR), so only
    // the VNI tells it apart.
    in_ns(&node2, move || {
        let mut h = Handle::new()?;
        let uplink = h.link_by_name("uplink")?.unwrap();
        let vx = h.create_vxlan(&VxlanSpec {
            name: "wvx7",
            vni: 7,
            local: Some("198.51.100.12".parse()?),
            underlay_index: Some(uplink.index),
            port: 8472,
            learning: false,
            mtu: Some(1450),
            mac: None,
            df_set: true,
            up: true,
        })?;
        h.replace_fdb(vx, node1_vtep_mac, "198.51.100.11".parse()?)?;
        h.add_address(vx, "10.244.2.250/32".parse()?, AddrFlags::default())?;
        h.add_neighbour(vx, target, node1_vtep_mac, true)?;
        Ok(())
    });
    // A socket bound to the VNI 7 device: with no route through it, the kernel treats the
    // destination as on-link there and uses the permanent neighbour entry above.
    in_ns(&node2, move || {
        let s = socket_bound_to("wvx7", "10.244.2.250".parse()?)?;
        for _ in 0..5 {
            s.send_to(b"wrong vni", SocketAddr::new(target, port))?;
        }
        Ok(())
    });
    let mut buf = [0u8; 16];
    if let Ok((_, from)) = receiver.recv_from(&mut buf) {
        panic!("a packet with VNI 7 from {from} reached the pod");
    }
    // Control: the same pod is reachable from node 2 over the real tunnel.
    in_ns(&node2, move || {
        let s = UdpSocket::bind(("0.0.0.0", 0))?;
        s.send_to(b"right vni", SocketAddr::new(target, port))?;
        Ok(())
    });
    let (n, _) = receiver
        .recv_from(&mut buf)
        .expect("the real tunnel delivers");
    assert_eq!(&buf[..n], b"right vni");
}

fn socket_bound_to(device: &str, source: IpAddr) -> anyhow::Result<UdpSocket> {
    use std::os::fd::AsRawFd;
    let s = UdpSocket::bind(SocketAddr::new(source, 0))?;
    let name = std::ffi::CString::new(device)?;
    // SAFETY: setsockopt with a valid fd and a NUL-terminated device name.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_BINDTODEVICE,
            name.as_ptr() as *const libc::c_void,
            name.as_bytes_with_nul().len() as libc::socklen_t,
        )
    };
    anyhow::ensure!(
        rc == 0,
        "SO_BINDTODEVICE {device}: {}",
        std::io::Error::last_os_error()
    );
    Ok(s)
}

#[test]
fn tunnel_packets_are_not_connection_tracked() {
    let lab = TestLab::up(2, 1);
    let server = lab.pod("pod2-1").clone();
    let client = lab.pod("pod1-1").clone();
    let port = 35000 + (std::process::id() % 1000) as u16;
    let listener = in_ns(&server.netns, move || Ok(TcpListener::bind(("::", port))?));
    let accept = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut sink = Vec::new();
        std::io::Read::read_to_end(&mut s, &mut sink).unwrap();
        sink.len()
    });
    let target = SocketAddr::new(addr_of(&server.addresses, true), port);
    in_ns(&client.netns, move || {
        let mut s = TcpStream::connect_timeout(&target, Duration::from_secs(3))?;
        std::io::Write::write_all(&mut s, &vec![7u8; 4 << 20])?;
        Ok(())
    });
    assert_eq!(accept.join().unwrap(), 4 << 20);
    for node in 1..=2 {
        let ns = lab.state.node(node).unwrap().netns.clone();
        // Conntrack is live in the node (the masquerade table needs it), so without the
        // notrack rules every tunnelled flow would leave entries for the outer UDP packets.
        let listing = in_ns(&ns, || {
            Ok(std::fs::read_to_string("/proc/net/nf_conntrack")?)
        });
        let tunnel = listing.lines().filter(|l| l.contains("port=8472 ")).count();
        assert_eq!(tunnel, 0, "node{node} tracks tunnel packets:\n{listing}");
        // The pod flow itself never met netfilter either (the programs redirect it).
        assert!(
            !listing.contains(&format!("dport={port} ")),
            "node{node} tracked the pod flow:\n{listing}"
        );
    }
}
