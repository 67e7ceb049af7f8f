//! The lab end to end: real agents, the real CNI plugin, real traffic. Root only.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use weft::lab::{self, netns, LabState, UpOptions};

mod common;
use common::TestLab;

fn v4(addrs: &[IpAddr]) -> IpAddr {
    *addrs.iter().find(|a| a.is_ipv4()).unwrap()
}

#[test]
fn three_node_matrix_is_green_over_ipv4_and_ipv6_including_world_egress() {
    let lab = TestLab::up(3, 2);
    let probes = lab::check::check(&lab.state).unwrap();
    let table = lab::check::render(&probes);
    let failed = probes.iter().filter(|p| !p.ok()).count();
    assert_eq!(failed, 0, "{table}");
    for kind in [
        "pod-pod same-node",
        "pod-pod cross-node",
        "pod-world (masquerade)",
        "node-pod local",
        "node-pod remote",
    ] {
        for family in ["IPv4", "IPv6"] {
            assert!(
                probes.iter().any(|p| p.kind == kind && p.family == family),
                "no {kind} {family} probe:\n{table}"
            );
        }
    }
    // The fast path carried the traffic: every node delivered locally and through the overlay.
    for node in 1..=3 {
        for outcome in ["local_delivery", "encap", "decap_delivery"] {
            let key = format!("weft_datapath_packets_total{{outcome=\"{outcome}\"}}");
            assert!(
                lab.metric(node, &key).unwrap_or(0.0) > 0.0,
                "node{node} {outcome} is zero"
            );
        }
        let drops = [
            "drop_spoofed_source",
            "drop_unknown_local_dest",
            "drop_unknown_overlay_source",
            "drop_malformed",
        ];
        for d in drops {
            let key = format!("weft_datapath_packets_total{{outcome=\"{d}\"}}");
            assert_eq!(lab.metric(node, &key), Some(0.0), "node{node} {d}");
        }
    }
}

#[test]
fn a_second_lab_with_the_same_name_is_refused() {
    let lab = TestLab::up(1, 0);
    let again = UpOptions {
        name: lab.state.name.clone(),
        dir: lab.state.dir.clone(),
        nodes: 1,
        pods_per_node: 0,
        weft_bin: PathBuf::from(env!("CARGO_BIN_EXE_weft")),
        attach_mode: weft_datapath::AttachMode::Auto,
    };
    let err = lab::up::up(&again).expect_err("second lab must be refused");
    assert!(err.to_string().contains("already exists"), "{err:#}");
    // The refusal touched nothing: the first lab still works.
    assert!(LabState::load(&lab.state.dir).is_ok());
}

/// A receiver that counts bytes and checks their pattern, in the pod's namespace.
fn sink(pod_netns: &str, port: u16) -> std::thread::JoinHandle<std::io::Result<u64>> {
    let listener: TcpListener = netns::in_netns(&netns::path_of(pod_netns), move || {
        Ok(TcpListener::bind(("0.0.0.0", port))?)
    })
    .unwrap();
    std::thread::spawn(move || {
        let (mut stream, _) = listener.accept()?;
        let mut buf = vec![0u8; 1 << 16];
        let mut total: u64 = 0;
        loop {
            let n = stream.read(&mut buf)?;
            if n == 0 {
                return Ok(total);
            }
            for (i, b) in buf[..n].iter().enumerate() {
                if *b != ((total + i as u64) % 251) as u8 {
                    return Err(std::io::Error::other(format!(
                        "corrupt byte at offset {}",
                        total + i as u64
                    )));
                }
            }
            total += n as u64;
        }
    })
}

