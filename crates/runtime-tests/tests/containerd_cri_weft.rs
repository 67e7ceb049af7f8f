//! containerd's CRI plugin calling the weft plugin exactly as a kubelet's runtime would:
//! RunPodSandbox (ADD), StopPodSandbox (DEL with netns) and RemovePodSandbox (DEL without
//! netns). The weft binary comes from `$WEFT_BIN` or the newest `target/{debug,release}/weft`.
//!
//! containerd runs inside a node namespace made by the test, so weft's host-side
//! interfaces land there and the root namespace is never touched.

use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, Instant};
use weft_runtime_tests::workload::{
    fetch_command, fetch_until_served, host_peer_of, link_exists, web_server_command, FetchOutcome,
    IDLE_COMMAND,
};
use weft_runtime_tests::{
    weft_conflist, weft_plugin_bin, CniDirs, Containerd, CriClient, PodSpec, TestSubnets,
    BUSYBOX_IMAGE, INDEX_HTML,
};
use weft_testkit::{require_root, unique_name, Netns};

/// The addresses weft's IPAM store holds, read through weft-ipam itself.
fn held_addresses(data_dir: &Path, network: &str) -> Vec<IpAddr> {
    weft_ipam::Store::open(data_dir, network)
        .and_then(|store| store.reservations())
        .unwrap_or_else(|e| panic!("weft IPAM store {}/{network}: {e}", data_dir.display()))
        .into_iter()
        .map(|reservation| reservation.address)
        .collect()
}

fn fetch(cri: &CriClient, client: &str, server_ip: IpAddr) -> String {
    let command = fetch_command(server_ip);
    fetch_until_served(&format!("client pod fetching from {server_ip}"), || {
        cri.exec_sync(client, &command, Duration::from_secs(10))
            .map(|r| FetchOutcome {
                exit_code: r.exit_code,
                stdout: r.stdout,
                stderr: r.stderr,
            })
    })
    .unwrap_or_else(|e| panic!("TCP from pod 2 to pod 1 at {server_ip}: {e}"))
}

#[test]
fn cri_pods_on_weft_get_addresses_connect_and_release_them() {
    require_root();
    let start = Instant::now();
    let weft = weft_plugin_bin().expect("weft plugin binary");
    // Declaration order is the reverse of drop order: containerd goes first, while the
    // conflist and the plugin it needs for DEL are still there.
    let node = Netns::new("wn");
    let cni = CniDirs::with_weft(&weft).expect("CNI dirs");
    let subnets = TestSubnets::unique();
    let network = unique_name("wc");
    let data_dir = cni.ipam_dir();
    cni.write_conflist(&weft_conflist(&network, &subnets, &data_dir))
        .expect("conflist");
    let containerd = Containerd::start_in_netns(node.path(), &cni.bin_dir(), &cni.conf_dir())
        .expect("containerd");
    let cri = containerd.cri();
    cri.wait_ready(true, Duration::from_secs(30))
        .map_err(|e| containerd.with_log(e))
        .expect("CRI ready");
    eprintln!("[timing] containerd up: {:?}", start.elapsed());

    let server_pod = cri
        .run_pod(&PodSpec::unique("sv"))
        .map_err(|e| containerd.with_log(e))
        .expect("RunPodSandbox (CNI ADD) for the server pod");
    let server_ips = cri.pod_ips(&server_pod).expect("server IPs");
    for ip in &server_ips {
        assert!(subnets.contains(*ip), "server IP {ip} not in {subnets:?}");
    }
    let server_v4 = server_ips
        .iter()
        .copied()
        .find(IpAddr::is_ipv4)
        .expect("an IPv4 address from the first range");
    let server_v6 = server_ips
        .iter()
        .copied()
        .find(IpAddr::is_ipv6)
        .expect("an IPv6 address from the second range");
    cri.create_and_start_container(&server_pod, BUSYBOX_IMAGE, &web_server_command())
        .map_err(|e| containerd.with_log(e))
        .expect("server container");

    let client_pod = cri
        .run_pod(&PodSpec::unique("cl"))
        .map_err(|e| containerd.with_log(e))
        .expect("RunPodSandbox (CNI ADD) for the client pod");
    let client_ips = cri.pod_ips(&client_pod).expect("client IPs");
    for ip in &client_ips {
        assert!(subnets.contains(*ip), "client IP {ip} not in {subnets:?}");
        assert!(!server_ips.contains(ip), "{ip} handed out twice");
    }
    let client = cri
        .create_and_start_container(&client_pod, BUSYBOX_IMAGE, IDLE_COMMAND)
        .expect("client container");
    eprintln!("[timing] two pods running: {:?}", start.elapsed());

    assert_eq!(fetch(cri, &client, server_v4), INDEX_HTML);
    assert_eq!(fetch(cri, &client, server_v6), INDEX_HTML);
    eprintln!(
        "[timing] pod-to-pod TCP over v4 and v6: {:?}",
        start.elapsed()
    );

    let held = held_addresses(&data_dir, &network);
    assert_eq!(held.len(), 4, "two addresses per pod, got {held:?}");
    let host_sides: Vec<String> = [&server_pod, &client_pod]
        .iter()
        .map(|pod| {
            let netns = cri.pod_netns_path(pod).expect("pod netns");
            host_peer_of(&netns, "eth0", node.path()).expect("host side of eth0")
        })
        .collect();

    for pod in [&server_pod, &client_pod] {
        cri.stop_pod_sandbox(pod)
            .map_err(|e| containerd.with_log(e))
            .expect("StopPodSandbox (CNI DEL)");
        cri.remove_pod_sandbox(pod)
            .map_err(|e| containerd.with_log(e))
            .expect("RemovePodSandbox (second DEL)");
    }
    assert_eq!(
        held_addresses(&data_dir, &network),
        Vec::<IpAddr>::new(),
        "IPAM store still holds addresses"
    );
    for host_side in &host_sides {
        assert!(
            !link_exists(node.path(), host_side).expect("ip link"),
            "host-side {host_side} still exists"
        );
    }
    eprintln!("[timing] cri weft test body: {:?}", start.elapsed());
}
