//! Upgrading a node from weft's first release (map layout v0: unversioned pins) to
//! today's datapath, under traffic: TCP and UDP flows between pods on one node and across
//! nodes, both families, keep running through the upgrade of both nodes, while a CNI
//! plugin of the old release keeps adding and removing endpoints in the old map. Nothing
//! may break or be lost, and every endpoint, route and setting must be carried over.

mod common;

use aya::programs::links::{FdLink, PinnedLink};
use common::cluster::{Cluster, ClusterNode};
use common::flows::{ns_path, tcp_flow, udp_flow};
use common::{in_netns, legacy};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use weft_datapath::{Datapath, EndpointInfo, NodeConfig, Program, ProgramChange, Tables};

fn link_ids(root: &Path, dir: &str) -> BTreeMap<String, u32> {
    std::fs::read_dir(root.join("links").join(dir))
        .expect("links dir")
        .map(|e| {
            let e = e.expect("entry");
            let link = FdLink::from(PinnedLink::from_pin(e.path()).expect("pinned link"));
            (
                e.file_name().to_string_lossy().into_owned(),
                link.info().expect("link info").id(),
            )
        })
        .collect()
}

fn hex(bytes: &[u8]) -> Vec<String> {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The endpoint a fake "old plugin" writes for its i-th pod.
fn fake_endpoint(i: u32) -> (IpAddr, EndpointInfo) {
    let ip = IpAddr::from([10, 244, 1, 100 + (i % 150) as u8]);
    let info = EndpointInfo {
        ifindex: 1000 + i,
        mac: [2, 0xfe, 0, 0, 0, i as u8],
    };
    (ip, info)
}

/// A CNI plugin of the old release, as a separate process per call (bpftool): adds an
/// endpoint, and every third call removes an earlier one, in the v0 map, until that map's
/// pin is gone. Returns the endpoints it left there.
fn old_plugin_churn(pin: PathBuf) -> BTreeMap<IpAddr, EndpointInfo> {
    let mut present = BTreeMap::new();
    for i in 0..3000u32 {
        let (ip, info) = fake_endpoint(i);
        let key = hex(bytemuck_key(ip).as_slice());
        let mut value = info.ifindex.to_ne_bytes().to_vec();
        value.extend_from_slice(&info.mac);
        value.extend_from_slice(&[0, 0]);
        let mut cmd = Command::new("bpftool");
        cmd.args(["map", "update", "pinned"])
            .arg(&pin)
            .arg("key")
            .arg("hex");
        cmd.args(&key).arg("value").arg("hex").args(hex(&value));
        if !run_bpftool(&mut cmd, &pin) {
            return present;
        }
        present.insert(ip, info);
        if i % 3 == 2 {
            let (old_ip, _) = fake_endpoint(i - 2);
            let mut cmd = Command::new("bpftool");
            cmd.args(["map", "delete", "pinned"])
                .arg(&pin)
                .arg("key")
                .arg("hex");
            cmd.args(hex(bytemuck_key(old_ip).as_slice()));
            if !run_bpftool(&mut cmd, &pin) {
                return present;
            }
            present.remove(&old_ip);
        }
    }
    panic!("the old endpoint map was never unpinned");
}

/// `false` once the map's pin is gone; any other failure fails the test.
fn run_bpftool(cmd: &mut Command, pin: &Path) -> bool {
    let out = weft_testkit::run(cmd);
    if out.success() {
        return true;
    }
    assert!(
        !pin.exists(),
        "bpftool failed with the pin in place: {}",
        out.stderr
    );
    false
}

fn bytemuck_key(ip: IpAddr) -> Vec<u8> {
    let key = legacy::ip_key(ip);
    let mut bytes = vec![key.family];
    bytes.extend_from_slice(&key.pad);
    bytes.extend_from_slice(&key.addr);
    bytes
}

#[test]
fn upgrading_from_layout_v0_under_traffic_drops_nothing_and_carries_everything_over() {
    weft_testkit::require_tool("bpftool");
    weft_testkit::require_tool("bridge");
    let cluster = Cluster::new([2, 1]);
    let [n1, n2] = &cluster.nodes;
    legacy::install(n1, n2);
    legacy::install(n2, n1);
    for node in [n1, n2] {
        for name in legacy::MAP_PINS {
            assert!(node.root.path().join("maps").join(name).exists(), "{name}");
        }
    }
    let links_before = [
        link_ids(n1.root.path(), "pods"),
        link_ids(n1.root.path(), "overlay"),
        link_ids(n2.root.path(), "pods"),
    ];

    let (a, b, c) = (cluster.pod(1, 0), cluster.pod(1, 1), cluster.pod(2, 0));
    let mut tcp = Vec::new();
    let mut udp = Vec::new();
    for (family, pick) in [("v4", 0usize), ("v6", 1)] {
        for (path, peer, base) in [("same-node", b, 5000u16), ("cross-node", c, 5100)] {
            let port = base + pick as u16;
            let server = SocketAddr::new(peer.addrs()[pick], port);
            tcp.push(tcp_flow(
                &format!("TCP {path} {family}"),
                &ns_path(a),
                &ns_path(peer),
                server,
                None,
            ));
            udp.push(udp_flow(
                &format!("UDP {path} {family}"),
                &ns_path(a),
                &ns_path(peer),
                server,
                None,
            ));
        }
    }
    // Traffic runs on the old datapath for a moment first (no timing is asserted).
    std::thread::sleep(Duration::from_millis(300));

    let churn = {
        let pin = n1.root.path().join("maps/weft_endpoints");
        std::thread::spawn(move || old_plugin_churn(pin))
    };
    let mut loaded = Vec::new();
    for node in [n1, n2] {
        let root = node.root.path().to_path_buf();
        loaded.push(in_netns(node.ns.path(), move || {
            let dp = Datapath::load_or_adopt(&root).expect("the new loader");
            let changes: Vec<_> = Program::ALL
                .iter()
                .map(|p| {
                    (
                        dp.program(*p).expect("program").change,
                        dp.program(*p).unwrap().links,
                    )
                })
                .collect();
            (changes, dp.migration().clone())
        }));
    }
    let fakes = churn.join().expect("old plugin thread");
    eprintln!(
        "old plugin left {} endpoints; migration: {:?}",
        fakes.len(),
        loaded[0].1
    );
    std::thread::sleep(Duration::from_millis(300));

    for flow in tcp {
        flow.finish().assert_intact();
    }
    for flow in udp {
        flow.finish().assert_lossless();
    }

    for (node, (changes, migration)) in [n1, n2].into_iter().zip(&loaded) {
        for (change, _) in changes {
            assert!(
                matches!(change, ProgramChange::Replaced { .. }),
                "node {}: {changes:?}",
                node.index
            );
        }
        let froms: Vec<PathBuf> = migration.maps.iter().map(|m| m.from.clone()).collect();
        let expected: Vec<PathBuf> = legacy::MAP_PINS
            .iter()
            .map(|n| node.root.path().join("maps").join(n))
            .collect();
        assert_eq!(froms, expected, "node {}: maps migrated", node.index);
        assert!(
            migration.maps.iter().all(|m| !m.holders_timed_out),
            "{migration:?}"
        );
        for name in legacy::MAP_PINS {
            assert!(
                !node.root.path().join("maps").join(name).exists(),
                "node {}: old pin {name} removed",
                node.index
            );
        }
    }
    check_carried_over(&cluster, n1, n2, &fakes);
    check_carried_over(&cluster, n2, n1, &BTreeMap::new());
    assert_eq!(
        [
            link_ids(n1.root.path(), "pods"),
            link_ids(n1.root.path(), "overlay"),
            link_ids(n2.root.path(), "pods"),
        ],
        links_before,
        "every link was updated in place, none recreated"
    );
}

fn check_carried_over(
    _cluster: &Cluster,
    node: &ClusterNode,
    peer: &ClusterNode,
    fakes: &BTreeMap<IpAddr, EndpointInfo>,
) {
    let tables = Tables::open(node.root.path()).expect("new maps");
    let mut endpoints: BTreeMap<IpAddr, EndpointInfo> = node.endpoints().into_iter().collect();
    endpoints.extend(fakes.iter().map(|(ip, info)| (*ip, *info)));
    let found: BTreeMap<IpAddr, EndpointInfo> =
        tables.endpoints().expect("endpoints").into_iter().collect();
    assert_eq!(found, endpoints, "node {}: endpoints", node.index);
    assert_eq!(
        tables.routes().expect("routes"),
        node.routes(peer),
        "node {}: routes",
        node.index
    );
    assert_eq!(
        tables.config().expect("config"),
        NodeConfig {
            vxlan_ifindex: node.ifindex(&node.vxlan),
            vtep_mac: node.vtep_mac(),
        },
        "node {}: config",
        node.index
    );
    let counters = tables.counters().expect("counters");
    assert!(
        counters.get(weft_datapath::Counter::LocalDelivery) > 0
            || counters.get(weft_datapath::Counter::DecapDelivery) > 0,
        "node {}: counters carried over: {:?}",
        node.index,
        counters.iter().collect::<Vec<_>>()
    );
    assert_eq!(
        counters.drops(),
        0,
        "{:?}",
        counters.iter().collect::<Vec<_>>()
    );
}