#[test]
fn killing_an_agent_drops_no_stream_and_pods_added_meanwhile_are_reachable() {
    let lab = TestLab::up(2, 1);
    let server_pod = lab.pod("pod2-1").clone();
    let client_pod = lab.pod("pod1-1").clone();
    let port = 31000 + (std::process::id() % 1000) as u16;
    let receiver = sink(&server_pod.netns, port);
    let target = SocketAddr::new(v4(&server_pod.addresses), port);

    // A 20-second cross-node stream at a steady rate, with a pattern the receiver verifies.
    let sender = {
        let path = netns::path_of(&client_pod.netns);
        std::thread::spawn(move || -> anyhow::Result<u64> {
            let mut stream = netns::in_netns(&path, move || {
                Ok(TcpStream::connect_timeout(&target, Duration::from_secs(3))?)
            })?;
            let start = Instant::now();
            let mut sent: u64 = 0;
            let mut chunk = vec![0u8; 16 * 1024];
            while start.elapsed() < Duration::from_secs(20) {
                for (i, b) in chunk.iter_mut().enumerate() {
                    *b = ((sent + i as u64) % 251) as u8;
                }
                stream.write_all(&chunk)?;
                sent += chunk.len() as u64;
                std::thread::sleep(Duration::from_millis(2));
            }
            stream.shutdown(std::net::Shutdown::Write)?;
            Ok(sent)
        })
    };

    std::thread::sleep(Duration::from_secs(4));
    let node1 = lab.state.node(1).unwrap().clone();
    let pid = node1.agent_pid.expect("agent started");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    while lab::process_alive(pid) {
        std::thread::sleep(Duration::from_millis(20));
    }

    // With node1's agent gone: a new pod on node1 gets an address and is reachable from node2.
    let topology = lab::topology::Topology::new(&lab.state.name);
    let late =
        lab::up::add_pod(&lab.state, &topology, 1, 9).expect("ADD works while the agent is down");
    // (Its namespace carries the lab's prefix, so lab down removes it with the rest.)
    let listener = netns::in_netns(&netns::path_of(&late.netns), move || {
        Ok(TcpListener::bind(("::", port + 1))?)
    })
    .unwrap();
    let expected = late.addresses.len();
    let accept = std::thread::spawn(move || -> std::io::Result<()> {
        for _ in 0..expected {
            let (mut s, _) = listener.accept()?;
            s.write_all(b"hi")?;
        }
        Ok(())
    });
    for addr in &late.addresses {
        let to = SocketAddr::new(*addr, port + 1);
        let got = netns::in_netns(&netns::path_of(&server_pod.netns), move || {
            let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(3))?;
            s.set_read_timeout(Some(Duration::from_secs(3)))?;
            let mut buf = [0u8; 2];
            s.read_exact(&mut buf)?;
            Ok(buf)
        });
        assert_eq!(
            got.unwrap(),
            *b"hi",
            "pod added while the agent was down, reached at {addr} from node2"
        );
    }
    accept.join().unwrap().unwrap();

    // Restart the agent: it adopts the pinned datapath and finds nothing to change.
    let new_pid =
        lab::up::spawn_agent(&PathBuf::from(env!("CARGO_BIN_EXE_weft")), &lab.state, 1).unwrap();
    let mut restarted = node1.clone();
    restarted.agent_pid = Some(new_pid);
    lab::up::wait_ready(&restarted, &lab.state.dir).unwrap();
    assert_eq!(
        lab.metric(1, "weft_agent_last_reconcile_changes"),
        Some(0.0),
        "the restarted agent reprogrammed something"
    );
    let log = std::fs::read_to_string(lab.state.dir.join("node1").join("agent.log")).unwrap();
    assert!(log.contains("adopted the pinned program"), "{log}");

    let sent = sender
        .join()
        .unwrap()
        .expect("the stream must complete without error");
    let received = receiver
        .join()
        .unwrap()
        .expect("the receiver must see every byte intact");
    assert_eq!(sent, received);
    assert!(sent > 10 << 20, "only {sent} bytes went through in 20 s");
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(new_pid),
        nix::sys::signal::Signal::SIGKILL,
    );
}

