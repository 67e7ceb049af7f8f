//! podman 4.3 (CNI backend) calling the weft plugin: `podman run --network` (ADD) and
//! `podman rm` (DEL). The weft binary comes from `$WEFT_BIN` or the newest
//! `target/{debug,release}/weft`. podman runs inside a node namespace made by the test.

use std::net::IpAddr;
use std::path::Path;
use std::time::Instant;
use weft_runtime_tests::workload::{
    fetch_command, fetch_until_served, host_peer_of, link_exists, web_server_command, FetchOutcome,
    IDLE_COMMAND,
};
use weft_runtime_tests::{
    weft_conflist, weft_plugin_bin, CniDirs, Podman, TestSubnets, INDEX_HTML,
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

fn fetch(podman: &Podman, client: &str, server_ip: IpAddr) -> String {
    let command = fetch_command(server_ip);
    fetch_until_served(
        &format!("client container fetching from {server_ip}"),
        || {
            podman.exec(client, &command).map(|out| FetchOutcome {
                exit_code: out.status.code().unwrap_or(-1),
                stdout: out.stdout,
                stderr: out.stderr,
            })
        },
    )
    .unwrap_or_else(|e| panic!("TCP from container 2 to container 1 at {server_ip}: {e}"))
}

#[test]
fn podman_containers_on_weft_get_addresses_connect_and_release_them() {
    require_root();
    let start = Instant::now();
    let weft = weft_plugin_bin().expect("weft plugin binary");
    let node = Netns::new("wp");
    let cni = CniDirs::with_weft(&weft).expect("CNI dirs");
    let podman = Podman::new_in_netns(node.path(), &cni.bin_dir()).expect("podman");
    eprintln!("[timing] podman ready: {:?}", start.elapsed());
    let subnets = TestSubnets::unique();
    let network = unique_name("wq");
    let data_dir = cni.ipam_dir();
    podman
        .add_network(&weft_conflist(&network, &subnets, &data_dir))
        .expect("network");

    let server = podman
        .run(&network, &web_server_command())
        .expect("podman run (CNI ADD) of the server");
    let server_ips = podman.container_ips(&server).expect("server IPs");
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
    let client = podman
        .run(&network, IDLE_COMMAND)
        .expect("podman run (CNI ADD) of the client");
    for ip in podman.container_ips(&client).expect("client IPs") {
        assert!(subnets.contains(ip), "client IP {ip} not in {subnets:?}");
        assert!(!server_ips.contains(&ip), "{ip} handed out twice");
    }
    eprintln!("[timing] two containers running: {:?}", start.elapsed());

    assert_eq!(fetch(&podman, &client, server_v4), INDEX_HTML);
    assert_eq!(fetch(&podman, &client, server_v6), INDEX_HTML);

    assert_eq!(
        held_addresses(&data_dir, &network).len(),
        4,
        "two addresses per container"
    );
    let server_host_side = host_peer_of(
        &podman.netns_path(&server).expect("netns"),
        "eth0",
        node.path(),
    )
    .expect("host side of the server's eth0");

    podman
        .rm(&server)
        .expect("podman rm (CNI DEL) of the server");
    let left = held_addresses(&data_dir, &network);
    assert_eq!(
        left.len(),
        2,
        "only the client's addresses remain, got {left:?}"
    );
    for ip in &server_ips {
        assert!(!left.contains(ip), "{ip} still reserved after podman rm");
    }
    assert!(
        !link_exists(node.path(), &server_host_side).expect("ip link"),
        "host-side {server_host_side} still exists"
    );
    podman
        .rm(&client)
        .expect("podman rm (CNI DEL) of the client");
    assert_eq!(
        held_addresses(&data_dir, &network),
        Vec::<IpAddr>::new(),
        "IPAM store still holds addresses"
    );
    eprintln!("[timing] podman weft test body: {:?}", start.elapsed());
}