#[test]
fn an_invalid_node_object_is_refused_by_name_and_field_and_the_agent_keeps_running() {
    let lab = TestLab::up(2, 1);
    let nodes_dir = lab.state.dir.join("nodes");
    // Overlaps node1's pod CIDR, and a second object without pod CIDRs at all.
    std::fs::write(
        nodes_dir.join("bad.yaml"),
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: intruder\nspec:\n  podCIDRs: [\"10.244.1.128/25\"]\nstatus:\n  addresses:\n  - type: InternalIP\n    address: 198.51.100.99\n---\napiVersion: v1\nkind: Node\nmetadata:\n  name: empty\nstatus:\n  addresses:\n  - type: InternalIP\n    address: 198.51.100.98\n",
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while lab.metric(2, "weft_agent_model_issues") != Some(2.0) {
        assert!(
            Instant::now() < deadline,
            "the agent did not report the two bad objects"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let log = std::fs::read_to_string(lab.state.dir.join("node2").join("agent.log")).unwrap();
    assert!(log.contains("Node/empty spec.podCIDRs"), "{log}");
    assert!(
        log.contains("Node/intruder spec.podCIDRs") && log.contains("Node/node1, which keeps it"),
        "{log}"
    );
    // The established node keeps its CIDR: nothing was reprogrammed and traffic still flows.
    assert_eq!(lab.metric(2, "weft_agent_ready"), Some(1.0));
    assert_eq!(
        lab.metric(2, "weft_agent_last_reconcile_changes"),
        Some(0.0)
    );
    let probes = lab::check::check(&lab.state).unwrap();
    assert!(
        probes.iter().all(|p| p.ok()),
        "{}",
        lab::check::render(&probes)
    );
    std::fs::remove_file(nodes_dir.join("bad.yaml")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while lab.metric(2, "weft_agent_model_issues") != Some(0.0) {
        assert!(Instant::now() < deadline, "the agent did not recover");
        std::thread::sleep(Duration::from_millis(200));
    }
    let probes = lab::check::check(&lab.state).unwrap();
    assert!(
        probes.iter().all(|p| p.ok()),
        "{}",
        lab::check::render(&probes)
    );
}

#[test]
fn the_clsact_fallback_carries_the_whole_matrix() {
    weft_testkit::require_tool("tc");
    let lab = TestLab::up_with(2, 2, weft_datapath::AttachMode::Clsact);
    let probes = lab::check::check(&lab.state).unwrap();
    assert!(
        probes.iter().all(|p| p.ok()),
        "{}",
        lab::check::render(&probes)
    );
    // Every pod veth and the overlay device carry our cls_bpf filter, and no TCX link is pinned.
    for node in &lab.state.nodes {
        let conflist = std::fs::read_to_string(&node.conflist).unwrap();
        assert!(
            conflist.contains("\"attachMode\": \"clsact\""),
            "{conflist}"
        );
        let links = weft_testkit::run(
            weft_testkit::cmd_in(&netns::path_of(&node.netns), "ip").args(["-o", "link"]),
        );
        for dev in links
            .stdout
            .split_whitespace()
            .filter(|w| w.starts_with("wf") || w.starts_with("weft.vxlan"))
        {
            let dev = dev
                .trim_end_matches(':')
                .split('@')
                .next()
                .unwrap()
                .to_string();
            let filters = weft_testkit::run(
                weft_testkit::cmd_in(&netns::path_of(&node.netns), "tc")
                    .args(["filter", "show", "dev", &dev, "ingress"]),
            );
            assert!(
                filters.stdout.contains("direct-action") && filters.stdout.contains("weft:"),
                "{dev}: {}",
                filters.stdout
            );
        }
        let pins = node.pin_root.join("links").join("pods");
        let pinned = std::fs::read_dir(&pins).map(|d| d.count()).unwrap_or(0);
        assert_eq!(
            pinned,
            0,
            "TCX links pinned in clsact mode under {}",
            pins.display()
        );
    }
}
